//! Helpers shared by the integration tests.
//!
//! Every test crate (`tests/*.rs`) that wants these writes `mod common;`. Not every crate
//! uses every helper, hence the `dead_code` allowance below.
//!
//! What is here:
//!
//! - [`TestServer`]: an in-process echo server ([`ServerHandle`]) on `127.0.0.1:0`, running on its own
//!   tokio runtime, with its real addresses and live counters.
//! - [`FrameClient`]: a blocking raw-TCP client speaking the length-prefixed postcard
//!   frames of [`rpcbench::wire`], counting the bytes it sends and receives.
//! - [`async_call`]: one request/response over a tokio `TcpStream`, for tests that need
//!   thousands of connections.
//! - [`EchoProcess`]: the real `rpcbench-echo` binary on free loopback ports, killed by
//!   its PID when dropped.
//! - HTTP helpers: [`curl_call`] (libcurl through the `curl` crate), [`hyper_collect`]
//!   (turn a hyper response into status, headers and body), [`raw_http`] (hand-written
//!   HTTP/1.1 over a plain socket, read to EOF) and [`parse_http1`].
//!
//! Everything has a timeout: a broken server makes a test fail, never hang.
#![allow(dead_code)]

pub mod h2raw;
pub mod link;
pub mod netns;

/// The README, then every page under `docs/`, sorted.
pub fn doc_pages() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages: Vec<_> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    pages.insert(0, root.join("README.md"));
    pages
}

/// The documentation as one text ([`doc_pages`]), for tests that check a name is
/// documented somewhere.
pub fn docs_text() -> String {
    doc_pages()
        .iter()
        .map(|page| std::fs::read_to_string(page).expect("a docs page"))
        .collect()
}

use bytes::Bytes;
use http_body_util::BodyExt;
use rpcbench::server::stats::StatsSnapshot;
use rpcbench::server::{ServerConfig, ServerHandle};
use rpcbench::wire::{self, LEN_PREFIX, Request, Response};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest any single blocking read or write in a helper may take before the test fails.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A request echoing `payload` with sequence number `seq`, no delay.
pub fn echo_req(seq: u64, payload: &[u8]) -> Request {
    Request {
        seq,
        reply_len: None,
        delay_us: 0,
        payload: payload.to_vec(),
    }
}

/// A request asking for `len` bytes of the reply pattern for `seq`.
pub fn pattern_req(seq: u64, len: u32) -> Request {
    Request {
        seq,
        reply_len: Some(len),
        delay_us: 0,
        payload: Vec::new(),
    }
}

/// A deterministic payload of `len` bytes that differs from seq to seq.
pub fn payload_for(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seq.wrapping_mul(31).wrapping_add(i as u64 * 7)) as u8)
        .collect()
}

/// The bytes of one encoded frame holding `msg`.
pub fn frame<T: serde::Serialize>(msg: &T) -> Vec<u8> {
    let mut out = Vec::new();
    wire::encode_frame(msg, &mut out);
    out
}

