//! One call and what came of it: what to send ([`Call`], [`Rpc`]), what came back
//! ([`Reply`], [`ServerTime`]), where its time went ([`Phases`]) and why it failed
//! ([`CallError`]).

use super::tls;
use crate::measure::ErrorKind;
use crate::resolve::LookupNameError;
use std::time::Duration;
use tonic::Code;

/// What an encoded call is (`--encoding`, `--message`): the transport sends the encoded
/// body to the encoding's route, with its content type, and hands the reply back as it
/// came; the runner encodes and decodes, so transports stay blind to encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rpc {
    pub encoding: crate::encoding::EncodingKind,
    pub operation: crate::encoding::Operation,
}

impl Rpc {
    /// The HTTP path its calls go to: `/rpc/EchoStruct`, or `/rpc` where the body names
    /// the operation.
    pub fn path(self) -> String {
        match self.encoding.facts().route {
            crate::encoding::Route::Fixed(path) => path.to_string(),
            crate::encoding::Route::PerOperation(prefix) => {
                format!("{prefix}{}", self.operation.name())
            }
        }
    }
}

/// One call to make.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// Unique within the run; the reply must carry it back.
    pub seq: u64,
    /// Request body.
    pub payload: &'a [u8],
    /// Ask the server for a pattern reply of this many bytes instead of an echo.
    pub reply_len: Option<u32>,
    /// Ask the server to wait this long before replying.
    pub delay_us: u32,
    /// The largest reply payload accepted (`--max-reply`): a transport stops reading a
    /// reply that would be larger, before holding it, and fails the call with
    /// [`CallError::ReplyTooLarge`], so a broken or hostile server cannot make the client
    /// hold what it likes.
    pub max_reply: usize,
    /// For an encoded call, its encoding and operation: `payload` is then the encoded
    /// request, and the reply is judged by decoding it.
    pub rpc: Option<Rpc>,
}

impl Call<'_> {
    /// The request body's HTTP content type.
    pub fn content_type(&self) -> &'static str {
        match self.rpc {
            None => "application/octet-stream",
            Some(rpc) => rpc.encoding.facts().content_type,
        }
    }

    /// A header the call carries besides its content type: its encoding's operation
    /// header (SOAP's `SOAPAction`), name and value.
    pub fn operation_header(&self) -> Option<(&'static str, &'static str)> {
        let rpc = self.rpc?;
        let named = rpc.encoding.facts().operation_header?;
        Some((named.name, (named.value)(rpc.operation)))
    }

    /// True when a reply of HTTP status `status` is the call's reply to judge: 200, or
    /// the status its encoding's error form goes under (SOAP's Fault, 500), whose body
    /// the runner reads as the fault it is. Any other status fails the call as such.
    pub fn takes_status(&self, status: u16) -> bool {
        status == 200
            || self
                .rpc
                .is_some_and(|rpc| rpc.encoding.facts().fault_status == Some(status))
    }

    /// The payload this call asks for back: the pattern's length, or the echo's.
    pub fn expected_reply(&self) -> usize {
        self.reply_len.map_or(self.payload.len(), |n| n as usize)
    }

    /// The largest reply body accepted when the transport's framing adds at most
    /// `overhead` bytes to the payload.
    pub fn max_body(&self, overhead: usize) -> usize {
        self.max_reply.saturating_add(overhead)
    }
}

/// What came back for one call, before verification.
#[derive(Debug)]
pub struct Reply<'a> {
    /// The sequence number the reply carries (frame field or `x-rpcbench-seq`), if any.
    pub seq: Option<u64>,
    /// The reply body.
    pub body: &'a [u8],
    /// Server-side time as the server reported it.
    pub server: Option<ServerTime>,
}

/// The time a server says it spent on a call: in all (`server-timing`'s `app`, a frame's
/// `server_ns`), and, for an encoded call, its decode and encode within that.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerTime {
    pub total: Duration,
    pub decode: Option<Duration>,
    pub encode: Option<Duration>,
}

impl From<Duration> for ServerTime {
    fn from(total: Duration) -> ServerTime {
        ServerTime {
            total,
            decode: None,
            encode: None,
        }
    }
}

/// Where the time of one call went, for the phases that exist on this transport.
#[derive(Debug, Default, Clone, Copy)]
pub struct Phases {
    /// Resolving the target's name, when this call did a lookup.
    pub dns: Option<Duration>,
    /// Establishing a TCP connection (zero-cost calls on a reused connection leave it None).
    pub connect: Option<Duration>,
    /// The TLS handshake after the connect, when this call opened a TLS connection.
    pub tls: Option<Duration>,
    /// QUIC's handshake (transport and TLS in one), when this call opened a QUIC
    /// connection.
    pub handshake: Option<Duration>,
    /// From starting to send the request to the first byte of the reply.
    pub first_byte: Option<Duration>,
    /// The bytes the call sent and received, headers included, as the HTTP library counted
    /// them: for a transport whose sockets the kernel is not asked about (libcurl's).
    pub wire_bytes: Option<(u64, u64)>,
}

