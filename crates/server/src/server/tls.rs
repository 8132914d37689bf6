//! TLS for the server (rustls, TLS 1.2 and 1.3): certificates, the handshake every TLS
//! listener runs first, and the raw frame listener over TLS (`--tls`). The QUIC listener
//! (`quic.rs`) takes the same certificate and settings, in TLS 1.3.
//!
//! The handshake runs on the reactor, bounded by the handshake timeout, so a client that
//! stalls mid-handshake or sends garbage costs a task and a connection slot for at most
//! that long and never a thread. Once it is done, a `--tls` connection is served by the
//! same frame code as a raw TCP one (`tcp::Listener`): `TlsFrames` is one more
//! `FrameStream`, so busy connections get a pool thread, quiet ones park on
//! the reactor, and idle timeouts, limits and shutdown are the raw listener's. The HTTPS
//! listener (`--https`) hands the stream to the HTTP service instead (`http/mod.rs`).
//!
//! Without `--cert`/`--key`, [`generate_certs`] makes a CA and a leaf signed by it for
//! the server's name and listener IPs; the CA is what clients verify against (`--ca`).

use super::Shared;
use super::stats::{HandshakeCounters, HandshakeFailure, ProtoCounters, Reject, Stats};
use super::tcp::FrameStream;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;

/// Default bound on a TLS handshake (10 s): far above a handshake's milliseconds even on
/// a distant, loaded link, short enough that a stalled client gives its slot back soon.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Shortest handshake timeout: the timer's tick times ten, so the bound means something.
pub const MIN_HANDSHAKE_TIMEOUT: Duration = Duration::from_millis(10);

/// Checks `handshake_timeout`: at least [`MIN_HANDSHAKE_TIMEOUT`].
pub fn check_handshake_timeout(timeout: Duration) -> Result<Duration, super::CheckSettingError> {
    super::within(
        "handshake_timeout",
        timeout,
        MIN_HANDSHAKE_TIMEOUT..=Duration::MAX,
        || format!("at least {MIN_HANDSHAKE_TIMEOUT:?}"),
    )
}

/// Bytes of TLS records rustls may hold unsent on a connection: 16 KiB, one full record.
/// rustls's default (64 KiB) let every client that stops reading hold 64 KiB of the
/// server's memory; with this, a reply waits in the socket rather than here, which costs
/// one more write per record on a connection that is sending a large reply.
pub(crate) const TLS_BUFFER_LIMIT: usize = 16 * 1024;

/// Sessions the server remembers for TLS 1.2 session-ID resumption (and TLS 1.3 when a
/// client offers an ID): rustls's own default size, plenty for a benchmark's workers.
const SESSION_CACHE: usize = 256;

/// ALPN protocols the HTTPS listener offers, in order of preference.
const HTTPS_ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// Where the server's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertSource {
    /// PEM files given with `--cert` (the chain, leaf first) and `--key`.
    Files {
        /// The certificate chain.
        cert: PathBuf,
        /// The private key (PKCS#8, PKCS#1 or SEC1).
        key: PathBuf,
    },
    /// Generated at start: a CA and a leaf for `dns_name` and the listener IPs.
    Generate {
        /// The DNS name the leaf covers (besides `localhost` and the IPs).
        dns_name: String,
        /// Where the CA's PEM is written, if anywhere.
        ca_out: Option<PathBuf>,
    },
}

/// How the TLS listeners are set up; one value for both (`--tls` and `--https`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// The server's certificate.
    pub cert: CertSource,
    /// With a CA file, clients must present a certificate it signed (mTLS).
    pub client_ca: Option<PathBuf>,
    /// A client CA as PEM text, as `client_ca` but without a file (the embedded server).
    pub client_ca_pem: Option<String>,
    /// Client certificates are verified when presented but not required: the embedded
    /// server, which serves `mtls` and the other modes on the same ports.
    pub client_auth_optional: bool,
    /// Session resumption (TLS 1.3 tickets, TLS 1.2 tickets and session IDs).
    pub resumption: bool,
    /// A handshake not finished within this long is abandoned and counted.
    pub handshake_timeout: Duration,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings {
            cert: CertSource::Generate {
                dns_name: "localhost".into(),
                ca_out: None,
            },
            client_ca: None,
            client_ca_pem: None,
            client_auth_optional: false,
            resumption: true,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        }
    }
}

