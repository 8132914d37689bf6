//! One prober: a transport's async side probing one peer at its interval, each probe a
//! timed call whose outcome and time go to the peer's series.

use super::{AgentConfig, PROBE_PAYLOAD, State};
use crate::runner::RunConfig;
use crate::runner::call::Attempt;
use crate::transport::{AsyncTransport, Endpoint, TransportKind, WithAsyncTransport};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::AbortHandle;

/// Starts one prober with the transport's async type (see [`WithAsyncTransport`]).
pub(super) struct SpawnProber {
    pub(super) key: (String, TransportKind),
    pub(super) endpoint: Endpoint,
    pub(super) config: Rc<AgentConfig>,
    pub(super) state: Rc<RefCell<State>>,
    pub(super) gate: Rc<Semaphore>,
}

impl WithAsyncTransport for SpawnProber {
    type Output = AbortHandle;

    fn run<T: AsyncTransport>(self) -> AbortHandle {
        tokio::task::spawn_local(probe::<T>(self)).abort_handle()
    }
}

/// The offset of a prober's first probe within the interval: random per agent process,
/// peer and transport (std's `RandomState` is seeded at random per process), so that the
/// agents of a fleet, started together, do not probe in lockstep, and one agent's probes
/// are spread over the interval instead of leaving in one burst.
pub(super) fn first_offset(key: &(String, TransportKind), interval: Duration) -> Duration {
    use std::hash::BuildHasher;
    let hash = std::collections::hash_map::RandomState::new().hash_one(key);
    let nanos = interval.as_nanos().max(1) as u64;
    Duration::from_nanos(hash % nanos)
}

/// Counts a call as under way for as long as it lives, including when the prober is
/// stopped in the middle of it.
pub(super) struct InFlight(Rc<RefCell<State>>);

impl InFlight {
    fn new(state: &Rc<RefCell<State>>) -> InFlight {
        state.borrow_mut().counters.in_flight += 1;
        InFlight(state.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.borrow_mut().counters.in_flight -= 1;
    }
}

/// One prober: a call every interval, each made, judged and timed by `call.rs`, recorded
/// in its series. Ticks missed while a call ran (it can take up to the timeout, which is
/// at most the interval) are skipped, never made up in a burst.
pub(super) async fn probe<T: AsyncTransport>(p: SpawnProber) {
    let SpawnProber {
        key,
        endpoint,
        config,
        state,
        gate,
    } = p;
    let run = RunConfig {
        payload: PROBE_PAYLOAD,
        max_reply: config.max_reply,
        timeout: config.timeout,
        ..RunConfig::default()
    };
    let mut transport = T::open(endpoint, config.timeout);
    let start = tokio::time::Instant::now() + first_offset(&key, config.interval);
    let mut ticks = tokio::time::interval_at(start, config.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut payload = Vec::with_capacity(PROBE_PAYLOAD as usize);
    let mut seq = 0u64;
    loop {
        ticks.tick().await;
        let Ok(_permit) = gate.try_acquire() else {
            state.borrow_mut().counters.skipped += 1;
            continue;
        };
        let _in_flight = InFlight::new(&state);
        seq += 1;
        let mut attempt = Attempt::start(seq, &run, &mut payload);
        let judged = attempt.make(&mut transport).await;
        let (ended, _) = attempt.finish(judged);
        if let Some(series) = state.borrow_mut().series.get_mut(&key) {
            series.record(&ended);
        }
    }
}
