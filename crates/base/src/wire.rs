//! The wire protocol: raw TCP frames, and what HTTP shares with them (the seq header and
//! the reply pattern).
//!
//! A frame is a 4-byte big-endian body length `L` (`1 <= L <= max frame`) followed by `L`
//! bytes holding one postcard-encoded message. Clients send [`Request`]s and the server
//! answers each with a [`Response`], in request order, so requests may be pipelined.
//! `docs/reference.md` documents the same format byte by byte for implementers in other languages.
//!
//! Over UDP a datagram holds one message body without the length prefix: one [`Request`]
//! per datagram, one [`Response`] per datagram back. A UDP reply is never an amplifier: its
//! payload is at most the size of the request datagram ([`Status::ReplyAboveRequest`]
//! otherwise), so a spoofed source can gain at most the reply's header
//! ([`RESPONSE_OVERHEAD`] bytes), never a multiple of what it sent. A datagram holds at
//! most [`MAX_UDP_PAYLOAD`] bytes.
//!
//! Both protocols carry a call's sequence number ([`SEQ_HEADER`] on HTTP) and can ask for
//! a reply of [`pattern`] bytes, so client and server read both from here: one definition,
//! and a client and server that cannot disagree about them.
//!
//! Layer 1 of the map in `lib.rs` (kinds and units): uses nothing above it: the server and the client both speak it.

use serde::{Deserialize, Serialize};

/// The wire's version: what a client and a server must agree on to call each other (the
/// frame layout, the fields of [`Request`] and [`Response`], the HTTP routes and
/// [`SEQ_HEADER`], the reply [`pattern`]). rpcbench-echo reports it in `/stats`; the
/// client's preflight refuses a server whose wire differs, and only notes a server of
/// another version on the same wire. Raise it with any change that makes an older client
/// and a newer server misread each other.
pub const WIRE_VERSION: u32 = 2;

/// Size of the big-endian length prefix in front of every frame body.
pub const LEN_PREFIX: usize = 4;

/// Default largest frame body, in bytes (16 MiB).
///
/// Large enough for any payload a latency benchmark sends, small enough that a hostile
/// length prefix cannot make the server reserve a dangerous amount of memory.
pub const DEFAULT_MAX_FRAME: u32 = 16 * 1024 * 1024;

/// Bytes of framing a response adds around its payload at most (varints for seq and
/// server_ns, status, payload length), used to check a requested reply fits in a frame.
pub const RESPONSE_OVERHEAD: u32 = 10 + 1 + 10 + 5;

/// Smallest request body: seq, the `reply_len` tag, `delay_us` and the payload length,
/// one byte each. A max frame below this accepts no request at all.
pub const MIN_REQUEST_LEN: u32 = 4;

/// Largest UDP payload over IPv4: 65,535 bytes of IP datagram less the 20-byte IPv4 header
/// and the 8-byte UDP header. Loopback's MTU (65,536) carries it in one packet; a request
/// larger than this cannot be one datagram, so the `udp` transport refuses it before a run.
pub const MAX_UDP_PAYLOAD: usize = 65_507;

/// Largest payload, request or reply, that a UDP message can carry whatever its header:
/// [`MAX_UDP_PAYLOAD`] less [`RESPONSE_OVERHEAD`]. The server answers a larger `reply_len`
/// (or the echo of a larger payload) with status 1, and the `udp` transport refuses
/// larger payloads before a run.
pub const MAX_UDP_MESSAGE_PAYLOAD: usize = MAX_UDP_PAYLOAD - RESPONSE_OVERHEAD as usize;

/// The HTTP header carrying a call's sequence number, both ways: the client sends it and
/// the server copies it into the reply (the frame's `seq` field, for HTTP).
pub const SEQ_HEADER: &str = "x-rpcbench-seq";

/// `n` in decimal, written at the end of `buf`: no formatting machinery, no allocation
/// (the seq and length fields of every HTTP request and reply).
pub fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// One call from the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Unique sequence number chosen by the client; the reply carries it back.
    pub seq: u64,
    /// `None`: echo `payload`. `Some(n)`: reply with `n` bytes of [`pattern`].
    pub reply_len: Option<u32>,
    /// Microseconds the server waits before replying.
    pub delay_us: u32,
    /// Opaque request body.
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
}

