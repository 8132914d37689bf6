//! One call, made, timed, verified and counted: the part both engines share, so a call on
//! the event loop is judged by exactly the code that judges one on a worker thread.
//!
//! An engine makes a call in four steps: [`Attempt::start`] (payload, clock), the
//! transport's `call` (blocking or awaited), [`Attempt::judge`] (seq and bytes), the
//! transport's `end_call` or `reset`, then [`Attempt::record`] (latency, phases, busy time,
//! the outcome). The transport step is the only one that differs between the engines.
//! The fleet agent (`crate::agent`) makes its probes with the same steps, ending with
//! [`Attempt::finish`], whose result it records in its Prometheus histograms instead of a
//! [`Tally`] (a `Tally` per probed pair would be a megabyte each).

use super::RunConfig;
use crate::encoding::{CallId, DecodeError, Request};
use crate::measure::{ErrorKind, Outcome, Phase, Tally};
use crate::transport::{Call, CallError, Counts, Phases, Reply, Rpc, ServerTime};
use crate::wire;
use std::time::{Duration, Instant};

/// One call under way: what is sent, where its time goes, and when it started.
pub struct Attempt<'p> {
    /// The call handed to the transport.
    pub call: Call<'p>,
    /// Filled by the transport with what it measured.
    pub phases: Phases,
    started: Instant,
    /// For an encoded call, what was encoded: the reply is judged against it.
    sent: Option<Sent>,
}

/// What an encoded call sent, and what encoding it took.
struct Sent {
    request: Request,
    id: CallId,
    /// The codec's time, or `None` when the message could not be encoded (the call then
    /// fails as `encode`, counted like any other).
    encode: Option<Duration>,
}

/// How a call ended, before it is recorded.
pub struct Judged {
    outcome: Outcome,
    /// What the server said it spent, for ok calls.
    server: Option<ServerTime>,
    /// Decoding an encoded call's reply.
    decode: Option<Duration>,
    /// The reply body's bytes, when there was a reply.
    reply_bytes: usize,
}

impl Judged {
    /// True for a verified reply: the transport then ends the call (`end_call`), else it
    /// drops its connection (`reset`), which may hold a late reply or be half-closed.
    #[inline]
    pub fn is_ok(&self) -> bool {
        self.outcome == Outcome::Ok
    }
}

/// A call that has ended, judged and timed: what [`Attempt::record`] puts in a [`Tally`].
#[derive(Debug)]
pub struct Ended {
    /// How it ended.
    pub outcome: Outcome,
    /// Its latency, for an ok call: from [`Attempt::start`] until now.
    pub latency: Option<Duration>,
    /// Where its time went, for an ok call (what the transport measured).
    pub phases: Phases,
    /// What the server said it spent, for an ok call.
    pub server: Option<ServerTime>,
    /// The codec's time on this side, for an ok encoded call: encoding the request and
    /// decoding the reply.
    pub codec: Option<(Duration, Duration)>,
    /// Time spent inside the call, every outcome.
    pub busy: Duration,
    /// The request's and the reply's body bytes, for an ok call.
    pub body_bytes: (usize, usize),
}

