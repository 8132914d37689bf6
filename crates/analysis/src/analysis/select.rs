//! Which runs of a report a check or a finding reads: the run of a transport under a
//! mode, made like another, and which runs were slowed on purpose.

use crate::report::{Report, RunRecord};
use crate::resolve::AddrMode;
use crate::transport::TransportKind;
use crate::transport::tls::Security;

/// How late the server answered DNS queries in this run, µs (0: not delayed, or unknown).
pub fn dns_delay_us(r: &Report) -> u64 {
    r.server
        .as_ref()
        .and_then(|s| s.settings.dns.as_ref())
        .map_or(0, |d| d.delay_us)
}

/// A run asked for nothing to be slowed: a reference for the checks.
pub(crate) fn is_plain(r: &Report) -> bool {
    r.config.delay_us == 0 && dns_delay_us(r) == 0
}

/// A run whose server answered DNS late and delayed nothing else: what the DNS check and
/// the seed's "by host name" cases read.
pub fn slow_dns(r: &Report) -> bool {
    dns_delay_us(r) > 0 && r.config.delay_us == 0
}

/// The run of `transport` under address mode `mode` and security mode `security` in a
/// report: a report may hold the same transport and address mode under several security
/// modes (`--security plain,tls13`), and a check or finding compares like with like. The
/// default run's multiplexing comparison at 16 workers is not found here (see
/// [`super::findings`](mod@super::findings)' multiplexing sentence, which reads it).
pub fn find(
    r: &Report,
    transport: TransportKind,
    mode: AddrMode,
    security: Security,
) -> Option<&RunRecord> {
    r.runs.iter().find(|x| {
        x.transport == transport
            && x.addr_mode == mode
            && x.security == security
            && !x.mux_comparison
    })
}

/// The run of `report` made like `r` (the same transport, security mode and workers, the
/// default run's multiplexing comparison or not) under address mode `mode`: a check that
/// compares two runs of one transport compares like with like.
pub(crate) fn find_like<'a>(
    report: &'a Report,
    r: &RunRecord,
    mode: AddrMode,
) -> Option<&'a RunRecord> {
    report.runs.iter().find(|x| {
        x.transport == r.transport
            && x.addr_mode == mode
            && x.security == r.security
            && x.mux_comparison == r.mux_comparison
            && (!r.mux_comparison || x.workers == r.workers)
    })
}