/// The server's answer to one [`Request`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// The request's sequence number.
    pub seq: u64,
    /// A [`Status`] code as a byte, so unknown future codes still decode.
    pub status: u8,
    /// Nanoseconds from having the whole request to starting to write the reply.
    pub server_ns: u64,
    /// The echoed payload or the pattern; empty when `status` is not ok.
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
}

/// A [`Request`] decoded in place: the payload borrows the receive buffer.
///
/// Same bytes on the wire as [`Request`]; the server uses it so that an echo's reply is
/// written from the request's own bytes, not from a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct RequestRef<'a> {
    pub seq: u64,
    pub reply_len: Option<u32>,
    pub delay_us: u32,
    #[serde(borrow, with = "serde_bytes")]
    pub payload: &'a [u8],
}

/// A [`Response`] decoded in place: the payload borrows the receive buffer.
///
/// Same bytes on the wire as [`Response`]; the client uses it so that verifying a reply
/// costs no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct ResponseRef<'a> {
    pub seq: u64,
    pub status: u8,
    pub server_ns: u64,
    #[serde(borrow, with = "serde_bytes")]
    pub payload: &'a [u8],
}

/// Outcome codes carried in [`Response::status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    /// The reply holds the echo or the pattern.
    Ok = 0,
    /// `reply_len` would not fit in the server's max frame.
    ReplyTooLarge = 1,
    /// `delay_us` is above the server's max delay.
    DelayTooLong = 2,
    /// UDP only: the reply's payload (the echo or `reply_len` pattern bytes) would be
    /// larger than the request datagram, so answering would make the server an
    /// amplifier for a spoofed source. The reply carries an empty payload.
    ReplyAboveRequest = 3,
    /// The request frame did not fit in what was left of the server's buffer budget
    /// (`--max-buffered`): it was read and dropped. Try again later.
    OverBudget = 4,
    /// An encoded call ([`RpcTrailer`]) whose body is no call of the server's, in a binary
    /// encoding: the payload is one line saying why (a JSON-RPC body is answered with its
    /// error object under status 0 instead, as over HTTP).
    RpcRefused = 5,
}

/// The trailer after a request's fields that makes the frame an encoded call (wire 2): its
/// encoding's code and its operation's (`EncodingKind::code`, `Operation::code`, from 1).
/// The payload is then the call's body in that encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcTrailer {
    pub encoding: u8,
    pub operation: u8,
}

/// Bytes of a request's [`RpcTrailer`].
pub const RPC_TRAILER_LEN: usize = 2;

impl RpcTrailer {
    /// Its bytes, appended after the request's payload.
    pub fn bytes(self) -> [u8; RPC_TRAILER_LEN] {
        [self.encoding, self.operation]
    }

    /// The trailer in the bytes after a request's fields: `None` for none (an echo),
    /// an error for bytes that are not one.
    pub fn of_request(rest: &[u8]) -> Result<Option<RpcTrailer>, DecodeFrameError> {
        match rest {
            [] => Ok(None),
            &[encoding, operation] => Ok(Some(RpcTrailer {
                encoding,
                operation,
            })),
            _ => Err(DecodeFrameError::TrailingBytes(rest.len())),
        }
    }
}

/// The trailer of the reply to an encoded call: the request's [`RpcTrailer`], then the
/// server's decode and encode in nanoseconds (postcard varints).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcReplyTrailer {
    pub encoding: u8,
    pub operation: u8,
    pub dec_ns: u64,
    pub enc_ns: u64,
}

impl RpcReplyTrailer {
    /// Appends its bytes to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let buf = std::mem::take(out);
        *out = postcard::to_extend(self, buf).expect("serialising into a Vec cannot fail");
    }
}

