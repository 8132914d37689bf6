//! Command-line front ends: argument definitions (clap derive) and the code that turns
//! parsed arguments into a run. The binaries in `bin/` only call [`echo::main`],
//! [`rpcbench::main`] and [`link::main`].
//!
//! Layer 8 of the map in `lib.rs` (CLI): uses anything: it is the top, and `bin/` only calls into it.

pub mod agent;
pub mod bench;
pub mod dns;
pub mod echo;
pub mod link;
pub mod manuals;
pub mod report;
pub mod rpcbench;
pub mod sweep;

pub use crate::units::{parse_duration, parse_positive_duration};
use std::net::SocketAddr;

/// Exit status: the run finished and nothing failed beyond what was allowed.
pub const EXIT_OK: u8 = 0;
/// Exit status: calls were lost, mismatched or failed (client), or the server could not
/// start (server).
pub const EXIT_FAILED: u8 = 1;
/// Exit status: bad usage (clap uses the same code for its own errors).
pub const EXIT_USAGE: u8 = 2;

/// Bad usage found after parsing (flags that conflict, a format a subcommand does not
/// print): the program's front end says it as clap would, with its usage, and exits
/// [`EXIT_USAGE`].
#[derive(Debug, thiserror::Error)]
#[error("{why}")]
pub struct UsageError {
    pub kind: clap::error::ErrorKind,
    pub why: String,
}

/// Parses a call rate per second, from one call per 1000 s to one per nanosecond, with an
/// optional `k` (thousand) or `m` (million) suffix: `200`, `0.5`, `5k`, `1.5m`.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (number, scale) = match lower.strip_suffix('k') {
        Some(n) => (n, 1e3),
        None => match lower.strip_suffix('m') {
            Some(n) => (n, 1e6),
            None => (lower.as_str(), 1.0),
        },
    };
    match number.parse::<f64>().map(|r| r * scale) {
        Ok(r) if (1e-3..=1e9).contains(&r) => Ok(r),
        _ => Err(format!(
            "{text:?} is not a rate (calls per second from 0.001 to 1e9, e.g. 200, 0.5 or 5k)"
        )),
    }
}

/// A listen address, or `None` for a listener turned `off`.
///
/// A newtype because clap reads a bare `Option` field as "flag may be absent".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listen(pub Option<SocketAddr>);

/// Parses a listen address, or `off` to disable a listener.
pub fn parse_listen(text: &str) -> Result<Listen, String> {
    if text.eq_ignore_ascii_case("off") {
        return Ok(Listen(None));
    }
    text.parse()
        .map(|a| Listen(Some(a)))
        .map_err(|_| format!("{text:?} is not IP:PORT or off"))
}

pub use crate::units::parse_bytes;

/// A usage error as one line: clap's message, without its `error: ` prefix, with its
/// hints (`[possible values: …]`, `tip: …`) folded onto the same line, and without the
/// usage block and the pointer to `--help` that clap adds below, so a script's log shows
/// what was wrong in one line.
pub fn usage_line(err: &clap::Error) -> String {
    let text = err.render().to_string();
    let mut parts = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !line.is_empty() {
            parts.push(line);
        }
    }
    let line = parts.join(" ");
    line.strip_prefix("error: ").unwrap_or(&line).to_string()
}

/// Exits for a clap error: 0 after `--help` or `--version` (clap prints them), else 2
/// with `PROGRAM: <usage_line>` on stderr.
pub fn usage_exit(program: &str, e: clap::Error) -> ! {
    if !e.use_stderr() {
        e.exit();
    }
    eprintln!("{program}: {}", usage_line(&e));
    std::process::exit(EXIT_USAGE.into());
}

/// Prints an error chain on one line, the way both binaries report failures.
pub fn one_line(err: &anyhow::Error) -> String {
    err.chain()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("10us"), Ok(Duration::from_micros(10)));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
        assert_eq!(parse_positive_duration("1ms"), Ok(Duration::from_millis(1)));
        for zero in ["0", "0s", "0ms", "0.0s"] {
            assert!(parse_positive_duration(zero).is_err(), "{zero:?} accepted");
        }
    }

    #[test]
    fn listen_addresses() {
        assert_eq!(parse_listen("off"), Ok(Listen(None)));
        assert_eq!(
            parse_listen("0.0.0.0:7001"),
            Ok(Listen(Some(SocketAddr::from(([0, 0, 0, 0], 7001)))))
        );
        assert!(parse_listen("localhost:1").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("200"), Ok(200.0));
        assert_eq!(parse_rate("0.5"), Ok(0.5));
        assert_eq!(parse_rate("5k"), Ok(5000.0));
        assert_eq!(parse_rate("1.5M"), Ok(1.5e6));
        for bad in ["0", "-5", "NaN", "inf", "1e10", "0.0001", "fast", ""] {
            assert!(parse_rate(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("64"), Ok(64));
        assert_eq!(parse_bytes("16MiB"), Ok(16 << 20));
        assert_eq!(parse_bytes("4k"), Ok(4096));
        assert!(parse_bytes("5GiB").is_err());
        assert!(parse_bytes("x").is_err());
    }
}
