//! One HTTP/2 connection that carries one stream at a time, driven frame by frame by the
//! call itself: the engine of the `h2` and `grpc` transports.
//!
//! It sits on the `h2` crate's frame layer ([`h2::Codec`]: framing, HPACK, CONTINUATION,
//! frame validation, from the crate's `unstable` API) and leaves out the crate's stream
//! state machine, which a client with one stream in flight does not need and which cost
//! about 20 µs a call on one core (the crate's own client against rpcbench-echo: about
//! 95 µs a call; this: about 72 µs; `h2load`: about 80 µs per request; see
//! `report/peers.sh`). A call writes its HEADERS and DATA frames, flushes them in one write,
//! and reads frames until its stream ends, answering what the server asks on the way
//! (SETTINGS, PING, flow control).
//!
//! What the connection does, per RFC 9113:
//! - **Preface.** The client preface, SETTINGS (no server push, a 2 MiB stream window) and
//!   a connection WINDOW_UPDATE to 5 MiB, as hyper's client sets them. Requests follow at
//!   once; the server's SETTINGS are applied and acknowledged when they arrive.
//! - **Sending.** DATA frames no larger than the server's MAX_FRAME_SIZE, within both the
//!   connection's and the stream's send window; when a window is spent, the call reads
//!   frames until the server's WINDOW_UPDATE (or SETTINGS) opens it.
//! - **Receiving.** The reply's HEADERS (1xx skipped), DATA and trailers. Every DATA frame
//!   is credited back with WINDOW_UPDATE once half a window is owed, on the stream while it
//!   is open and on the connection always (also for DATA of streams already ended). The
//!   frame layer does not tell a padded frame's padding, so a padded frame is credited as if
//!   it carried the most (255 bytes and the length byte): the server's view of the window
//!   can only grow by that, and the connection is reopened long before it could near 2^31.
//! - **Ending.** RST_STREAM on the call's stream fails the call (a protocol error).
//!   GOAWAY fails it as `Closed` when the server will not process its stream, and in any
//!   case leaves the connection to be reopened by the next call. So does the end of the
//!   stream ids. A PUSH_PROMISE (push was refused) or a server-initiated stream is a
//!   protocol error; PRIORITY and unknown frames are ignored.

use super::tls::{TlsNoted, Watched};
use super::{CallError, Phases};
use bytes::Bytes;
use h2::frame::{self, Frame, Reason, StreamId};
use hyper::header::HeaderMap;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

/// The client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The receive windows this client offers: 2 MiB per stream, 5 MiB for the connection,
/// as hyper's client sets them, so that a large reply is not paced by window updates;
/// the `h2` crate's client (h2-mux, gRPC) offers the same.
pub(super) const STREAM_WINDOW: u32 = 2 << 20;
pub(super) const CONNECTION_WINDOW: u32 = 5 << 20;

/// The window every stream and the connection start with (RFC 9113 §6.9.2).
pub(super) const DEFAULT_WINDOW: i64 = 65_535;

/// The largest a flow-control window may be (RFC 9113 §6.9.1).
pub(super) const MAX_WINDOW: i64 = (1 << 31) - 1;

/// What a padded DATA frame is credited beyond its data: the padding length byte and
/// the most padding there can be.
pub(super) const MOST_PADDING: u32 = 256;

/// Padded frames after which the connection is reopened: by then the server's view of
/// the connection window has grown by at most 256 MiB over the 5 MiB offered.
pub(super) const MAX_PADDED_FRAMES: u32 = 1 << 20;

/// One open connection.
pub(super) struct Wire<T> {
    codec: h2::Codec<Watched<T>, Bytes>,
    /// The id the next stream gets; `None` once they are spent.
    next_id: Option<StreamId>,
    /// The connection's send window, as the server's WINDOW_UPDATEs left it.
    send_window: i64,
    /// The send window a new stream starts with (the server's SETTINGS_INITIAL_WINDOW_SIZE).
    stream_initial: i64,
    /// Connection bytes received and not yet credited back.
    owed: u32,
    /// Padded DATA frames seen.
    padded: u32,
    /// Set when the connection must not carry another call: the server sent GOAWAY.
    done: bool,
    /// Where the socket notes a TLS failure.
    noted: Arc<TlsNoted>,
}

/// One request: a `POST` of `payload` to `uri` with `headers`.
pub(super) struct Outgoing {
    pub uri: hyper::Uri,
    pub headers: HeaderMap,
    pub payload: Bytes,
    /// The largest reply body accepted: a larger one fails the call (`ReplyTooLarge`)
    /// as soon as the DATA that passes it arrives, and the stream is reset.
    pub max_body: usize,
    /// A status besides 200 whose reply is the call's to judge (SOAP's Fault under 500).
    pub fault_status: Option<u16>,
}

