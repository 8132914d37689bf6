//! A WSTest call, whatever carries it (HTTP's `/rpc` routes, an encoded raw frame): the
//! body really decoded into the typed message within the buffer budget, echoed, encoded
//! again and counted; a body that cannot be decoded refused in the encoding's own form and
//! counted once under its kind. The listeners only frame what this returns.
//!
//! - **Memory.** Before a body is decoded, the budget lends what the decoded message can
//!   hold at most ([`heap_bound`](crate::encoding::EncodingKind::heap_bound): the body's
//!   length times the codec's expansion, or closer where the codec counts); the encoded
//!   reply is made whole and
//!   stays leased ([`Held`]) until it is sent.
//! - **Refusals**: a body the codec cannot read is `rpc_malformed`, an XML body with a DTD
//!   `rpc_doctype`, one nested too deep `rpc_too_deep`, one that is not a call of this
//!   server's `rpc_bad_call`. JSON-RPC, XML-RPC and SOAP answer in their own error form
//!   (an error object or fault with -32700, -32701, -32601 or -32602; a SOAP Client
//!   Fault); the binary encodings with a one-line reason.

use super::Shared;
use super::budget::{ConnShare, Held, Lease};
use super::stats::Reject;
use crate::encoding::{DecodeError, EncodingKind, ErrorReply, Operation};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// A call answered: its encoded reply, and the codec's time each way.
pub(super) struct Answer {
    pub reply: Held,
    pub decode: Duration,
    pub encode: Duration,
}

/// Why a call got no reply of its own.
pub(super) enum Refusal {
    /// The budget cannot lend what the decoded message may hold, or its reply.
    OverBudget,
    /// The body is no call of this server's, counted: the encoding's own error form where
    /// it has one (answered as a reply), and one line saying why.
    NotACall {
        error_reply: Option<ErrorReply>,
        reason: String,
    },
    /// The reply could not be encoded: only a message too large for the encoding's
    /// lengths can make it, the server's fault.
    Unencodable(String),
}

/// Answers one call of `encoding` whose body is `body`; `op` is the operation the route or
/// frame named (`None` where the body names its own: JSON-RPC over `/rpc`). `share` is the
/// connection's share of the budget, where it has one.
pub(super) fn answer(
    shared: &Shared,
    share: Option<&Arc<ConnShare>>,
    encoding: EncodingKind,
    op: Option<Operation>,
    body: &[u8],
) -> Result<Answer, Refusal> {
    // What the decoded message may hold, lent before it is made.
    let bound = encoding.heap_bound(op, body) as u64;
    let mut lease = Lease::new(&shared.stats.budget, share, bound);
    if !lease.grow_to(bound) {
        return Err(Refusal::OverBudget);
    }
    let started = Instant::now();
    let decoded = encoding.decode_request(op, body);
    let decode = started.elapsed();
    let (req, id) = match decoded {
        Ok(call) => call,
        Err(e) => return Err(refuse(shared, encoding, &e, body)),
    };
    let counters = shared.stats.rpc(encoding, req.operation());
    counters.decoded.fetch_add(1, Relaxed);
    counters.bytes_in.fetch_add(body.len() as u64, Relaxed);
    let started = Instant::now();
    let mut out = Vec::new();
    let encoded = encoding.encode_reply(&req.into_reply(), &id, &mut out);
    let encode = started.elapsed();
    if let Err(e) = encoded {
        return Err(Refusal::Unencodable(format!(
            "cannot encode the reply: {e}"
        )));
    }
    counters.encoded.fetch_add(1, Relaxed);
    counters.bytes_out.fetch_add(out.len() as u64, Relaxed);
    // The message is gone; its reply's bytes stay leased until sent.
    let reply = Held::from_vec(lease, out).map_err(|_| Refusal::OverBudget)?;
    Ok(Answer {
        reply,
        decode,
        encode,
    })
}

