//! TLS for the client transports: the security axis (`--security`), one run's rustls
//! configuration, the handshake every TLS connection opens with (blocking and tokio), and
//! how a TLS failure is counted.
//!
//! Every transport that opens TCP connections connects through `tcp::TimedStream`
//! (blocking) or `connect_nodelay` (tokio); both run the handshake here when the
//! run's endpoint carries a [`TlsClient`], so the transports themselves only see a stream.
//! The handshake is timed apart from the connect: the `tls` phase.

use super::{CallError, remaining};
use crate::tcpinfo::Probe;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How a run's connections are secured: the security axis, beside the address modes.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Security {
    /// No TLS.
    #[default]
    Plain,
    /// TLS 1.3, a full handshake on every new connection.
    Tls13,
    /// TLS 1.3, each new connection resuming the previous session (a ticket).
    Tls13Resume,
    /// TLS 1.3 resumption with the request in early data (0-RTT): QUIC only. Early data
    /// can be replayed by anyone who captured it; see the README's note.
    #[value(name = "tls13-0rtt")]
    #[serde(rename = "tls13-0rtt")]
    Tls13ZeroRtt,
    /// TLS 1.2, a full handshake on every new connection.
    Tls12,
    /// TLS 1.2, each new connection resuming the previous session.
    Tls12Resume,
    /// TLS 1.3 with a client certificate (mutual TLS), full handshakes.
    Mtls,
}

impl Security {
    /// The stable lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Security::Plain => "plain",
            Security::Tls13 => "tls13",
            Security::Tls13Resume => "tls13-resume",
            Security::Tls13ZeroRtt => "tls13-0rtt",
            Security::Tls12 => "tls12",
            Security::Tls12Resume => "tls12-resume",
            Security::Mtls => "mtls",
        }
    }

    /// True for every mode but `plain`.
    pub fn is_tls(self) -> bool {
        self != Security::Plain
    }

    /// True when new connections resume the previous session.
    pub fn resumes(self) -> bool {
        matches!(
            self,
            Security::Tls13Resume | Security::Tls13ZeroRtt | Security::Tls12Resume
        )
    }

    /// True when a resumed connection sends its request in early data (0-RTT).
    pub fn early_data(self) -> bool {
        self == Security::Tls13ZeroRtt
    }

    /// The protocol version asked for, as rustls names it (`TLSv1_3`); `None` for plain.
    pub fn version(self) -> Option<rustls::ProtocolVersion> {
        match self {
            Security::Plain => None,
            Security::Tls12 | Security::Tls12Resume => Some(rustls::ProtocolVersion::TLSv1_2),
            _ => Some(rustls::ProtocolVersion::TLSv1_3),
        }
    }
}

impl std::fmt::Display for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a TLS connection failed, each a distinct error kind of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsFailure {
    /// The server did not speak TLS (a TLS client to a plain port).
    NotTlsServer,
    /// The server spoke TLS to a plain client (a plain client to a TLS port).
    TlsServer,
    /// The server's certificate is not signed by a trusted CA (`--ca`).
    Untrusted,
    /// The server's certificate has expired (or is not yet valid).
    Expired,
    /// The server's certificate does not cover the name (or IP) called.
    WrongName,
    /// The server wants a client certificate and got none (mTLS).
    ClientCertRequired,
    /// The server refused the client's certificate (another CA's, say).
    ClientCertRefused,
    /// The server stopped answering mid-handshake until the call's timeout.
    HandshakeTimeout,
    /// The negotiated protocol version is not the one the mode asks for.
    VersionMismatch,
    /// Any other TLS failure.
    Other,
}