/// What a finished call hands back (its body went to the caller's buffer): the reply's
/// header fields and its trailers, if it had any.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Replied {
    pub head: HeaderMap,
    pub trailers: Option<HeaderMap>,
}

/// The call under way: its stream and what has come back on it so far.
struct Stream<'a> {
    id: StreamId,
    /// The stream's send window.
    send_window: i64,
    /// Stream bytes received and not yet credited back.
    owed: u32,
    /// The final status, once the reply's head has come.
    status: Option<u16>,
    /// What came back: the head's fields and the trailers.
    replied: Replied,
    body: &'a mut Vec<u8>,
    /// The largest body accepted.
    max_body: usize,
    /// The server ended the stream.
    ended: bool,
}

impl<T: AsyncRead + AsyncWrite + Unpin> Wire<T> {
    /// Starts the connection on `sock` (connected, TLS done): sends the preface, this
    /// client's SETTINGS and the connection's window; the server's SETTINGS are read with
    /// the first call's frames.
    pub(super) async fn open(sock: T, noted: Arc<TlsNoted>) -> Result<Wire<T>, CallError> {
        Ok(Wire {
            codec: start(sock, noted.clone()).await?,
            next_id: Some(StreamId::from(1)),
            send_window: DEFAULT_WINDOW,
            stream_initial: DEFAULT_WINDOW,
            owed: 0,
            padded: 0,
            done: false,
            noted,
        })
    }

    /// False once the connection must be reopened before the next call.
    pub(super) fn usable(&self) -> bool {
        !self.done && self.next_id.is_some() && self.padded < MAX_PADDED_FRAMES
    }

    /// Makes one call: `req` on a new stream; reads the whole reply into `body`. Returns
    /// the reply's head and trailers when its status is 200, else `HttpStatus`.
    pub(super) async fn call(
        &mut self,
        req: Outgoing,
        body: &mut Vec<u8>,
        phases: &mut Phases,
    ) -> Result<Replied, CallError> {
        let done = self.exchange(req, body, phases).await;
        done.map_err(|e| self.noted.explain(e))
    }

    async fn exchange(
        &mut self,
        Outgoing {
            uri,
            headers,
            mut payload,
            max_body,
            fault_status,
        }: Outgoing,
        body: &mut Vec<u8>,
        phases: &mut Phases,
    ) -> Result<Replied, CallError> {
        let id = self.next_id.ok_or(CallError::Closed)?;
        self.next_id = id.next_id().ok();
        body.clear();
        let mut stream = Stream {
            id,
            send_window: self.stream_initial,
            owed: 0,
            status: None,
            replied: Replied::default(),
            body,
            max_body,
            ended: false,
        };
        let sent = Instant::now();
        let mut head = frame::Headers::new(
            id,
            frame::Pseudo::request(hyper::Method::POST, uri, None),
            headers,
        );
        if payload.is_empty() {
            head.set_end_stream();
        }
        self.queue(head.into()).await?;
        while !payload.is_empty() && !stream.ended {
            let room = self
                .send_window
                .min(stream.send_window)
                .min(self.codec.max_send_frame_size() as i64);
            if room <= 0 {
                // A window is spent: send what is queued and wait for the server to open it.
                self.flush().await?;
                self.read_one(&mut stream).await?;
                continue;
            }
            let chunk = payload.split_to((room as usize).min(payload.len()));
            self.send_window -= chunk.len() as i64;
            stream.send_window -= chunk.len() as i64;
            let mut data = frame::Data::new(id, chunk);
            data.set_end_stream(payload.is_empty());
            self.queue(data.into()).await?;
        }
        if !payload.is_empty() {
            // The server answered before taking the whole request (RFC 9113 §8.1): the
            // rest is not sent, and the stream is closed on this side too.
            self.queue(frame::Reset::new(id, Reason::CANCEL).into())
                .await?;
        }
        self.flush().await?;
        let mut first = true;
        while !stream.ended {
            self.read_one(&mut stream).await?;
            if first && stream.status.is_some() {
                phases.first_byte = Some(sent.elapsed());
                first = false;
            }
        }
        match stream.status {
            Some(200) => Ok(stream.replied),
            Some(status) if fault_status == Some(status) => Ok(stream.replied),
            Some(status) => Err(CallError::HttpStatus(status)),
            None => Err(CallError::Protocol),
        }
    }

    /// Queues one frame for the next write (writing what is queued first if the buffer
    /// is full).
    async fn queue(&mut self, f: Frame<Bytes>) -> Result<(), CallError> {
        std::future::poll_fn(|cx| self.codec.poll_ready(cx))
            .await
            .map_err(|e| CallError::from_io(&e))?;
        // Only a DATA frame over the frame size is refused, and none is made.
        self.codec.buffer(f).map_err(|_| CallError::Protocol)
    }

