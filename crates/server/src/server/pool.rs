//! A cached thread pool for blocking connection handlers: a thread whose connection ends
//! waits a while for the next one before it exits, so a client that opens a connection
//! per call (`tcp-connect`) does not pay a thread start per call.
//!
//! There is no upper bound on busy threads: the server's `--max-connections` already
//! bounds how many connections are open, and only the busy ones hold a thread (an idle
//! raw TCP connection is parked on the reactor, see [`super::tcp`]). Idle threads are
//! capped at [`MAX_IDLE`], so a burst of connections does not leave a thread per
//! connection behind for [`KEEP_ALIVE`].

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long an idle thread waits for work before it exits (as tokio's blocking pool).
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// Stack of each thread: address space, not memory, as a handler keeps its buffers on
/// the heap and touches a few pages of it. 1 MiB rather than 256 KiB because glibc keeps
/// exited threads' stacks cached up to 40 MiB, each with about 12 KiB still resident:
/// after 1,000 stalled raw TCP readers (about 230 threads at once), 157 cached 256 KiB
/// stacks held 1.9 MiB for good, 40 cached 1 MiB stacks hold a quarter of that (issue #35).
const STACK: usize = 1024 * 1024;

/// Most threads kept waiting for work; a thread that finishes a job while this many wait
/// exits at once. Enough for 256 connections opened and closed at once without a thread
/// start each (`tcp-connect` with 256 workers), and a bound on what idle threads cost:
/// their stacks' touched pages and allocator heaps, tens of KiB each.
const MAX_IDLE: usize = 256;

type Job = Box<dyn FnOnce() + Send>;

/// Threads that run one job at a time and are reused.
#[derive(Debug)]
pub(crate) struct ThreadPool {
    name: &'static str,
    /// Threads waiting for work, each with the sender of its own queue.
    idle: Mutex<Vec<(u64, mpsc::Sender<Job>)>>,
    next_id: AtomicU64,
}

impl ThreadPool {
    pub fn new(name: &'static str) -> Arc<ThreadPool> {
        Arc::new(ThreadPool {
            name,
            idle: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
        })
    }

    /// Runs `job` on an idle thread, or on a new one. Fails only when no thread can be
    /// started (the process is out of memory or threads).
    pub fn run(self: &Arc<Self>, job: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        let mut job: Job = Box::new(job);
        loop {
            let Some((_, tx)) = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop() else {
                break;
            };
            match tx.send(job) {
                Ok(()) => return Ok(()),
                // That thread is gone (its job panicked); try the next one.
                Err(mpsc::SendError(back)) => job = back,
            }
        }
        let pool = self.clone();
        std::thread::Builder::new()
            .name(self.name.to_string())
            .stack_size(STACK)
            .spawn(move || {
                pool.work(job);
                crate::host::note_thread_end();
                // The thread's heap goes back to mimalloc as it exits: collected by the
                // next thread that goes idle (server::memory).
                super::memory::note_release();
            })
            .map(drop)
    }

    /// A thread's life: run a job, offer itself as idle (or exit when [`MAX_IDLE`] threads
    /// already wait), run the next job or exit.
    fn work(self: Arc<Self>, first: Job) {
        let id = self.next_id.fetch_add(1, Relaxed);
        let (tx, rx) = mpsc::channel::<Job>();
        let mut job = first;
        loop {
            job();
            let _ = super::memory::on_idle();
            {
                let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                if idle.len() >= MAX_IDLE {
                    return;
                }
                idle.push((id, tx.clone()));
            }
            job = match rx.recv_timeout(KEEP_ALIVE) {
                Ok(next) => next,
                Err(RecvTimeoutError::Timeout) => {
                    let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(at) = idle.iter().position(|(i, _)| *i == id) {
                        idle.swap_remove(at);
                        return;
                    }
                    drop(idle);
                    // Taken off the idle list just as the wait ended: the job is on its way.
                    match rx.recv() {
                        Ok(next) => next,
                        Err(_) => return,
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    #[test]
    fn reuses_an_idle_thread_and_runs_jobs_concurrently() {
        let pool = ThreadPool::new("pool-test");
        let (tx, rx) = channel();
        let t = tx.clone();
        pool.run(move || t.send(std::thread::current().id()).unwrap())
            .unwrap();
        let first = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        // Wait until that thread has offered itself as idle.
        for _ in 0..500 {
            if !pool.idle.lock().unwrap().is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let t = tx.clone();
        pool.run(move || t.send(std::thread::current().id()).unwrap())
            .unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), first);
        // Two jobs that wait for each other only finish if they run at the same time.
        let (a_tx, a_rx) = channel::<()>();
        let (b_tx, b_rx) = channel::<()>();
        let t = tx.clone();
        pool.run(move || {
            a_tx.send(()).unwrap();
            b_rx.recv_timeout(Duration::from_secs(5)).unwrap();
            t.send(std::thread::current().id()).unwrap();
        })
        .unwrap();
        pool.run(move || {
            a_rx.recv_timeout(Duration::from_secs(5)).unwrap();
            b_tx.send(()).unwrap();
        })
        .unwrap();
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
    }
}
