//! A reply's payload as the HTTP and gRPC replies hand it out: a chunk at a time, never
//! made whole.
//!
//! A pattern payload is slices of the static pattern table ([`wire::pattern_static`]),
//! so a reply of 16 MiB costs no allocation at all; an echo's payload is the request's own
//! bytes, sliced without copying (they stay leased from the budget until the last slice
//! is dropped, see [`super::budget::Held`]). How much of a reply is buffered then depends
//! only on how fast the client takes it: hyper asks for the next chunk when its write
//! buffer has room (HTTP/1.1) or the stream has send capacity (HTTP/2).

use crate::wire;
use bytes::Bytes;

/// The largest chunk handed to hyper at once: 8 KiB. HTTP/1.1 copies each chunk into its
/// write buffer while that holds less than its own limit (`http::WRITE_BUFFER`, 8 KiB), so
/// a connection that stops reading holds at most 16 KiB there; HTTP/2 sends a chunk as
/// DATA frames without copying it. Larger chunks would grow every stalled connection's
/// buffer with them; smaller ones cost a poll and a write per few kilobytes of a large
/// reply.
pub(crate) const CHUNK: usize = 8 * 1024;

/// What is left to send of a payload.
#[derive(Debug)]
pub(crate) enum Payload {
    /// Bytes held: text, JSON, an echo's request body.
    Bytes(Bytes),
    /// `left` more bytes of the reply pattern, starting where the pattern for `seq`
    /// starts (byte `i` is `(seq + i) mod 256`, so the rest of a pattern is a pattern too).
    Pattern { seq: u64, left: usize },
}

impl Payload {
    /// The first `len` bytes of the reply pattern for `seq`.
    pub fn pattern(seq: u64, len: usize) -> Payload {
        Payload::Pattern { seq, left: len }
    }

    /// Bytes not yet handed out.
    pub fn len(&self) -> usize {
        match self {
            Payload::Bytes(b) => b.len(),
            Payload::Pattern { left, .. } => *left,
        }
    }

    /// True once every byte has been handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next chunk, at most [`CHUNK`] bytes; `None` once all were handed out.
    pub fn next_chunk(&mut self) -> Option<Bytes> {
        match self {
            Payload::Bytes(b) if b.is_empty() => None,
            // A short body goes whole: no slice to make, which is the usual small reply.
            Payload::Bytes(b) if b.len() <= CHUNK => Some(std::mem::take(b)),
            Payload::Bytes(b) => Some(b.split_to(CHUNK)),
            Payload::Pattern { left: 0, .. } => None,
            Payload::Pattern { seq, left } => {
                let n = (*left).min(CHUNK);
                let chunk = wire::pattern_static(*seq, n).expect("a chunk fits in the table");
                // The pattern after n bytes is the pattern of seq + n.
                *seq = seq.wrapping_add(n as u64);
                *left -= n;
                Some(Bytes::from_static(chunk))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_of_a_pattern_make_the_pattern() {
        for len in [
            0,
            1,
            CHUNK,
            CHUNK + 1,
            5 * CHUNK + 17,
            wire::PATTERN_STATIC_MAX * 3,
        ] {
            let seq = u64::MAX - 3;
            let mut payload = Payload::pattern(seq, len);
            let mut whole = Vec::new();
            while let Some(chunk) = payload.next_chunk() {
                assert!(!chunk.is_empty() && chunk.len() <= CHUNK);
                whole.extend_from_slice(&chunk);
            }
            assert_eq!(whole.len(), len);
            assert!(wire::is_pattern(seq, &whole), "len {len}");
            assert!(payload.is_empty());
        }
    }

    #[test]
    fn held_bytes_are_sliced_not_copied() {
        let bytes = Bytes::from(vec![5u8; 3 * CHUNK + 1]);
        let start = bytes.as_ptr();
        let mut payload = Payload::Bytes(bytes);
        let mut at = 0;
        while let Some(chunk) = payload.next_chunk() {
            assert_eq!(chunk.as_ptr(), start.wrapping_add(at));
            at += chunk.len();
        }
        assert_eq!(at, 3 * CHUNK + 1);
    }
}
