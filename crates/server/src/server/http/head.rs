//! The first bytes of a connection: an HTTP/2 preface or an HTTP/1.1 head, read whole
//! before the connection is handed to the HTTP server that speaks it.

use super::{CountingIo, HttpIo, count_moved};
use std::io;

/// What an HTTP/2 client with prior knowledge sends first (RFC 9113, section 3.4).
pub(super) const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The first size of a connection's head buffer: a request head from curl, wrk or hyper
/// is 60 to 200 bytes, and a browser's rarely passes 512.
pub(super) const HEAD_FIRST: usize = 512;

/// Largest head read before hyper takes over: hyper's own first read buffer. A longer
/// head is hyper's to finish (up to its limits), as if this stage were not there.
pub(super) const HEAD_MAX: usize = 8 * 1024;

/// How [`read_head`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HeadEnd {
    /// A blank line arrived, or [`HEAD_MAX`] bytes: hyper takes over.
    Whole,
    /// The client closed its side first (after nothing, or after part of a head).
    Closed,
    /// The first bytes are a TLS record: a TLS client on a plain port. It is closed at
    /// once, which its handshake sees as a server that does not speak TLS, rather than
    /// left waiting for a blank line no ClientHello has.
    Tls,
}

/// Reads the start of the first request until its head is complete (a blank line), the
/// head reaches [`HEAD_MAX`], or the client closes or resets; what was read waits in
/// `io.head` for hyper.
///
/// The buffer is allocated when the first byte can be read, not before, at
/// [`HEAD_FIRST`], doubling when full. HTTP/2's preface ([`H2_PREFACE`]) counts as a
/// whole head once all of it is in: [`serve`] then picks HTTP/2 by it.
pub(super) async fn read_head<S: HttpIo>(io: &mut CountingIo<S>) -> io::Result<HeadEnd> {
    let head = &mut io.head.bytes;
    loop {
        io.inner.wait_readable().await?;
        if head.len() == head.capacity() {
            // Doubling from HEAD_FIRST, never past HEAD_MAX (the length is below it here).
            let more = head.capacity().max(HEAD_FIRST).min(HEAD_MAX - head.len());
            head.reserve_exact(more);
        }
        let before = head.len();
        match io.inner.read_some(head).await {
            Ok(0) => return Ok(HeadEnd::Closed),
            Ok(n) => {
                count_moved(&io.state, n, |s| &s.bytes_in);
                if before == 0 && crate::wire::looks_like_tls(head) {
                    return Ok(HeadEnd::Tls);
                }
                // Part of HTTP/2's preface (which has a blank line in it) is not a head.
                let partial_preface = head.len() < H2_PREFACE.len() && H2_PREFACE.starts_with(head);
                if head.len() >= HEAD_MAX || (!partial_preface && ends_head(head, before)) {
                    return Ok(HeadEnd::Whole);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether `head` has a blank line (`\n\n` or `\n\r\n`) ending at or after `from`: the end
/// of an HTTP/1 request head (httparse accepts both line ends).
pub(super) fn ends_head(head: &[u8], from: usize) -> bool {
    let tail = &head[from.saturating_sub(2)..];
    tail.windows(2).any(|w| w == b"\n\n") || tail.windows(3).any(|w| w == b"\n\r\n")
}
