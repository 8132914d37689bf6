//! What the C library reads before it sends a query: `/etc/resolv.conf` (nameservers,
//! search list, options), `/etc/nsswitch.conf` (whether the hosts file comes first) and
//! `/etc/hosts`; and from them, the candidate names a lookup tries, in glibc's order.
//!
//! glibc's rules (`resolv/res_query.c`, `__res_context_search`), in short:
//! - a name with a trailing dot is tried as it is, and only so;
//! - a name with at least `ndots` dots is tried as it is first, then with each search
//!   domain appended;
//! - a name with fewer dots is tried with each search domain first, then as it is;
//! - a candidate that answers NXDOMAIN (or has no data) moves on to the next one; an
//!   answer with records ends the lookup.
//!
//! Without a `search` or `domain` line, the search list is the host name's domain (what
//! follows its first dot), when it has one.

use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::time::Duration;

/// glibc's most nameservers (`MAXNS`): later lines are ignored.
pub const MAX_NAMESERVERS: usize = 3;
/// glibc's most search domains (`MAXDNSRCH`).
pub const MAX_SEARCH: usize = 6;
/// glibc caps `ndots` at 15 (`RES_MAXNDOTS`), `timeout` at 30 s, `attempts` at 5.
const MAX_NDOTS: u32 = 15;
const MAX_TIMEOUT_S: u32 = 30;
const MAX_ATTEMPTS: u32 = 5;
/// Longest DNS name, without the trailing dot (RFC 1035: 255 octets on the wire).
pub const MAX_NAME: usize = 253;
/// Longest label.
pub const MAX_LABEL: usize = 63;

/// The resolver configuration, as glibc would read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvConf {
    /// Nameservers in order (at most [`MAX_NAMESERVERS`]).
    pub nameservers: Vec<IpAddr>,
    /// Search domains in order, without trailing dots.
    pub search: Vec<String>,
    /// Whether `search` came from the host name rather than a `search`/`domain` line.
    pub search_from_hostname: bool,
    pub ndots: u32,
    /// Seconds to wait for an answer before retrying (`timeout:`).
    pub timeout_s: u32,
    /// Rounds over the nameservers (`attempts:`).
    pub attempts: u32,
    pub rotate: bool,
    /// A and AAAA one after the other instead of together (`single-request`, or
    /// `single-request-reopen`, which also opens a new socket for the second).
    pub single_request: bool,
    pub edns0: bool,
    /// Every query over TCP (`use-vc`).
    pub use_vc: bool,
    /// Options and keywords glibc would ignore, and lines past its limits: said, not fatal.
    pub ignored: Vec<String>,
}

impl Default for ResolvConf {
    fn default() -> Self {
        ResolvConf {
            nameservers: Vec::new(),
            search: Vec::new(),
            search_from_hostname: false,
            ndots: 1,
            timeout_s: 5,
            attempts: 2,
            rotate: false,
            single_request: false,
            edns0: false,
            use_vc: false,
            ignored: Vec::new(),
        }
    }
}

/// A resolv.conf line that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file} line {line}: {text:?}: {why}")]
pub struct ParseResolvConfError {
    pub file: String,
    pub line: usize,
    pub text: String,
    pub why: String,
}

