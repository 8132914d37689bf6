//! What the HTTP transports share: a worker's runtime for the async clients (h2, gRPC),
//! reading the reply headers the server adds (the seq, `server-timing`), and classifying
//! hyper's errors. HTTP/1.1 (`http-keepalive`, `http-fresh`) speaks through the lean codec
//! in `h1.rs`.

use super::{CallError, OpenTransportError, ServerTime};
use crate::wire::SEQ_HEADER;
use hyper::header::HeaderMap;
use std::time::Duration;

/// A current-thread runtime for one worker's hyper transport: the worker blocks on it for
/// each call, so the async client runs on the worker's own thread with no hand-off.
pub(super) fn worker_runtime() -> Result<tokio::runtime::Runtime, OpenTransportError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(OpenTransportError::Runtime)
}

/// The sequence number in the reply's `x-rpcbench-seq`, if present and numeric.
pub(super) fn header_seq(headers: &HeaderMap) -> Option<u64> {
    headers.get(SEQ_HEADER)?.to_str().ok()?.trim().parse().ok()
}

/// The server time in a `server-timing: app;dur=<ms>` header.
pub(super) fn server_timing(headers: &HeaderMap) -> Option<ServerTime> {
    parse_server_timing(headers.get("server-timing")?.as_bytes())
}

/// Nanoseconds in a millisecond.
const NS_PER_MS: u64 = 1_000_000;

/// Parses `app;dur=<milliseconds>` (the first metric with a `dur`) as the total, and the
/// metrics `dec` and `enc` (an encoded call's decode and encode, rpcbench-echo's names)
/// when present. Read on every call of every HTTP transport, so the usual form (digits, a
/// point, digits) is read digit by digit, exact to the nanosecond; anything else (an
/// exponent, say) goes through `f64`.
pub fn parse_server_timing(value: &[u8]) -> Option<ServerTime> {
    let mut time: Option<ServerTime> = None;
    let (mut decode, mut encode) = (None, None);
    for metric in value.split(|&b| b == b',') {
        let name = metric
            .split(|&b| b == b';')
            .next()
            .unwrap_or(&[])
            .trim_ascii();
        let Some(took) = metric_dur(metric) else {
            continue;
        };
        match name {
            b"dec" => decode = Some(took),
            b"enc" => encode = Some(took),
            _ => {}
        }
        time.get_or_insert(ServerTime::from(took));
    }
    let mut time = time?;
    time.decode = decode;
    time.encode = encode;
    Some(time)
}

/// The `dur` of one `server-timing` metric.
fn metric_dur(metric: &[u8]) -> Option<Duration> {
    let at = metric.windows(DUR.len()).position(|w| w == DUR)? + DUR.len();
    let rest = &metric[at..];
    let end = rest.iter().position(|&b| b == b';').unwrap_or(rest.len());
    let ms = rest[..end].trim_ascii();
    decimal_ms(ms).or_else(|| {
        let ms: f64 = std::str::from_utf8(ms).ok()?.parse().ok()?;
        Duration::try_from_secs_f64(ms / 1e3).ok()
    })
}

/// The parameter of a `server-timing` metric that holds its duration.
const DUR: &[u8] = b"dur=";

/// `<digits>[.<digits>]` milliseconds, or `None` for any other form.
fn decimal_ms(ms: &[u8]) -> Option<Duration> {
    let (whole, frac) = match ms.iter().position(|&b| b == b'.') {
        Some(dot) => (&ms[..dot], &ms[dot + 1..]),
        None => (ms, &[][..]),
    };
    if whole.is_empty() || !whole.iter().chain(frac).all(u8::is_ascii_digit) {
        return None;
    }
    let digits = |d: &[u8]| {
        d.iter().try_fold(0u64, |n, &b| {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        })
    };
    // Digits past the nanosecond are dropped, as a float would round them away.
    let frac = &frac[..frac.len().min(NS_PER_MS.ilog10() as usize)];
    let frac_ns = digits(frac)? * 10u64.pow(NS_PER_MS.ilog10() - frac.len() as u32);
    Some(Duration::from_nanos(
        digits(whole)?
            .checked_mul(NS_PER_MS)?
            .checked_add(frac_ns)?,
    ))
}

/// Maps a hyper error to how the call ended.
pub(super) fn classify(e: &hyper::Error) -> CallError {
    if let Some(failure) = super::tls::TlsFailure::in_chain(e) {
        return CallError::Tls(failure);
    }
    if let Some(io) = std::error::Error::source(e).and_then(|s| s.downcast_ref::<std::io::Error>())
    {
        return CallError::from_io(io);
    }
    if e.is_timeout() {
        CallError::Timeout
    } else if e.is_closed() || e.is_incomplete_message() || e.is_canceled() {
        CallError::Closed
    } else {
        CallError::Protocol
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_timing_values() {
        let parse = |v: &str| parse_server_timing(v.as_bytes()).map(|t| t.total);
        assert_eq!(parse("app;dur=1.500"), Some(Duration::from_micros(1500)));
        assert_eq!(parse("app; dur=0.001"), Some(Duration::from_micros(1)));
        assert_eq!(parse("app;dur=12"), Some(Duration::from_millis(12)));
        assert_eq!(parse("app;dur=0.0000015"), Some(Duration::from_nanos(1)));
        assert_eq!(
            parse("app;dur=2.5, db;dur=1"),
            Some(Duration::from_micros(2500))
        );
        assert_eq!(parse("app;dur=1e-3"), Some(Duration::from_micros(1)));
        assert_eq!(parse("app"), None);
        assert_eq!(parse("app;dur=x"), None);
        assert_eq!(parse("app;dur=-1"), None);
        let split = parse_server_timing(b"app;dur=0.030, dec;dur=0.004, enc;dur=0.002").unwrap();
        assert_eq!(
            (split.total, split.decode, split.encode),
            (
                Duration::from_micros(30),
                Some(Duration::from_micros(4)),
                Some(Duration::from_micros(2))
            )
        );
        let alone = parse_server_timing(b"app;dur=0.030").unwrap();
        assert_eq!((alone.decode, alone.encode), (None, None));
    }
}
