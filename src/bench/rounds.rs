//! The jobs of a run, round by round: each (transport, mode, security) run at its share
//! of the calls, in an order reversed every other round, and the server's counters read
//! after.

use super::{BenchSpec, Observer, Plan, RunBenchError, Session};
use crate::resolve::AddrMode;
use crate::runner::{RunConfig, TransportRun, try_run_transport};
use crate::server::stats::StatsSnapshot;
use crate::transport::TransportKind;
use crate::transport::tls::Security;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// One (transport, address mode, security mode, encoded call) run at a number of workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Job {
    pub(super) kind: TransportKind,
    pub(super) mode: AddrMode,
    pub(super) security: Security,
    pub(super) workers: usize,
    pub(super) rpc: Option<crate::runner::RpcConfig>,
}

/// The encoded calls `kind` runs with: those of `spec` it carries, or the opaque echo
/// (`None`) when `spec` has none.
pub(super) fn rpcs_for(
    spec: &BenchSpec,
    kind: TransportKind,
) -> Vec<Option<crate::runner::RpcConfig>> {
    if spec.rpcs.is_empty() {
        return vec![None];
    }
    spec.rpcs
        .iter()
        .filter(|r| kind.carries(r.encoding))
        .map(|&r| Some(r))
        .collect()
}

/// Runs every (transport, address mode) job `rounds` times, reversing the order every
/// other round so drift over time hits each alike, and merges the rounds per job.
pub(super) fn run_jobs(
    jobs: &[Job],
    spec: &BenchSpec,
    config: &RunConfig,
    session: &Session,
    observer: &mut dyn Observer,
    step: Option<&str>,
) -> Result<Vec<TransportRun>, RunBenchError> {
    let plan = &session.plan;
    let mut merged: Vec<Option<TransportRun>> = vec![None; jobs.len()];
    for round in 0..spec.rounds {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..jobs.len()).collect()
        } else {
            (0..jobs.len()).rev().collect()
        };
        for (n, i) in order.into_iter().enumerate() {
            let Job {
                kind,
                mode,
                security,
                workers,
                rpc,
            } = jobs[i];
            // A job's encoded call, or the one the caller set (a sweep's step).
            let rpc = rpc.or(config.rpc);
            // This round's share of the calls, or of the time.
            let config = &RunConfig {
                concurrency: workers,
                rpc,
                calls: round_share(config.calls, spec.rounds, round),
                duration: config.duration.map(|d| d / spec.rounds),
                ..config.clone()
            };
            let endpoint = plan.endpoint(mode, security, spec)?;
            let done = Arc::new(AtomicU64::new(0));
            let mut modes = match security {
                Security::Plain => mode.to_string(),
                _ => format!("{mode} {security}"),
            };
            if Some(workers) == spec.mux_concurrency && workers != spec.run.concurrency {
                modes.push_str(&format!(" c{workers}"));
            }
            if let Some(rpc) = rpc {
                modes.push_str(&format!(" {} {}", rpc.encoding, rpc.message));
            }
            // Where the run is: `[12/41] tcp ip · round 2/3`.
            let at = jobs.len() * round as usize + n + 1;
            let of = jobs.len() * spec.rounds as usize;
            let rounds = if spec.rounds > 1 {
                format!(" · round {}/{}", round + 1, spec.rounds)
            } else {
                String::new()
            };
            let label = match step {
                Some(step) => format!("[{at}/{of}] {kind} {modes} · {step}"),
                None => format!("[{at}/{of}] {kind} {modes}{rounds}"),
            };
            // A default run's rows of several workers are split off the server's CPU.
            session.placed.enter_for(workers)?;
            observer.job_started(&label, config, done.clone());
            // The responder's count around the run: what one lookup really asked, also
            // under `system`, whose queries rpcbench cannot see itself.
            let responder_before = (mode != AddrMode::Ip)
                .then(|| session.responder_queries(spec.run.timeout))
                .flatten();
            // An encoded run's server cost, from the server's counters around it.
            let stats_before = rpc.and_then(|_| session.server_stats(spec.run.timeout));
            let mut run = try_run_transport(kind, &endpoint, config, done)?;
            run.server_use = stats_before.and_then(|before| {
                let after = session.server_stats(spec.run.timeout)?;
                Some(crate::server::stats::ServerUse::between(&before, &after))
            });
            run.dns_responder_queries = responder_before.and_then(|before| {
                session
                    .responder_queries(spec.run.timeout)
                    .map(|after| after.saturating_sub(before))
            });
            run.dns_search = plan.search_for(mode);
            observer.job_finished();
            match &mut merged[i] {
                Some(m) => m.merge(&run),
                slot @ None => *slot = Some(run),
            }
        }
    }
    Ok(merged.into_iter().flatten().collect())
}

/// Round `round`'s share of `calls` split over `rounds`: the remainder goes to the first
/// rounds, so the shares add up to `calls`.
pub(super) fn round_share(calls: u64, rounds: u32, round: u32) -> u64 {
    let rounds = u64::from(rounds.max(1));
    calls / rounds + u64::from(u64::from(round) < calls % rounds)
}

/// Asks a remote server for its counters and settings (`GET /stats`); `None` when it
/// cannot be asked, which is worth a log line but not a failed run.
pub(super) fn fetch_server_stats(plan: &Plan, timeout: Duration) -> Option<StatsSnapshot> {
    let host = plan
        .stats_ip
        .map_or_else(|| plan.name.clone(), |ip| ip.to_string());
    let host = crate::resolve::url_host(&host);
    let url = format!("http://{host}:{}/stats", plan.http_port);
    let mut body = Vec::new();
    let fetched = (|| -> Result<u32, curl::Error> {
        let mut easy = curl::easy::Easy::new();
        easy.url(&url)?;
        easy.timeout(timeout)?;
        easy.signal(false)?;
        let mut transfer = easy.transfer();
        transfer.write_function(|data| {
            body.extend_from_slice(data);
            Ok(data.len())
        })?;
        transfer.perform()?;
        drop(transfer);
        easy.response_code()
    })();
    let why = match fetched.map(|code| (code, serde_json::from_slice::<StatsSnapshot>(&body))) {
        Ok((200, Ok(stats))) => return Some(stats),
        Ok((200, Err(e))) => format!("the reply is not its JSON: {e}"),
        Ok((code, _)) => format!("HTTP status {code}"),
        Err(e) => e.to_string(),
    };
    tracing::warn!("could not read the server's /stats at {url}: {why}");
    None
}
