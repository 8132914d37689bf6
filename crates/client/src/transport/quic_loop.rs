//! `quic` and `quic-connect` on the event loop: the same calls as their blocking side
//! (`quic_conn.rs`: the handshake, one request frame and one response frame on a stream of
//! their own), made from a connection task of an event-loop thread, whose runtime drives
//! the QUIC endpoint. Each connection has an endpoint (a UDP socket) of its own, bound at
//! its first call; at the end of the run it is closed and given a moment to say so, so
//! that the server does not wait for its idle timer.

use super::quic_conn::{LINGER, bind, client_config, handshake, round_trip, tls_of};
use super::tcp::{encode_request, reply_of};
use super::tls::Alpn;
use super::{AsyncTransport, Call, CallError, Counts, Endpoint, Phases, Port, Reply};
use crate::wire::RESPONSE_OVERHEAD;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// One connection of `quic` (`FRESH` false: kept) or `quic-connect` (`FRESH`: a new one
/// per call, closed inside the call) on the event loop.
pub struct AsyncQuicLoop<const FRESH: bool> {
    endpoint: Endpoint,
    timeout: Duration,
    /// The QUIC endpoint and whether it is IPv6, once bound.
    quic: Option<(quinn::Endpoint, bool)>,
    config: Option<quinn::ClientConfig>,
    conn: Option<quinn::Connection>,
    /// Connections done with their call, kept open for their tickets (`tls13-0rtt`).
    lingering: VecDeque<quinn::Connection>,
    out: Vec<u8>,
    body: Vec<u8>,
    connects: u64,
    zero_rtt_sent: u64,
    zero_rtt_accepted: u64,
    retries: Arc<AtomicU64>,
}

impl<const FRESH: bool> AsyncQuicLoop<FRESH> {
    /// The connection for a call, opened now when there is none; with whether the server
    /// takes its early data still to come (`tls13-0rtt`).
    async fn connection(
        &mut self,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<(quinn::Connection, Option<quinn::ZeroRttAccepted>), CallError> {
        if let Some(conn) = &self.conn {
            return Ok((conn.clone(), None));
        }
        let addr = (self.endpoint)
            .addr_async(Port::Quic, deadline, phases)
            .await?;
        let tls = tls_of(&self.endpoint)?;
        if self.config.is_none() {
            self.config = Some(client_config(tls, Alpn::None)?);
        }
        let quic = match &self.quic {
            Some((quic, v6)) if *v6 == addr.is_ipv6() => quic.clone(),
            _ => {
                let quic = bind(addr, &self.retries)?;
                self.quic.insert((quic, addr.is_ipv6())).0.clone()
            }
        };
        let config = self.config.clone().expect("set above");
        let started = Instant::now();
        let (conn, early) = handshake(&quic, config, addr, tls, deadline).await?;
        phases.handshake = Some(started.elapsed());
        self.connects += 1;
        self.zero_rtt_sent += u64::from(early.is_some());
        Ok((self.conn.insert(conn).clone(), early))
    }

    /// Closes the connection, or keeps it open a little for its tickets (`tls13-0rtt`:
    /// [`LINGER`]).
    fn retire(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        let early_data = (self.endpoint.tls.as_deref()).is_some_and(|t| t.security().early_data());
        if early_data {
            self.lingering.push_back(conn);
            if self.lingering.len() <= LINGER {
                return;
            }
            let Some(oldest) = self.lingering.pop_front() else {
                return;
            };
            oldest.close(0u32.into(), b"");
            return;
        }
        conn.close(0u32.into(), b"");
    }
}

impl<const FRESH: bool> AsyncTransport for AsyncQuicLoop<FRESH> {
    fn open(endpoint: Endpoint, timeout: Duration) -> Self {
        AsyncQuicLoop {
            endpoint,
            timeout,
            quic: None,
            config: None,
            conn: None,
            lingering: VecDeque::new(),
            out: Vec::new(),
            body: Vec::new(),
            connects: 0,
            zero_rtt_sent: 0,
            zero_rtt_accepted: 0,
            retries: Arc::new(AtomicU64::new(0)),
        }
    }

    async fn call(&mut self, call: &Call<'_>, phases: &mut Phases) -> Result<Reply<'_>, CallError> {
        let deadline = Instant::now() + self.timeout;
        if FRESH {
            self.retire();
        }
        let (conn, early) = self.connection(deadline, phases).await?;
        encode_request(call, &mut self.out);
        let max_body = call.max_body(RESPONSE_OVERHEAD as usize);
        let sent = Instant::now();
        let at = tokio::time::Instant::from_std(deadline);
        let (out, body) = (&self.out, &mut self.body);
        let mut result = tokio::time::timeout_at(at, round_trip(&conn, out, body, max_body, sent))
            .await
            .unwrap_or(Err(CallError::Timeout));
        if let Some(accepted) = early {
            let accepted = tokio::time::timeout_at(at, accepted).await.unwrap_or(false);
            self.zero_rtt_accepted += u64::from(accepted);
            if !accepted {
                // The server never saw the request: once more, on the connection now open.
                let again = round_trip(&conn, out, body, max_body, sent);
                result = tokio::time::timeout_at(at, again)
                    .await
                    .unwrap_or(Err(CallError::Timeout));
            }
        }
        phases.first_byte = Some(result?);
        reply_of(&self.body, call.rpc)
    }

    /// Closes a connection per call inside the timed call, as the blocking side does.
    fn end_call(&mut self) {
        if FRESH {
            self.retire();
        }
    }

    fn reset(&mut self) {
        self.retire();
    }

    fn counts(&self) -> Counts {
        Counts {
            connects: self.connects,
            zero_rtt_sent: self.zero_rtt_sent,
            zero_rtt_accepted: self.zero_rtt_accepted,
            quic_retries: self.retries.load(Relaxed),
            ..Counts::default()
        }
    }

    /// Closes every connection and waits, briefly, for the endpoint to have said so.
    async fn close(&mut self) {
        if let Some((quic, _)) = self.quic.take() {
            quic.close(0u32.into(), b"");
            let _ = tokio::time::timeout(Duration::from_millis(200), quic.wait_idle()).await;
        }
    }
}
