//! Hand-written HTTP/2 frames over a plain socket, for abuse a real client will not send:
//! streams reset by the thousand, bodies cut short, lying frames.
//!
//! Just enough of RFC 9113 to open streams and read what comes back: frames are written
//! whole, request headers are HPACK literals without Huffman coding (which every decoder
//! must accept), and replies are read frame by frame without decoding their headers (a
//! test reads DATA payloads, RST_STREAM and GOAWAY codes, which need no HPACK).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The client connection preface (RFC 9113, section 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

/// RST_STREAM / GOAWAY error code CANCEL.
pub const CANCEL: u32 = 0x8;

/// One frame as read back.
#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// The error code of a RST_STREAM or GOAWAY frame.
    pub fn error_code(&self) -> Option<u32> {
        let at = match self.kind {
            RST_STREAM => 0,
            GOAWAY => 4,
            _ => return None,
        };
        let b = self.payload.get(at..at + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// Appends one frame to `out`.
pub fn put_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len() as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&(stream & 0x7FFF_FFFF).to_be_bytes());
    out.extend_from_slice(payload);
}

/// An HPACK header block for a request: `:method`, `:scheme http`, `:path`, `:authority`,
/// then `extra` headers, all as literals without indexing.
pub fn request_block(method: &str, path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    // Literal header field without indexing, indexed name (RFC 7541, 6.2.2): 0000 + index
    // in four bits; the static table's :authority is 1, :method 2, :path 4, :scheme 6.
    for (index, value) in [(2u8, method), (6, "http"), (4, path), (1, "rpcbench.test")] {
        b.push(index);
        put_string(&mut b, value);
    }
    for (name, value) in extra {
        b.push(0);
        put_string(&mut b, name);
        put_string(&mut b, value);
    }
    b
}

/// An HPACK string literal, no Huffman coding; lengths up to 126 bytes (one octet).
fn put_string(out: &mut Vec<u8>, s: &str) {
    assert!(s.len() < 127, "a test header longer than one length octet");
    out.push(s.len() as u8);
    out.extend_from_slice(s.as_bytes());
}

/// A raw HTTP/2 connection: preface and an empty SETTINGS frame already written.
pub struct RawH2 {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl RawH2 {
    pub fn connect(addr: SocketAddr) -> RawH2 {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).unwrap();
        stream.set_write_timeout(Some(super::IO_TIMEOUT)).unwrap();
        let mut h2 = RawH2 {
            stream,
            buf: Vec::new(),
        };
        let mut hello = PREFACE.to_vec();
        put_frame(&mut hello, SETTINGS, 0, 0, &[]);
        h2.stream.write_all(&hello).expect("write preface");
        h2
    }

    /// Writes `bytes` (frames made with [`put_frame`]); an error means the server closed.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// The next frame, acknowledging the server's SETTINGS and answering PINGs on the
    /// way; `None` at end of stream, on a reset, or when nothing comes within `within`.
    pub fn next_frame(&mut self, within: Duration) -> Option<Frame> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(frame) = self.take_frame() {
                match (frame.kind, frame.flags & ACK) {
                    (SETTINGS, 0) => {
                        let mut ack = Vec::new();
                        put_frame(&mut ack, SETTINGS, ACK, 0, &[]);
                        let _ = self.stream.write_all(&ack);
                    }
                    (PING, 0) => {
                        let mut pong = Vec::new();
                        put_frame(&mut pong, PING, ACK, 0, &frame.payload);
                        let _ = self.stream.write_all(&pong);
                    }
                    _ => {}
                }
                return Some(frame);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            self.stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .unwrap();
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Reads frames until `want` returns true for one (returned), or the connection ends
    /// or `within` passes (`None`).
    pub fn frame_until(
        &mut self,
        within: Duration,
        want: impl Fn(&Frame) -> bool,
    ) -> Option<Frame> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let frame = self.next_frame(left)?;
            if want(&frame) {
                return Some(frame);
            }
        }
    }

    /// The DATA a stream receives until its END_STREAM, or `None` if the connection ends
    /// or the stream is reset first.
    pub fn body_of(&mut self, stream: u32, within: Duration) -> Option<Vec<u8>> {
        let deadline = Instant::now() + within;
        let mut body = Vec::new();
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let f = self.next_frame(left)?;
            if f.stream != stream {
                continue;
            }
            match f.kind {
                DATA => body.extend_from_slice(&f.payload),
                RST_STREAM => return None,
                _ => {}
            }
            if f.kind != RST_STREAM && f.flags & END_STREAM != 0 {
                return Some(body);
            }
        }
    }

    /// Reads and drops whatever comes until the server closes the connection (true) or
    /// `within` passes with it still open (false).
    pub fn closed_within(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let mut chunk = [0u8; 16 * 1024];
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            self.stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .unwrap();
            match self.stream.read(&mut chunk) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return false;
                }
                // A reset is closed too.
                Err(_) => return true,
            }
        }
        false
    }

    /// Sends a whole POST of `body` on `stream` (headers, then one DATA with END_STREAM).
    pub fn post(&mut self, stream: u32, path: &str, body: &[u8]) -> io::Result<()> {
        let mut out = Vec::new();
        let len = body.len().to_string();
        let block = request_block("POST", path, &[("content-length", &len)]);
        put_frame(&mut out, HEADERS, END_HEADERS, stream, &block);
        put_frame(&mut out, DATA, END_STREAM, stream, body);
        self.send(&out)
    }

    fn take_frame(&mut self) -> Option<Frame> {
        if self.buf.len() < 9 {
            return None;
        }
        let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
        if self.buf.len() < 9 + len {
            return None;
        }
        let head: Vec<u8> = self.buf.drain(..9 + len).collect();
        Some(Frame {
            kind: head[3],
            flags: head[4],
            stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7FFF_FFFF,
            payload: head[9..].to_vec(),
        })
    }
}
