//! The rpcbench-link binary (the test bed's userspace link); all logic lives in the library.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    rpcbench::cli::link::main()
}