    /// Writes what is queued.
    async fn flush(&mut self) -> Result<(), CallError> {
        std::future::poll_fn(|cx| self.codec.flush(cx))
            .await
            .map_err(|e| CallError::from_io(&e))
    }

    /// Queues `f` and writes it at once: the server may be waiting for it.
    async fn answer(&mut self, f: Frame<Bytes>) -> Result<(), CallError> {
        self.queue(f).await?;
        self.flush().await
    }

    /// Reads one frame and does what it asks.
    async fn read_one(&mut self, stream: &mut Stream<'_>) -> Result<(), CallError> {
        let next = tokio_stream::StreamExt::next(&mut self.codec).await;
        let f = match next {
            Some(Ok(f)) => f,
            Some(Err(e)) => return Err(from_proto(&e)),
            None => return Err(CallError::Closed),
        };
        match f {
            Frame::Data(data) => self.on_data(data, stream).await,
            Frame::Headers(head) => on_headers(head, stream),
            Frame::Settings(settings) => self.on_settings(settings, stream).await,
            Frame::Ping(ping) if !ping.is_ack() => {
                self.answer(frame::Ping::pong(ping.into_payload()).into())
                    .await
            }
            Frame::WindowUpdate(update) => {
                let inc = i64::from(update.size_increment());
                let window = if update.stream_id().is_zero() {
                    &mut self.send_window
                } else if update.stream_id() == stream.id {
                    &mut stream.send_window
                } else {
                    return Ok(());
                };
                *window += inc;
                if *window > MAX_WINDOW {
                    return Err(CallError::Protocol);
                }
                Ok(())
            }
            Frame::Reset(reset) if reset.stream_id() == stream.id => Err(CallError::Protocol),
            Frame::GoAway(away) => {
                self.done = true;
                if away.last_stream_id() < stream.id {
                    Err(CallError::Closed)
                } else {
                    Ok(())
                }
            }
            Frame::PushPromise(_) => Err(CallError::Protocol),
            Frame::Ping(_) | Frame::Reset(_) | Frame::Priority(_) => Ok(()),
        }
    }

    /// A DATA frame: the call's body, and flow-control credit owed either way.
    async fn on_data(
        &mut self,
        data: frame::Data<Bytes>,
        stream: &mut Stream<'_>,
    ) -> Result<(), CallError> {
        let mut len = data.payload().len() as u32;
        if data.is_padded() {
            len += MOST_PADDING;
            self.padded += 1;
        }
        self.owed += len;
        if data.stream_id() == stream.id && !stream.ended {
            if stream.status.is_none() {
                // DATA before the reply's head.
                return Err(CallError::Protocol);
            }
            if stream.body.len() + data.payload().len() > stream.max_body {
                // Not read further: the stream is reset, and the connection (whose window
                // the rest would still use) is not used again.
                self.done = true;
                let _ = self
                    .answer(frame::Reset::new(stream.id, Reason::CANCEL).into())
                    .await;
                return Err(CallError::ReplyTooLarge);
            }
            stream.body.extend_from_slice(data.payload());
            stream.ended = data.is_end_stream();
            stream.owed += len;
            if !stream.ended && stream.owed >= STREAM_WINDOW / 2 {
                let credit = std::mem::take(&mut stream.owed);
                self.answer(frame::WindowUpdate::new(stream.id, credit).into())
                    .await?;
            }
        } else if data.stream_id().is_server_initiated() || data.stream_id() > stream.id {
            return Err(CallError::Protocol);
        }
        if self.owed >= CONNECTION_WINDOW / 2 {
            let credit = std::mem::take(&mut self.owed);
            self.answer(frame::WindowUpdate::new(StreamId::zero(), credit).into())
                .await?;
        }
        Ok(())
    }

    /// The server's SETTINGS: applied, then acknowledged.
    async fn on_settings(
        &mut self,
        settings: frame::Settings,
        stream: &mut Stream<'_>,
    ) -> Result<(), CallError> {
        if settings.is_ack() {
            return Ok(());
        }
        stream.send_window += apply_settings(&mut self.codec, &settings, &mut self.stream_initial);
        if stream.send_window > MAX_WINDOW {
            return Err(CallError::Protocol);
        }
        self.answer(frame::Settings::ack().into()).await
    }
}

/// Starts a client connection on `sock` (connected, TLS done, its failures noted in
/// `noted`): writes the preface, this client's SETTINGS and the connection's window, and
/// returns the frame layer over it.
pub(super) async fn start<T: AsyncRead + AsyncWrite + Unpin>(
    sock: T,
    noted: Arc<TlsNoted>,
) -> Result<h2::Codec<Watched<T>, Bytes>, CallError> {
    Ok(h2::Codec::new(preface(sock, noted).await?))
}

