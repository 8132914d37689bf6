//! A test server that misbehaves on purpose, deterministically, and records exactly what it
//! did, so a test can hold the client's counts against the faults that were injected.
//!
//! [`Misbehave`] listens on `127.0.0.1:0` twice: once speaking the raw TCP frame protocol
//! (through [`rpcbench::wire`]) and once speaking a minimal HTTP/1.1 written by hand
//! (request line, headers, `Content-Length` body; `POST /echo` only; keep-alive unless the
//! request says `Connection: close`). Both share one request counter `n` (1, 2, 3, ... in
//! the order whole requests arrive), and a [`Rule`] maps `(n, seq)` to the [`Action`] taken
//! for that request. Every request is recorded ([`Seen`]) with its action and connection,
//! so the test knows which seqs were dropped, corrupted, duplicated or followed by a close.
//!
//! Requests are served like the real echo server serves them (echo, or `reply_len` pattern
//! bytes; `delay_us` honoured, up to 1 s) unless the rule says otherwise.
//!
//! The datagram counterpart, for the `udp` transport, is [`udp::MisbehaveUdp`].
//!
//! Plain threads and blocking std sockets: one thread per listener and per connection.
//! Reads time out every 50 ms to look at the stop flag, so dropping the server ends every
//! thread promptly; the drop joins them all.
#![allow(dead_code)]

pub mod udp;

use rpcbench::wire::{self, Request, Response};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// What the server does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Reply correctly.
    Reply,
    /// Read the request and never answer; keep the connection open (the client times out).
    Drop,
    /// Read the request and close the connection without answering.
    Abort,
    /// Reply with one payload byte flipped (with the seq moved on when the payload is empty).
    Corrupt,
    /// Reply correctly, then send the very same reply again.
    Duplicate,
    /// Reply correctly (nothing announced), then close the connection.
    CloseAfter,
    /// Reply correctly, then close the connection once it has been idle for [`IDLE_CLOSE`]
    /// (a server-side idle timeout); a request arriving before that is served as usual.
    IdleClose,
    /// HTTP: reply with `Connection: close`, then close. TCP has no way to announce a
    /// close, so there it is the same as [`Action::CloseAfter`].
    CloseAnnounced,
    /// HTTP: reply with `Connection: close`, then keep the connection open, breaking the
    /// promise (until the client closes it). TCP: the same as [`Action::Reply`].
    LingerAnnounced,
}

/// Which listener a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Tcp,
    Http,
}

/// One request as the server received it, and what it did with it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The server's request counter: 1 for the first whole request, over both listeners.
    pub n: u64,
    /// The seq the request carried (frame field, or the `x-rpcbench-seq` header).
    pub seq: u64,
    /// The connection it came on: 1 for the first accepted connection, over both listeners.
    pub conn: u64,
    /// 0 for the first request on its connection.
    pub index_on_conn: u64,
    pub proto: Proto,
    pub action: Action,
}

/// Everything the server did so far.
#[derive(Debug, Clone, Default)]
pub struct Record {
    /// Every whole request, in arrival order.
    pub requests: Vec<Seen>,
    /// Connections accepted on each listener.
    pub tcp_connections: u64,
    pub http_connections: u64,
}

impl Record {
    /// The seqs of the requests that got `action`, in arrival order.
    pub fn seqs(&self, action: Action) -> Vec<u64> {
        self.requests
            .iter()
            .filter(|s| s.action == action)
            .map(|s| s.seq)
            .collect()
    }

    /// How many requests got `action`.
    pub fn count(&self, action: Action) -> u64 {
        self.requests.iter().filter(|s| s.action == action).count() as u64
    }

    /// True when a request with this seq reached the server.
    pub fn saw(&self, seq: u64) -> bool {
        self.requests.iter().any(|s| s.seq == seq)
    }

    /// Every injected fault (anything but a plain reply), for messages.
    pub fn faults(&self) -> Vec<(u64, u64, Action)> {
        self.requests
            .iter()
            .filter(|s| s.action != Action::Reply)
            .map(|s| (s.n, s.seq, s.action))
            .collect()
    }
}