impl TlsFailure {
    /// The stable key the failure is counted under.
    pub fn kind(self) -> &'static str {
        match self {
            TlsFailure::NotTlsServer => "tls_not_tls_server",
            TlsFailure::TlsServer => "tls_plain_client",
            TlsFailure::Untrusted => "tls_untrusted_cert",
            TlsFailure::Expired => "tls_expired_cert",
            TlsFailure::WrongName => "tls_wrong_name",
            TlsFailure::ClientCertRequired => "tls_client_cert_required",
            TlsFailure::ClientCertRefused => "tls_client_cert_refused",
            TlsFailure::HandshakeTimeout => "tls_handshake_timeout",
            TlsFailure::VersionMismatch => "tls_version_mismatch",
            TlsFailure::Other => "tls_error",
        }
    }

    /// Classifies a rustls error.
    pub fn of(e: &rustls::Error) -> TlsFailure {
        use rustls::{AlertDescription as A, CertificateError as C, Error as E};
        match e {
            E::InvalidCertificate(
                C::Expired
                | C::ExpiredContext { .. }
                | C::NotValidYet
                | C::NotValidYetContext { .. },
            ) => TlsFailure::Expired,
            E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => {
                TlsFailure::WrongName
            }
            E::InvalidCertificate(_) => TlsFailure::Untrusted,
            E::AlertReceived(A::CertificateRequired) => TlsFailure::ClientCertRequired,
            E::AlertReceived(
                A::BadCertificate | A::UnknownCA | A::CertificateUnknown | A::DecryptError,
            ) => TlsFailure::ClientCertRefused,
            E::InvalidMessage(_)
            | E::InappropriateMessage { .. }
            | E::InappropriateHandshakeMessage { .. } => TlsFailure::NotTlsServer,
            _ => TlsFailure::Other,
        }
    }

    /// The TLS failure an I/O error carries, if it carries one.
    pub fn of_io(e: &std::io::Error) -> Option<TlsFailure> {
        let inner = e.get_ref()?;
        // The h2 crate passes an I/O error on as its kind and message only, so the
        // message is how a [`TlsReplyError`] is known after it went through HTTP/2.
        if inner.is::<TlsReplyError>() || inner.to_string() == TlsReplyError.to_string() {
            return Some(TlsFailure::TlsServer);
        }
        inner.downcast_ref::<rustls::Error>().map(TlsFailure::of)
    }

    /// The TLS failure anywhere in `e`'s chain of sources (hyper, tonic and h2 wrap the
    /// I/O error that carries it), if one is there.
    pub fn in_chain(e: &(dyn std::error::Error + 'static)) -> Option<TlsFailure> {
        let mut next = Some(e);
        while let Some(e) = next {
            if let Some(io) = e.downcast_ref::<std::io::Error>()
                && let Some(failure) = TlsFailure::of_io(io)
            {
                return Some(failure);
            }
            if let Some(io) = e.downcast_ref::<h2::Error>().and_then(|e| e.get_io())
                && let Some(failure) = TlsFailure::of_io(io)
            {
                return Some(failure);
            }
            next = e.source();
        }
        None
    }
}

impl std::fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TlsFailure::NotTlsServer => "the server does not speak TLS",
            TlsFailure::TlsServer => "the server speaks TLS; the client does not",
            TlsFailure::Untrusted => "server certificate not signed by a trusted CA",
            TlsFailure::Expired => "server certificate expired or not yet valid",
            TlsFailure::WrongName => "server certificate does not cover the name called",
            TlsFailure::ClientCertRequired => "the server requires a client certificate",
            TlsFailure::ClientCertRefused => "the server refused the client certificate",
            TlsFailure::HandshakeTimeout => "the server stalled mid-handshake",
            TlsFailure::VersionMismatch => "negotiated another TLS version than asked",
            TlsFailure::Other => "TLS failure",
        })
    }
}

pub use crate::wire::looks_like_tls;

/// The error a plain client socket's read returns when the server's first bytes are a TLS
/// record: without it a TLS port's alert would reach the HTTP or HTTP/2 parser as garbage
/// and be counted as a protocol error (or, for HTTP/2, as a lost call).
#[derive(Debug, thiserror::Error)]
#[error("the server answered with TLS")]
pub struct TlsReplyError;

/// Looks at the first bytes a plain socket read (once: `sniffed` is set after), failing
/// the read with [`TlsReplyError`] when they are a TLS record. No reply of ours starts like
/// one: read as a raw frame's length or an HTTP/2 frame's, `0x15 0x03` or `0x16 0x03` is
/// far above any frame allowed, and HTTP/1.1 starts with `HTTP/`.
#[inline]
pub fn sniff_reply(sniffed: &mut bool, bytes: &[u8]) -> std::io::Result<()> {
    if *sniffed || bytes.is_empty() {
        return Ok(());
    }
    *sniffed = true;
    if looks_like_tls(bytes) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            TlsReplyError,
        ));
    }
    Ok(())
}

