//! Sleeping to a deadline on the server's coarse timer: a tokio sleep that ends a nap
//! before the deadline, and the spin that takes it from there, so a delayed reply leaves
//! on time without burning a core.

use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The coarse timer's granularity: tokio rounds sleeps up to whole milliseconds.
pub(super) const TIMER_TICK: Duration = Duration::from_millis(1);

/// The share of a long delay [`sleep_until`] leaves to [`nap_until`] (one sixteenth: 3 ms of
/// 50): tokio's timer, parked in `epoll_wait` with a timeout in milliseconds, woke 50 ms
/// delays 0.7-2.9 ms late and 200 ms ones 1.8-6.7 ms late on a small virtual machine,
/// where a high-resolution `nanosleep` oversleeps 0.2-0.6 ms, whatever its length.
pub(super) const NAPPED_SHARE: u32 = 16;

/// How long before a delay's deadline the server stops sleeping: about what waking a
/// sleeping thread and handing back to the runtime costs on a small virtual machine.
pub(super) const WAKE_BEFORE_DEADLINE: Duration = Duration::from_micros(100);

/// Sleeps until `deadline` to within a few microseconds.
///
/// tokio's timer wheel has millisecond ticks, so `tokio::time::sleep(1ms)` often takes 2 ms;
/// a server whose delays are off by a millisecond would skew every figure that uses
/// `delay_us` or `--dns-delay`. The bulk of the wait uses the timer; the last two ticks (or
/// [`NAPPED_SHARE`] of a long wait) are slept on a blocking-pool thread by [`nap_until`]; the runtime thread then yields until
/// the deadline, so the hand-back costs nothing after it and other connections keep being
/// served meanwhile.
pub(crate) async fn sleep_until(deadline: Instant) {
    let left = deadline.saturating_duration_since(Instant::now());
    if let Some(coarse) = left.checked_sub((2 * TIMER_TICK).max(left / NAPPED_SHARE)) {
        tokio::time::sleep(coarse).await;
    }
    if deadline.saturating_duration_since(Instant::now()) > WAKE_BEFORE_DEADLINE {
        let _ = tokio::task::spawn_blocking(move || nap_until(deadline)).await;
    }
    while Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
}

/// [`sleep_until`] for a thread of its own (the raw TCP connections): the same precision.
pub(crate) fn sleep_until_blocking(deadline: Instant) {
    nap_until(deadline);
    while Instant::now() < deadline {
        std::thread::yield_now();
    }
}

/// Sleeps the calling thread with the kernel's high-resolution `nanosleep` until
/// [`WAKE_BEFORE_DEADLINE`] before `deadline`.
pub(super) fn nap_until(deadline: Instant) {
    let left = deadline.saturating_duration_since(Instant::now());
    if let Some(nap) = left.checked_sub(WAKE_BEFORE_DEADLINE) {
        // The kernel lets a sleeping thread oversleep by its timer slack, 50 µs by
        // default: as large as a loopback round trip. 1 ns asks for the real deadline.
        let _ = nix::sys::prctl::set_timerslack(1);
        std::thread::sleep(nap);
    }
}

/// Resolves once shutdown has started (or the server handle is gone).
pub(crate) async fn stopping(mut rx: watch::Receiver<bool>) {
    loop {
        let stop = *rx.borrow_and_update();
        if stop || rx.changed().await.is_err() {
            return;
        }
    }
}