/// Opens a client connection on `sock` as [`start`] does, and returns the socket.
pub(super) async fn preface<T: AsyncRead + AsyncWrite + Unpin>(
    sock: T,
    noted: Arc<TlsNoted>,
) -> Result<Watched<T>, CallError> {
    let mut sock = Watched::new(sock, noted.clone());
    let mut settings = frame::Settings::default();
    settings.set_enable_push(false);
    settings.set_initial_window_size(Some(STREAM_WINDOW));
    let mut head = bytes::BytesMut::with_capacity(64);
    head.extend_from_slice(PREFACE);
    settings.encode(&mut head);
    frame::WindowUpdate::new(StreamId::zero(), CONNECTION_WINDOW - DEFAULT_WINDOW as u32)
        .encode(&mut head);
    sock.write_all(&head)
        .await
        .map_err(|e| noted.explain(CallError::from_io(&e)))?;
    Ok(sock)
}

/// Applies the server's `settings` (not an acknowledgement) to the frame layer and to
/// `stream_initial`, the send window new streams start with; returns how far the send
/// window of every open stream moves with it (RFC 9113 §6.9.2).
pub(super) fn apply_settings<T: AsyncRead + AsyncWrite + Unpin>(
    codec: &mut h2::Codec<T, Bytes>,
    settings: &frame::Settings,
    stream_initial: &mut i64,
) -> i64 {
    if let Some(size) = settings.max_frame_size() {
        codec.set_max_send_frame_size(size as usize);
    }
    if let Some(size) = settings.header_table_size() {
        codec.set_send_header_table_size(size as usize);
    }
    settings.initial_window_size().map_or(0, |size| {
        let delta = i64::from(size) - *stream_initial;
        *stream_initial = i64::from(size);
        delta
    })
}

/// What a HEADERS frame on a call's open stream is, its fields read into `F`.
pub(super) enum Head<F = HeaderMap> {
    /// A 1xx head: the final one follows.
    Informational,
    /// The reply's head: its status, its fields, and whether it ends the stream.
    Final(u16, F, bool),
    /// The trailers, which end the stream.
    Trailers(F),
}

/// What the gRPC transports read of a reply's head and trailers, however they were kept
/// (a header map, or only these fields: `h2_mux_wire::Kept`).
pub(super) trait ReplyFields {
    /// The head's content type is gRPC's (`application/grpc`, `+proto` and the like).
    fn grpc(&self) -> bool;
    /// The `grpc-status` of the trailers (of the head, in a trailers-only reply).
    fn grpc_status(&self) -> Option<u8>;
    /// The `server-timing` duration of the trailers (or the head).
    fn server_timing(&self) -> Option<super::ServerTime>;
}

impl ReplyFields for Replied {
    fn grpc(&self) -> bool {
        self.head
            .get(hyper::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(GRPC_CONTENT_TYPE))
    }

    fn grpc_status(&self) -> Option<u8> {
        let end = self.trailers.as_ref().unwrap_or(&self.head);
        grpc_status(end.get(GRPC_STATUS)?.as_bytes())
    }

    fn server_timing(&self) -> Option<super::ServerTime> {
        super::http::server_timing(self.trailers.as_ref().unwrap_or(&self.head))
    }
}

/// What gRPC's content types start with.
pub(super) const GRPC_CONTENT_TYPE: &[u8] = b"application/grpc";

/// The trailer of a gRPC call's status.
pub(super) const GRPC_STATUS: &str = "grpc-status";