/// The application protocol a connection offers by ALPN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    /// None: the raw frames.
    None,
    /// `http/1.1`.
    Http1,
    /// `h2` (HTTP/2 and gRPC).
    H2,
    /// `h3` (HTTP/3, over QUIC only).
    H3,
}

/// What a run's TLS connections negotiated, recorded once per run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Negotiated {
    /// The protocol version (`TLSv1_3`).
    pub version: String,
    /// The cipher suite (`TLS13_AES_256_GCM_SHA384`).
    pub cipher_suite: String,
    /// The ALPN protocol chosen, if any (`h2`).
    #[serde(default)]
    pub alpn: Option<String>,
}

/// What verifying the server, and being verified, needs.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// CAs the server's certificate must chain to (`--ca`).
    pub ca: Vec<CertificateDer<'static>>,
    /// Skip verifying the server's certificate (`--insecure`): loudly, never silently.
    pub insecure: bool,
    /// The client certificate chain and key for `mtls`.
    pub client_cert: Option<(Vec<CertificateDer<'static>>, Arc<PrivateKeyDer<'static>>)>,
    /// The same CAs, PEM encoded, for libcurl's own TLS.
    pub ca_pem: String,
    /// The same client certificate and key, PEM encoded, for libcurl.
    pub client_pem: Option<(String, String)>,
}

impl TlsOptions {
    /// Options from PEM text: the CAs, and a client certificate chain and key.
    pub fn from_pem(
        ca_pem: &str,
        client: Option<(&str, &str)>,
        insecure: bool,
    ) -> Result<TlsOptions, rustls::pki_types::pem::Error> {
        use rustls::pki_types::pem::PemObject;
        let ca =
            CertificateDer::pem_slice_iter(ca_pem.as_bytes()).collect::<Result<Vec<_>, _>>()?;
        let client_cert = match client {
            Some((cert, key)) => Some((
                CertificateDer::pem_slice_iter(cert.as_bytes()).collect::<Result<Vec<_>, _>>()?,
                Arc::new(PrivateKeyDer::from_pem_slice(key.as_bytes())?),
            )),
            None => None,
        };
        Ok(TlsOptions {
            ca,
            insecure,
            client_cert,
            ca_pem: ca_pem.to_string(),
            client_pem: client.map(|(c, k)| (c.to_string(), k.to_string())),
        })
    }

    /// The options for libcurl's TLS on `easy`: the same CA, version and client
    /// certificate as rustls gets, so both verify alike.
    pub fn apply_to_curl<H>(
        &self,
        security: Security,
        easy: &mut curl::easy::Easy2<H>,
    ) -> Result<(), curl::Error> {
        use curl::easy::SslVersion;
        let version = match security.version() {
            Some(rustls::ProtocolVersion::TLSv1_2) => SslVersion::Tlsv12,
            _ => SslVersion::Tlsv13,
        };
        // Pinned at both ends: a negotiated version other than the one asked for fails
        // the handshake instead of being a silent fallback.
        easy.ssl_min_max_version(version, version)?;
        if self.insecure {
            easy.ssl_verify_peer(false)?;
            easy.ssl_verify_host(false)?;
        } else {
            easy.ssl_cainfo_blob(self.ca_pem.as_bytes())?;
        }
        if let (Security::Mtls, Some((cert, key))) = (security, &self.client_pem) {
            easy.ssl_cert_blob(cert.as_bytes())?;
            easy.ssl_cert_type("PEM")?;
            easy.ssl_key_blob(key.as_bytes())?;
            easy.ssl_key_type("PEM")?;
        }
        Ok(())
    }
}

/// Why the TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildTlsError {
    /// rustls refused a CA, the client certificate or key.
    #[error("TLS configuration refused")]
    Config(#[from] rustls::Error),
    /// `mtls` without a client certificate.
    #[error("mode mtls needs a client certificate (--client-cert and --client-key)")]
    NoClientCert,
    /// Neither a CA nor `--insecure`: nothing to verify the server against.
    #[error("no CA to verify the server against (--ca, or --insecure)")]
    NoCa,
}

