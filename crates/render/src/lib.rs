//! rpcbench's layer 6, render, the only layer that writes words about results: [`render`]
//! (table, json, csv, markdown, the findings' sentences) and [`site`] (`rpcbench report`:
//! SVG charts, README and HTML).
//!
//! **Rule:** it depends only on the layers below (`rpcbench-base` up to
//! `rpcbench-analysis`), whose modules it names as `crate::report` and so on through the
//! import below.
#![forbid(unsafe_code)]

// The modules of the layers below, by the names every path in this crate uses.
use rpcbench_analysis::{analysis, compare, model, physics};
use rpcbench_base::{encoding, measure, placement, units};
use rpcbench_client::{dnsdiag, resolve, runner, transport};
use rpcbench_report::report;
use rpcbench_server::tcpinfo;

pub mod render;
pub mod site;
