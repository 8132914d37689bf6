//! rpcbench's layer 2, the server and its readings: [`server`] (the echo server, one module
//! per listener, its counters and the `/stats` record both sides read) and [`tcpinfo`]
//! (`TCP_INFO` of a run's connections).
//!
//! **Rule:** it depends only on `rpcbench-base`, whose modules it names as `crate::wire`
//! and so on through the import below.
#![forbid(unsafe_code)]

// The modules of the layers below, by the names every path in this crate uses.
use rpcbench_base::{encoding, host, listener, proto, sys, wire};

pub mod server;
pub mod tcpinfo;