/// One run's TLS: a rustls configuration per ALPN, all sharing one session store, so that
/// each new connection of a resume mode resumes the session of the one before, whichever
/// worker opened it.
pub struct TlsClient {
    security: Security,
    /// The host called and the options, to build a fresh client for the next run.
    host: String,
    options: TlsOptions,
    plain: Arc<rustls::ClientConfig>,
    http1: Arc<rustls::ClientConfig>,
    h2: Arc<rustls::ClientConfig>,
    /// For QUIC (ALPN `rpcbench`; early data in `tls13-0rtt`): TLS 1.3 modes only.
    quic: Arc<rustls::ClientConfig>,
    /// For HTTP/3 (ALPN `h3`; early data in `tls13-0rtt`): TLS 1.3 modes only.
    h3: Arc<rustls::ClientConfig>,
    server_name: ServerName<'static>,
    negotiated: Mutex<Option<Negotiated>>,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TlsClient({} {:?})", self.security, self.server_name)
    }
}

/// A certificate verifier that accepts every certificate: `--insecure` only.
#[derive(Debug)]
struct AcceptAnything(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAnything {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// How long before a call's deadline its handshake gives up, so that the handshake's own
/// timeout, which knows a stall was mid-handshake, fires before the call's timer (which
/// would count a plain connect timeout).
const HANDSHAKE_MARGIN: Duration = Duration::from_millis(2);

/// Sessions the client keeps for resumption: one target, a few tickets at a time.
const CLIENT_SESSIONS: usize = 64;

impl TlsClient {
    /// The TLS of one run in mode `security` (not `plain`), calling `host` (a name or an
    /// IP literal, which the server's certificate must cover).
    pub fn new(
        security: Security,
        host: &str,
        options: &TlsOptions,
    ) -> Result<Arc<TlsClient>, BuildTlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let version: &'static rustls::SupportedProtocolVersion = match security.version() {
            Some(rustls::ProtocolVersion::TLSv1_2) => &rustls::version::TLS12,
            _ => &rustls::version::TLS13,
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[version])?;
        let builder = if options.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnything(provider)))
        } else {
            if options.ca.is_empty() {
                return Err(BuildTlsError::NoCa);
            }
            let mut roots = rustls::RootCertStore::empty();
            for ca in &options.ca {
                roots.add(ca.clone())?;
            }
            builder.with_root_certificates(roots)
        };
        let mut config = match (security, &options.client_cert) {
            (Security::Mtls, Some((chain, key))) => {
                builder.with_client_auth_cert(chain.clone(), key.clone_key())?
            }
            (Security::Mtls, None) => return Err(BuildTlsError::NoClientCert),
            _ => builder.with_no_client_auth(),
        };
        config.resumption = if security.resumes() {
            rustls::client::Resumption::store(Arc::new(
                rustls::client::ClientSessionMemoryCache::new(CLIENT_SESSIONS),
            ))
        } else {
            rustls::client::Resumption::disabled()
        };
        let server_name = ServerName::try_from(host.to_string())
            .map_err(|e| rustls::Error::General(format!("{host:?}: {e}")))?;
        let with_alpn = |alpn: &[u8]| {
            let mut c = config.clone();
            c.alpn_protocols = vec![alpn.to_vec()];
            Arc::new(c)
        };
        let over_quic = |alpn: &[u8]| {
            let mut c = config.clone();
            c.alpn_protocols = vec![alpn.to_vec()];
            c.enable_early_data = security.early_data();
            Arc::new(c)
        };
        Ok(Arc::new(TlsClient {
            security,
            host: host.to_string(),
            options: options.clone(),
            http1: with_alpn(b"http/1.1"),
            h2: with_alpn(b"h2"),
            quic: over_quic(b"rpcbench"),
            h3: over_quic(b"h3"),
            plain: Arc::new(config),
            server_name,
            negotiated: Mutex::new(None),
        }))
    }

    /// The same client with an empty session store and nothing negotiated: what a new
    /// run starts from, so resumption never reaches across runs.
    pub fn fresh(&self) -> Arc<TlsClient> {
        TlsClient::new(self.security, &self.host, &self.options)
            .expect("the same settings built a client before")
    }

    /// The options the client was built with.
    pub fn options(&self) -> &TlsOptions {
        &self.options
    }

    /// True when the server's certificate is not verified (`--insecure`).
    pub fn insecure(&self) -> bool {
        self.options.insecure
    }

    /// The mode.
    pub fn security(&self) -> Security {
        self.security
    }

    /// The host called, as the server's certificate must cover it (a name or an IP).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The configuration of QUIC connections offering `alpn`: [`Alpn::H3`] for HTTP/3,
    /// any other for the raw frames (ALPN `rpcbench`). For a TLS 1.3 mode.
    pub fn quic_config(&self, alpn: Alpn) -> Arc<rustls::ClientConfig> {
        match alpn {
            Alpn::H3 => self.h3.clone(),
            _ => self.quic.clone(),
        }
    }

    /// What the run's first successful handshake negotiated.
    pub fn negotiated(&self) -> Option<Negotiated> {
        self.negotiated
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn config(&self, alpn: Alpn) -> Arc<rustls::ClientConfig> {
        match alpn {
            Alpn::None => self.plain.clone(),
            Alpn::Http1 => self.http1.clone(),
            Alpn::H2 => self.h2.clone(),
            // HTTP/3 never runs over TCP; asked anyway, it offers nothing.
            Alpn::H3 => self.plain.clone(),
        }
    }

    /// Checks what a finished handshake negotiated against the mode, and records it.
    fn check(&self, state: &rustls::CommonState) -> Result<(), CallError> {
        if state.protocol_version() != self.security.version() {
            return Err(CallError::Tls(TlsFailure::VersionMismatch));
        }
        let mut negotiated = self.negotiated.lock().unwrap_or_else(|p| p.into_inner());
        if negotiated.is_none() {
            *negotiated = Some(Negotiated {
                version: state
                    .protocol_version()
                    .map(|v| format!("{v:?}"))
                    .unwrap_or_default(),
                cipher_suite: state
                    .negotiated_cipher_suite()
                    .map(|s| format!("{:?}", s.suite()))
                    .unwrap_or_default(),
                alpn: state
                    .alpn_protocol()
                    .map(|p| String::from_utf8_lossy(p).into_owned()),
            });
        }
        Ok(())
    }

    /// Runs the client handshake on a connected blocking socket, giving up at `deadline`;
    /// returns the connection and the handshake's time.
    pub fn handshake_blocking(
        &self,
        mut sock: TcpStream,
        alpn: Alpn,
        deadline: Instant,
    ) -> Result<(BlockingTls, Duration), CallError> {
        let started = Instant::now();
        let mut conn = rustls::ClientConnection::new(self.config(alpn), self.server_name.clone())
            .map_err(|e| CallError::Tls(TlsFailure::of(&e)))?;
        let left = remaining(deadline)?;
        sock.set_read_timeout(Some(
            left.saturating_sub(HANDSHAKE_MARGIN).max(HANDSHAKE_MARGIN),
        ))
        .map_err(|e| CallError::from_io(&e))?;
        while conn.is_handshaking() {
            conn.complete_io(&mut sock)
                .map_err(|e| handshake_error(&e))?;
        }
        while conn.wants_write() {
            conn.write_tls(&mut sock).map_err(|e| handshake_error(&e))?;
        }
        self.check(&conn)?;
        Ok((
            BlockingTls(rustls::StreamOwned::new(conn, sock)),
            started.elapsed(),
        ))
    }

    /// Runs the client handshake on a connected tokio socket, giving up at `deadline`;
    /// returns the connection and the handshake's time.
    pub async fn handshake(
        &self,
        sock: tokio::net::TcpStream,
        alpn: Alpn,
        deadline: Instant,
    ) -> Result<
        (
            tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
            Duration,
        ),
        CallError,
    > {
        let started = Instant::now();
        let connector = tokio_rustls::TlsConnector::from(self.config(alpn));
        let until = tokio::time::Instant::from_std(
            deadline.checked_sub(HANDSHAKE_MARGIN).unwrap_or(deadline),
        );
        let stream =
            tokio::time::timeout_at(until, connector.connect(self.server_name.clone(), sock))
                .await
                .map_err(|_| CallError::Tls(TlsFailure::HandshakeTimeout))?
                .map_err(|e| handshake_error(&e))?;
        self.check(stream.get_ref().1)?;
        Ok((stream, started.elapsed()))
    }
}

