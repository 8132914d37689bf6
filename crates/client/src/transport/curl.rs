//! What the two libcurl transports share: the handle set-up, one transfer, and reading the
//! reply headers and libcurl's own timers.

use super::http::parse_server_timing;
use super::tls::TlsFailure;
use super::{Call, CallError, ConnectFailure, Endpoint, Phases};
use crate::resolve::AddrMode;
use crate::wire::SEQ_HEADER;
use curl::easy::{Easy2, Handler, List, WriteError};
use std::time::Duration;

/// Collects one transfer's body and the two reply headers rpcbench reads.
#[derive(Debug, Default)]
pub(super) struct Collector {
    pub body: Vec<u8>,
    pub seq: Option<u64>,
    pub server: Option<super::ServerTime>,
    /// The largest body taken (the call's `max_reply`).
    pub max_body: usize,
    /// The body went past `max_body`: the transfer was stopped there.
    pub too_large: bool,
}

impl Handler for Collector {
    fn write(&mut self, data: &[u8]) -> Result<usize, WriteError> {
        if self.body.len() + data.len() > self.max_body {
            // Taking less than was handed stops the transfer (CURLE_WRITE_ERROR).
            self.too_large = true;
            return Ok(0);
        }
        self.body.extend_from_slice(data);
        Ok(data.len())
    }

    fn header(&mut self, line: &[u8]) -> bool {
        let Ok(line) = std::str::from_utf8(line) else {
            return true;
        };
        if line.starts_with("HTTP/") {
            // A new status line (after a 100 Continue, say): forget the previous headers.
            self.seq = None;
            self.server = None;
        } else if let Some((name, value)) = line.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case(SEQ_HEADER) {
                self.seq = value.parse().ok();
            } else if name.eq_ignore_ascii_case("server-timing") {
                self.server = parse_server_timing(value.as_bytes());
            }
        }
        true
    }
}

/// A new easy handle with the options every transfer uses; `pin` is a `CURLOPT_RESOLVE`
/// entry from [`Endpoint::curl_pin`].
pub(super) fn new_handle(
    timeout: Duration,
    pin: Option<String>,
    endpoint: &Endpoint,
) -> Result<Easy2<Collector>, curl::Error> {
    let mut easy = Easy2::new(Collector::default());
    // HTTP/1.1 in every security mode: over TLS libcurl would otherwise offer h2 by ALPN,
    // and `curl-fresh tls13` against `curl-fresh` would compare HTTP/2 with HTTP/1.1.
    easy.http_version(curl::easy::HttpVersion::V11)?;
    match &endpoint.tls {
        Some(tls) => tls.options().apply_to_curl(tls.security(), &mut easy)?,
        // A reply without an HTTP status line is taken as HTTP/0.9 rather than failed
        // as "unsupported protocol", so its bytes reach `perform`, which tells a TLS
        // port's alert (a plain client calling a TLS port) from other garbage.
        None => easy.http_09_allowed(true)?,
    }
    if let Some(pin) = pin {
        let mut list = List::new();
        list.append(&pin)?;
        easy.resolve(list)?;
    }
    // Worker threads must not get SIGALRM from libcurl's resolver timeouts.
    easy.signal(false)?;
    easy.timeout(timeout)?;
    easy.connect_timeout(timeout)?;
    easy.tcp_nodelay(true)?;
    Ok(easy)
}

