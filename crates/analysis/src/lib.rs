//! rpcbench's layer 5, analysis, values only: [`physics`] (orderings the protocols fix,
//! checked against each figure's noise), [`model`] (the round-trip model `mean ≈ c + k ×
//! RTT`), [`compare`] (two reports' p50/p99 side by side), [`analysis`] (findings, peers,
//! what sweeps say). No sentences: words about results are made in `rpcbench-render`.
//!
//! **Rule:** it depends only on the layers below (`rpcbench-base`, `-server`, `-client`,
//! `-report`), whose modules it names as `crate::report` and so on through the import below.
#![forbid(unsafe_code)]

// The modules of the layers below, by the names every path in this crate uses.
use rpcbench_base::{encoding, measure};
use rpcbench_client::{dnsdiag, resolve, transport};
use rpcbench_report::report;
use rpcbench_server::tcpinfo;

pub mod analysis;
pub mod compare;
pub mod model;
pub mod physics;