/// Why bytes on the wire could not be turned into a message.
#[derive(Debug, thiserror::Error)]
pub enum DecodeFrameError {
    /// A length prefix of zero: every message has at least one byte.
    #[error("frame length 0 is not allowed")]
    EmptyFrame,
    /// A length prefix above the limit; nothing was allocated for it.
    #[error("frame length {len} is above the maximum of {max} bytes")]
    FrameTooLarge { len: u32, max: u32 },
    /// The body is not a valid postcard message of the expected type.
    ///
    /// The message names no cause: the postcard error is the `source`, and an error chain
    /// printed on one line would show it twice.
    #[error("frame body is not a valid message")]
    Malformed(#[from] postcard::Error),
    /// The body decoded but left bytes over, so the sender and we disagree on the format.
    #[error("frame body has {0} trailing bytes")]
    TrailingBytes(usize),
}

/// Appends one frame holding `msg` to `out`.
pub fn encode_frame<T: Serialize>(msg: &T, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; LEN_PREFIX]);
    // Writing into a Vec cannot fail, and our message types have no fallible fields.
    let buf = std::mem::take(out);
    *out = postcard::to_extend(msg, buf).expect("serialising into a Vec cannot fail");
    let body_len = (out.len() - start - LEN_PREFIX) as u32;
    out[start..start + LEN_PREFIX].copy_from_slice(&body_len.to_be_bytes());
}

/// Appends the start of a frame holding a [`Response`] whose payload is `payload_len`
/// bytes: the length prefix, the fields before the payload, and the payload's length. The
/// payload's bytes, written next, complete the frame, so a large payload can be written
/// from wherever it is (the static pattern, the request's buffer) without a copy.
pub fn encode_response_head(
    seq: u64,
    status: u8,
    server_ns: u64,
    payload_len: usize,
    out: &mut Vec<u8>,
) {
    encode_response_head_with(seq, status, server_ns, payload_len, 0, out);
}

/// [`encode_response_head`] of a reply whose payload is followed by `trailer_len` bytes
/// of trailer ([`RpcReplyTrailer`]), counted in the frame's length.
pub fn encode_response_head_with(
    seq: u64,
    status: u8,
    server_ns: u64,
    payload_len: usize,
    trailer_len: usize,
    out: &mut Vec<u8>,
) {
    let start = out.len();
    out.extend_from_slice(&[0; LEN_PREFIX]);
    let buf = std::mem::take(out);
    *out = postcard::to_extend(&(seq, status, server_ns), buf)
        .expect("serialising into a Vec cannot fail");
    // postcard writes a byte string's length as an unsigned LEB128 varint.
    let mut n = payload_len as u64;
    loop {
        let byte = (n & 0x7F) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    let body_len = (out.len() - start - LEN_PREFIX + payload_len + trailer_len) as u32;
    out[start..start + LEN_PREFIX].copy_from_slice(&body_len.to_be_bytes());
}

/// The `seq` of a request frame body from its first bytes (it is the first field, an
/// unsigned LEB128 varint of at most 10 bytes); `None` when they do not hold one.
pub fn request_seq(body_start: &[u8]) -> Option<u64> {
    let mut seq = 0u64;
    for (i, &byte) in body_start.iter().take(10).enumerate() {
        seq |= u64::from(byte & 0x7F).checked_shl(7 * i as u32)?;
        if byte & 0x80 == 0 {
            return Some(seq);
        }
    }
    None
}

/// Checks a length prefix; returns the body length when it is acceptable.
pub fn check_len(prefix: [u8; LEN_PREFIX], max: u32) -> Result<usize, DecodeFrameError> {
    match u32::from_be_bytes(prefix) {
        0 => Err(DecodeFrameError::EmptyFrame),
        len if len > max => Err(DecodeFrameError::FrameTooLarge { len, max }),
        len => Ok(len as usize),
    }
}

/// Decodes the message at the start of a frame body, and returns the bytes after it (a
/// wire-2 trailer, or nothing).
pub fn decode_body_and_rest<'a, T: Deserialize<'a>>(
    body: &'a [u8],
) -> Result<(T, &'a [u8]), DecodeFrameError> {
    Ok(postcard::take_from_bytes(body)?)
}

/// Decodes one frame body (without its prefix) into a message.
pub fn decode_body<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, DecodeFrameError> {
    let (msg, rest) = postcard::take_from_bytes(body)?;
    if rest.is_empty() {
        Ok(msg)
    } else {
        Err(DecodeFrameError::TrailingBytes(rest.len()))
    }
}

/// Decodes the first frame in `buf`.
///
/// Returns `Ok(None)` when `buf` does not yet hold a whole frame (read more and try again),
/// or the message and the number of bytes it used.
pub fn decode_frame<'a, T: Deserialize<'a>>(
    buf: &'a [u8],
    max: u32,
) -> Result<Option<(T, usize)>, DecodeFrameError> {
    let Some(prefix) = buf.first_chunk::<LEN_PREFIX>() else {
        return Ok(None);
    };
    let len = check_len(*prefix, max)?;
    let Some(body) = buf.get(LEN_PREFIX..LEN_PREFIX + len) else {
        return Ok(None);
    };
    Ok(Some((decode_body(body)?, LEN_PREFIX + len)))
}

/// Longest run of the reply pattern [`pattern_static`] hands out without copying: 64 KiB,
/// larger than the replies of latency tests, small enough to keep in the binary. A multiple
/// of 256, so a longer pattern is whole runs of it back to back (see [`pattern`]).
pub const PATTERN_STATIC_MAX: usize = 64 * 1024;

/// Byte `j` is `j mod 256`: `PATTERN_TABLE[seq % 256..][..len]` is the pattern for `seq`.
static PATTERN_TABLE: [u8; 256 + PATTERN_STATIC_MAX] = {
    let mut table = [0u8; 256 + PATTERN_STATIC_MAX];
    let mut j = 0;
    while j < table.len() {
        table[j] = j as u8;
        j += 1;
    }
    table
};

/// The first `len` bytes of the reply pattern for `seq` (byte `i` is `(seq + i) mod 256`),
/// borrowed from a static table; `None` when `len` is above [`PATTERN_STATIC_MAX`].
///
/// The HTTP server sends this slice as the body without allocating; [`pattern`] and
/// [`is_pattern`] are built on it, so there is one generator of the pattern.
#[inline]
pub fn pattern_static(seq: u64, len: usize) -> Option<&'static [u8]> {
    if len > PATTERN_STATIC_MAX {
        return None;
    }
    let start = (seq % 256) as usize;
    Some(&PATTERN_TABLE[start..start + len])
}