/// Panics unless `resp` is a correct status-0 echo of `req` (echo or pattern).
pub fn assert_reply(req: &Request, resp: &Response) {
    assert_eq!(resp.seq, req.seq, "reply carries the wrong seq");
    assert_eq!(
        resp.status, 0,
        "seq {}: status {} instead of 0",
        req.seq, resp.status
    );
    match req.reply_len {
        None => assert!(
            resp.payload == req.payload,
            "seq {}: echoed payload differs ({} bytes sent, {} back)",
            req.seq,
            req.payload.len(),
            resp.payload.len()
        ),
        Some(n) => {
            assert_eq!(
                resp.payload.len(),
                n as usize,
                "seq {}: pattern length",
                req.seq
            );
            assert!(
                wire::is_pattern(req.seq, &resp.payload),
                "seq {}: reply is not the pattern",
                req.seq
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// In-process server
// ---------------------------------------------------------------------------------------

/// A `ServerConfig` on free loopback ports for both listeners; change fields as needed.
pub fn config() -> ServerConfig {
    ServerConfig::loopback_any_port()
}

/// The library's [`ServerHandle`] with both listeners' addresses at hand and a few test
/// conveniences. Create it from a plain `#[test]` (not from inside an async context); run
/// async client code with `server.block_on(...)` or on a runtime of your own. Dropping it
/// stops the server.
pub struct TestServer {
    handle: ServerHandle,
    /// The raw TCP listener's real address.
    pub tcp: SocketAddr,
    /// The HTTP listener's real address.
    pub http: SocketAddr,
}

/// Runtime threads of a test server: two, so a test's client tasks spawned on the same
/// runtime cannot starve the server.
const TEST_SERVER_THREADS: usize = 2;

impl TestServer {
    /// Starts a server with `config`; both listeners must be enabled.
    pub fn start(config: ServerConfig) -> TestServer {
        let handle = ServerHandle::start(config, TEST_SERVER_THREADS)
            .expect("the echo server did not start");
        let tcp = handle.tcp_addr.expect("the tcp listener is off");
        let http = handle.http_addr.expect("the http listener is off");
        assert!(tcp.ip().is_loopback() && http.ip().is_loopback());
        TestServer { handle, tcp, http }
    }

    /// Starts a server with the default limits.
    pub fn start_default() -> TestServer {
        TestServer::start(config())
    }

    /// The server's runtime, e.g. to spawn client tasks next to it.
    pub fn runtime(&self) -> &tokio::runtime::Runtime {
        self.handle.runtime()
    }

    /// Runs `fut` to completion on the server's runtime.
    pub fn block_on<F: std::future::Future>(&self, fut: F) -> F::Output {
        self.handle.block_on(fut)
    }

    /// The live counters (same data as `GET /stats`).
    pub fn stats(&self) -> StatsSnapshot {
        self.handle.stats()
    }

    /// Polls the counters until `done` holds, for up to `within`; returns the last snapshot
    /// and panics with it when the condition never held. Counters are updated by server
    /// tasks after the client has seen the effect (a close, a reply), so exact checks on
    /// them need this.
    pub fn wait_stats(
        &self,
        within: Duration,
        what: &str,
        done: impl Fn(&StatsSnapshot) -> bool,
    ) -> StatsSnapshot {
        let deadline = Instant::now() + within;
        loop {
            let snap = self.stats();
            if done(&snap) {
                return snap;
            }
            if Instant::now() > deadline {
                panic!("server counters never reached {what} within {within:?}: {snap:#?}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stops the server gracefully; returns the totals and whether it drained in time.
    pub fn shutdown(self, grace: Duration) -> (StatsSnapshot, bool) {
        self.handle.shutdown(grace)
    }
}

// ---------------------------------------------------------------------------------------
// Blocking raw TCP frame client
// ---------------------------------------------------------------------------------------

/// A blocking client for the raw TCP protocol. Every read and write has [`IO_TIMEOUT`].
pub struct FrameClient {
    /// The socket, for tests that need to do something unusual with it.
    pub stream: TcpStream,
    /// Bytes written so far (frames and raw bytes).
    pub sent: u64,
    /// Bytes read so far.
    pub received: u64,
}

impl FrameClient {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr) -> FrameClient {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
            .unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"));
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        FrameClient {
            stream,
            sent: 0,
            received: 0,
        }
    }

    /// Writes one request frame; returns its size in bytes.
    pub fn send(&mut self, req: &Request) -> usize {
        let bytes = frame(req);
        self.send_raw(&bytes);
        bytes.len()
    }

    /// Writes arbitrary bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream
            .write_all(bytes)
            .unwrap_or_else(|e| panic!("write of {} bytes failed: {e}", bytes.len()));
        self.sent += bytes.len() as u64;
    }

    /// Reads one response frame; the body length must be at most `max` bytes.
    pub fn try_recv(&mut self, max: u32) -> io::Result<Response> {
        let mut prefix = [0u8; LEN_PREFIX];
        self.stream.read_exact(&mut prefix)?;
        let len = wire::check_len(prefix, max)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body)?;
        self.received += (LEN_PREFIX + len) as u64;
        wire::decode_body(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Reads one response frame (of at most the default max frame), panicking on failure.
    pub fn recv(&mut self) -> Response {
        self.try_recv(wire::DEFAULT_MAX_FRAME)
            .unwrap_or_else(|e| panic!("reading a response failed: {e}"))
    }

    /// Sends `req` and reads its response.
    pub fn call(&mut self, req: &Request) -> Response {
        self.send(req);
        self.recv()
    }

    /// Sends an echo of `payload` as `seq` and checks the reply.
    pub fn check_echo(&mut self, seq: u64, payload: &[u8]) {
        let req = echo_req(seq, payload);
        let resp = self.call(&req);
        assert_reply(&req, &resp);
    }

    /// Waits up to `within` for the server to close the connection (EOF or reset), and
    /// returns how long that took. Panics if data arrives or nothing happens in time.
    pub fn expect_closed(&mut self, within: Duration) -> Duration {
        expect_closed(&mut self.stream, within)
    }
}

/// Waits up to `within` for the peer to close `stream` (EOF or reset), returning how long
/// it took; panics if data arrives instead or nothing happens in time.
pub fn expect_closed(stream: &mut TcpStream, within: Duration) -> Duration {
    let start = Instant::now();
    stream
        .set_read_timeout(Some(within))
        .expect("set_read_timeout");
    let mut buf = [0u8; 64];
    let res = stream.read(&mut buf);
    let took = start.elapsed();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    match res {
        Ok(0) => took,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
            ) =>
        {
            took
        }
        Ok(n) => panic!(
            "expected the server to close, got {n} bytes: {:?}",
            &buf[..n]
        ),
        Err(e) => panic!("expected the server to close within {within:?}, got {e}"),
    }
}

// ---------------------------------------------------------------------------------------
// Async raw TCP
// ---------------------------------------------------------------------------------------

/// Sends `req` over `stream` and reads one response (async, for many connections).
pub async fn async_call(stream: &mut tokio::net::TcpStream, req: &Request) -> io::Result<Response> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(&frame(req)).await?;
    let mut prefix = [0u8; LEN_PREFIX];
    stream.read_exact(&mut prefix).await?;
    let len = wire::check_len(prefix, wire::DEFAULT_MAX_FRAME)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    wire::decode_body(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

// ---------------------------------------------------------------------------------------
// The real binary
// ---------------------------------------------------------------------------------------

/// A running `rpcbench-echo` child process listening on free loopback ports.
///
/// Its stdout is read line by line on a helper thread. Dropping it kills the process with
/// SIGKILL, by its PID, if it has not exited yet.
pub struct EchoProcess {
    child: Child,
    exited: Option<ExitStatus>,
    lines: mpsc::Receiver<String>,
    /// The raw TCP listener's address.
    pub tcp: SocketAddr,
    /// The HTTP listener's address.
    pub http: SocketAddr,
    /// The raw-frames-over-TLS listener's address, when `--tls` was given.
    pub tls: Option<SocketAddr>,
    /// The HTTPS listener's address, when `--https` was given.
    pub https: Option<SocketAddr>,
    /// The QUIC listener's address, when `--quic` was given.
    pub quic: Option<SocketAddr>,
    /// The `ca PATH names N1,N2` line, when the server generated its certificates.
    pub ca_line: Option<String>,
}

impl EchoProcess {
    /// Waits (bounded) for a clean exit 0 after SIGTERM or SIGINT and returns the counters
    /// the server printed on its `totals` line.
    pub fn exit_totals(&mut self) -> rpcbench::server::stats::StatsSnapshot {
        let status = self
            .wait_exit(Duration::from_secs(8))
            .expect("rpcbench-echo did not exit after SIGTERM");
        assert_eq!(status.code(), Some(0), "exit status {status:?}");
        // The reader thread may still be forwarding the last lines when the process is
        // gone: read until it ends at the pipe's end (bounded), not only what has arrived.
        let mut lines = Vec::new();
        let deadline = Instant::now() + IO_TIMEOUT;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => lines.push(line),
                Err(_) => break,
            }
        }
        let totals = lines
            .iter()
            .find_map(|l| l.strip_prefix("totals "))
            .unwrap_or_else(|| panic!("no totals line in {lines:?}"));
        serde_json::from_str(totals).expect("totals is not JSON stats")
    }

    /// Starts the binary with `--tcp 127.0.0.1:0 --http 127.0.0.1:0` followed by `extra`
    /// (which must not repeat `--tcp` or `--http`), and waits for both `listening` lines,
    /// and for those of `--tls` and `--https` and the `ca` line when `extra` asks for them.
    pub fn spawn(extra: &[&str]) -> EchoProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rpcbench-echo"))
            .args(["--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("cannot start rpcbench-echo");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut proc = EchoProcess {
            child,
            exited: None,
            lines,
            tcp: SocketAddr::from(([0, 0, 0, 0], 0)),
            http: SocketAddr::from(([0, 0, 0, 0], 0)),
            tls: None,
            https: None,
            quic: None,
            ca_line: None,
        };
        let asks = |flag: &str| extra.windows(2).any(|w| w[0] == flag && w[1] != "off");
        let (want_tls, want_https) = (asks("--tls"), asks("--https"));
        let want_quic = asks("--quic");
        let want_ca = (want_tls || want_https || want_quic) && !extra.contains(&"--cert");
        let (mut tcp, mut http) = (None, None);
        while tcp.is_none()
            || http.is_none()
            || (want_tls && proc.tls.is_none())
            || (want_https && proc.https.is_none())
            || (want_quic && proc.quic.is_none())
            || (want_ca && proc.ca_line.is_none())
        {
            let line = proc
                .next_line(IO_TIMEOUT)
                .expect("rpcbench-echo did not print its listening lines");
            if line.starts_with("ca ") {
                proc.ca_line = Some(line);
                continue;
            }
            let mut words = line.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some("listening"), Some(proto), Some(addr)) => {
                    let addr: SocketAddr = addr
                        .parse()
                        .unwrap_or_else(|e| panic!("bad address in {line:?}: {e}"));
                    assert!(addr.ip().is_loopback(), "not loopback: {line:?}");
                    assert_ne!(addr.port(), 0, "port 0 printed: {line:?}");
                    match proto {
                        "tcp" => tcp = Some(addr),
                        "http" => http = Some(addr),
                        "tls" => proc.tls = Some(addr),
                        "https" => proc.https = Some(addr),
                        "quic" => proc.quic = Some(addr),
                        _ => panic!("unknown listener in {line:?}"),
                    }
                }
                _ => panic!("unexpected line before listening lines: {line:?}"),
            }
        }
        proc.tcp = tcp.unwrap();
        proc.http = http.unwrap();
        proc
    }

    /// The child's process id.
    pub fn pid(&self) -> nix::unistd::Pid {
        nix::unistd::Pid::from_raw(self.child.id() as i32)
    }

    /// Sends `signal` to the child.
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(self.pid(), signal).expect("kill(2) on the child failed");
    }

    /// The next stdout line, waiting up to `within`; `None` on timeout or end of output.
    pub fn next_line(&self, within: Duration) -> Option<String> {
        self.lines.recv_timeout(within).ok()
    }

    /// Every stdout line printed so far that has not been taken yet.
    pub fn take_lines(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    /// Waits up to `within` for the child to exit; `None` if it is still running.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("waitpid failed") {
                self.exited = Some(status);
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The child's resident set size in KiB (VmRSS from /proc/PID/status).
    pub fn rss_kib(&self) -> u64 {
        self.proc_status_kib("VmRSS")
    }

    /// The child's virtual memory size in KiB (VmSize): unlike RSS it also grows for
    /// memory reserved but never touched, such as a `Vec::with_capacity` nobody fills.
    pub fn vm_size_kib(&self) -> u64 {
        self.proc_status_kib("VmSize")
    }

    /// A `kB` field of /proc/PID/status.
    pub fn proc_status_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("cannot read /proc/PID/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {field} line in /proc/PID/status"))
    }
}

impl Drop for EchoProcess {
    fn drop(&mut self) {
        if self.exited.is_none() && matches!(self.child.try_wait(), Ok(None)) {
            let _ = nix::sys::signal::kill(self.pid(), nix::sys::signal::Signal::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------

/// What one curl transfer returned.
#[derive(Debug, Clone)]
pub struct CurlReply {
    pub status: u32,
    /// Header names lower-cased, values trimmed, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl CurlReply {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Does one HTTP/1.1 transfer with `easy`: `method` ("GET", "POST", or anything else as
/// a custom request), optional `body`, extra `headers` as "Name: value" lines.
///
/// The handle's options are reset first, but its connection cache is kept, so reusing
/// one `Easy` reuses one kept-alive connection.
pub fn curl_call(
    easy: &mut curl::easy::Easy,
    method: &str,
    url: &str,
    body: Option<&[u8]>,
    headers: &[&str],
) -> CurlReply {
    easy.reset();
    easy.url(url).unwrap();
    easy.timeout(IO_TIMEOUT).unwrap();
    match method {
        "GET" => easy.get(true).unwrap(),
        "POST" => easy.post(true).unwrap(),
        other => easy.custom_request(other).unwrap(),
    }
    if let Some(body) = body {
        easy.post_fields_copy(body).unwrap();
        if method != "POST" {
            easy.custom_request(method).unwrap();
        }
    }
    let mut list = curl::easy::List::new();
    for h in headers {
        list.append(h).unwrap();
    }
    // curl adds "Expect: 100-continue" to large bodies; the tests want one plain round trip.
    list.append("Expect:").unwrap();
    easy.http_headers(list).unwrap();
    let mut out = Vec::new();
    let mut hdrs: Vec<(String, String)> = Vec::new();
    {
        let mut transfer = easy.transfer();
        transfer
            .write_function(|data| {
                out.extend_from_slice(data);
                Ok(data.len())
            })
            .unwrap();
        transfer
            .header_function(|line| {
                let line = String::from_utf8_lossy(line);
                if line.starts_with("HTTP/") {
                    hdrs.clear(); // a new response (after 100 Continue, say)
                } else if let Some((k, v)) = line.split_once(':') {
                    hdrs.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                }
                true
            })
            .unwrap();
        transfer
            .perform()
            .unwrap_or_else(|e| panic!("curl {method} {url} failed: {e}"));
    }
    CurlReply {
        status: easy.response_code().unwrap(),
        headers: hdrs,
        body: out,
    }
}

/// `GET /stats` through curl on a fresh connection, parsed.
pub fn http_stats(http: SocketAddr) -> StatsSnapshot {
    let mut easy = curl::easy::Easy::new();
    let reply = curl_call(&mut easy, "GET", &format!("http://{http}/stats"), None, &[]);
    assert_eq!(reply.status, 200, "GET /stats: {}", reply.text());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    serde_json::from_slice(&reply.body)
        .unwrap_or_else(|e| panic!("/stats is not a StatsSnapshot ({e}): {}", reply.text()))
}

/// Reads a whole hyper response: status, headers and collected body.
pub async fn hyper_collect(
    resp: hyper::Response<hyper::body::Incoming>,
) -> (hyper::StatusCode, hyper::HeaderMap, Bytes) {
    let (parts, body) = resp.into_parts();
    let body = body
        .collect()
        .await
        .expect("reading the response body failed")
        .to_bytes();
    (parts.status, parts.headers, body)
}

/// A connection to `addr` with Nagle off, as every HTTP client rpcbench measures has it:
/// with it on, a request that hyper writes in two pieces (HTTP/2's HEADERS and DATA) waits
/// for the server's delayed ACK, 40 ms a call.
async fn connect_nodelay(addr: SocketAddr) -> tokio::net::TcpStream {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("TCP_NODELAY");
    stream
}

/// A hyper HTTP/1.1 client connection over one new TCP connection to `addr`; the
/// connection task is spawned on the current runtime.
pub async fn hyper_http1(
    addr: SocketAddr,
) -> hyper::client::conn::http1::SendRequest<http_body_util::Full<Bytes>> {
    let stream = connect_nodelay(addr).await;
    let (sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .expect("http1 handshake");
    tokio::spawn(conn);
    sender
}

/// Waits until the HTTP/1.1 connection can take a request (the previous exchange has
/// fully finished), sends `req` and reads the whole response.
pub async fn hyper_send1(
    sender: &mut hyper::client::conn::http1::SendRequest<http_body_util::Full<Bytes>>,
    req: hyper::Request<http_body_util::Full<Bytes>>,
) -> (hyper::StatusCode, hyper::HeaderMap, Bytes) {
    sender.ready().await.expect("the http1 connection closed");
    let resp = sender
        .send_request(req)
        .await
        .expect("http1 request failed");
    hyper_collect(resp).await
}

/// A hyper HTTP/2 (prior knowledge) client connection over one new TCP connection.
pub async fn hyper_http2(
    addr: SocketAddr,
) -> hyper::client::conn::http2::SendRequest<http_body_util::Full<Bytes>> {
    let stream = connect_nodelay(addr).await;
    let (sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("http2 handshake");
    tokio::spawn(conn);
    sender
}

/// Builds a hyper request for `uri` (path and query) on `addr`.
pub fn hyper_req(
    method: hyper::Method,
    addr: SocketAddr,
    path: &str,
    body: &[u8],
) -> hyper::Request<http_body_util::Full<Bytes>> {
    hyper::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header(hyper::header::HOST, addr.to_string())
        .body(http_body_util::Full::new(Bytes::copy_from_slice(body)))
        .expect("valid request")
}

/// Writes `request` (raw HTTP/1.x bytes) to a new connection to `addr`, then reads until
/// the server closes it (or [`IO_TIMEOUT`] passes: panic). Returns every byte read.
pub fn raw_http(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.write_all(request).expect("write request");
    let mut out = Vec::new();
    match stream.read_to_end(&mut out) {
        Ok(_) => out,
        Err(e) => panic!(
            "server did not close the connection ({e}); read so far: {:?}",
            String::from_utf8_lossy(&out)
        ),
    }
}

/// `POST` `body` to `url` through `easy` and check that it came back with status 200.
pub fn curl_echo(easy: &mut curl::easy::Easy, url: &str, body: &[u8]) {
    let reply = curl_call(easy, "POST", url, Some(body), &[]);
    assert_eq!(
        (reply.status, reply.body.as_slice()),
        (200, body),
        "POST {url}"
    );
}

/// One HTTP/1.x response parsed from raw bytes.
#[derive(Debug, Clone)]
pub struct RawResponse {
    pub status: u16,
    /// Lower-cased names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Parses the first response in `bytes` (Content-Length bodies only); returns it and the
/// number of bytes it used, or `None` when `bytes` does not yet hold all of it.
pub fn parse_http1(bytes: &[u8]) -> Option<(RawResponse, usize)> {
    let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&bytes[..head_end]).expect("response head is not UTF-8");
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .map(|(_, v)| v.parse().expect("content-length"))
        .unwrap_or(0);
    let body = bytes.get(head_end..head_end + len)?.to_vec();
    Some((
        RawResponse {
            status,
            headers,
            body,
        },
        head_end + len,
    ))
}

/// Reads from `stream` until one whole response is buffered in `buf`, then removes and
/// returns it. Panics on EOF or timeout before that.
pub fn read_http1(stream: &mut TcpStream, buf: &mut Vec<u8>) -> RawResponse {
    loop {
        if let Some((resp, used)) = parse_http1(buf) {
            buf.drain(..used);
            return resp;
        }
        let mut chunk = [0u8; 16 * 1024];
        let n = stream
            .read(&mut chunk)
            .unwrap_or_else(|e| panic!("reading an HTTP response failed: {e}"));
        assert!(
            n > 0,
            "connection closed before a whole response: {:?}",
            String::from_utf8_lossy(buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Parses a `server-timing` value of the form `app;dur=<float>` into milliseconds.
pub fn parse_server_timing(value: &str) -> Option<f64> {
    let dur = value.strip_prefix("app;dur=")?;
    let ms: f64 = dur.parse().ok()?;
    (ms.is_finite() && ms >= 0.0).then_some(ms)
}

/// Panics unless every reject counter is zero except the ones listed with their counts.
pub fn assert_rejects(snap: &StatsSnapshot, expected: &[(rpcbench::server::stats::Reject, u64)]) {
    for kind in rpcbench::server::stats::Reject::ALL {
        let want = expected
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, n)| *n);
        assert_eq!(
            snap.rejected(kind),
            want,
            "rejected[{}] is {} instead of {want}; all: {:?}",
            kind.name(),
            snap.rejected(kind),
            snap.rejected
        );
    }
}

// ---------------------------------------------------------------------------------------
// Added for /metrics and the load tests (server side of issue #10)
// ---------------------------------------------------------------------------------------

impl TestServer {
    /// The DNS responder's real address, when the config turned it on.
    pub fn dns_addr(&self) -> Option<SocketAddr> {
        self.handle.dns_addr
    }

    /// The UDP listener's real address, when the config turned it on.
    pub fn udp_addr(&self) -> Option<SocketAddr> {
        self.handle.udp_addr
    }

    /// The Unix socket's path, when the config turned it on.
    pub fn unix_path(&self) -> Option<std::path::PathBuf> {
        self.handle.unix_path.clone()
    }

    /// The QUIC listener's real address, when the config turned it on.
    pub fn quic_addr(&self) -> Option<SocketAddr> {
        self.handle.quic_addr
    }

    /// The endpoint `kind` calls under `--security plain`: every listener the server
    /// opened, in plain text but for a transport that has no plain mode (QUIC), which gets
    /// TLS 1.3 verified against the server's generated CA.
    pub fn endpoint_for(
        &self,
        kind: rpcbench::transport::TransportKind,
    ) -> rpcbench::transport::Endpoint {
        endpoint_of(&self.handle, kind)
    }
}

/// The endpoint `kind` calls on `server` under `--security plain`: every listener the
/// server opened, with TLS 1.3 (verified against its generated CA) for a transport that
/// has no plain mode.
pub fn endpoint_of(
    server: &ServerHandle,
    kind: rpcbench::transport::TransportKind,
) -> rpcbench::transport::Endpoint {
    use rpcbench::transport::tls::{Security, TlsClient, TlsOptions};
    let security = kind.security_in(Security::Plain).unwrap_or(Security::Plain);
    let tls = (security != Security::Plain).then(|| {
        let ca = server.ca_pem.as_deref().expect("a generated CA");
        let options = TlsOptions::from_pem(ca, None, false).expect("the CA reads");
        TlsClient::new(security, "127.0.0.1", &options).expect("a TLS client")
    });
    rpcbench::transport::Endpoint::new(server.tcp_addr.unwrap(), server.http_addr.unwrap())
        .with_udp_port(server.udp_addr.map_or(0, |a| a.port()))
        .with_unix(server.unix_path.clone())
        .with_quic_port(server.quic_addr.map_or(0, |a| a.port()))
        .with_tls(tls)
}
