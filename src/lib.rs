//! rpcbench: how fast, and how reliably, two machines can call each other, and why.
//!
//! # Layers
//!
//! The modules stand in eight layers. Each depends only on the layers below it, never on
//! one above or on a sibling's insides; each layer's rule is stated in the opening doc of
//! its modules. From the bottom up:
//!
//! 1. **Kinds and units**, used by everything: [`units`] (durations, rates and sizes for
//!    people, and the parsers of their flags), [`wire`] (the raw TCP protocol: postcard
//!    frames, over UDP bodies, the reply pattern, the seq header, TLS sniffing),
//!    [`encoding`] (WSTest's messages and one codec per encoding), [`proto`]
//!    (the gRPC service `rpcbench.v1.Echo`), [`host`] (facts of this machine), [`placement`]
//!    (where rpcbench's own threads run), [`measure`] (HDR histograms and per-call outcome
//!    tallies), [`sys`] (the few system calls no safe crate wraps; the only `unsafe` code),
//!    [`logs`], and [`link`] (the userspace link of `rpcbench-link`: two namespaces joined
//!    through TUN devices, with delay, jitter, loss, duplication, reordering and a rate).
//! 2. **Server and readings**: [`server`] (the echo server, one file per listener, its
//!    counters and the `/stats` record both sides read), [`tcpinfo`] (`TCP_INFO` of a run's
//!    connections).
//! 3. **Client**: [`dnsdiag`] (resolv.conf read as glibc does, and `rpcbench dns NAME`: the
//!    queries a lookup really sends, timed), [`resolve`] (the five address modes),
//!    [`transport`] (one file per transport behind one small trait, each answering for
//!    itself: [`transport::Facts`]), [`runner`] (the load engine: workers or event loops,
//!    warm-up, timing, verification, counting), [`preflight`] (one probe of each port a run
//!    needs, and what to do when it fails).
//! 4. **Record**: [`report`] (the serialisable results, a run's and a sweep's: what JSON
//!    holds and every renderer reads).
//! 5. **Analysis**, values only: [`physics`] (orderings the protocols fix, checked against
//!    each figure's noise), [`model`] (the round-trip model `mean ≈ c + k × RTT`),
//!    [`compare`] (two reports' p50/p99 side by side), [`analysis`] (findings, peers, what
//!    sweeps say).
//! 6. **Render**, the only layer that writes words about results: [`render`] (table, json,
//!    csv, markdown, the findings' sentences) and [`site`] (`rpcbench report`: SVG charts,
//!    README and HTML).
//! 7. **Apps**, a whole job as one call that prints nothing: [`bench`](mod@bench) (a run:
//!    embedded server, plan, name check, rounds, report), [`sweep`] (steps over rates,
//!    concurrency or payload sizes; capacity under a latency objective), [`agent`] (fleet
//!    mode: probes peers and serves `GET /metrics`).
//! 8. **CLI**: [`cli`], the front ends of the three binaries (`bin/` only calls into here).
//!
//! `docs/reference.md` documents the protocol byte by byte, `docs/client.md` every flag,
//! and `docs/layout.md` the same layers by folder.
// `deny`, not `forbid`, for one exception: `sys::tcp_info`, the `getsockopt(TCP_INFO)`
// call that no safe crate wraps, allows `unsafe` for itself alone. Nothing else may.
#![deny(unsafe_code)]

pub mod agent;
pub mod analysis;
pub mod bench;
pub mod cli;
pub mod compare;
pub mod dnsdiag;
pub mod encoding;
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