impl ResolvConf {
    /// Parses the text of a resolv.conf named `file`. `hostname` supplies the search list
    /// when the file has none.
    pub fn parse(
        text: &str,
        file: &str,
        hostname: &str,
    ) -> Result<ResolvConf, ParseResolvConfError> {
        let mut conf = ResolvConf::default();
        let mut search_set = false;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split(['#', ';']).next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |why: String| ParseResolvConfError {
                file: file.to_string(),
                line: i + 1,
                text: raw.trim().to_string(),
                why,
            };
            let mut words = line.split_whitespace();
            let keyword = words.next().unwrap_or("");
            let rest: Vec<&str> = words.collect();
            match keyword {
                "nameserver" => {
                    let [addr] = rest[..] else {
                        return Err(err("a nameserver line holds one address".into()));
                    };
                    // glibc accepts a scope on IPv6 (`fe80::1%eth0`); the address is
                    // what matters here.
                    let ip: IpAddr = addr
                        .split('%')
                        .next()
                        .unwrap_or(addr)
                        .parse()
                        .map_err(|_| err(format!("{addr:?} is not an IP address")))?;
                    if conf.nameservers.len() < MAX_NAMESERVERS {
                        conf.nameservers.push(ip);
                    } else {
                        conf.ignored.push(format!(
                            "nameserver {addr}: glibc reads only the first {MAX_NAMESERVERS}"
                        ));
                    }
                }
                // The last of `search` and `domain` wins, as in glibc.
                "search" | "domain" => {
                    if rest.is_empty() {
                        return Err(err(format!("{keyword} needs at least one domain")));
                    }
                    let mut list = Vec::new();
                    for d in &rest {
                        check_name(d).map_err(|e| err(e.to_string()))?;
                        list.push(d.trim_end_matches('.').to_ascii_lowercase());
                    }
                    if keyword == "domain" {
                        list.truncate(1);
                    }
                    if list.len() > MAX_SEARCH {
                        conf.ignored.push(format!(
                            "search domains past the first {MAX_SEARCH}: glibc ignores them"
                        ));
                        list.truncate(MAX_SEARCH);
                    }
                    conf.search = list;
                    search_set = true;
                }
                "options" => {
                    for opt in &rest {
                        conf.option(opt).map_err(err)?;
                    }
                }
                "sortlist" => conf
                    .ignored
                    .push("sortlist: orders answers, sends nothing".into()),
                other => conf.ignored.push(format!("unknown keyword {other:?}")),
            }
        }
        if !search_set
            && let Some((_, domain)) = hostname.split_once('.')
            && !domain.is_empty()
        {
            conf.search = vec![domain.to_ascii_lowercase()];
            conf.search_from_hostname = true;
        }
        Ok(conf)
    }

    /// Applies one `options` word.
    fn option(&mut self, opt: &str) -> Result<(), String> {
        let number = |value: &str, max: u32| -> Result<u32, String> {
            let n: u32 = value
                .parse()
                .map_err(|_| format!("{value:?} is not a whole number"))?;
            Ok(n.min(max))
        };
        match opt.split_once(':') {
            Some(("ndots", v)) => self.ndots = number(v, MAX_NDOTS)?,
            Some(("timeout", v)) => self.timeout_s = number(v, MAX_TIMEOUT_S)?.max(1),
            Some(("attempts", v)) => self.attempts = number(v, MAX_ATTEMPTS)?.max(1),
            Some((name, _)) => self.ignored.push(format!("option {name}")),
            None => match opt {
                "rotate" => self.rotate = true,
                "single-request" | "single-request-reopen" => self.single_request = true,
                "edns0" => self.edns0 = true,
                "use-vc" => self.use_vc = true,
                other => self.ignored.push(format!("option {other}")),
            },
        }
        Ok(())
    }

    /// The wait for one query's answer.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(u64::from(self.timeout_s))
    }

    /// The names a lookup of `name` tries, in order, each fully qualified (trailing dot).
    pub fn candidates(&self, name: &str) -> Vec<String> {
        let lower = name.to_ascii_lowercase();
        if let Some(abs) = lower.strip_suffix('.') {
            return vec![format!("{abs}.")];
        }
        let dots = lower.matches('.').count() as u32;
        let searched = self.search.iter().map(|d| format!("{lower}.{d}."));
        let as_is = format!("{lower}.");
        if dots >= self.ndots {
            std::iter::once(as_is).chain(searched).collect()
        } else {
            searched.chain(std::iter::once(as_is)).collect()
        }
    }
}

/// A name that no resolver would send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckNameError {
    #[error("the name is empty")]
    Empty,
    #[error("{name:?} is {len} bytes long; a DNS name is at most {MAX_NAME}")]
    TooLong { name: String, len: usize },
    #[error("{name:?} has a label of {len} bytes ({label:?}); a label is at most {MAX_LABEL}")]
    LabelTooLong {
        name: String,
        label: String,
        len: usize,
    },
    #[error("{name:?} has an empty label")]
    EmptyLabel { name: String },
}

/// Checks `name` against the limits of RFC 1035: at most 253 bytes (without a trailing
/// dot), labels of 1 to 63 bytes.
pub fn check_name(name: &str) -> Result<(), CheckNameError> {
    let bare = name.strip_suffix('.').unwrap_or(name);
    if bare.is_empty() {
        return Err(CheckNameError::Empty);
    }
    if bare.len() > MAX_NAME {
        return Err(CheckNameError::TooLong {
            name: name.to_string(),
            len: bare.len(),
        });
    }
    for label in bare.split('.') {
        if label.is_empty() {
            return Err(CheckNameError::EmptyLabel {
                name: name.to_string(),
            });
        }
        if label.len() > MAX_LABEL {
            return Err(CheckNameError::LabelTooLong {
                name: name.to_string(),
                label: label.to_string(),
                len: label.len(),
            });
        }
    }
    Ok(())
}