/// A `grpc-status` value: its code, or `None` when it is not one.
pub(super) fn grpc_status(value: &[u8]) -> Option<u8> {
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// Reads `head`, a HEADERS frame of a stream whose final head has (`have_status`) or has
/// not come yet.
pub(super) fn read_head(head: frame::Headers, have_status: bool) -> Result<Head, CallError> {
    let end = head.is_end_stream();
    if have_status {
        return if end {
            Ok(Head::Trailers(head.into_parts().1))
        } else {
            Err(CallError::Protocol)
        };
    }
    let (pseudo, fields) = head.into_parts();
    let status = pseudo.status.ok_or(CallError::Protocol)?.as_u16();
    match (status, end) {
        (100..200, false) => Ok(Head::Informational),
        (100..200, true) => Err(CallError::Protocol),
        _ => Ok(Head::Final(status, fields, end)),
    }
}

/// A HEADERS frame: the call's reply head (1xx heads skipped) or its trailers.
fn on_headers(head: frame::Headers, stream: &mut Stream<'_>) -> Result<(), CallError> {
    let id = head.stream_id();
    if id != stream.id {
        // A server-initiated stream, or one this client has not opened.
        return if id.is_server_initiated() || id > stream.id {
            Err(CallError::Protocol)
        } else {
            Ok(())
        };
    }
    if stream.ended {
        return Err(CallError::Protocol);
    }
    match read_head(head, stream.status.is_some())? {
        Head::Informational => {}
        Head::Final(status, fields, end) => {
            stream.status = Some(status);
            stream.replied.head = fields;
            stream.ended = end;
        }
        Head::Trailers(fields) => {
            stream.replied.trailers = Some(fields);
            stream.ended = true;
        }
    }
    Ok(())
}

/// What a frame-layer error means for the call: an I/O error as such, the server's
/// GOAWAY as `Closed`, anything else (a malformed frame, a bad header block) a protocol
/// error.
pub(super) fn from_proto(e: &h2::proto::Error) -> CallError {
    match e {
        h2::proto::Error::Io(kind, _) => CallError::from_io(&std::io::Error::from(*kind)),
        h2::proto::Error::GoAway(_, Reason::NO_ERROR, _) => CallError::Closed,
        _ => CallError::Protocol,
    }
}

#[cfg(test)]
pub(super) mod script {
    //! A scripted HTTP/2 server for the clients' tests: it reads and writes frames with
    //! the same frame layer, so each test sends exactly the frames a case needs.
    use super::*;
    use tokio::io::{AsyncReadExt, DuplexStream};
    use tokio_stream::StreamExt;

    pub(in crate::transport) type Server = h2::Codec<DuplexStream, Bytes>;

    pub(in crate::transport) const SEQ: &str = crate::wire::SEQ_HEADER;

    /// A client opened by `open` on an in-memory pipe, and the server's end, the client's
    /// preface and first frames read.
    pub(in crate::transport) async fn pair_with<W>(
        open: impl AsyncFnOnce(DuplexStream, Arc<TlsNoted>) -> Result<W, CallError>,
    ) -> (W, Server) {
        let (client, server) = tokio::io::duplex(1 << 22);
        let wire = open(client, Arc::default()).await.unwrap();
        (wire, accept(server).await)
    }

    /// The server's end of a new connection, the client's preface and first frames read
    /// and checked.
    async fn accept(mut server: DuplexStream) -> Server {
        let mut preface = [0; PREFACE.len()];
        server.read_exact(&mut preface).await.unwrap();
        assert_eq!(preface, PREFACE);
        let mut server = h2::Codec::new(server);
        match server.next().await.unwrap().unwrap() {
            Frame::Settings(s) => {
                assert_eq!(s.initial_window_size(), Some(STREAM_WINDOW));
                assert_eq!(s.is_push_enabled(), Some(false));
            }
            f => panic!("{f:?}"),
        }
        match server.next().await.unwrap().unwrap() {
            Frame::WindowUpdate(w) => {
                assert!(w.stream_id().is_zero());
                assert_eq!(i64::from(w.size_increment()) + DEFAULT_WINDOW, 5 << 20);
            }
            f => panic!("{f:?}"),
        }
        server
    }

    pub(in crate::transport) async fn send(server: &mut Server, f: Frame<Bytes>) {
        std::future::poll_fn(|cx| server.poll_ready(cx))
            .await
            .unwrap();
        server.buffer(f).unwrap();
        std::future::poll_fn(|cx| server.flush(cx)).await.unwrap();
    }

    /// The next frame that is not a SETTINGS acknowledgement.
    pub(in crate::transport) async fn next(server: &mut Server) -> Frame {
        loop {
            match server.next().await.unwrap().unwrap() {
                Frame::Settings(s) if s.is_ack() => continue,
                f => return f,
            }
        }
    }

    /// Reads a request's HEADERS; returns its stream and seq.
    pub(in crate::transport) async fn request(server: &mut Server) -> (StreamId, u64) {
        match next(server).await {
            Frame::Headers(h) => {
                let id = h.stream_id();
                let seq = h.fields()[SEQ].to_str().unwrap().parse().unwrap();
                (id, seq)
            }
            f => panic!("{f:?}"),
        }
    }

    /// A reply's head: `status` with the seq header.
    pub(in crate::transport) fn head(
        id: StreamId,
        status: u16,
        seq: u64,
        end: bool,
    ) -> Frame<Bytes> {
        let mut fields = HeaderMap::new();
        fields.insert(SEQ, seq.into());
        let mut h = frame::Headers::new(
            id,
            frame::Pseudo::response(hyper::StatusCode::from_u16(status).unwrap()),
            fields,
        );
        if end {
            h.set_end_stream();
        }
        h.into()
    }

    pub(in crate::transport) fn data(id: StreamId, bytes: &[u8], end: bool) -> Frame<Bytes> {
        let mut d = frame::Data::new(id, Bytes::copy_from_slice(bytes));
        d.set_end_stream(end);
        d.into()
    }

    /// The request of call `seq`: `POST /echo` of `payload` with its seq header.
    pub(in crate::transport) fn echo(seq: u64, payload: &[u8]) -> Outgoing {
        let mut headers = HeaderMap::new();
        headers.insert(SEQ, seq.into());
        Outgoing {
            uri: "http://test/echo".parse().unwrap(),
            headers,
            payload: Bytes::copy_from_slice(payload),
            max_body: 16 << 20,
            fault_status: None,
        }
    }

    pub(in crate::transport) fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }
}