/// What an I/O error during a handshake counts as.
fn handshake_error(e: &std::io::Error) -> CallError {
    use std::io::ErrorKind::*;
    CallError::Tls(match TlsFailure::of_io(e) {
        Some(kind) => kind,
        None => match e.kind() {
            WouldBlock | TimedOut => TlsFailure::HandshakeTimeout,
            // A plain server closes (or resets) a connection whose first bytes, a
            // ClientHello, are not a request it understands.
            UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe => {
                TlsFailure::NotTlsServer
            }
            _ => TlsFailure::Other,
        },
    })
}

/// A blocking TLS connection.
pub struct BlockingTls(rustls::StreamOwned<rustls::ClientConnection, TcpStream>);

impl BlockingTls {
    /// The socket under it.
    pub fn sock(&self) -> &TcpStream {
        &self.0.sock
    }
}

impl Read for BlockingTls {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for BlockingTls {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl Drop for BlockingTls {
    fn drop(&mut self) {
        // close_notify, so the server sees a clean end rather than a truncation. Best
        // effort: the socket may be gone.
        self.0.conn.send_close_notify();
        let _ = self.0.conn.write_tls(&mut self.0.sock);
    }
}

/// A blocking client socket, plain TCP or TLS over it, and the probe that reads its
/// `TCP_INFO` into the run's sums when it closes.
pub struct BlockingSock {
    /// The stream.
    io: BlockingIo,
    /// Read once more by `Drop`, while the descriptor is still open.
    probe: Probe,
}

/// The stream of a [`BlockingSock`].
pub enum BlockingIo {
    /// Plain TCP, and whether its first reply bytes have been looked at yet
    /// ([`sniff_reply`]).
    Plain(TcpStream, bool),
    /// TLS over TCP (boxed: the rustls state is large).
    Tls(Box<BlockingTls>),
}

impl BlockingIo {
    /// The TCP socket under it.
    fn tcp(&self) -> &TcpStream {
        match self {
            BlockingIo::Plain(s, _) => s,
            BlockingIo::Tls(t) => t.sock(),
        }
    }
}

impl BlockingSock {
    /// A socket whose connect made `probe`.
    pub fn new(io: BlockingIo, probe: Probe) -> BlockingSock {
        BlockingSock { io, probe }
    }

