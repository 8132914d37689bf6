//! `unix`: one persistent Unix socket connection per worker, the raw TCP frames.
//!
//! The same frame exchange as `tcp` ([`FrameConn`], [`AsyncFrameConn`], generic over the
//! socket), over the server's `--unix` socket: the round trip without TCP/IP, what a
//! sidecar on the same host costs. A path has no name to resolve, so the address modes
//! do not apply (the runner runs it once); `connects` counts connections opened, one per
//! worker on a healthy run.

use super::tcp::{
    AsyncFrameConn, AsyncPersistent, BlockingSocket, Dial, FrameConn, Persistent, TimedStream,
};
use super::{CallError, Endpoint, Facts, Phases, Port, Tls, Took, remaining};
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

impl BlockingSocket for UnixStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        UnixStream::set_read_timeout(self, timeout)
    }
}

/// How `unix` dials: the server's socket file, no name to look up.
pub(super) struct UnixDial;

impl Dial for UnixDial {
    type Sock = UnixStream;
    type AsyncSock = tokio::net::UnixStream;
    type Place = ();
    const FACTS: Facts = Facts {
        summary: "one frame each way over a persistent Unix socket connection per worker (`rpcbench-echo --unix`; same host only, so it runs in address mode `ip` only)",
        persistent: true,
        port: Port::Unix,
        round_trips: None,
        network_twin: Some("tcp"),
        tls: Tls::None,
        encodings: crate::encoding::EncodingKind::ALL,
        ..Facts::DEFAULT
    };

    fn dial(
        endpoint: &Endpoint,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<FrameConn<UnixStream>, CallError> {
        let path = endpoint.unix_path()?;
        let (stream, took) = connect(path, remaining(deadline)?)?;
        phases.connect = Some(took);
        Ok(FrameConn::new(TimedStream::new(stream)))
    }

    async fn locate(_: &Endpoint, _: Instant, _: &mut Phases) -> Result<(), CallError> {
        Ok(())
    }

    async fn dial_async(
        endpoint: &Endpoint,
        (): (),
        _: Instant,
    ) -> Result<(AsyncFrameConn<tokio::net::UnixStream>, Took), CallError> {
        let path = endpoint.unix_path()?;
        let started = Instant::now();
        let stream = tokio::net::UnixStream::connect(path)
            .await
            .map_err(|e| CallError::from_connect(&e))?;
        let took = Took {
            connect: started.elapsed(),
            tls: None,
        };
        Ok((AsyncFrameConn::new(stream), took))
    }
}

/// The `unix` transport.
pub type Unix = Persistent<UnixDial>;

/// The `unix` transport on the event loop: the same frames on a tokio Unix socket.
pub type AsyncUnix = AsyncPersistent<UnixDial>;

#[cfg(test)]
mod tests {
    /// What the rest of the program reads from its facts: the connections a healthy run
    /// of 8 workers and 100 calls opens, the port, an event-loop side.
    #[test]
    fn its_facts() {
        super::super::expect_facts("unix", 8, super::super::Port::Unix, true);
    }
}
