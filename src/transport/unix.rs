//! `unix`: one persistent Unix socket connection per worker, the raw TCP frames.
//!
//! The same frame exchange as `tcp` ([`FrameConn`], [`AsyncFrameConn`], generic over the
//! socket), over the server's `--unix` socket: the round trip without TCP/IP, what a
//! sidecar on the same host costs. A path has no name to resolve, so the address modes
//! do not apply (the runner runs it once); `connects` counts connections opened, one per
//! worker on a healthy run.

use super::tcp::{AsyncFrameConn, FrameConn, TimedStream};
use super::{AsyncTransport, Call, CallError, CallTimer, Endpoint, OpenTransportError, Phases, Port, Reply, Transport, opened, remaining, Facts, Tls};
use std::cell::Cell;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// Connects to the socket at `path`, writes timing out after `timeout`. A Unix connect
/// does not wait for a handshake: it is answered or refused at once (a full backlog makes
/// it wait, which the write timeout does not bound; the call's read deadline does).
fn connect(path: &Path, timeout: Duration) -> Result<(UnixStream, Duration), CallError> {
    let started = Instant::now();
    let stream = UnixStream::connect(path).map_err(|e| CallError::from_connect(&e))?;
    let took = started.elapsed();
    stream
        .set_write_timeout(Some(timeout))
        .map_err(|e| CallError::from_io(&e))?;
    Ok((stream, took))
}

/// The `unix` transport.
pub struct Unix {
    endpoint: Endpoint,
    timeout: Duration,
    conn: Option<FrameConn<UnixStream>>,
    connects: u64,
    duplicates: u64,
}

impl Transport for Unix {
    const FACTS: Facts = Facts {
        summary: "one frame each way over a persistent Unix socket connection per worker (`rpcbench-echo --unix`; same host only, so it runs in address mode `ip` only)",
        persistent: true,
        port: Port::Unix,
        round_trips: None,
        tls: Tls::None,
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<Unix, OpenTransportError> {
        Ok(Unix {
            endpoint,
            timeout,
            conn: None,
            connects: 0,
            duplicates: 0,
        })
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let conn = match &mut self.conn {
            Some(conn) => conn,
            slot @ None => {
                let path = self.endpoint.unix_path()?;
                let (stream, took) = connect(path, remaining(deadline)?)?;
                self.connects += 1;
                phases.connect = Some(took);
                slot.insert(FrameConn::new(TimedStream::new(stream)))
            }
        };
        conn.exchange(call, deadline, phases, &mut self.duplicates)
    }

    fn reset(&mut self) {
        self.conn = None;
    }

    fn connects(&self) -> u64 {
        self.connects
    }

    fn duplicates(&self) -> u64 {
        self.duplicates
    }
}

/// The `unix` transport on the event loop: the same frames on a tokio Unix socket.
pub struct AsyncUnix {
    /// Where the calls go.
    endpoint: Endpoint,
    /// Longest a call may take.
    timeout: Duration,
    /// The timer of this connection's calls.
    timer: CallTimer,
    /// The connection, once open.
    conn: Option<AsyncFrameConn<tokio::net::UnixStream>>,
    /// Connections opened so far.
    connects: u64,
    /// Replies to earlier calls read so far.
    duplicates: u64,
}

impl AsyncTransport for AsyncUnix {
    fn open(endpoint: Endpoint, timeout: Duration) -> AsyncUnix {
        AsyncUnix {
            endpoint,
            timeout,
            timer: CallTimer::default(),
            conn: None,
            connects: 0,
            duplicates: 0,
        }
    }

    async fn call(
        &mut self,
        call: &Call<'_>,
        phases: &mut Phases,
    ) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let connecting = &Cell::new(self.conn.is_none());
        let AsyncUnix {
            endpoint,
            timer,
            conn,
            connects,
            duplicates,
            ..
        } = self;
        timer
            .within(deadline, connecting, async move {
                let conn = match conn {
                    Some(conn) => conn,
                    slot @ None => {
                        let path = endpoint.unix_path()?;
                        let started = Instant::now();
                        let stream = tokio::net::UnixStream::connect(path)
                            .await
                            .map_err(|e| CallError::from_connect(&e))?;
                        slot.insert(opened(
                            (AsyncFrameConn::new(stream), super::Took { connect: started.elapsed(), tls: None }),
                            connects,
                            phases,
                            connecting,
                        ))
                    }
                };
                conn.exchange(call, phases, duplicates).await
            })
            .await
    }

    fn reset(&mut self) {
        self.conn = None;
    }

    fn connects(&self) -> u64 {
        self.connects
    }

    fn duplicates(&self) -> u64 {
        self.duplicates
    }
}