/// The pattern for `seq` in runs of at most [`PATTERN_STATIC_MAX`] bytes, `len` in all,
/// borrowed from the static table: how a server writes a pattern reply without making it.
/// Every run but the last is a whole [`PATTERN_STATIC_MAX`], a multiple of 256, so each
/// run starts where the pattern for `seq` itself starts.
pub fn pattern_runs(seq: u64, len: usize) -> impl Iterator<Item = &'static [u8]> {
    let whole = len / PATTERN_STATIC_MAX;
    let full = pattern_static(seq, PATTERN_STATIC_MAX).expect("a run fits in the table");
    let last = pattern_static(seq, len % PATTERN_STATIC_MAX).expect("a run fits in the table");
    std::iter::repeat_n(full, whole).chain(std::iter::once(last))
}

/// Appends `len` bytes of the verifiable reply pattern for `seq` to `out`.
pub fn pattern(seq: u64, len: usize, out: &mut Vec<u8>) {
    out.reserve(len);
    for run in pattern_runs(seq, len) {
        out.extend_from_slice(run);
    }
}

/// True when `bytes` is exactly the pattern of its length for `seq`.
pub fn is_pattern(seq: u64, bytes: &[u8]) -> bool {
    // `chunks` cuts at the same multiples of PATTERN_STATIC_MAX as `pattern_runs`.
    bytes
        .chunks(PATTERN_STATIC_MAX)
        .zip(pattern_runs(seq, bytes.len()))
        .all(|(got, want)| got == want)
}

