//! rpcbench: how fast, and how reliably, two machines can call each other, and why.
//!
//! # Layers
//!
//! The modules stand in eight layers, and the first six are crates of their own under
//! `crates/`, so the compiler holds the rule: each depends only on the layers below it,
//! never on one above. Each crate's `lib.rs` opens with its rule; this crate holds the last
//! two layers and re-exports every module below, so `rpcbench::wire` names the same module
//! as `rpcbench_base::wire`. From the bottom up:
//!
//! 1. **Kinds and units** (`rpcbench-base`), used by everything: [`units`] (durations, rates and sizes for
//!    people, and the parsers of their flags), [`wire`] (the raw TCP protocol: postcard
//!    frames, over UDP bodies, the reply pattern, the seq header, TLS sniffing),
//!    [`encoding`] (WSTest's messages and one codec per encoding), [`proto`]
//!    (the gRPC service `rpcbench.v1.Echo`), [`host`] (facts of this machine), [`placement`]
//!    (where rpcbench's own threads run), [`measure`] (HDR histograms and per-call outcome
//!    tallies), [`sys`] (the few system calls no safe crate wraps; the only `unsafe` code),
//!    [`logs`], and [`link`] (the userspace link of `rpcbench-link`: two namespaces joined
//!    through TUN devices, with delay, jitter, loss, duplication, reordering and a rate).
//! 2. **Server and readings** (`rpcbench-server`): [`server`] (the echo server, one file per listener, its
//!    counters and the `/stats` record both sides read), [`tcpinfo`] (`TCP_INFO` of a run's
//!    connections).
//! 3. **Client** (`rpcbench-client`): [`dnsdiag`] (resolv.conf read as glibc does, and `rpcbench dns NAME`: the
//!    queries a lookup really sends, timed), [`resolve`] (the five address modes),
//!    [`transport`] (one file per transport behind one small trait, each answering for
//!    itself: [`transport::Facts`]), [`runner`] (the load engine: workers or event loops,
//!    warm-up, timing, verification, counting), [`preflight`] (one probe of each port a run
//!    needs, and what to do when it fails).
//! 4. **Record** (`rpcbench-report`): [`report`] (the serialisable results, a run's and a sweep's: what JSON
//!    holds and every renderer reads).
//! 5. **Analysis** (`rpcbench-analysis`), values only: [`physics`] (orderings the protocols fix, checked against
//!    each figure's noise), [`model`] (the round-trip model `mean ≈ c + k × RTT`),
//!    [`compare`] (two reports' p50/p99 side by side), [`analysis`] (findings, peers, what
//!    sweeps say).
//! 6. **Render** (`rpcbench-render`), the only layer that writes words about results: [`render`] (table, json,
//!    csv, markdown, the findings' sentences) and [`site`] (`rpcbench report`: SVG charts,
//!    README and HTML).
//! 7. **Apps** (this crate), a whole job as one call that prints nothing: [`bench`](mod@bench) (a run:
//!    embedded server, plan, name check, rounds, report), [`sweep`] (steps over rates,
//!    concurrency or payload sizes; capacity under a latency objective), [`agent`] (fleet
//!    mode: probes peers and serves `GET /metrics`).
//! 8. **CLI** (this crate): [`cli`], the front ends of the three binaries (`bin/` only calls into here).
//!
//! `docs/reference.md` documents the protocol byte by byte, `docs/client.md` every flag,
//! and `docs/layout.md` the same layers by folder.
#![forbid(unsafe_code)]

pub use rpcbench_analysis::{analysis, compare, model, physics};
pub use rpcbench_base::{
    encoding, host, init_tracing, link, listener, logs, measure, placement, proto, sys, units, wire,
};
pub use rpcbench_client::{dnsdiag, preflight, resolve, runner, transport};
pub use rpcbench_render::{render, site};
pub use rpcbench_report::report;
pub use rpcbench_server::{server, tcpinfo};

pub mod agent;
pub mod bench;
pub mod cli;
pub mod sweep;
