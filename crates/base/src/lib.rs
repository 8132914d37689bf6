//! rpcbench's layer 1, kinds and units, used by every crate above: [`units`] (durations,
//! rates and sizes for people, and the parsers of their flags), [`wire`] (the raw TCP
//! protocol: postcard frames, over UDP bodies, the reply pattern, the seq header, TLS
//! sniffing), [`encoding`] (WSTest's messages and one codec per encoding), [`proto`] (the
//! gRPC service `rpcbench.v1.Echo`), [`host`] (facts of this machine), [`placement`] (where
//! rpcbench's own threads run), [`measure`] (HDR histograms and per-call outcome tallies),
//! [`sys`] (the few system calls no safe crate wraps; the only `unsafe` code), [`logs`], and
//! [`listener`] (the echo server's listeners, named once), and [`link`] (the userspace link of `rpcbench-link`: two namespaces joined through TUN
//! devices, with delay, jitter, loss, duplication, reordering and a rate).
//!
//! **Rule:** it depends on no other crate of rpcbench. The map of all the layers is in the
//! `rpcbench` crate's documentation and in `docs/layout.md`.
// `deny`, not `forbid`, for one exception: `sys::tcp_info`, the `getsockopt(TCP_INFO)`
// call that no safe crate wraps, allows `unsafe` for itself alone. Nothing else may.
#![deny(unsafe_code)]

pub mod encoding;
pub mod host;
pub mod link;
pub mod listener;
pub mod logs;
pub mod measure;
pub mod placement;
pub mod proto;
pub mod sys;
pub mod units;
pub mod wire;

pub use logs::init_tracing;
