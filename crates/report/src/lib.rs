//! rpcbench's layer 4, the record: [`report`], the serialisable results of a run and of a
//! sweep, what JSON holds and every renderer reads.
//!
//! **Rule:** it depends only on the layers below (`rpcbench-base`, `-server`, `-client`),
//! whose modules it names as `crate::transport` and so on through the import below.
#![forbid(unsafe_code)]

// The modules of the layers below, by the names every path in this crate uses.
use rpcbench_base::{encoding, host, measure, placement};
use rpcbench_client::{resolve, runner, transport};
use rpcbench_server::{server, tcpinfo};

pub mod report;