impl<'p> Attempt<'p> {
    /// Builds call `seq` with a payload unique to it (so an echo of some other call's bytes
    /// cannot pass) in `payload`, and starts its clock. An encoded call (`config.rpc`)
    /// makes its message from `seq`, starts the clock, then encodes it: the encode is part
    /// of the call, as it is of any RPC stack's.
    #[inline]
    pub fn start(seq: u64, config: &RunConfig, payload: &'p mut Vec<u8>) -> Attempt<'p> {
        payload.clear();
        let expected = config.reply.unwrap_or(config.payload);
        let mut max_reply = config.max_reply.unwrap_or(expected) as usize;
        let (sent, started) = match config.rpc {
            None => {
                wire::pattern(seq, config.payload as usize, payload);
                (None, Instant::now())
            }
            Some(rpc) => {
                let request = rpc.message.request(seq);
                let id = CallId::of_call(seq);
                let started = Instant::now();
                let encoded = rpc.encoding.encode_request(&request, &id, payload);
                let encode = encoded.is_ok().then(|| started.elapsed());
                if config.max_reply.is_none() {
                    max_reply = super::rpc_max_reply(payload.len());
                }
                let sent = Sent {
                    request,
                    id,
                    encode,
                };
                (Some(sent), started)
            }
        };
        let call = Call {
            seq,
            payload,
            reply_len: config.reply,
            delay_us: config.delay_us,
            max_reply,
            rpc: config.rpc.map(|rpc| Rpc {
                encoding: rpc.encoding,
                operation: rpc.message.operation(),
            }),
        };
        Attempt {
            call,
            phases: Phases::default(),
            started,
            sent,
        }
    }

    /// Makes the call on an event-loop transport and judges it, then ends the call:
    /// `end_call` after a verified reply, `reset` after anything else, so that the next
    /// call starts on a new connection. What the runner's event loop and the fleet agent
    /// both do for every call.
    pub async fn make<T: crate::transport::AsyncTransport>(&mut self, transport: &mut T) -> Judged {
        let result = transport.call(&self.call, &mut self.phases).await;
        let judged = self.judge(result);
        if judged.is_ok() {
            transport.end_call();
        } else {
            transport.reset();
        }
        judged
    }

    /// Judges what the transport returned: ok, lost, mismatched, or an error by kind.
    #[inline]
    pub fn judge(&self, result: Result<Reply<'_>, CallError>) -> Judged {
        match result {
            Ok(reply) => match (&self.sent, self.call.rpc) {
                (Some(sent), Some(rpc)) => judge_encoded(&self.call, rpc, sent, &reply),
                _ => Judged {
                    outcome: verify(&self.call, reply.seq, reply.body),
                    server: reply.server,
                    decode: None,
                    reply_bytes: reply.body.len(),
                },
            },
            Err(e) if e.is_lost() => Judged {
                outcome: Outcome::Lost,
                server: None,
                decode: None,
                reply_bytes: 0,
            },
            Err(e) => {
                let kind = e.kind();
                if let CallError::Tls(_) = e {
                    say_first(kind, &e);
                }
                Judged {
                    outcome: Outcome::Error(kind),
                    server: None,
                    decode: None,
                    reply_bytes: 0,
                }
            }
        }
    }

    /// Records the call in `tally`, once the transport has ended or reset it. `due` is
    /// when an open schedule meant the call to start (`--rate`); an ok call is then also
    /// timed from `due`, which is what a user of a service called at that rate would have
    /// waited (wrk2's correction for coordinated omission).
    #[inline]
    pub fn record(self, judged: Judged, due: Option<Instant>, tally: &mut Tally) {
        let seq = self.call.seq;
        let (ended, at) = self.finish(judged);
        if let Some(latency) = ended.latency {
            tally.latency.record(latency);
            if let (Some(due), Some(hist)) = (due, &mut tally.latency_intended) {
                hist.record(at.saturating_duration_since(due));
            }
            let phases = ended.phases;
            if let Some((sent, received)) = phases.wire_bytes {
                tally.wire_bytes_sent += sent;
                tally.wire_bytes_received += received;
            }
            let server = ended.server.unwrap_or_default();
            let (encode, decode) = ended.codec.unzip();
            for (phase, took) in [
                (Phase::Dns, phases.dns),
                (Phase::Connect, phases.connect),
                (Phase::Tls, phases.tls),
                (Phase::Handshake, phases.handshake),
                (Phase::FirstByte, phases.first_byte),
                (Phase::Server, ended.server.map(|s| s.total)),
                (Phase::Encode, encode),
                (Phase::Decode, decode),
                (Phase::ServerDecode, server.decode),
                (Phase::ServerEncode, server.encode),
            ] {
                if let Some(took) = took {
                    tally.record_phase(phase, took);
                }
            }
        }
        tally.busy += ended.busy;
        tally.body_bytes_sent += ended.body_bytes.0 as u64;
        tally.body_bytes_received += ended.body_bytes.1 as u64;
        tally.count(seq, ended.outcome);
    }

    /// Stops the call's clock, once the transport has ended or reset it, and returns what
    /// [`Attempt::record`] would count, and the instant the clock stopped.
    #[inline]
    pub fn finish(self, judged: Judged) -> (Ended, Instant) {
        let at = Instant::now();
        let busy = at - self.started;
        let ok = judged.is_ok();
        let ended = Ended {
            outcome: judged.outcome,
            latency: ok.then_some(busy),
            phases: if ok { self.phases } else { Phases::default() },
            server: judged.server,
            body_bytes: if ok {
                (self.call.payload.len(), judged.reply_bytes)
            } else {
                (0, 0)
            },
            codec: match (&self.sent, judged.decode) {
                (Some(sent), Some(decode)) if ok => sent.encode.map(|e| (e, decode)),
                _ => None,
            },
            busy,
        };
        (ended, at)
    }
}

/// Checks a reply: the call's seq, and exactly the expected bytes.
fn verify(call: &Call, seq: Option<u64>, body: &[u8]) -> Outcome {
    let bytes_ok = match call.reply_len {
        None => body == call.payload,
        Some(n) => body.len() == n as usize && wire::is_pattern(call.seq, body),
    };
    if seq == Some(call.seq) && bytes_ok {
        Outcome::Ok
    } else {
        Outcome::Mismatched
    }
}

/// Judges the reply to an encoded call: decoded (timed), then compared field by field with
/// what was sent. A reply the encoding cannot read fails as `decode_<encoding>`, one in
/// the encoding's error form as its fault (`jsonrpc_-32601`); the values, the JSON-RPC
/// id, and the seq where the reply carries one must all be the call's, else `mism`.
fn judge_encoded(call: &Call, rpc: Rpc, sent: &Sent, reply: &Reply) -> Judged {
    let started = Instant::now();
    let decoded = rpc.encoding.decode_reply(rpc.operation, reply.body);
    let decode = started.elapsed();
    let outcome = match decoded {
        _ if sent.encode.is_none() => Outcome::Error(ErrorKind::Named("encode")),
        Ok((back, id)) => {
            let id_ok = id == CallId::None || id == sent.id;
            let seq_ok = reply.seq.is_none_or(|seq| seq == call.seq);
            if back.echoes(&sent.request) && id_ok && seq_ok {
                Outcome::Ok
            } else {
                Outcome::Mismatched
            }
        }
        Err(DecodeError::Fault(fault, _)) => Outcome::Error(ErrorKind::Fault(fault)),
        Err(_) => Outcome::Error(ErrorKind::Decode(rpc.encoding)),
    };
    Judged {
        outcome,
        server: reply.server,
        decode: Some(decode),
        reply_bytes: reply.body.len(),
    }
}

/// Error kinds already told on stderr by [`say_first`], over the whole process.
static TOLD: std::sync::Mutex<std::collections::BTreeSet<ErrorKind>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Tells a TLS failure on stderr, one line, the first time its kind occurs: the counts in
/// the report say how often, this line says what it was while the run goes on (a wrong
/// `--ca` should not wait for the table to be noticed).
fn say_first(kind: ErrorKind, e: &CallError) {
    let mut told = TOLD.lock().unwrap_or_else(|p| p.into_inner());
    if !told.contains(&kind) {
        told.insert(kind);
        tracing::warn!("first {kind} error: {e}");
    }
}

/// Adds what the transports counted themselves to a run's tally: every connection opened,
/// warm-up included (`connects` is checked against what the run should open), and the
/// duplicate, late and reordered replies and the early data of the measured calls alone.
pub(super) fn count_transport(tally: &mut Tally, at_end: Counts, in_warmup: Counts) {
    tally.connects += at_end.connects;
    tally.duplicated = at_end.duplicates - in_warmup.duplicates;
    tally.late_replies = at_end.late_replies - in_warmup.late_replies;
    tally.reordered = at_end.reordered - in_warmup.reordered;
    tally.zero_rtt_sent = at_end.zero_rtt_sent - in_warmup.zero_rtt_sent;
    tally.zero_rtt_accepted = at_end.zero_rtt_accepted - in_warmup.zero_rtt_accepted;
    tally.quic_retries = at_end.quic_retries - in_warmup.quic_retries;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verification() {
        let mut payload = Vec::new();
        wire::pattern(9, 8, &mut payload);
        let echo = Call {
            seq: 9,
            payload: &payload,
            reply_len: None,
            delay_us: 0,
            max_reply: 8,
            rpc: None,
        };
        assert_eq!(verify(&echo, Some(9), &payload), Outcome::Ok);
        assert_eq!(verify(&echo, Some(8), &payload), Outcome::Mismatched);
        assert_eq!(verify(&echo, None, &payload), Outcome::Mismatched);
        assert_eq!(verify(&echo, Some(9), &payload[1..]), Outcome::Mismatched);
        let pattern = Call {
            reply_len: Some(8),
            ..echo
        };
        assert_eq!(verify(&pattern, Some(9), &payload), Outcome::Ok);
        let mut corrupt = payload.clone();
        corrupt[3] ^= 0x40;
        assert_eq!(verify(&pattern, Some(9), &corrupt), Outcome::Mismatched);
    }

    #[test]
    fn judged_and_recorded_once_by_outcome() {
        let config = RunConfig {
            payload: 4,
            ..RunConfig::default()
        };
        let mut tally = Tally::new(config.rate.is_some());
        let mut payload = Vec::new();
        let attempt = Attempt::start(5, &config, &mut payload);
        let body = attempt.call.payload.to_vec();
        let ok = attempt.judge(Ok(Reply {
            seq: Some(5),
            body: &body,
            server: Some(Duration::from_micros(3).into()),
        }));
        assert!(ok.is_ok());
        attempt.record(ok, None, &mut tally);
        let attempt = Attempt::start(6, &config, &mut payload);
        let lost = attempt.judge(Err(CallError::Closed));
        attempt.record(lost, None, &mut tally);
        let attempt = Attempt::start(7, &config, &mut payload);
        let failed = attempt.judge(Err(CallError::HttpStatus(503)));
        attempt.record(failed, None, &mut tally);
        assert_eq!((tally.ok, tally.lost, tally.calls()), (1, 1, 3));
        assert_eq!(tally.errors[&ErrorKind::HttpStatus(503)], 1);
        assert_eq!(tally.latency.len(), 1);
        assert_eq!(tally.phase(Phase::Server).len(), 1);
        assert!(tally.phase(Phase::Connect).is_empty());
    }
}