/// Where the `hosts:` line of nsswitch.conf sends a lookup, in order (`files`, `dns`,
/// `myhostname`, `resolve`...); without a `hosts:` line, `files dns`, what every
/// distribution ships.
pub fn hosts_sources(nsswitch: Option<&str>) -> Vec<String> {
    nsswitch
        .and_then(|text| {
            text.lines()
                .map(|l| l.split('#').next().unwrap_or("").trim())
                .find_map(|l| l.strip_prefix("hosts:"))
                .map(|rest| {
                    rest.split_whitespace()
                        // `[NOTFOUND=return]` and friends are actions, not sources.
                        .filter(|w| !w.starts_with('['))
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| vec!["files".into(), "dns".into()])
}

/// The addresses `/etc/hosts` (its text) gives `name`, case-insensitively.
pub fn hosts_lookup(hosts: &str, name: &str) -> Vec<IpAddr> {
    let name = name.trim_end_matches('.');
    hosts
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let ip: IpAddr = words.next()?.parse().ok()?;
            words.any(|w| w.eq_ignore_ascii_case(name)).then_some(ip)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(text: &str) -> ResolvConf {
        ResolvConf::parse(text, "resolv.conf", "host").unwrap()
    }

    #[test]
    fn search_list_order_follows_ndots() {
        let c = conf("nameserver 10.0.0.2\nsearch a.test b.test\noptions ndots:5 timeout:1\n");
        assert_eq!(c.ndots, 5);
        assert_eq!(c.timeout_s, 1);
        assert_eq!(
            c.candidates("echo.svc"),
            ["echo.svc.a.test.", "echo.svc.b.test.", "echo.svc."]
        );
        assert_eq!(c.candidates("echo.svc."), ["echo.svc."], "a trailing dot");
        let one = conf("search a.test\n");
        assert_eq!(one.ndots, 1);
        assert_eq!(
            one.candidates("echo.svc"),
            ["echo.svc.", "echo.svc.a.test."]
        );
        assert_eq!(one.candidates("Echo"), ["echo.a.test.", "echo."]);
    }

    #[test]
    fn options_and_limits() {
        let c = conf(
            "nameserver 1.1.1.1\nnameserver ::1\nnameserver 10.0.0.1\nnameserver 10.0.0.2\n\
             options rotate single-request edns0 use-vc ndots:99 attempts:9 timeout:0 inet6\n\
             domain one.test\nsortlist 10.0.0.0\n# comment\n",
        );
        assert_eq!(c.nameservers.len(), 3);
        assert!(c.rotate && c.single_request && c.edns0 && c.use_vc);
        assert_eq!((c.ndots, c.attempts, c.timeout_s), (15, 5, 1));
        assert_eq!(c.search, ["one.test"]);
        assert_eq!(c.ignored.len(), 3, "{:?}", c.ignored);
        let from_host = ResolvConf::parse("", "f", "box.corp.test").unwrap();
        assert_eq!(from_host.search, ["corp.test"]);
        assert!(from_host.search_from_hostname);
    }

    #[test]
    fn bad_lines_name_their_line() {
        for (text, line) in [
            ("nameserver\n", 1),
            ("# ok\nnameserver not-an-ip\n", 2),
            ("options ndots:x\n", 1),
            ("search\n", 1),
            ("search a..b\n", 1),
        ] {
            let e = ResolvConf::parse(text, "rc", "h").unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(
                e.to_string().starts_with(&format!("rc line {line}: ")),
                "{e}"
            );
        }
    }

    #[test]
    fn names_past_the_limits_are_refused() {
        assert!(check_name("echo.svc").is_ok());
        assert!(check_name("echo.svc.").is_ok());
        assert!(matches!(check_name(""), Err(CheckNameError::Empty)));
        let long = format!("{}.test", "a".repeat(64));
        assert!(matches!(
            check_name(&long),
            Err(CheckNameError::LabelTooLong { len: 64, .. })
        ));
        let many = vec!["abcdefghi"; 26].join(".");
        assert!(matches!(
            check_name(&many),
            Err(CheckNameError::TooLong { .. })
        ));
    }

    #[test]
    fn nsswitch_and_hosts() {
        assert_eq!(hosts_sources(None), ["files", "dns"]);
        assert_eq!(
            hosts_sources(Some(
                "passwd: files\nhosts: files [NOTFOUND=return] dns # x\n"
            )),
            ["files", "dns"]
        );
        assert_eq!(hosts_sources(Some("hosts: dns files\n")), ["dns", "files"]);
        let hosts = "127.0.0.1 localhost\n10.0.0.9 echo.svc Echo # c\n";
        assert_eq!(hosts_lookup(hosts, "ECHO."), [IpAddr::from([10, 0, 0, 9])]);
        assert!(hosts_lookup(hosts, "other").is_empty());
    }
}
