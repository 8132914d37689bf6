//! `tcp-connect`: a new TCP connection per call (connect, one frame each way, close), the
//! shape of netperf's TCP_CRR. The latency includes the connect.

use super::tcp::{AsyncFrameConn, FrameBufs, FrameConn};
use super::{
    AsyncTransport, Call, CallError, CallTimer, Counts, Endpoint, Facts, OpenTransportError,
    Phases, Port, Reply, Transport, opened,
};
use std::cell::Cell;
use std::time::{Duration, Instant};

/// The `tcp-connect` transport.
pub struct TcpConnect {
    endpoint: Endpoint,
    timeout: Duration,
    /// The connection of the call in progress; kept only so the reply can borrow from it,
    /// and closed by `end_call`.
    conn: Option<FrameConn>,
    /// The last connection's buffers, for the next.
    spare: Option<FrameBufs>,
    connects: u64,
}

impl Transport for TcpConnect {
    const FACTS: Facts = Facts {
        summary: "connect, one frame each way, close: a new TCP connection per call (netperf's TCP_CRR)",
        persistent: false,
        port: Port::Tcp,
        round_trips: Some(2.0),
        encodings: crate::encoding::EncodingKind::ALL,
        ..Facts::DEFAULT
    };

    fn open(endpoint: Endpoint, timeout: Duration) -> Result<TcpConnect, OpenTransportError> {
        Ok(TcpConnect {
            endpoint,
            timeout,
            conn: None,
            spare: None,
            connects: 0,
        })
    }

    fn call(&mut self, call: &Call, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let addr = self.endpoint.tcp_addr(deadline, phases)?;
        let bufs = self.spare.take().unwrap_or_default();
        let (conn, took) = FrameConn::connect(addr, deadline, &self.endpoint, bufs)?;
        self.connects += 1;
        took.record(phases);
        // A new connection per call cannot hold an earlier call's reply.
        let mut none = 0;
        self.conn
            .insert(conn)
            .exchange(call, deadline, phases, &mut none)
    }

    fn end_call(&mut self) {
        self.spare = self.conn.take().map(FrameConn::close);
    }

    fn reset(&mut self) {
        self.end_call();
    }

    fn counts(&self) -> Counts {
        Counts::connects(self.connects)
    }
}

/// The `tcp-connect` transport on the event loop: a new tokio connection per call, closed
/// by `end_call` inside the timed call, as on the blocking side.
pub struct AsyncTcpConnect {
    /// Where the calls go.
    endpoint: Endpoint,
    /// Longest a call may take.
    timeout: Duration,
    /// The timer of this connection's calls.
    timer: CallTimer,
    /// The connection of the call in progress, as in [`TcpConnect`].
    conn: Option<AsyncFrameConn>,
    /// Connections opened so far.
    connects: u64,
}

impl AsyncTransport for AsyncTcpConnect {
    fn open(endpoint: Endpoint, timeout: Duration) -> AsyncTcpConnect {
        AsyncTcpConnect {
            endpoint,
            timeout,
            timer: CallTimer::default(),
            conn: None,
            connects: 0,
        }
    }

    async fn call(&mut self, call: &Call<'_>, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        let addr = self
            .endpoint
            .addr_async(Port::Tcp, deadline, phases)
            .await?;
        let connecting = &Cell::new(true);
        let AsyncTcpConnect {
            endpoint,
            timer,
            conn,
            connects,
            ..
        } = self;
        timer
            .within(deadline, connecting, async move {
                let new = opened(
                    AsyncFrameConn::connect(addr, deadline, endpoint).await?,
                    connects,
                    phases,
                    connecting,
                );
                // A new connection per call cannot hold an earlier call's reply.
                let mut none = 0;
                conn.insert(new).exchange(call, phases, &mut none).await
            })
            .await
    }

    fn end_call(&mut self) {
        self.conn = None;
    }

    fn reset(&mut self) {
        self.conn = None;
    }

    fn counts(&self) -> Counts {
        Counts::connects(self.connects)
    }
}

#[cfg(test)]
mod tests {
    /// What the rest of the program reads from its facts: the connections a healthy run
    /// of 8 workers and 100 calls opens, the port, an event-loop side.
    #[test]
    fn its_facts() {
        super::super::expect_facts("tcp-connect", 100, super::super::Port::Tcp, true);
    }
}
