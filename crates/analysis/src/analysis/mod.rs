//! The analysis layer: what a set of results says, as values carrying their numbers.
//!
//! Findings of a run or of several ([`findings()`]), peers against established tools
//! ([`peers`]), and what sweeps say ([`sweep`]). Nothing here writes words or draws: the
//! render layer (`render`, `site`) turns these values into sentences, tables and charts.
//!
//! **Rule:** analysis reads results (`report`, `sweep`'s records, `model`) and the kinds
//! below them; it never reaches up into `render`, `site`, the apps or the CLI.

/// The sentences at the top of a report and after a run's table, as values.
pub mod findings;
/// rpcbench beside established tools: the pairs and the ratio limit.
pub mod peers;
/// Picking runs out of a set of results by transport, mode and role.
pub mod select;
/// Capacity, knees and findings from sweep results.
pub mod sweep;
/// The truth checks: figures held to what physics says they must be.
pub mod truth;

pub use findings::{Unplaced, findings, unplaced};
pub use peers::{PEER_RATIO_LIMIT, PeerPair, Peers, median};