/// Performs one `POST /echo` on `easy`. Fills `phases` from libcurl's timers, and adds the
/// connections this transfer opened to `new_connections`. `fresh_handle` says the handle
/// has no DNS cache yet, so in mode `system` opening a connection means libcurl resolved.
pub(super) fn perform(
    easy: &mut Easy2<Collector>,
    endpoint: &Endpoint,
    call: &Call,
    phases: &mut Phases,
    new_connections: &mut u64,
    fresh_handle: bool,
) -> Result<(), CallError> {
    let setup = |easy: &mut Easy2<Collector>| -> Result<(), curl::Error> {
        easy.url(&endpoint.echo_url(call))?;
        easy.post(true)?;
        easy.post_fields_copy(call.payload)?;
        let mut headers = List::new();
        headers.append(&format!("{SEQ_HEADER}: {}", call.seq))?;
        headers.append(&format!("Content-Type: {}", call.content_type()))?;
        if let Some((name, value)) = call.operation_header() {
            headers.append(&format!("{name}: {value}"))?;
        }
        // libcurl 7.x waits for "100 Continue" before sending bodies over 1 KiB; that
        // round trip is not part of the call we mean to measure.
        headers.append("Expect:")?;
        easy.http_headers(headers)
    };
    setup(easy).map_err(|_| CallError::Protocol)?;
    let collector = easy.get_mut();
    collector.body.clear();
    collector.seq = None;
    collector.server = None;
    collector.max_body = call.max_reply;
    collector.too_large = false;
    let result = easy.perform();
    let opened = easy.num_connects().unwrap_or(0);
    *new_connections += opened;
    if opened > 0 {
        let (lookup, connected) = (easy.namelookup_time(), easy.connect_time());
        if let (Ok(lookup), Ok(connected)) = (lookup, connected) {
            phases.connect = Some(connected.saturating_sub(lookup));
            if endpoint.tls.is_some() {
                // CURLINFO_APPCONNECT_TIME: when the TLS handshake was done, counted from
                // the start like the connect time, so the handshake is the difference.
                phases.tls = easy
                    .appconnect_time()
                    .ok()
                    .map(|done| done.saturating_sub(connected));
            }
            if endpoint.names.mode() == AddrMode::System {
                // libcurl did the lookup; its timer is the only one that saw it.
                phases.dns = Some(lookup);
                if fresh_handle {
                    endpoint.names.count_outside_lookup();
                }
            }
        }
    }
    if result.is_err() && easy.get_ref().too_large {
        return Err(CallError::ReplyTooLarge);
    }
    if let Err(e) = result {
        // On a reused connection libcurl reports no connect and a connect time of 0, so
        // "the request went out" (a pre-transfer time) is what tells a lost reply from a
        // failed connect.
        let connected = opened > 0 || easy.pretransfer_time().is_ok_and(|t| !t.is_zero());
        // Timed out after the TCP connect but before the TLS handshake was done: the
        // server stalled mid-handshake, which is neither a lost reply nor a connect error.
        // libcurl 7.88 counts a connection in NUM_CONNECTS once TCP connected, but sets the
        // CONNECT time only once the whole connection (TLS included) is up, so a stalled
        // handshake reads as a connection opened with no connect or APPCONNECT time; an
        // unanswered SYN as no connection at all.
        let handshaking = endpoint.tls.is_some()
            && opened > 0
            && easy.appconnect_time().is_ok_and(|t| t.is_zero());
        if e.is_operation_timedout() && handshaking {
            return Err(CallError::Tls(TlsFailure::HandshakeTimeout));
        }
        return Err(classify(&e, connected));
    }
    if let (Ok(pre), Ok(start)) = (easy.pretransfer_time(), easy.starttransfer_time()) {
        phases.first_byte = Some(start.saturating_sub(pre));
    }
    // CURLINFO_REQUEST_SIZE: the request as sent, its body included; CURLINFO_HEADER_SIZE
    // and CURLINFO_SIZE_DOWNLOAD: the reply's head and body.
    if let (Ok(sent), Ok(head), Ok(body)) = (
        easy.request_size(),
        easy.header_size(),
        easy.download_size(),
    ) {
        phases.wire_bytes = Some((sent, head + body as u64));
    }
    match easy.response_code() {
        Ok(code) if call.takes_status(code as u16) => Ok(()),
        // No status line: an HTTP/0.9 reply (allowed on plain handles, see
        // `new_handle`), which is the whole of what came. A TLS port's alert is one.
        Ok(0) if super::tls::looks_like_tls(&easy.get_ref().body) => {
            Err(CallError::Tls(TlsFailure::TlsServer))
        }
        Ok(0) => Err(CallError::Protocol),
        Ok(code) => Err(CallError::HttpStatus(code as u16)),
        Err(_) => Err(CallError::Protocol),
    }
}