/// Picks the action for request `n` (1-based, per server) carrying `seq`.
pub type Rule = Box<dyn Fn(u64, u64) -> Action + Send + Sync>;

/// A rule from a list of `(every, action)`: request `n` gets the first action whose
/// `every` divides `n`, a plain reply otherwise. `last`, when given, is the last request
/// the test will send: it always gets a plain reply (a duplicate or a close after the final
/// call could never be noticed by the client).
pub fn every(list: &[(u64, Action)], last: Option<u64>) -> Rule {
    let list = list.to_vec();
    Box::new(move |n, _seq| {
        if Some(n) == last {
            return Action::Reply;
        }
        list.iter()
            .find(|(k, _)| n % k == 0)
            .map_or(Action::Reply, |&(_, a)| a)
    })
}

/// How long a connection must stay silent after an [`Action::IdleClose`] reply before the
/// server closes it.
pub const IDLE_CLOSE: Duration = Duration::from_millis(20);

/// How often a blocked read wakes up to look at the stop flag.
const POLL: Duration = Duration::from_millis(50);
/// Longest a write may block (a client that stopped reading).
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest HTTP request head accepted.
const MAX_HEAD: usize = 64 * 1024;

struct Inner {
    rule: Rule,
    record: Mutex<Record>,
    stop: AtomicBool,
    next_conn: Mutex<u64>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl Inner {
    fn record(&self) -> MutexGuard<'_, Record> {
        self.record.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one whole request and decides what to do with it.
    fn on_request(&self, proto: Proto, conn: u64, index_on_conn: u64, seq: u64) -> Action {
        let mut record = self.record();
        let n = record.requests.len() as u64 + 1;
        let action = (self.rule)(n, seq);
        record.requests.push(Seen {
            n,
            seq,
            conn,
            index_on_conn,
            proto,
            action,
        });
        action
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Reads some bytes, waking up every [`POLL`] to check the stop flag. `Ok(0)` means the
    /// peer closed or the server is stopping.
    fn read_some(&self, stream: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if self.stopping() {
                return Ok(0);
            }
            match stream.read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// The misbehaving server. Dropping it stops and joins every thread.
pub struct Misbehave {
    /// The raw TCP listener.
    pub tcp: SocketAddr,
    /// The HTTP listener.
    pub http: SocketAddr,
    inner: Arc<Inner>,
    acceptors: Vec<JoinHandle<()>>,
}

impl Misbehave {
    /// Binds both listeners on `127.0.0.1:0` and starts serving with `rule`.
    pub fn start(rule: Rule) -> Misbehave {
        let inner = Arc::new(Inner {
            rule,
            record: Mutex::new(Record::default()),
            stop: AtomicBool::new(false),
            next_conn: Mutex::new(0),
            workers: Mutex::new(Vec::new()),
        });
        let tcp_listener = TcpListener::bind("127.0.0.1:0").expect("bind misbehaving tcp");
        let http_listener = TcpListener::bind("127.0.0.1:0").expect("bind misbehaving http");
        let tcp = tcp_listener.local_addr().expect("tcp local addr");
        let http = http_listener.local_addr().expect("http local addr");
        let acceptors = vec![
            spawn_acceptor(tcp_listener, Proto::Tcp, inner.clone()),
            spawn_acceptor(http_listener, Proto::Http, inner.clone()),
        ];
        Misbehave {
            tcp,
            http,
            inner,
            acceptors,
        }
    }

    /// A copy of what the server did so far.
    pub fn record(&self) -> Record {
        self.inner.record().clone()
    }
}

impl Drop for Misbehave {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Relaxed);
        // Wake the blocking accepts; they see the flag and return.
        for addr in [self.tcp, self.http] {
            let _ = TcpStream::connect_timeout(&addr, Duration::from_secs(1));
        }
        for h in self.acceptors.drain(..) {
            let _ = h.join();
        }
        let workers =
            std::mem::take(&mut *self.inner.workers.lock().unwrap_or_else(|e| e.into_inner()));
        for h in workers {
            let _ = h.join();
        }
    }
}

fn spawn_acceptor(listener: TcpListener, proto: Proto, inner: Arc<Inner>) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(format!("misbehave-accept-{proto:?}"))
        .spawn(move || {
            for stream in listener.incoming() {
                if inner.stopping() {
                    return;
                }
                let Ok(stream) = stream else {
                    // EMFILE and friends: back off a little rather than spin.
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                };
                let conn = {
                    let mut next = inner.next_conn.lock().unwrap_or_else(|e| e.into_inner());
                    *next += 1;
                    *next
                };
                {
                    let mut record = inner.record();
                    match proto {
                        Proto::Tcp => record.tcp_connections += 1,
                        Proto::Http => record.http_connections += 1,
                    }
                }
                let worker_inner = inner.clone();
                let handle = std::thread::Builder::new()
                    .name(format!("misbehave-{proto:?}-{conn}"))
                    .spawn(move || {
                        let _ = stream.set_nodelay(true);
                        let _ = stream.set_read_timeout(Some(POLL));
                        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
                        match proto {
                            Proto::Tcp => serve_tcp(stream, conn, &worker_inner),
                            Proto::Http => serve_http(stream, conn, &worker_inner),
                        }
                    })
                    .expect("spawn a misbehaving connection thread");
                let mut workers = inner.workers.lock().unwrap_or_else(|e| e.into_inner());
                // Reap finished threads so a long run does not pile up handles.
                let (done, running): (Vec<_>, Vec<_>) = std::mem::take(&mut *workers)
                    .into_iter()
                    .partition(|h| h.is_finished());
                for h in done {
                    let _ = h.join();
                }
                *workers = running;
                workers.push(handle);
            }
        })
        .expect("spawn a misbehaving accept thread")
}

/// Waits up to [`IDLE_CLOSE`] for the peer to send something (or close); false when it
/// stayed silent all that time.
fn stays_busy(stream: &TcpStream) -> bool {
    let _ = stream.set_read_timeout(Some(IDLE_CLOSE));
    let mut byte = [0u8; 1];
    let silent = matches!(
        stream.peek(&mut byte),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
    );
    let _ = stream.set_read_timeout(Some(POLL));
    !silent
}

/// Flips one byte in the middle of the payload; with no payload, moves the seq on so the
/// reply is still for "some other call".
fn corrupt(payload: &mut [u8], seq: &mut u64) {
    if payload.is_empty() {
        *seq += 1_000_000_000;
    } else {
        let i = payload.len() / 2;
        payload[i] ^= 0x01;
    }
}

/// Honours a request's `delay_us` (capped at one second) before answering.
fn pause(delay_us: u32) {
    if delay_us > 0 {
        std::thread::sleep(Duration::from_micros(u64::from(delay_us.min(1_000_000))));
    }
}

/// The reply body a request asks for: its payload back, or `reply_len` pattern bytes.
fn reply_body(seq: u64, reply_len: Option<u32>, payload: Vec<u8>) -> Vec<u8> {
    match reply_len {
        None => payload,
        Some(n) => {
            let mut out = Vec::with_capacity(n as usize);
            wire::pattern(seq, n as usize, &mut out);
            out
        }
    }
}

fn serve_tcp(mut stream: TcpStream, conn: u64, inner: &Inner) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut index_on_conn = 0;
    loop {
        let req = match wire::decode_frame::<Request>(&buf, wire::DEFAULT_MAX_FRAME) {
            Ok(Some((req, used))) => {
                buf.drain(..used);
                req
            }
            Ok(None) => match inner.read_some(&mut stream, &mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    continue;
                }
            },
            Err(_) => return,
        };
        let action = inner.on_request(Proto::Tcp, conn, index_on_conn, req.seq);
        index_on_conn += 1;
        pause(req.delay_us);
        let mut resp = Response {
            seq: req.seq,
            status: 0,
            server_ns: 1_000,
            payload: reply_body(req.seq, req.reply_len, req.payload),
        };
        match action {
            Action::Drop => continue,
            Action::Abort => {
                let _ = stream.shutdown(Shutdown::Both);
                return;
            }
            Action::Corrupt => corrupt(&mut resp.payload, &mut resp.seq),
            _ => {}
        }
        let mut out = Vec::new();
        wire::encode_frame(&resp, &mut out);
        if action == Action::Duplicate {
            wire::encode_frame(&resp, &mut out);
        }
        if stream.write_all(&out).is_err() {
            return;
        }
        if matches!(action, Action::CloseAfter | Action::CloseAnnounced)
            || (action == Action::IdleClose && !stays_busy(&stream))
        {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
    }
}

