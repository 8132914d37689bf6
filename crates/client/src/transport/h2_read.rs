//! Reading HTTP/2 frames off a client connection (RFC 9113 §4, §6), in place: each frame
//! is checked as the RFC says a client must check what a server sends, and handed over
//! as slices of the receive buffer, with no allocation and no copy. The `h2-mux` and
//! `grpc-mux` connection's task reads through it ([`super::h2_mux_wire`]); the `h2`
//! crate's frame reader, which it used before, split a buffer per frame and built a header
//! map per header block (a fifth of that task's CPU at `-c 64`).
//!
//! What a frame means for streams and calls is the caller's; what is wrong with a frame in
//! itself (a length its type does not allow, stream 0 where a stream is needed, padding
//! past the payload, a zero window increment, a CONTINUATION out of place, a server push)
//! is a connection error here.

use super::CallError;

/// A frame's header (§4.1).
pub(super) const HEAD_LEN: usize = 9;

/// The largest frame this side accepts: SETTINGS_MAX_FRAME_SIZE, which it never raises
/// from the default (§6.5.2).
pub(super) const MAX_FRAME: usize = 16_384;

/// The largest header block (HEADERS and its CONTINUATIONs) this side takes in: far above
/// any reply's head, and a bound on what a server can make it hold.
pub(super) const MAX_HEADER_BLOCK: usize = 1 << 20;

/// The flags this side reads (§6).
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// A frame received, its payload borrowed from the receive buffer.
#[derive(Debug, PartialEq)]
pub(super) enum Received<'a> {
    /// DATA: its data (padding removed), and its whole length, which flow control counts.
    Data {
        id: u32,
        data: &'a [u8],
        counted: u32,
        end: bool,
    },
    /// HEADERS, or a CONTINUATION of its block: the block's fragment.
    Headers {
        id: u32,
        fragment: &'a [u8],
        end_stream: bool,
        end_headers: bool,
    },
    Continuation {
        id: u32,
        fragment: &'a [u8],
        end_headers: bool,
    },
    Reset {
        id: u32,
        code: u32,
    },
    /// SETTINGS: its parameters, as (identifier, value).
    Settings {
        ack: bool,
        params: Vec<(u16, u32)>,
    },
    Ping {
        ack: bool,
        payload: [u8; 8],
    },
    GoAway {
        last: u32,
        code: u32,
    },
    WindowUpdate {
        id: u32,
        increment: u32,
    },
    /// PRIORITY, or a frame type this side does not know: nothing to do (§4.1, §5.5).
    Ignored,
}

/// The next whole frame at the front of `buf`, and its length with its header; `None`
/// while it is not all there.
pub(super) fn next(buf: &[u8]) -> Result<Option<(Received<'_>, usize)>, CallError> {
    let Some(head) = buf.first_chunk::<HEAD_LEN>() else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    if len > MAX_FRAME {
        return Err(CallError::Protocol);
    }
    let Some(payload) = buf.get(HEAD_LEN..HEAD_LEN + len) else {
        return Ok(None);
    };
    let (kind, flags) = (head[3], head[4]);
    let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    Ok(Some((frame(kind, flags, id, payload)?, HEAD_LEN + len)))
}

/// Reads one frame of type `kind`.
fn frame(kind: u8, flags: u8, id: u32, payload: &[u8]) -> Result<Received<'_>, CallError> {
    let on_stream = id != 0;
    let word = |at: usize| {
        payload
            .get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    Ok(match kind {
        0x0 if on_stream => Received::Data {
            id,
            data: unpadded(payload, flags)?,
            counted: payload.len() as u32,
            end: flags & END_STREAM != 0,
        },
        0x1 if on_stream => {
            let mut fragment = unpadded(payload, flags)?;
            if flags & PRIORITY != 0 {
                fragment = fragment.get(5..).ok_or(CallError::Protocol)?;
            }
            Received::Headers {
                id,
                fragment,
                end_stream: flags & END_STREAM != 0,
                end_headers: flags & END_HEADERS != 0,
            }
        }
        0x2 if on_stream && payload.len() == 5 => Received::Ignored,
        0x3 if on_stream && payload.len() == 4 => Received::Reset {
            id,
            code: word(0).ok_or(CallError::Protocol)?,
        },
        0x4 if !on_stream && flags & ACK != 0 && payload.is_empty() => Received::Settings {
            ack: true,
            params: Vec::new(),
        },
        0x4 if !on_stream && flags & ACK == 0 && payload.len().is_multiple_of(6) => {
            Received::Settings {
                ack: false,
                params: payload
                    .chunks_exact(6)
                    .map(|p| {
                        let value = u32::from_be_bytes([p[2], p[3], p[4], p[5]]);
                        (u16::from_be_bytes([p[0], p[1]]), value)
                    })
                    .collect(),
            }
        }
        0x6 if !on_stream => Received::Ping {
            ack: flags & ACK != 0,
            payload: *payload
                .first_chunk::<8>()
                .filter(|_| payload.len() == 8)
                .ok_or(CallError::Protocol)?,
        },
        0x7 if !on_stream && payload.len() >= 8 => Received::GoAway {
            last: word(0).ok_or(CallError::Protocol)? & 0x7fff_ffff,
            code: word(4).ok_or(CallError::Protocol)?,
        },
        0x8 if payload.len() == 4 => match word(0).ok_or(CallError::Protocol)? & 0x7fff_ffff {
            0 => return Err(CallError::Protocol),
            increment => Received::WindowUpdate { id, increment },
        },
        0x9 if on_stream => Received::Continuation {
            id,
            fragment: payload,
            end_headers: flags & END_HEADERS != 0,
        },
        // Unknown types are ignored; a known one that failed its checks above, or a
        // PUSH_PROMISE (this client turned push off), is an error.
        0xa.. => Received::Ignored,
        _ => return Err(CallError::Protocol),
    })
}