    /// The TCP socket under it.
    pub fn tcp(&self) -> &TcpStream {
        self.io.tcp()
    }
}

impl Drop for BlockingSock {
    fn drop(&mut self) {
        // Before the fields drop: a TLS close_notify, then the close itself.
        self.probe.close(self.io.tcp().as_fd());
    }
}

impl Read for BlockingSock {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match &mut self.io {
            BlockingIo::Plain(s, sniffed) => {
                let n = s.read(buf)?;
                sniff_reply(sniffed, &buf[..n])?;
                Ok(n)
            }
            BlockingIo::Tls(t) => t.read(buf),
        }
    }
}

impl Write for BlockingSock {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut self.io {
            BlockingIo::Plain(s, _) => s.write(buf),
            BlockingIo::Tls(t) => t.write(buf),
        }
    }

    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match &mut self.io {
            BlockingIo::Plain(s, _) => s.write_all(buf),
            BlockingIo::Tls(t) => t.write_all(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.io {
            BlockingIo::Plain(s, _) => s.flush(),
            BlockingIo::Tls(t) => t.flush(),
        }
    }
}

/// A tokio client socket, plain TCP or TLS over it, and the probe that reads its
/// `TCP_INFO` into the run's sums when it closes (in whichever task or runtime drops it).
pub struct AsyncSock {
    /// The stream.
    io: AsyncIo,
    /// Read once more by `Drop`, while the descriptor is still open.
    probe: Probe,
}

/// The stream of an [`AsyncSock`].
pub enum AsyncIo {
    /// Plain TCP, and whether its first reply bytes have been looked at yet
    /// ([`sniff_reply`]).
    Plain(tokio::net::TcpStream, bool),
    /// TLS over TCP (boxed: the rustls state is large).
    Tls(Box<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>),
}

impl AsyncIo {
    /// The TCP socket under it.
    fn tcp(&self) -> &tokio::net::TcpStream {
        match self {
            AsyncIo::Plain(s, _) => s,
            AsyncIo::Tls(t) => t.get_ref().0,
        }
    }
}

impl AsyncSock {
    /// A socket whose connect made `probe`.
    pub fn new(io: AsyncIo, probe: Probe) -> AsyncSock {
        AsyncSock { io, probe }
    }