/// Why the TLS setup failed.
#[derive(Debug, thiserror::Error)]
pub enum SetUpTlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("cannot read {what} from {path}: {reason}")]
    Pem {
        /// What was looked for (`certificate`, `private key`, `client CA`).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why, for a person.
        reason: String,
    },
    /// rustls refused the certificate, key or CA (a key that does not match, say).
    #[error("TLS configuration refused")]
    Config(#[from] rustls::Error),
    /// The certificates could not be generated.
    #[error("cannot generate the certificates")]
    Generate(#[from] rcgen::Error),
    /// The generated CA could not be written to `--ca-out`.
    #[error("cannot write the CA to {path}")]
    WriteCa {
        /// The `--ca-out` path.
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A CA and a leaf it signed, PEM encoded.
#[derive(Debug, Clone)]
pub struct GeneratedCerts {
    /// The CA's certificate: what clients trust (`--ca`).
    pub ca_pem: String,
    /// The CA's private key, to sign more (tests sign client certificates with it).
    pub ca_key_pem: String,
    /// The leaf certificate.
    pub leaf_pem: String,
    /// The leaf's private key.
    pub leaf_key_pem: String,
}

/// What a leaf is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafUse {
    /// A server certificate.
    Server,
    /// A client certificate (mTLS).
    Client,
}

/// Generates a CA and a leaf it signed that covers `names` (DNS names or IP literals),
/// valid from 1975 to 4096 unless `expired`, which makes one that ended in 2001.
pub fn generate_certs(
    names: &[String],
    usage: LeafUse,
    expired: bool,
) -> Result<GeneratedCerts, rcgen::Error> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(DnType::CommonName, "rpcbench test CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key)?;
    let leaf_key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(names.to_vec())?;
    leaf.distinguished_name.push(
        DnType::CommonName,
        names.first().map_or("rpcbench", |n| n.as_str()),
    );
    leaf.extended_key_usages = vec![match usage {
        LeafUse::Server => ExtendedKeyUsagePurpose::ServerAuth,
        LeafUse::Client => ExtendedKeyUsagePurpose::ClientAuth,
    }];
    if expired {
        leaf.not_before = rcgen::date_time_ymd(2000, 1, 1);
        leaf.not_after = rcgen::date_time_ymd(2001, 1, 1);
    }
    let leaf_cert = leaf.signed_by(&leaf_key, &ca_cert, &ca_key)?;
    Ok(GeneratedCerts {
        ca_pem: ca_cert.pem(),
        ca_key_pem: ca_key.serialize_pem(),
        leaf_pem: leaf_cert.pem(),
        leaf_key_pem: leaf_key.serialize_pem(),
    })
}

/// The names a generated leaf covers: `dns_name`, `localhost`, and every listener IP. An
/// unspecified one (`0.0.0.0`, `::`) stands for every address of the host: loopback and
/// `interfaces` (the addresses another host reaches this one at, which rpcbench-echo
/// prints), so that a client on another host may call it by IP and verify it.
pub fn leaf_names(
    dns_name: &str,
    ips: impl IntoIterator<Item = IpAddr>,
    interfaces: &[IpAddr],
) -> Vec<String> {
    let mut names = vec![dns_name.to_string()];
    let mut add = |n: String| {
        if !names.contains(&n) {
            names.push(n);
        }
    };
    add("localhost".into());
    for ip in ips {
        if ip.is_unspecified() {
            add("127.0.0.1".into());
            add("::1".into());
            for a in interfaces {
                add(a.to_string());
            }
        } else {
            add(ip.to_string());
        }
    }
    names
}

/// The two rustls configurations the listeners use, and the CA clients should trust when
/// it was generated here.
#[derive(Clone)]
pub(crate) struct ServerTls {
    /// For `--tls` (no ALPN: the frames are the only protocol).
    pub frames: tokio_rustls::TlsAcceptor,
    /// For `--https`: ALPN `h2` and `http/1.1`.
    pub https: tokio_rustls::TlsAcceptor,
    /// For `--quic`: the same certificate, client CA and tickets, its ALPN set by the
    /// QUIC listener (`quic.rs`).
    pub quic: rustls::ServerConfig,
    /// The generated CA (PEM), when the certificate was generated.
    pub ca_pem: Option<String>,
    /// Where that CA was written (`--ca-out`).
    pub ca_path: Option<PathBuf>,
    /// The names the leaf covers, when generated.
    pub names: Vec<String>,
}

/// Reads every certificate of a PEM file.
fn read_certs(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, SetUpTlsError> {
    let pem_err = |reason: String| SetUpTlsError::Pem {
        what,
        path: path.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem_err(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_err(e.to_string()))?;
    if certs.is_empty() {
        return Err(pem_err("no CERTIFICATE block".into()));
    }
    Ok(certs)
}

/// Builds the listeners' TLS from `settings`; `ips` are the TLS listeners' IPs, which a
/// generated leaf covers.
pub(crate) fn set_up(settings: &TlsSettings, ips: &[IpAddr]) -> Result<ServerTls, SetUpTlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (chain, key, ca_pem, ca_path, names) = match &settings.cert {
        CertSource::Files { cert, key } => {
            let chain = read_certs("certificate", cert)?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| SetUpTlsError::Pem {
                what: "private key",
                path: key.clone(),
                reason: e.to_string(),
            })?;
            (chain, key, None, None, Vec::new())
        }
        CertSource::Generate { dns_name, ca_out } => {
            let interfaces = if ips.iter().any(IpAddr::is_unspecified) {
                crate::host::interface_addrs()
            } else {
                Vec::new()
            };
            let names = leaf_names(dns_name, ips.iter().copied(), &interfaces);
            let certs = generate_certs(&names, LeafUse::Server, false)?;
            if let Some(path) = ca_out {
                std::fs::write(path, &certs.ca_pem).map_err(|source| SetUpTlsError::WriteCa {
                    path: path.clone(),
                    source,
                })?;
            }
            let chain = vec![
                CertificateDer::from_pem_slice(certs.leaf_pem.as_bytes())
                    .map_err(|e| rustls::Error::General(e.to_string()))?,
            ];
            let key = PrivateKeyDer::from_pem_slice(certs.leaf_key_pem.as_bytes())
                .map_err(|e| rustls::Error::General(e.to_string()))?;
            (chain, key, Some(certs.ca_pem), ca_out.clone(), names)
        }
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
    let client_cas = match (&settings.client_ca, &settings.client_ca_pem) {
        (Some(path), _) => Some(read_certs("client CA", path)?),
        (None, Some(pem)) => Some(
            CertificateDer::pem_slice_iter(pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| rustls::Error::General(e.to_string()))?,
        ),
        (None, None) => None,
    };
    let builder = match client_cas {
        Some(cas) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in cas {
                roots.add(cert)?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            );
            let verifier = if settings.client_auth_optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| rustls::Error::General(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key)?;
    if settings.resumption {
        config.session_storage = rustls::server::ServerSessionMemoryCache::new(SESSION_CACHE);
        config.ticketer = rustls::crypto::ring::Ticketer::new()?;
    } else {
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        config.send_tls13_tickets = 0;
    }
    let frames = Arc::new(config.clone());
    let quic = config.clone();
    config.alpn_protocols = HTTPS_ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(ServerTls {
        frames: frames.into(),
        https: Arc::new(config).into(),
        quic,
        ca_pem,
        ca_path,
        names,
    })
}

/// What a failed handshake is counted as.
fn failure_kind(e: &std::io::Error) -> HandshakeFailure {
    use rustls::Error as E;
    match e.get_ref().and_then(|inner| inner.downcast_ref::<E>()) {
        Some(
            E::InvalidMessage(_)
            | E::InappropriateHandshakeMessage { .. }
            | E::InappropriateMessage { .. },
        ) => HandshakeFailure::NotTls,
        Some(E::NoCertificatesPresented) => HandshakeFailure::NoClientCert,
        Some(E::InvalidCertificate(_)) => HandshakeFailure::BadClientCert,
        Some(E::AlertReceived(_)) => HandshakeFailure::AlertReceived,
        Some(E::PeerIncompatible(_)) => HandshakeFailure::Incompatible,
        Some(_) => HandshakeFailure::Other,
        None if e.kind() == std::io::ErrorKind::UnexpectedEof => HandshakeFailure::Closed,
        None => HandshakeFailure::Io,
    }
}

/// Longest a refused handshake's connection is kept, after its alert went out, for the
/// client's close (see [`linger`]).
const REFUSAL_LINGER: Duration = Duration::from_millis(500);

/// Bytes a refused connection may send during [`REFUSAL_LINGER`] before it is dropped.
const REFUSAL_DRAIN: usize = 64 << 10;

/// Closes the connection of a refused handshake the way that lets its alert arrive: the
/// write side first (the alert is already out), then what the client sends is read and
/// dropped until it closes, for at most [`REFUSAL_LINGER`] and [`REFUSAL_DRAIN`] bytes.
/// Under TLS 1.3 a client's handshake is done before the server has checked its
/// certificate, so its request may already be here; a socket closed with unread bytes
/// sends a reset, and the reset can overtake the alert, leaving the client with "closed"
/// where the server said "certificate required". Bounded, so a client gains nothing by it
/// that the handshake timeout does not give it already.
async fn linger(mut tcp: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = tokio::time::timeout(REFUSAL_LINGER, async {
        let _ = tcp.shutdown().await;
        let mut buf = [0u8; 4096];
        let mut drained = 0;
        while drained < REFUSAL_DRAIN {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    })
    .await;
}

/// Runs the server side of a handshake on `stream`, within the handshake timeout, and
/// counts it in `counters`: full or resumed, or the failure's kind. `None` when it failed
/// or shutdown started meanwhile (the stream is then dropped, which closes it).
pub(crate) async fn handshake(
    stream: tokio::net::TcpStream,
    acceptor: &tokio_rustls::TlsAcceptor,
    shared: &Shared,
    counters: &HandshakeCounters,
) -> Option<tokio_rustls::server::TlsStream<tokio::net::TcpStream>> {
    let timeout = shared.config.tls_settings.handshake_timeout;
    let accepting = tokio::time::timeout(timeout, acceptor.accept(stream).into_fallible());
    let done = tokio::select! {
        done = accepting => done,
        _ = super::stopping(shared.shutdown.clone()) => return None,
    };
    match done {
        Ok(Ok(mut stream)) => {
            let resumed =
                stream.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
            counters.succeeded(resumed);
            stream.get_mut().1.set_buffer_limit(Some(TLS_BUFFER_LIMIT));
            Some(stream)
        }
        Ok(Err((e, tcp))) => {
            counters.failed(failure_kind(&e));
            linger(tcp).await;
            None
        }
        Err(_elapsed) => {
            counters.failed(HandshakeFailure::Timeout);
            None
        }
    }
}

/// A raw frame connection over TLS: the socket, blocking while busy, and its rustls state.
///
/// The frame code reads and writes through `&TlsFrames` (as it does through `&TcpStream`),
/// so the rustls state sits behind a mutex; only the connection's one thread ever takes
/// it, so it is never contended (an uncontended lock is two atomic operations per read).
pub(super) struct TlsFrames {
    sock: TcpStream,
    tls: Mutex<rustls::ServerConnection>,
}

impl TlsFrames {
    /// Runs `f` on a rustls stream over the socket.
    fn with<T>(
        &self,
        f: impl FnOnce(&mut rustls::Stream<'_, rustls::ServerConnection, &TcpStream>) -> T,
    ) -> T {
        let mut tls = self.tls.lock().unwrap_or_else(|p| p.into_inner());
        let mut sock = &self.sock;
        f(&mut rustls::Stream::new(&mut *tls, &mut sock))
    }
}

impl Read for &TlsFrames {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.with(|s| s.read(buf)) {
            // A client that closes without close_notify has still closed: the frame code
            // tells a clean close from one mid-frame by what it has buffered.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(0),
            res => res,
        }
    }
}

impl Write for &TlsFrames {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.with(|s| s.write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.with(|s| s.flush())
    }
}

impl FrameStream for TlsFrames {
    type Parked = (tokio::net::TcpStream, rustls::ServerConnection);
    const COUNTERS: fn(&Stats) -> &ProtoCounters = |s| &s.tls;
    const THREAD_NAME: &'static str = super::THREAD_NAMES[4];

    fn set_timeouts(&self, read: Duration, write: Duration) -> std::io::Result<()> {
        self.sock.set_read_timeout(Some(read))?;
        self.sock.set_write_timeout(Some(write))
    }

    fn park(self) -> std::io::Result<Self::Parked> {
        // Parked for a read only after one timed out, so rustls holds no plaintext the
        // frame code has not taken: what wakes the connection is new bytes on the socket.
        // Parked for a write, rustls may hold records the client has not taken: the frame
        // code flushes them first when the socket is writable again.
        let tls = self.tls.into_inner().unwrap_or_else(|p| p.into_inner());
        Ok((FrameStream::park(self.sock)?, tls))
    }

    async fn readable(parked: &Self::Parked) -> std::io::Result<usize> {
        <TcpStream as FrameStream>::readable(&parked.0).await
    }

    async fn writable(parked: &Self::Parked) -> std::io::Result<()> {
        parked.0.writable().await
    }

    fn unpark((sock, tls): Self::Parked) -> std::io::Result<Self> {
        Ok(TlsFrames {
            sock: <TcpStream as FrameStream>::unpark(sock)?,
            tls: Mutex::new(tls),
        })
    }
}

/// Accepts `--tls` connections until shutdown starts: each handshakes on a task of its
/// own, then is served by the raw frame code.
pub(super) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, tls: Arc<ServerTls>) {
    let frames = super::tcp::Listener::<TlsFrames>::new(shared.clone());
    while let Some((stream, guard)) = shared.next_connection(&listener, |s: &Stats| &s.tls).await {
        let (shared, tls, frames) = (shared.clone(), tls.clone(), frames.clone());
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let Some(stream) =
                handshake(stream, &tls.frames, &shared, &shared.stats.tls_handshakes).await
            else {
                return;
            };
            match to_blocking(stream) {
                Ok(conn) => frames.serve(conn, guard),
                Err(_) => shared.stats.reject(Reject::IoError),
            }
        });
    }
}

/// Turns a handshaken tokio stream into a blocking [`TlsFrames`], writing out whatever
/// rustls still has to send (TLS 1.3 session tickets).
fn to_blocking(
    stream: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
) -> std::io::Result<TlsFrames> {
    let (sock, mut tls) = stream.into_inner();
    let mut sock = <TcpStream as FrameStream>::unpark(sock)?;
    while tls.wants_write() {
        tls.write_tls(&mut sock)?;
    }
    Ok(TlsFrames {
        sock,
        tls: Mutex::new(tls),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaf_on_every_address_covers_the_host_s_addresses() {
        let host: [IpAddr; 2] = ["192.0.2.2".parse().unwrap(), "2001:db8::2".parse().unwrap()];
        let names = leaf_names("echo.test", ["0.0.0.0".parse().unwrap()], &host);
        assert_eq!(
            names,
            [
                "echo.test",
                "localhost",
                "127.0.0.1",
                "::1",
                "192.0.2.2",
                "2001:db8::2"
            ]
        );
        let names = leaf_names("echo.test", ["10.0.0.2".parse().unwrap()], &host);
        assert_eq!(names, ["echo.test", "localhost", "10.0.0.2"]);
    }
}
