//! The echo server binary; all logic lives in the library.
#![forbid(unsafe_code)]

/// hyper allocates several small buffers per request (header maps, request parts); glibc's
/// malloc and free were a tenth of the server's instructions per request, mimalloc's a few
/// percent (`report/bench_server.md`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    rpcbench::cli::echo::main()
}