#[cfg(test)]
mod tests {
    //! The client against a scripted server on an in-memory pipe: the server side reads and
    //! writes frames with the same frame layer (padded DATA, which it cannot write, by
    //! hand), so each test sends exactly the frames a case needs.
    use super::script::*;
    use super::*;
    use std::time::Duration;
    use tokio::io::DuplexStream;
    use tokio_stream::StreamExt;

    async fn pair() -> (Wire<DuplexStream>, Server) {
        pair_with(Wire::open).await
    }

    /// Runs one call on `wire` while `script` plays the server.
    async fn call_with<S, F: std::future::Future<Output = S>>(
        wire: &mut Wire<DuplexStream>,
        seq: u64,
        payload: &[u8],
        script: F,
    ) -> (Result<Option<u64>, CallError>, Vec<u8>, S) {
        let mut body = Vec::new();
        let mut phases = Phases::default();
        let req = echo(seq, payload);
        // The reply's seq header stands for what came back.
        let call = async {
            let replied = wire.call(req, &mut body, &mut phases).await?;
            Ok(super::super::http::header_seq(&replied.head))
        };
        // Bounded: a client that misses what a case waits for fails it, not hangs it.
        let (result, server) = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::join!(call, script)
        })
        .await
        .expect("the call or the server's script is stuck");
        (result, body, server)
    }

    /// Small windows and frames from the server's SETTINGS, a PING, an informational head
    /// and a padded DATA frame: the client sends within every window and frame size,
    /// answers the PING, skips the 1xx head and takes the padded frame's data.
    #[test]
    fn follows_the_servers_settings_and_windows() {
        rt().block_on(async {
            let (mut wire, mut server) = pair().await;
            let payload: Vec<u8> = (0..70_000u32).map(|i| i as u8).collect();
            let script = async {
                let mut settings = frame::Settings::default();
                settings.set_initial_window_size(Some(1000));
                send(&mut server, settings.into()).await;
                let (id, seq) = request(&mut server).await;
                send(&mut server, frame::Ping::new(*b"rpcbench").into()).await;
                let mut got = Vec::new();
                let mut ponged = false;
                // The connection window is 65,535 until this server opens it: the client
                // must stop there, and at 1000 a frame on the stream.
                let mut conn_window = DEFAULT_WINDOW;
                // Until the client acknowledges the SETTINGS it may send by the defaults
                // (RFC 9113 §6.9.2): a request goes out before the server's SETTINGS are
                // read.
                let mut acked = false;
                while got.len() < payload.len() {
                    match server.next().await.unwrap().unwrap() {
                        Frame::Settings(s) => {
                            assert!(s.is_ack());
                            acked = true;
                        }
                        Frame::Ping(p) => {
                            assert!(p.is_ack());
                            assert_eq!(p.payload(), b"rpcbench");
                            ponged = true;
                        }
                        Frame::Data(d) => {
                            let n = d.payload().len();
                            let most = if acked { 1000 } else { 16_384 };
                            assert!(n <= most, "a DATA frame of {n} over the window");
                            conn_window -= n as i64;
                            assert!(conn_window >= 0, "over the connection window");
                            got.extend_from_slice(d.payload());
                            assert_eq!(d.is_end_stream(), got.len() == payload.len());
                            send(&mut server, frame::WindowUpdate::new(id, n as u32).into()).await;
                            if conn_window < 10_000 {
                                let inc = 60_000;
                                conn_window += i64::from(inc);
                                send(
                                    &mut server,
                                    frame::WindowUpdate::new(StreamId::zero(), inc).into(),
                                )
                                .await;
                            }
                        }
                        f => panic!("{f:?}"),
                    }
                }
                assert!(ponged, "no PING acknowledgement");
                assert!(acked, "no SETTINGS acknowledgement");
                assert_eq!(got, payload);
                send(&mut server, head(id, 100, seq, false)).await;
                send(&mut server, head(id, 200, seq, false)).await;
                send(&mut server, data(id, &got[..16_000], false)).await;
                send(&mut server, data(id, &got[16_000..30_000], false)).await;
                // A padded frame, by hand: length, type DATA, flags PADDED, the stream,
                // the pad length, the data, then the padding.
                let rest = &got[30_000..40_000];
                let mut raw = Vec::new();
                let len = (1 + rest.len() + 7) as u32;
                raw.extend_from_slice(&len.to_be_bytes()[1..]);
                raw.extend_from_slice(&[0x0, 0x8]);
                raw.extend_from_slice(&u32::from(id).to_be_bytes());
                raw.push(7);
                raw.extend_from_slice(rest);
                raw.extend_from_slice(&[0; 7]);
                server.get_mut().write_all(&raw).await.unwrap();
                send(&mut server, data(id, &got[40_000..55_000], false)).await;
                send(&mut server, data(id, &got[55_000..], true)).await;
                server
            };
            let (result, body, _server) = call_with(&mut wire, 7, &payload, script).await;
            assert_eq!(result, Ok(Some(7)));
            assert_eq!(body, payload);
            assert!(wire.usable());
            assert_eq!(wire.padded, 1);
        });
    }

    /// A reply larger than the stream window: the client credits the stream before the
    /// window is spent, and the connection too, so the server never waits.
    #[test]
    fn credits_a_large_reply() {
        rt().block_on(async {
            let (mut wire, mut server) = pair().await;
            let script = async {
                let (id, seq) = request(&mut server).await;
                send(&mut server, head(id, 200, seq, false)).await;
                let total = 3 << 20;
                let chunk = vec![b'x'; 16_384];
                let (mut stream_window, mut conn_window) =
                    (i64::from(STREAM_WINDOW), i64::from(CONNECTION_WINDOW));
                let mut sent = 0;
                while sent < total {
                    // What the client credited so far, without waiting for more.
                    while let Some(Ok(Frame::WindowUpdate(w))) = futures_now(&mut server) {
                        if w.stream_id().is_zero() {
                            conn_window += i64::from(w.size_increment());
                        } else {
                            stream_window += i64::from(w.size_increment());
                        }
                    }
                    let n = chunk.len().min(total - sent);
                    assert!(
                        stream_window >= n as i64 && conn_window >= n as i64,
                        "the client let a window run out at {sent} bytes"
                    );
                    stream_window -= n as i64;
                    conn_window -= n as i64;
                    sent += n;
                    send(&mut server, data(id, &chunk[..n], sent == total)).await;
                    tokio::task::yield_now().await;
                }
                server
            };
            let (result, body, _server) = call_with(&mut wire, 1, b"x", script).await;
            assert_eq!(result, Ok(Some(1)));
            assert_eq!(body.len(), 3 << 20);
        });
    }

    /// Trailers after the body, and a head that ends the stream (gRPC's trailers-only
    /// reply): each comes back as sent.
    #[test]
    fn trailers_and_a_head_that_ends_the_stream() {
        rt().block_on(async {
            let (mut wire, mut server) = pair().await;
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", "0".parse().unwrap());
            let script = async {
                let (id, seq) = request(&mut server).await;
                send(&mut server, head(id, 200, seq, false)).await;
                send(&mut server, data(id, b"body", false)).await;
                let mut t = frame::Headers::trailers(id, trailers.clone());
                t.set_end_stream();
                send(&mut server, t.into()).await;
                let (id, seq) = request(&mut server).await;
                send(&mut server, head(id, 200, seq, true)).await;
                server
            };
            let mut phases = Phases::default();
            let (mut first, mut second) = (Vec::new(), Vec::new());
            let req = |seq| echo(seq, b"");
            let calls = async {
                let a = wire.call(req(1), &mut first, &mut phases).await;
                let b = wire.call(req(2), &mut second, &mut phases).await;
                (a, b)
            };
            let ((a, b), _server) = tokio::time::timeout(Duration::from_secs(10), async {
                tokio::join!(calls, script)
            })
            .await
            .expect("stuck");
            let a = a.unwrap();
            assert_eq!(a.trailers, Some(trailers));
            assert_eq!(a.head[SEQ], "1");
            assert_eq!(first, b"body");
            let b = b.unwrap();
            assert_eq!(b.trailers, None);
            assert_eq!(b.head[SEQ], "2");
            assert!(second.is_empty());
        });
    }

    /// A frame already read from `server`, if one is waiting.
    fn futures_now(server: &mut Server) -> Option<Result<Frame, h2::proto::Error>> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        match tokio_stream::Stream::poll_next(std::pin::Pin::new(server), &mut cx) {
            std::task::Poll::Ready(f) => f,
            std::task::Poll::Pending => None,
        }
    }

    /// GOAWAY below the call's stream: `Closed`, and the wire is not used again. A reset
    /// stream: a protocol error, and the next call goes on on the same connection.
    #[test]
    fn goaway_and_reset() {
        rt().block_on(async {
            let (mut wire, mut server) = pair().await;
            let script = async {
                let (id, _) = request(&mut server).await;
                send(
                    &mut server,
                    frame::Reset::new(id, Reason::INTERNAL_ERROR).into(),
                )
                .await;
                server
            };
            let (result, _, mut server) = call_with(&mut wire, 1, b"", script).await;
            assert_eq!(result, Err(CallError::Protocol));
            assert!(wire.usable());
            let script = async {
                let (id, seq) = request(&mut server).await;
                assert_eq!(u32::from(id), 3, "the next stream id");
                send(&mut server, head(id, 200, seq, true)).await;
                server
            };
            let (result, _, mut server) = call_with(&mut wire, 2, b"", script).await;
            assert_eq!(result, Ok(Some(2)));
            let script = async {
                let _ = request(&mut server).await;
                send(
                    &mut server,
                    frame::GoAway::new(StreamId::from(3), Reason::NO_ERROR).into(),
                )
                .await;
                server
            };
            let (result, _, _server) = call_with(&mut wire, 3, b"", script).await;
            assert_eq!(result, Err(CallError::Closed));
            assert!(!wire.usable());
        });
    }

    /// A status the call's encoding puts its faults under (SOAP's 500) is a reply, its
    /// body the runner's to judge; the same status on a call without one is an error.
    #[test]
    fn a_fault_status_is_a_reply() {
        rt().block_on(async {
            for fault_status in [Some(500), None] {
                let (mut wire, mut server) = pair().await;
                let script = async {
                    let (id, seq) = request(&mut server).await;
                    send(&mut server, head(id, 500, seq, false)).await;
                    send(&mut server, data(id, b"<Fault/>", true)).await;
                    server
                };
                let (mut body, mut phases) = (Vec::new(), Phases::default());
                let req = Outgoing {
                    fault_status,
                    ..echo(1, b"x")
                };
                let (result, _) = tokio::time::timeout(Duration::from_secs(10), async {
                    tokio::join!(wire.call(req, &mut body, &mut phases), script)
                })
                .await
                .expect("the call or the server's script is stuck");
                match fault_status {
                    Some(_) => {
                        assert!(result.is_ok(), "{result:?}");
                        assert_eq!(body, b"<Fault/>");
                    }
                    None => assert_eq!(result.err(), Some(CallError::HttpStatus(500))),
                }
            }
        });
    }

    /// A server that closes mid-reply, sends DATA before its head, or answers 503: each a
    /// clear error, never a hang.
    #[test]
    fn broken_replies() {
        rt().block_on(async {
            let (mut wire, mut server) = pair().await;
            let script = async {
                let (id, seq) = request(&mut server).await;
                send(&mut server, head(id, 200, seq, false)).await;
                send(&mut server, data(id, b"half", false)).await;
                drop(server);
            };
            let (result, body, ()) = call_with(&mut wire, 1, b"x", script).await;
            assert_eq!(result, Err(CallError::Closed));
            assert_eq!(body, b"half", "what came before the close");

            let (mut wire, mut server) = pair().await;
            let script = async {
                let (id, _) = request(&mut server).await;
                send(&mut server, data(id, b"early", true)).await;
                server
            };
            let (result, _, _) = call_with(&mut wire, 1, b"", script).await;
            assert_eq!(result, Err(CallError::Protocol));

            let (mut wire, mut server) = pair().await;
            let script = async {
                let (id, seq) = request(&mut server).await;
                send(&mut server, head(id, 503, seq, true)).await;
                server
            };
            let (result, _, _) = call_with(&mut wire, 1, b"", script).await;
            assert_eq!(result, Err(CallError::HttpStatus(503)));

            // A reply before the whole request was taken: the client stops sending and
            // resets its side of the stream.
            let (mut wire, mut server) = pair().await;
            let script = async {
                let mut settings = frame::Settings::default();
                settings.set_initial_window_size(Some(10));
                send(&mut server, settings.into()).await;
                let (id, seq) = request(&mut server).await;
                let (mut got, mut replied) = (0, false);
                loop {
                    match next(&mut server).await {
                        Frame::Data(d) => {
                            got += d.payload().len();
                            if !replied {
                                // The client is now stopped by a window: 10 bytes on the
                                // stream, once it reads these SETTINGS.
                                send(&mut server, head(id, 413, seq, true)).await;
                                replied = true;
                            }
                        }
                        Frame::Reset(r) => {
                            assert_eq!(r.stream_id(), id);
                            assert_eq!(r.reason(), Reason::CANCEL);
                            break;
                        }
                        f => panic!("{f:?}"),
                    }
                }
                assert!(got < 200_000, "the client sent the whole request");
                server
            };
            let (result, _, _) = call_with(&mut wire, 1, &[0; 200_000], script).await;
            assert_eq!(result, Err(CallError::HttpStatus(413)));
        });
    }
}