    /// The plain TCP stream, or `None` under TLS.
    pub fn plain(&self) -> Option<&tokio::net::TcpStream> {
        match &self.io {
            AsyncIo::Plain(s, _) => Some(s),
            AsyncIo::Tls(_) => None,
        }
    }
}

impl Drop for AsyncSock {
    fn drop(&mut self) {
        self.probe.close(self.io.tcp().as_fd());
    }
}

impl AsyncRead for AsyncSock {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().io {
            AsyncIo::Plain(s, sniffed) => {
                let before = buf.filled().len();
                let polled = Pin::new(s).poll_read(cx, buf);
                if let Poll::Ready(Ok(())) = polled {
                    sniff_reply(sniffed, &buf.filled()[before..])?;
                }
                polled
            }
            AsyncIo::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for AsyncSock {
    #[inline]
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match &mut self.get_mut().io {
            AsyncIo::Plain(s, _) => Pin::new(s).poll_write(cx, buf),
            AsyncIo::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match &mut self.get_mut().io {
            AsyncIo::Plain(s, _) => Pin::new(s).poll_write_vectored(cx, bufs),
            AsyncIo::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            AsyncIo::Plain(s, _) => s.is_write_vectored(),
            AsyncIo::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().io {
            AsyncIo::Plain(s, _) => Pin::new(s).poll_flush(cx),
            AsyncIo::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().io {
            AsyncIo::Plain(s, _) => Pin::new(s).poll_shutdown(cx),
            AsyncIo::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The TLS failure a connection's reads or writes met, for the call that saw only the
/// connection end. A client library's connection task sees the error; the call gets a copy
/// of the I/O error's kind and message (`h2` cannot clone the error itself) or that the
/// connection closed (hyper), from which the failure cannot be told, so a call refused by
/// an alert (an mTLS server under TLS 1.3, after the handshake) would count as `io` or lost.
#[derive(Debug, Default)]
pub(super) struct TlsNoted(std::sync::Mutex<Option<TlsFailure>>);

impl TlsNoted {
    /// What a failed call counts as: the TLS failure its connection met, when it met one,
    /// else `e`. Every call that fails on that connection is explained by it (on a shared
    /// connection, all the streams the alert ended).
    pub(super) fn explain(&self, e: CallError) -> CallError {
        match *self.0.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(failure) if !matches!(e, CallError::Tls(_)) => CallError::Tls(failure),
            _ => e,
        }
    }

    /// Forgets the failure: a new connection is about to use this slot.
    pub(super) fn clear(&self) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// A connection's socket, telling its [`TlsNoted`] of a TLS failure on it.
pub(super) struct Watched<S> {
    sock: S,
    noted: std::sync::Arc<TlsNoted>,
}

impl<S> Watched<S> {
    pub(super) fn new(sock: S, noted: std::sync::Arc<TlsNoted>) -> Watched<S> {
        Watched { sock, noted }
    }

    /// Passes `polled` on, noting the TLS failure it carries.
    fn note<T>(&self, polled: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        if let Poll::Ready(Err(e)) = &polled
            && let Some(failure) = TlsFailure::of_io(e)
        {
            *self.noted.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(failure);
        }
        polled
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Watched<S> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        let polled = std::pin::Pin::new(&mut me.sock).poll_read(cx, buf);
        me.note(polled)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Watched<S> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let me = self.get_mut();
        let polled = std::pin::Pin::new(&mut me.sock).poll_write(cx, buf);
        me.note(polled)
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let me = self.get_mut();
        let polled = std::pin::Pin::new(&mut me.sock).poll_write_vectored(cx, bufs);
        me.note(polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.sock.is_write_vectored()
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        let polled = std::pin::Pin::new(&mut me.sock).poll_flush(cx);
        me.note(polled)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().sock).poll_shutdown(cx)
    }
}