/// Why a call did not produce a reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The reply did not come within the timeout.
    #[error("no reply within the timeout")]
    Timeout,
    /// The connection closed before the reply was complete.
    #[error("connection closed before the reply")]
    Closed,
    /// Connecting failed (refused, unreachable, or timed out).
    #[error("connect failed: {0}")]
    Connect(ConnectFailure),
    /// The server answered with an HTTP status other than 200.
    #[error("HTTP status {0}")]
    HttpStatus(u16),
    /// The server answered with a non-zero frame status.
    #[error("frame status {0}")]
    FrameStatus(u8),
    /// The server ended a gRPC call with a status other than OK (its code).
    #[error("gRPC status {0}")]
    GrpcStatus(u8),
    /// The reply broke the protocol (bad frame, bad HTTP).
    #[error("protocol error")]
    Protocol,
    /// Any other I/O failure.
    #[error("I/O error")]
    Io,
    /// The target's name could not be resolved.
    #[error("name lookup failed: {0}")]
    Dns(#[from] LookupNameError),
    /// TLS failed: the handshake, the certificates, or TLS against a plain port.
    #[error("TLS: {0}")]
    Tls(tls::TlsFailure),
    /// The reply was larger than `--max-reply`: the transport stopped reading it.
    #[error("reply larger than the largest accepted (--max-reply)")]
    ReplyTooLarge,
}

/// How a connect failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectFailure {
    Refused,
    TimedOut,
    Other,
}

impl std::fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConnectFailure::Refused => "refused",
            ConnectFailure::TimedOut => "timed out",
            ConnectFailure::Other => "failed",
        })
    }
}

impl CallError {
    /// True when the call counts as lost (sent, but no reply) rather than as an error.
    pub fn is_lost(&self) -> bool {
        matches!(self, CallError::Timeout | CallError::Closed)
    }

    /// The stable key this error is counted under in tables and JSON.
    pub fn kind(&self) -> ErrorKind {
        use ErrorKind::Named;
        match self {
            CallError::Timeout => Named("timeout"),
            CallError::Closed => Named("closed"),
            CallError::Connect(ConnectFailure::Refused) => Named("connect_refused"),
            CallError::Connect(ConnectFailure::TimedOut) => Named("connect_timeout"),
            CallError::Connect(ConnectFailure::Other) => Named("connect"),
            CallError::HttpStatus(code) => ErrorKind::HttpStatus(*code),
            CallError::FrameStatus(code) => ErrorKind::FrameStatus(*code),
            CallError::GrpcStatus(code) => {
                grpc_status_kind(*code).map_or(ErrorKind::GrpcStatus(*code), Named)
            }
            CallError::Protocol => Named("protocol"),
            CallError::Io => Named("io"),
            CallError::Dns(LookupNameError::NoAddress) => Named("dns"),
            CallError::Dns(LookupNameError::Timeout) => Named("dns_timeout"),
            CallError::Dns(LookupNameError::Other) => Named("dns_error"),
            CallError::Tls(failure) => Named(failure.kind()),
            CallError::ReplyTooLarge => Named("reply_above_max"),
        }
    }

    /// Classifies a failed connect.
    pub fn from_connect(e: &std::io::Error) -> CallError {
        use std::io::ErrorKind::*;
        CallError::Connect(match e.kind() {
            ConnectionRefused => ConnectFailure::Refused,
            TimedOut | WouldBlock => ConnectFailure::TimedOut,
            _ => ConnectFailure::Other,
        })
    }

    /// Classifies a failed read or write on an open connection.
    pub fn from_io(e: &std::io::Error) -> CallError {
        use std::io::ErrorKind::*;
        if let Some(failure) = tls::TlsFailure::of_io(e) {
            return CallError::Tls(failure);
        }
        match e.kind() {
            TimedOut | WouldBlock => CallError::Timeout,
            UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe => CallError::Closed,
            _ => CallError::Io,
        }
    }
}

/// The error kind of a gRPC status code (`grpc_` and the code's name in snake case), or
/// `None` for OK and for codes gRPC does not define.
fn grpc_status_kind(code: u8) -> Option<&'static str> {
    Some(match Code::from_i32(i32::from(code)) {
        Code::Ok => return None,
        // An undefined code reads as Unknown; only 2 itself is that.
        Code::Unknown if code != Code::Unknown as u8 => return None,
        Code::Cancelled => "grpc_cancelled",
        Code::Unknown => "grpc_unknown",
        Code::InvalidArgument => "grpc_invalid_argument",
        Code::DeadlineExceeded => "grpc_deadline_exceeded",
        Code::NotFound => "grpc_not_found",
        Code::AlreadyExists => "grpc_already_exists",
        Code::PermissionDenied => "grpc_permission_denied",
        Code::ResourceExhausted => "grpc_resource_exhausted",
        Code::FailedPrecondition => "grpc_failed_precondition",
        Code::Aborted => "grpc_aborted",
        Code::OutOfRange => "grpc_out_of_range",
        Code::Unimplemented => "grpc_unimplemented",
        Code::Internal => "grpc_internal",
        Code::Unavailable => "grpc_unavailable",
        Code::DataLoss => "grpc_data_loss",
        Code::Unauthenticated => "grpc_unauthenticated",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_grpc_error_status_has_a_kind_of_its_own() {
        let mut kinds: Vec<String> = (1..=16u8)
            .map(|code| {
                let kind = CallError::GrpcStatus(code).kind().to_string();
                let name = format!("{:?}", Code::from_i32(i32::from(code)));
                // The kind is the code's name: `InvalidArgument` is `grpc_invalid_argument`.
                assert_eq!(
                    kind.replace('_', ""),
                    format!("grpc{}", name.to_ascii_lowercase()),
                    "{code}"
                );
                kind
            })
            .collect();
        kinds.sort();
        kinds.dedup();
        assert_eq!(kinds.len(), 16);
        assert_eq!(grpc_status_kind(0), None);
        assert_eq!(CallError::GrpcStatus(17).kind().to_string(), "grpc_17");
        assert!(!CallError::GrpcStatus(14).is_lost());
    }
}
