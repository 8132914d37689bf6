//! Opening a connection and timing a call on tokio: the connect with its TLS handshake,
//! what each took ([`Took`]), and the timeouts that tell a connect timeout from a lost call.

use super::{CallError, ConnectFailure, Phases, tls};
use crate::tcpinfo::TcpInfoTally;
use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs `fut` within `timeout`; a connect that was still under way (`connecting` set)
/// counts as a connect timeout, anything later as a lost call. For the hyper transports,
/// whose runtime lives for one call at a time; the event loop's use [`CallTimer`].
pub(crate) async fn within<T, E: From<CallError>>(
    timeout: Duration,
    connecting: &Cell<bool>,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(res) => res,
        Err(_) => Err(timed_out(connecting).into()),
    }
}

/// The run's TLS and the ALPN protocol a connection offers, or `None` for plain TCP.
pub type Secure<'a> = Option<(&'a tls::TlsClient, tls::Alpn)>;

/// How long opening a connection took: the TCP connect, and the TLS handshake after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Took {
    /// The TCP connect.
    pub connect: Duration,
    /// The TLS handshake, on a TLS connection.
    pub tls: Option<Duration>,
}

impl Took {
    /// Records both as the call's `connect` and `tls` phases.
    pub fn record(self, phases: &mut Phases) {
        phases.connect = Some(self.connect);
        phases.tls = self.tls;
    }
}

/// Opens a tokio TCP connection with Nagle off (replies are small and latency is the
/// product) and, when `secure` says so, runs the TLS handshake on it (giving up at
/// `deadline`); returns it and what each step took. Every transport driven by tokio
/// connects through here: the hyper ones, tonic's, and the event loop's. The socket
/// carries a [`Probe`](crate::tcpinfo::Probe) into `tcp_info`, the run's `TCP_INFO` sums.
pub(crate) async fn connect_nodelay(
    addr: SocketAddr,
    secure: Secure<'_>,
    deadline: Instant,
    tcp_info: &Arc<TcpInfoTally>,
) -> Result<(tls::AsyncSock, Took), CallError> {
    use std::os::fd::AsFd;
    let started = Instant::now();
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| CallError::from_connect(&e))?;
    let connect = started.elapsed();
    // The segments retransmitted so far (the SYN's) are told apart.
    let probe = crate::tcpinfo::Probe::opened(tcp_info, stream.as_fd(), connect);
    stream
        .set_nodelay(true)
        .map_err(|e| CallError::from_io(&e))?;
    match secure {
        None => Ok((
            tls::AsyncSock::new(tls::AsyncIo::Plain(stream, false), probe),
            Took { connect, tls: None },
        )),
        Some((client, alpn)) => {
            let (stream, took) = client.handshake(stream, alpn, deadline).await?;
            Ok((
                tls::AsyncSock::new(tls::AsyncIo::Tls(Box::new(stream)), probe),
                Took {
                    connect,
                    tls: Some(took),
                },
            ))
        }
    }
}

/// Counts a connection an async transport has just opened (`connect` as a connection's
/// `connect` returns it): one more in `connects`, its time as the call's connect phase,
/// and the end of the `connecting` window, so a timeout from here on is a lost call.
pub(crate) fn opened<C>(
    (conn, took): (C, Took),
    connects: &mut u64,
    phases: &mut Phases,
    connecting: &Cell<bool>,
) -> C {
    *connects += 1;
    took.record(phases);
    connecting.set(false);
    conn
}

/// What a timed-out call counts as: a connect timeout while `connecting`, else lost.
fn timed_out(connecting: &Cell<bool>) -> CallError {
    if connecting.get() {
        CallError::Connect(ConnectFailure::TimedOut)
    } else {
        CallError::Timeout
    }
}

/// The timer of one event-loop connection's calls: one tokio `Sleep`, moved on to each
/// call's deadline, with [`within`]'s rules. Not `tokio::time::timeout` per call, which
/// files a timer in the wheel and takes it out again on every call: moving a filed timer
/// to a later deadline is one atomic compare-and-swap (tokio re-files it only when the
/// old deadline comes), a few hundred instructions less per call.
#[derive(Default)]
pub(crate) struct CallTimer(Option<std::pin::Pin<Box<tokio::time::Sleep>>>);

impl CallTimer {
    /// Runs `fut` until `deadline`.
    pub async fn within<T, E: From<CallError>>(
        &mut self,
        deadline: Instant,
        connecting: &Cell<bool>,
        fut: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        remaining(deadline)?;
        let deadline = tokio::time::Instant::from_std(deadline);
        let sleep = match &mut self.0 {
            Some(sleep) => {
                sleep.as_mut().reset(deadline);
                sleep
            }
            slot @ None => slot.insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        tokio::select! {
            biased;
            done = fut => done,
            () = sleep.as_mut() => Err(timed_out(connecting).into()),
        }
    }
}

/// Time left before `deadline`, or a timeout error when none is.
pub(crate) fn remaining(deadline: Instant) -> Result<Duration, CallError> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or(CallError::Timeout)
}