/// One parsed HTTP request head.
struct Head {
    method: String,
    path: String,
    query: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn query_param(&self, name: &str) -> Option<&str> {
        self.query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }
}

fn parse_head(head: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut parts = lines.next()?.split(' ');
    let method = parts.next()?.to_string();
    let target = parts.next()?;
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let headers = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':')?;
            Some((n.trim().to_string(), v.trim().to_string()))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Head {
        method,
        path: path.to_string(),
        query: query.to_string(),
        headers,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn serve_http(mut stream: TcpStream, conn: u64, inner: &Inner) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut index_on_conn = 0;
    // Reads more into `buf`; false when the connection is over.
    let mut fill =
        |stream: &mut TcpStream, buf: &mut Vec<u8>| match inner.read_some(stream, &mut chunk) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                true
            }
        };
    loop {
        let head_end = loop {
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                break i;
            }
            if buf.len() > MAX_HEAD || !fill(&mut stream, &mut buf) {
                return;
            }
        };
        let Some(head) = parse_head(&buf[..head_end]) else {
            let _ = stream.write_all(
                b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
            return;
        };
        let Some(len) = head
            .header("content-length")
            .map_or(Some(0), |v| v.parse::<usize>().ok())
        else {
            return;
        };
        let body_start = head_end + 4;
        if buf.len() < body_start + len
            && head
                .header("expect")
                .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
            && stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").is_err()
        {
            return;
        }
        while buf.len() < body_start + len {
            if !fill(&mut stream, &mut buf) {
                return;
            }
        }
        let payload = buf[body_start..body_start + len].to_vec();
        buf.drain(..body_start + len);
        let client_close = head
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        if head.method != "POST" || head.path != "/echo" {
            let _ = stream.write_all(
                b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
            return;
        }
        let seq: u64 = head
            .header(rpcbench::wire::SEQ_HEADER)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let reply_len: Option<u32> = head.query_param("reply_len").and_then(|v| v.parse().ok());
        let action = inner.on_request(Proto::Http, conn, index_on_conn, seq);
        index_on_conn += 1;
        pause(
            head.query_param("delay_us")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        );
        let mut seq_out = seq;
        let mut body = reply_body(seq, reply_len, payload);
        match action {
            Action::Drop => continue,
            Action::Abort => {
                let _ = stream.shutdown(Shutdown::Both);
                return;
            }
            Action::Corrupt => corrupt(&mut body, &mut seq_out),
            _ => {}
        }
        let announce_close =
            client_close || matches!(action, Action::CloseAnnounced | Action::LingerAnnounced);
        let mut out = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: {}\r\n\
             {}: {seq_out}\r\nserver-timing: app;dur=0.001\r\n{}\r\n",
            body.len(),
            rpcbench::wire::SEQ_HEADER,
            if announce_close {
                "connection: close\r\n"
            } else {
                ""
            },
        )
        .into_bytes();
        out.extend_from_slice(&body);
        if action == Action::Duplicate {
            out.extend_from_slice(&out.clone());
        }
        if stream.write_all(&out).is_err() {
            return;
        }
        if action == Action::LingerAnnounced {
            continue;
        }
        if client_close
            || matches!(action, Action::CloseAfter | Action::CloseAnnounced)
            || (action == Action::IdleClose && !stays_busy(&stream))
        {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
    }
}
