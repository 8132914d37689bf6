//! rpcbench: how fast, and how reliably, two machines can call each other, and why.
//!
//! Map of the crate, one line per module:
//!
//! - [`wire`]: the raw TCP protocol (postcard frames; over UDP, bodies), the reply pattern
//!   and the seq header.
//! - [`proto`]: the gRPC service `rpcbench.v1.Echo`, generated from `proto/rpcbench.proto`.
//! - [`host`]: facts of the machine this process runs on (name, kernel, CPUs, pinning).
//! - [`placement`]: where rpcbench's own threads run (`--placement`): client and embedded
//!   server on one CPU by default.
//! - [`server`]: the echo server, one file per listener (`tcp.rs`, `unix.rs`, `udp.rs`,
//!   `http/`, `grpc.rs`, `dns.rs`), counters.
//! - [`transport`]: the client transports, one file each, behind one small trait.
//! - [`bench`](mod@bench): a whole run as one call: embedded server, plan, name check, rounds, report.
//! - [`runner`]: the load engine: worker threads or event loops, warm-up, timing,
//!   verification, counting.
//! - [`measure`]: HDR histograms and per-call outcome tallies, merged across workers.
//! - [`resolve`]: address modes: IP literal, getaddrinfo, hickory with and without cache
//!   (and following the search list).
//! - [`dnsdiag`]: `rpcbench dns NAME`: the queries a lookup really sends here, timed, and
//!   what to change; `conf.rs` reads resolv.conf as glibc does.
//! - [`model`]: the round-trip model `mean ≈ c + k × RTT`: the round trips each protocol
//!   needs, k and c fitted over runs at several link RTTs, what-if projections.
//! - [`physics`]: orderings the protocols fix (modes agree for kept connections, unix no
//!   slower than tcp, ...), checked in every run against each figure's noise.
//! - [`report`]: the serialisable result (JSON) that every renderer reads.
//! - [`units`]: durations, rates and sizes for people, and the parsers of their flags; at
//!   the bottom, for every layer to use.
//! - [`render`]: one renderer per output format (table, json, csv, markdown).
//! - [`site`]: the comparison report: findings (also after the table), truth checks, peers,
//!   SVG charts, README and HTML.
//! - [`link`]: the userspace link (`rpcbench-link`): two namespaces joined through TUN
//!   devices, with delay, jitter, loss, duplication, reordering and a rate.
//! - [`sweep`]: steps over rates, concurrency or payload sizes; capacity under a latency objective.
//! - [`compare`]: p50/p99 of two reports side by side, to catch regressions in CI.
//! - [`agent`]: fleet mode (`rpcbench agent`): probes a list of peers all the time and
//!   serves the results on `GET /metrics` for Prometheus.
//! - [`sys`]: the few system calls no safe crate wraps (`TCP_INFO`); the only `unsafe` code.
//! - [`tcpinfo`]: `TCP_INFO` of a run's connections: retransmits, RTTs, the path RTT estimate.
//! - [`preflight`]: before a run against a target, one probe of each port the run needs:
//!   refused, no answer, another server, or rpcbench-echo of another version.
//! - [`logs`]: warnings on stderr as one plain line; `RUST_LOG` and `-v` for full records.
//! - [`cli`]: command-line front ends for both binaries (`bin/` only calls into here).
//!
//! The README documents the protocol byte by byte and every flag.
// `deny`, not `forbid`, for one exception: `sys::tcp_info`, the `getsockopt(TCP_INFO)`
// call that no safe crate wraps, allows `unsafe` for itself alone. Nothing else may.
#![deny(unsafe_code)]

pub mod agent;
pub mod analysis;
pub mod bench;
pub mod cli;
pub mod compare;
pub mod dnsdiag;
pub mod host;
pub mod link;
pub mod logs;
pub mod measure;
pub mod model;
pub mod physics;
pub mod placement;
pub mod preflight;
pub mod proto;
pub mod render;
pub mod report;
pub mod resolve;
pub mod runner;
pub mod server;
pub mod site;
pub mod sweep;
pub mod sys;
pub mod tcpinfo;
pub mod transport;
pub mod units;
pub mod wire;

pub use logs::init_tracing;
