//! rpcbench's layer 3, the client: [`dnsdiag`] (resolv.conf read as glibc does, and
//! `rpcbench dns NAME`: the queries a lookup really sends, timed), [`resolve`] (the five
//! address modes), [`transport`] (one module per transport behind one small trait, each
//! answering for itself: [`transport::Facts`]), [`runner`] (the load engine: workers or event
//! loops, warm-up, timing, verification, counting), [`preflight`] (one probe of each port a
//! run needs, and what to do when it fails).
//!
//! **Rule:** it depends only on the layers below, `rpcbench-base` and `rpcbench-server`,
//! whose modules it names as `crate::wire` and so on through the import below.
#![forbid(unsafe_code)]

// The modules of the layers below, by the names every path in this crate uses.
use rpcbench_base::{encoding, host, listener, measure, proto, wire};
use rpcbench_server::{server, tcpinfo};

pub mod dnsdiag;
pub mod preflight;
pub mod resolve;
pub mod runner;
pub mod transport;