/// Maps a libcurl error to how the call ended. `connected` tells a timeout while waiting
/// for the reply (lost) from one while connecting (a connect error).
fn classify(e: &curl::Error, connected: bool) -> CallError {
    tracing::debug!("libcurl: {e}");
    if let Some(failure) = tls_failure(e) {
        CallError::Tls(failure)
    } else if e.is_couldnt_connect() {
        CallError::Connect(ConnectFailure::Refused)
    } else if e.is_operation_timedout() {
        if connected {
            CallError::Timeout
        } else {
            CallError::Connect(ConnectFailure::TimedOut)
        }
    } else if e.is_got_nothing() || e.is_recv_error() || e.is_partial_file() || e.is_send_error() {
        CallError::Closed
    } else if e.is_ssl_connect_error() {
        CallError::Tls(TlsFailure::Other)
    } else if e.is_couldnt_resolve_host() {
        CallError::Dns(crate::resolve::LookupNameError::NoAddress)
    } else {
        CallError::Protocol
    }
}

/// What a libcurl error says about TLS, from its code and its error buffer (OpenSSL's
/// words, which tell apart what the code alone does not: error 60 is every failed
/// verification, and a refused client certificate arrives as a receive error).
fn tls_failure(e: &curl::Error) -> Option<TlsFailure> {
    let text = e.extra_description().unwrap_or("").to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| text.contains(w));
    if e.is_operation_timedout() && has(&["ssl connection timeout", "tls connection timeout"]) {
        return Some(TlsFailure::HandshakeTimeout);
    }
    // A CA of the same name as the one that signed the certificate, but another key:
    // OpenSSL takes it as the issuer and fails the signature check (EVP).
    if e.is_ssl_connect_error()
        && has(&["certificate verify failed", "signature failure", "evp lib"])
    {
        return Some(TlsFailure::Untrusted);
    }
    if e.is_peer_failed_verification() || e.is_ssl_cacert() {
        return Some(if has(&["expired", "not yet valid"]) {
            TlsFailure::Expired
        } else if has(&["subject name", "does not match", "alternative name"]) {
            TlsFailure::WrongName
        } else {
            TlsFailure::Untrusted
        });
    }
    if has(&["certificate required"]) {
        Some(TlsFailure::ClientCertRequired)
    } else if has(&[
        "unknown ca",
        "bad certificate",
        "certificate unknown",
        // The server's alert when the client's certificate names its CA but another key
        // signed it (rustls: a bad signature is `decrypt_error`).
        "alert decrypt error",
    ]) {
        Some(TlsFailure::ClientCertRefused)
    } else if has(&[
        "wrong version number",
        "packet length too long",
        "record layer failure",
    ]) || (e.is_ssl_connect_error() && has(&["ssl_error_syscall"]))
    {
        // OpenSSL read a reply that is not a TLS record, or the end of the connection
        // before the ServerHello (SSL_ERROR_SYSCALL): a plain port, which closes on a
        // ClientHello, as rustls' handshake counts an end of file there.
        Some(TlsFailure::NotTlsServer)
    } else {
        None
    }
}

/// The libcurl this process runs with, read at run time: curl-sys's build script runs once
/// and its output is cached, so a build made before the system libcurl was installed keeps
/// a bundled copy (another version, no TLS) that no check in a build script can see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkedLibcurl {
    /// `curl_version_info`'s version, e.g. `7.88.1`; a bundled build says `8.22.0-DEV`.
    pub version: String,
    /// The TLS backend and its version (`OpenSSL/3.0.17`); empty when it has none.
    pub tls: String,
    /// The shared object it was loaded from (`/proc/self/maps`); `None` when libcurl is
    /// linked into the binary itself, as the bundled build is.
    pub file: Option<String>,
}

/// The process's memory map, which names every shared object loaded.
const SELF_MAPS: &str = "/proc/self/maps";

/// The suffix of a version string that curl's own source tree carries (`8.22.0-DEV`), so a
/// libcurl built from the curl-sys crate's bundled source rather than a distribution's.
const DEV_SUFFIX: &str = "-DEV";

