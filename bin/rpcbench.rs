//! The rpcbench client binary; all logic lives in the library.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    rpcbench::cli::rpcbench::main()
}
