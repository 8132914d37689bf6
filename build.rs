//! Generates the Prometheus data model (`proto/io/prometheus/client/metrics.proto`), the
//! protobuf exposition format the fleet agent reads (`src/agent/native.rs`).
//!
//! The .proto is compiled by protox, a protobuf compiler in Rust, rather than by the
//! `protoc` binary that tonic-prost-build runs by default: a build then needs nothing
//! outside Cargo, on CI and on any machine.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    const METRICS: &str = "proto/io/prometheus/client/metrics.proto";
    println!("cargo:rerun-if-changed={METRICS}");
    let fds = protox::compile([METRICS], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(false)
        .build_transport(false)
        .compile_fds(fds)?;
    Ok(())
}