impl LinkedLibcurl {
    /// Reads the version from libcurl itself and the file from `/proc/self/maps`.
    pub fn detect() -> LinkedLibcurl {
        let info = ::curl::Version::get();
        let maps = std::fs::read_to_string(SELF_MAPS).unwrap_or_default();
        LinkedLibcurl {
            version: info.version().to_string(),
            tls: info.ssl_version().unwrap_or("").to_string(),
            file: libcurl_file(&maps),
        }
    }

    /// True when this is a distribution's libcurl: a shared object of its own, with a
    /// release's version.
    pub fn is_system(&self) -> bool {
        self.file.is_some() && !self.version.ends_with(DEV_SUFFIX)
    }

    /// Refuses a libcurl that is not the system's: the `curl-*` figures would then depend on
    /// which machine built rpcbench and when.
    pub fn check(&self) -> Result<(), BundledLibcurl> {
        if self.is_system() {
            Ok(())
        } else {
            Err(BundledLibcurl {
                version: self.version.clone(),
            })
        }
    }
}

/// The libcurl linked is curl-sys's bundled copy, not the system library.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "rpcbench was built with a bundled libcurl {version}, not the system's: install \
     libcurl4-openssl-dev, run `{clean}`, then build again (or leave the curl transports \
     out with --transports)",
    clean = if cfg!(debug_assertions) {
        "cargo clean -p curl-sys"
    } else {
        "cargo clean --release -p curl-sys"
    }
)]
pub struct BundledLibcurl {
    /// The version it reports.
    pub version: String,
}

/// The path of the libcurl shared object in a `/proc/PID/maps` text, if one is mapped.
fn libcurl_file(maps: &str) -> Option<String> {
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| {
            let name = path.rsplit('/').next().unwrap_or(path);
            name.starts_with("libcurl") && name.contains(".so")
        })
        .map(str::to_string)
}

#[cfg(test)]
mod linked_tests {
    use super::*;

    const MAPS: &str = "\
7f1c2a000000-7f1c2a01e000 r--p 00000000 08:01 1312 /usr/lib/x86_64-linux-gnu/libcurl.so.4.8.0
7f1c2a200000-7f1c2a21e000 r--p 00000000 08:01 1313 /usr/lib/x86_64-linux-gnu/libssl.so.3
7ffd5a000000-7ffd5a021000 rw-p 00000000 00:00 0    [stack]
";

    fn linked(version: &str, file: Option<&str>) -> LinkedLibcurl {
        LinkedLibcurl {
            version: version.to_string(),
            tls: String::new(),
            file: file.map(str::to_string),
        }
    }

    #[test]
    fn the_shared_object_is_found_in_the_maps() {
        assert_eq!(
            libcurl_file(MAPS).as_deref(),
            Some("/usr/lib/x86_64-linux-gnu/libcurl.so.4.8.0")
        );
        assert_eq!(libcurl_file("7ffd-7ffe rw-p 0 00:00 0 [stack]\n"), None);
        assert_eq!(libcurl_file(""), None);
    }

    #[test]
    fn a_bundled_libcurl_is_refused_in_one_line() {
        let so = Some("/usr/lib/x86_64-linux-gnu/libcurl.so.4.8.0");
        assert!(linked("7.88.1", so).check().is_ok());
        // curl-sys's bundled source: a -DEV version, linked into the binary.
        let err = linked("8.22.0-DEV", None).check().unwrap_err();
        let line = err.to_string();
        assert!(line.contains("bundled libcurl 8.22.0-DEV"), "{line}");
        // The clean of the profile this was built in: `cargo clean -p` alone cleans dev.
        let clean = if cfg!(debug_assertions) {
            "cargo clean -p curl-sys"
        } else {
            "cargo clean --release -p curl-sys"
        };
        assert!(line.contains(clean), "{line}");
        assert!(!line.contains('\n'), "{line}");
        // Either sign alone is enough to refuse it.
        assert!(linked("8.22.0-DEV", so).check().is_err());
        assert!(linked("7.88.1", None).check().is_err());
    }

    #[test]
    fn this_build_links_the_system_libcurl() {
        // build.rs refuses any other, and the check must agree with it here.
        let here = LinkedLibcurl::detect();
        assert!(here.is_system(), "{here:?}");
    }
}