/// True when `bytes` start like a TLS record (a handshake or an alert, versions 1.0 to
/// 1.3): how a plain client recognises that it called a TLS port, and how a plain server
/// recognises a TLS client.
pub fn looks_like_tls(bytes: &[u8]) -> bool {
    matches!(bytes, [0x15 | 0x16, 0x03, 0x01..=0x04, ..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hi_request() -> Request {
        Request {
            seq: 1,
            reply_len: None,
            delay_us: 0,
            payload: b"hi".to_vec(),
        }
    }

    /// The worked example in `docs/reference.md`; if this changes, that page is wrong.
    #[test]
    fn readme_hex_examples() {
        let mut out = Vec::new();
        encode_frame(&hi_request(), &mut out);
        assert_eq!(out, [0, 0, 0, 6, 0x01, 0x00, 0x00, 0x02, 0x68, 0x69]);

        let resp = Response {
            seq: 1,
            status: Status::Ok as u8,
            server_ns: 1500,
            payload: b"hi".to_vec(),
        };
        out.clear();
        encode_frame(&resp, &mut out);
        assert_eq!(out, [0, 0, 0, 7, 0x01, 0x00, 0xdc, 0x0b, 0x02, 0x68, 0x69]);
        let (borrowed, _) = decode_frame::<ResponseRef>(&out, DEFAULT_MAX_FRAME)
            .unwrap()
            .unwrap();
        assert_eq!(
            (borrowed.seq, borrowed.server_ns, borrowed.payload),
            (1, 1500, &b"hi"[..])
        );
    }

    /// The encoded-call example in `docs/reference.md`: EchoVoid in postcard (an empty
    /// body), its request trailer, and the reply's trailer with the codec's times.
    #[test]
    fn readme_encoded_call_example() {
        let void = Request {
            seq: 1,
            reply_len: None,
            delay_us: 0,
            payload: Vec::new(),
        };
        let mut body = postcard::to_allocvec(&void).unwrap();
        let trailer = RpcTrailer {
            encoding: 1,
            operation: 1,
        };
        body.extend_from_slice(&trailer.bytes());
        assert_eq!(body, [0x01, 0x00, 0x00, 0x00, 0x01, 0x01]);
        let (req, rest) = decode_body_and_rest::<RequestRef>(&body).unwrap();
        assert_eq!(
            (req.seq, RpcTrailer::of_request(rest).unwrap()),
            (1, Some(trailer))
        );
        assert!(RpcTrailer::of_request(&[1, 2, 3]).is_err());

        let mut out = Vec::new();
        let mut tail = Vec::new();
        RpcReplyTrailer {
            encoding: 1,
            operation: 1,
            dec_ns: 300,
            enc_ns: 200,
        }
        .encode(&mut tail);
        encode_response_head_with(1, Status::Ok as u8, 1500, 0, tail.len(), &mut out);
        out.extend_from_slice(&tail);
        assert_eq!(
            out,
            [
                0, 0, 0, 11, 0x01, 0x00, 0xdc, 0x0b, 0x00, 0x01, 0x01, 0xac, 0x02, 0xc8, 0x01
            ]
        );
    }

    #[test]
    fn round_trip_and_partial_frames() {
        let req = Request {
            seq: u64::MAX,
            reply_len: Some(70_000),
            delay_us: 123,
            payload: vec![7; 300],
        };
        let mut out = Vec::new();
        encode_frame(&req, &mut out);
        encode_frame(&hi_request(), &mut out);
        for cut in 0..LEN_PREFIX + 5 {
            assert!(
                decode_frame::<Request>(&out[..cut], DEFAULT_MAX_FRAME)
                    .unwrap()
                    .is_none()
            );
        }
        let (first, used) = decode_frame::<Request>(&out, DEFAULT_MAX_FRAME)
            .unwrap()
            .unwrap();
        assert_eq!(first, req);
        let (second, rest) = decode_frame::<Request>(&out[used..], DEFAULT_MAX_FRAME)
            .unwrap()
            .unwrap();
        assert_eq!(second, hi_request());
        assert_eq!(used + rest, out.len());
    }

    #[test]
    fn bad_frames_are_errors() {
        assert!(matches!(
            decode_frame::<Request>(&[0, 0, 0, 0, 1], 100),
            Err(DecodeFrameError::EmptyFrame)
        ));
        assert!(matches!(
            decode_frame::<Request>(&[0xff, 0xff, 0xff, 0xff], 100),
            Err(DecodeFrameError::FrameTooLarge {
                len: u32::MAX,
                max: 100
            })
        ));
        // An Option tag of 7 is not valid postcard.
        assert!(matches!(
            decode_frame::<Request>(&[0, 0, 0, 3, 1, 7, 0], 100),
            Err(DecodeFrameError::Malformed(_))
        ));
        assert!(matches!(
            decode_frame::<Request>(&[0, 0, 0, 5, 1, 0, 0, 0, 9], 100),
            Err(DecodeFrameError::TrailingBytes(1))
        ));
    }

    #[test]
    fn a_response_head_and_its_payload_make_the_frame() {
        for len in [0usize, 1, 127, 128, 300, 70_000] {
            let resp = Response {
                seq: u64::MAX - 1,
                status: Status::Ok as u8,
                server_ns: 123_456,
                payload: vec![9; len],
            };
            let mut whole = Vec::new();
            encode_frame(&resp, &mut whole);
            let mut streamed = Vec::new();
            encode_response_head(resp.seq, resp.status, resp.server_ns, len, &mut streamed);
            streamed.extend_from_slice(&resp.payload);
            assert_eq!(streamed, whole, "len {len}");
        }
    }

    #[test]
    fn a_request_is_read_in_place_and_its_seq_from_its_start() {
        let req = Request {
            seq: 300_000_000_000,
            reply_len: Some(5),
            delay_us: 7,
            payload: b"abc".to_vec(),
        };
        let mut frame = Vec::new();
        encode_frame(&req, &mut frame);
        let body = &frame[LEN_PREFIX..];
        let read: RequestRef = decode_body(body).unwrap();
        assert_eq!(
            (read.seq, read.reply_len, read.delay_us),
            (req.seq, Some(5), 7)
        );
        assert_eq!(read.payload, b"abc");
        assert_eq!(request_seq(&body[..6]), Some(req.seq));
        assert_eq!(
            request_seq(&body[..2]),
            None,
            "cut in the middle of the varint"
        );
        assert_eq!(request_seq(&[0xFF; 12]), None);
    }

    #[test]
    fn pattern_wraps_and_verifies() {
        let mut p = Vec::new();
        pattern(254, 4, &mut p);
        assert_eq!(p, [254, 255, 0, 1]);
        assert!(is_pattern(254, &p));
        p[2] ^= 1;
        assert!(!is_pattern(254, &p));
    }

    /// Byte `i` is `(seq + i) mod 256` at every length, across the static table's end.
    #[test]
    fn pattern_is_seq_plus_index_at_every_length() {
        let max = PATTERN_STATIC_MAX;
        for (seq, len) in [
            (0, 0),
            (255, 3),
            (1_000_003, 100),
            (7, max),
            (9, max + 1),
            (u64::MAX, 2 * max + 300),
        ] {
            let mut p = Vec::new();
            pattern(seq, len, &mut p);
            assert_eq!(p.len(), len, "seq {seq} len {len}");
            for (i, &b) in p.iter().enumerate() {
                assert_eq!(b, seq.wrapping_add(i as u64) as u8, "seq {seq} byte {i}");
            }
            assert!(is_pattern(seq, &p), "seq {seq} len {len}");
            if let Some(last) = p.last_mut() {
                *last ^= 1;
                assert!(!is_pattern(seq, &p), "seq {seq} len {len}: last byte wrong");
            }
            match pattern_static(seq, len) {
                Some(s) => assert!(len <= max && is_pattern(seq, s)),
                None => assert!(len > max),
            }
        }
    }

    /// The smallest request really is [`MIN_REQUEST_LEN`] bytes.
    #[test]
    fn smallest_request_is_min_request_len() {
        let smallest = Request {
            seq: 0,
            reply_len: None,
            delay_us: 0,
            payload: Vec::new(),
        };
        let mut out = Vec::new();
        encode_frame(&smallest, &mut out);
        assert_eq!(out.len() - LEN_PREFIX, MIN_REQUEST_LEN as usize);
    }

    /// An error chain printed on one line names each cause once.
    #[test]
    fn malformed_frame_names_its_cause_once() {
        let err = decode_frame::<Request>(&[0, 0, 0, 3, 1, 7, 0], 100).unwrap_err();
        let cause = std::error::Error::source(&err).expect("postcard error as source");
        assert!(!err.to_string().contains(&cause.to_string()), "{err}");
    }
}
