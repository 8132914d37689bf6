//! The receive buffer every transport that parses its own replies reads into: raw TCP frames
//! (blocking and async) and the lean HTTP/1.1 codec.
//!
//! One buffer per connection, reused for every call, so a call allocates nothing once the
//! buffer has grown to the largest reply seen. Received bytes not yet consumed live in
//! `buf[start..end]`; a reply is consumed by moving `start` past it, and its bytes stay in
//! place (so the reply handed to the runner can borrow them) until the next read makes room.

use std::ops::Range;

/// A growable receive buffer with a consumed prefix, see the module docs.
#[derive(Debug)]
pub(super) struct RecvBuf {
    /// The storage; its length is the capacity reads may fill.
    buf: Vec<u8>,
    /// First byte not yet consumed.
    start: usize,
    /// One past the last byte received.
    end: usize,
}

impl RecvBuf {
    /// An empty buffer of `capacity` bytes; it grows when a reply needs more.
    pub fn new(capacity: usize) -> RecvBuf {
        RecvBuf {
            buf: vec![0; capacity],
            start: 0,
            end: 0,
        }
    }

    /// The bytes received and not yet consumed.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Bytes at `range`, a range handed out by [`RecvBuf::take`] since the last read.
    #[inline]
    pub fn get(&self, range: Range<usize>) -> &[u8] {
        &self.buf[range]
    }

    /// Consumes the first `n` unconsumed bytes; returns where they are, which stays valid
    /// until the next [`RecvBuf::space_for`].
    #[inline]
    pub fn take(&mut self, n: usize) -> Range<usize> {
        debug_assert!(n <= self.end - self.start);
        let taken = self.start..self.start + n;
        self.start += n;
        taken
    }

    /// Makes room for `need` bytes counted from the first unconsumed one (moving what is
    /// buffered to the front, then growing, only when they would not fit), and returns the
    /// free space after the buffered bytes for the next read. `need` must be more than
    /// what is buffered, so the space returned is never empty.
    #[inline]
    pub fn space_for(&mut self, need: usize) -> &mut [u8] {
        debug_assert!(need > self.end - self.start);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.buf.len() - self.start < need {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.buf.len() < need {
                self.buf.resize(need, 0);
            }
        }
        &mut self.buf[self.end..]
    }

    /// Forgets what it holds, keeping its storage: for the next connection.
    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    /// Records that a read put `n` bytes into the space [`RecvBuf::space_for`] returned.
    #[inline]
    pub fn filled(&mut self, n: usize) {
        debug_assert!(self.end + n <= self.buf.len());
        self.end += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `bytes` into the buffer as a socket read would.
    fn receive(buf: &mut RecvBuf, need: usize, bytes: &[u8]) {
        let space = buf.space_for(need);
        space[..bytes.len()].copy_from_slice(bytes);
        buf.filled(bytes.len());
    }

    #[test]
    fn consumed_bytes_stay_until_the_next_read_and_room_is_made() {
        let mut buf = RecvBuf::new(8);
        receive(&mut buf, 4, b"abcdef");
        let first = buf.take(4);
        assert_eq!(buf.get(first.clone()), b"abcd");
        assert_eq!(buf.data(), b"ef");
        // 6 more bytes do not fit after position 4: the two left move to the front.
        receive(&mut buf, 8, b"ghijkl");
        assert_eq!(buf.data(), b"efghijkl");
        // A reply larger than the buffer grows it.
        let space = buf.space_for(20).len();
        assert_eq!(space, 12);
        receive(&mut buf, 20, b"mnopqrstuvwx");
        let all = buf.take(20);
        assert_eq!(buf.get(all), b"efghijklmnopqrstuvwx");
        // Everything consumed: the next read starts at the front again.
        receive(&mut buf, 1, b"z");
        let last = buf.take(1);
        assert_eq!(buf.get(last), b"z");
        assert_eq!(buf.get(0..1), b"z");
    }
}