/// A DATA or HEADERS payload without its padding (§6.1).
fn unpadded(payload: &[u8], flags: u8) -> Result<&[u8], CallError> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let (&pad, rest) = payload.split_first().ok_or(CallError::Protocol)?;
    rest.len()
        .checked_sub(usize::from(pad))
        .map(|n| &rest[..n])
        .ok_or(CallError::Protocol)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(kind: u8, flags: u8, id: u32, payload: &[u8]) -> Vec<u8> {
        let len = (payload.len() as u32).to_be_bytes();
        let mut f = vec![len[1], len[2], len[3], kind, flags];
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn one(kind: u8, flags: u8, id: u32, payload: &[u8]) -> Result<Received<'static>, CallError> {
        let f: &'static [u8] = raw(kind, flags, id, payload).leak();
        next(f).map(|r| r.expect("whole").0)
    }

    #[test]
    fn frames_are_read_in_place() {
        let mut buf = raw(0x0, 0x8 | 0x1, 3, &[2, b'h', b'i', 0, 0]);
        buf.extend(raw(0x1, 0x20 | 0x4, 3, &[0, 0, 0, 1, 16, 0x88]));
        let (data, n) = next(&buf).unwrap().unwrap();
        assert_eq!(
            data,
            Received::Data {
                id: 3,
                data: b"hi",
                counted: 5,
                end: true
            }
        );
        let (head, m) = next(&buf[n..]).unwrap().unwrap();
        assert_eq!(
            head,
            Received::Headers {
                id: 3,
                fragment: &[0x88],
                end_stream: false,
                end_headers: true
            }
        );
        assert_eq!(n + m, buf.len());
        // Not all there yet.
        assert_eq!(next(&buf[..n - 1]).unwrap(), None);
        assert_eq!(next(&buf[..4]).unwrap(), None);
        let settings = one(0x4, 0, 0, &[0, 4, 0, 0, 1, 0, 0, 5, 0, 0, 64, 0]).unwrap();
        assert_eq!(
            settings,
            Received::Settings {
                ack: false,
                params: vec![(4, 256), (5, 16_384)]
            }
        );
        assert_eq!(one(0xfa, 0xff, 9, b"anything"), Ok(Received::Ignored));
    }

    #[test]
    fn bad_frames_are_connection_errors() {
        let e = Err(CallError::Protocol);
        // DATA on stream 0; padding past the payload; HEADERS on stream 0; PRIORITY of
        // 4 bytes; RST_STREAM of 5; SETTINGS with a payload and ACK, on a stream, of 5
        // bytes; PUSH_PROMISE; PING of 7; GOAWAY of 7; a zero window increment;
        // CONTINUATION on stream 0.
        for (kind, flags, id, payload) in [
            (0x0, 0, 0, &b"x"[..]),
            (0x0, 0x8, 1, &[5, 1, 2][..]),
            (0x1, 0x4, 0, &[0x88][..]),
            (0x2, 0, 1, &[0; 4][..]),
            (0x3, 0, 1, &[0; 5][..]),
            (0x4, 0x1, 0, &[0; 6][..]),
            (0x4, 0, 1, &[0; 6][..]),
            (0x4, 0, 0, &[0; 5][..]),
            (0x5, 0x4, 1, &[0, 0, 0, 2][..]),
            (0x6, 0, 0, &[0; 7][..]),
            (0x7, 0, 0, &[0; 7][..]),
            (0x8, 0, 1, &[0; 4][..]),
            (0x9, 0x4, 0, &[0x88][..]),
        ] {
            assert_eq!(
                one(kind, flags, id, payload),
                e,
                "{kind:#x} {flags:#x} {id}"
            );
        }
        // Longer than the largest frame this side accepts, before its payload arrives.
        let mut big = raw(0x0, 0, 1, &[]);
        big[..3].copy_from_slice(&[0, 0x40, 0x01]);
        assert_eq!(next(&big), Err(CallError::Protocol));
    }
}