/// The refusal of a body the codec would not take, counted under its kind, answered in
/// the encoding's own error form where it has one.
fn refuse(shared: &Shared, encoding: EncodingKind, e: &DecodeError, body: &[u8]) -> Refusal {
    let kind = match e {
        DecodeError::Malformed(..) | DecodeError::Charset(_) => Reject::RpcMalformed,
        DecodeError::Doctype(_) => Reject::RpcDoctype,
        DecodeError::TooDeep(_) => Reject::RpcTooDeep,
        DecodeError::NoSuchOperation(_) | DecodeError::BadCall(_) | DecodeError::Fault(..) => {
            Reject::RpcBadCall
        }
    };
    shared.stats.reject(kind);
    Refusal::NotACall {
        error_reply: encoding.error_reply(e, body),
        reason: e.to_string(),
    }
}

/// The `server-timing` value of an answered call that took `total` from having its
/// request: `app;dur=…, dec;dur=…, enc;dur=…` in milliseconds to the nanosecond (six
/// decimals: a small message's decode takes well under a microsecond, which three would
/// round to 0 or 1). Written with integer arithmetic, as `/echo`'s is.
pub(super) fn server_timing(total: Duration, answer: &Answer) -> hyper::header::HeaderValue {
    let mut buf = [0u8; TIMING_MAX];
    let mut len = 0;
    let mut put = |bytes: &[u8]| {
        buf[len..len + bytes.len()].copy_from_slice(bytes);
        len += bytes.len();
    };
    for (i, (name, took)) in [
        (b"app", total),
        (b"dec", answer.decode),
        (b"enc", answer.encode),
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 {
            put(b", ");
        }
        put(name);
        put(b";dur=");
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let mut scratch = [0; 20];
        put(crate::wire::decimal(ns / 1_000_000, &mut scratch));
        put(b".");
        let frac = crate::wire::decimal(1_000_000 + ns % 1_000_000, &mut scratch);
        put(&frac[1..]);
    }
    hyper::header::HeaderValue::from_bytes(&buf[..len])
        .expect("digits, letters and `;=,. ` are valid header bytes")
}

/// Longest [`server_timing`] value: three times `xxx;dur=`, 20 digits, `.` and 6
/// decimals, and two `, `.
const TIMING_MAX: usize = 3 * (8 + 20 + 1 + 6) + 2 * 2;

/// The refusal of a call of `encoding` naming an operation this server does not have
/// (`what`: the path's, the frame's or the header's), counted.
pub(super) fn no_such_operation(shared: &Shared, encoding: EncodingKind, what: &str) -> Refusal {
    let e = DecodeError::NoSuchOperation(format!(
        "{what}: this server has EchoVoid, EchoStruct, EchoList and EchoSynthetic"
    ));
    refuse(shared, encoding, &e, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_timing_is_milliseconds_to_the_nanosecond() {
        let budget = Arc::new(super::super::budget::Budget::new(1 << 20));
        let answer = |decode, encode| Answer {
            reply: Held::from_vec(Lease::new(&budget, None, 0), Vec::new()).unwrap(),
            decode,
            encode,
        };
        for (total, decode, encode) in [
            (Duration::ZERO, Duration::ZERO, Duration::ZERO),
            (
                Duration::from_nanos(1_234_567),
                Duration::from_nanos(450),
                Duration::from_nanos(1_000_001),
            ),
            (
                Duration::MAX,
                Duration::from_secs(12),
                Duration::from_nanos(999_999),
            ),
        ] {
            let value = server_timing(total, &answer(decode, encode));
            let ms = |d: Duration| {
                let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                format!("{}.{:06}", ns / 1_000_000, ns % 1_000_000)
            };
            let want = format!(
                "app;dur={}, dec;dur={}, enc;dur={}",
                ms(total),
                ms(decode),
                ms(encode)
            );
            assert_eq!(value.to_str().unwrap(), want);
        }
    }
}
