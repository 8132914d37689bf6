//! The peer list: a YAML list of hosts to probe, read from a file or an `http://` URL,
//! checked as a whole, and read again while the agent runs.
//!
//! ```yaml
//! - name: node-a          # the `peer` label; unique in the list
//!   address: 10.0.0.1     # IP literal or DNS name
//!   tcp_port: 7001        # optional (default 7001)
//!   http_port: 7080       # optional (default 7080)
//!   labels: {zone: eu-1, rack: r12}   # optional, added to every series of the peer
//! ```
//!
//! A list is taken whole or not at all: one bad entry rejects the file, and the agent goes
//! on with the last good list (a half-applied list would silently stop probing peers).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

/// The raw TCP port a peer's echo server listens on unless its entry says otherwise
/// (rpcbench-echo's default).
pub const DEFAULT_TCP_PORT: u16 = 7001;

/// The HTTP port a peer's echo server listens on unless its entry says otherwise
/// (rpcbench-echo's default).
pub const DEFAULT_HTTP_PORT: u16 = 7080;

/// Most labels of its own one peer may carry: each is a label on every series of the
/// peer, and Prometheus's cost grows with labels per series.
pub const MAX_PEER_LABELS: usize = 16;

/// Longest peer list file or URL body read: 1,000 peers with a few labels each is about
/// 150 KiB, so 4 MiB leaves room for the largest list `--max-peers` allows without letting
/// a wrong URL fill the agent's memory.
pub const MAX_LIST_BYTES: usize = 4 << 20;

/// Labels every series already has; a peer's own labels may not reuse them.
pub const RESERVED_LABELS: [&str; 7] = [
    "peer",
    "address",
    "transport",
    "mode",
    "outcome",
    "phase",
    "le",
];

/// One host to probe, as its list entry gives it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Peer {
    /// Its name: the `peer` label, unique in the list.
    pub name: String,
    /// An IP literal or a DNS name, resolved per the agent's address mode.
    pub address: String,
    /// The raw TCP port of its echo server.
    #[serde(default = "default_tcp_port")]
    pub tcp_port: u16,
    /// The HTTP port of its echo server.
    #[serde(default = "default_http_port")]
    pub http_port: u16,
    /// Labels of its own (zone, rack, ...), added to every series of the peer.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

fn default_tcp_port() -> u16 {
    DEFAULT_TCP_PORT
}

fn default_http_port() -> u16 {
    DEFAULT_HTTP_PORT
}

/// Why a peer list was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReadPeersError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The URL could not be fetched, or did not answer 200.
    #[error("cannot fetch {url}: {why}")]
    Fetch { url: String, why: String },
    /// The text is longer than [`MAX_LIST_BYTES`].
    #[error("the peer list is longer than {MAX_LIST_BYTES} bytes")]
    TooLong,
    /// The text is not YAML, or not a list of peers.
    #[error("not a YAML list of peers: {0}")]
    Yaml(String),
    /// An entry breaks a rule the YAML shape cannot express.
    #[error("peer {index} ({name:?}): {why}")]
    Entry {
        index: usize,
        name: String,
        why: String,
    },
    /// More peers than `--max-peers` allows.
    #[error("{count} peers, more than --max-peers {max}")]
    TooMany { count: usize, max: usize },
}

/// Where the list comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerSource {
    /// A file, read again when its content changes.
    File(PathBuf),
    /// An `http://` URL, fetched again every reload interval.
    Url(String),
}

impl PeerSource {
    /// `http://...` is a URL, anything else a file path. `https://` is refused: the agent
    /// has no TLS client.
    pub fn parse(text: &str) -> Result<PeerSource, String> {
        if text.starts_with("http://") {
            text.parse::<hyper::Uri>()
                .map_err(|e| format!("{text:?} is not a URL: {e}"))?;
            Ok(PeerSource::Url(text.to_string()))
        } else if text.starts_with("https://") {
            Err(format!(
                "{text:?}: the agent fetches peer lists over http:// only"
            ))
        } else {
            Ok(PeerSource::File(PathBuf::from(text)))
        }
    }

    /// Reads the list's raw text (at most [`MAX_LIST_BYTES`]), giving up after `timeout`
    /// for a URL.
    pub async fn fetch(&self, timeout: Duration) -> Result<String, ReadPeersError> {
        match self {
            PeerSource::File(path) => {
                // Off the runtime's thread: a file on a network file system can block.
                let owned = path.clone();
                let read = tokio::task::spawn_blocking(move || std::fs::read(owned)).await;
                let bytes = read
                    .unwrap_or_else(|e| Err(std::io::Error::other(e)))
                    .map_err(|source| ReadPeersError::Read {
                        path: path.display().to_string(),
                        source,
                    })?;
                if bytes.len() > MAX_LIST_BYTES {
                    return Err(ReadPeersError::TooLong);
                }
                String::from_utf8(bytes).map_err(|_| ReadPeersError::Yaml("not UTF-8".into()))
            }
            PeerSource::Url(url) => match tokio::time::timeout(timeout, get(url)).await {
                Ok(res) => res,
                Err(_) => Err(ReadPeersError::Fetch {
                    url: url.clone(),
                    why: format!("no answer within {timeout:?}"),
                }),
            },
        }
    }
}

impl std::fmt::Display for PeerSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerSource::File(p) => write!(f, "{}", p.display()),
            PeerSource::Url(u) => f.write_str(u),
        }
    }
}

/// `GET url`, its body as text when it answers 200.
async fn get(url: &str) -> Result<String, ReadPeersError> {
    use http_body_util::{BodyExt, Empty, Limited};
    let fail = |why: String| ReadPeersError::Fetch {
        url: url.to_string(),
        why,
    };
    let uri: hyper::Uri = url.parse().map_err(|e| fail(format!("{e}")))?;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<bytes::Bytes>>();
    let resp = client.get(uri).await.map_err(|e| fail(format!("{e}")))?;
    if resp.status() != hyper::StatusCode::OK {
        return Err(fail(format!("HTTP status {}", resp.status().as_u16())));
    }
    let body = Limited::new(resp.into_body(), MAX_LIST_BYTES)
        .collect()
        .await
        .map_err(|_| ReadPeersError::TooLong)?
        .to_bytes();
    String::from_utf8(body.to_vec()).map_err(|_| ReadPeersError::Yaml("not UTF-8".into()))
}

/// Parses and checks a whole list: YAML shape, then every entry's rules, then the cap.
pub fn parse(text: &str, max_peers: usize) -> Result<Vec<Peer>, ReadPeersError> {
    // An empty file is an empty list (every peer removed), not a YAML error.
    let peers: Vec<Peer> = if text.trim().is_empty() {
        Vec::new()
    } else {
        serde_saphyr::from_str(text).map_err(|e| {
            // The error carries a multi-line snippet of the text; the log wants one line.
            let msg = e.to_string();
            ReadPeersError::Yaml(msg.lines().next().unwrap_or("").trim().to_string())
        })?
    };
    if peers.len() > max_peers {
        return Err(ReadPeersError::TooMany {
            count: peers.len(),
            max: max_peers,
        });
    }
    let mut names = BTreeSet::new();
    for (index, peer) in peers.iter().enumerate() {
        let bad = |why: String| ReadPeersError::Entry {
            index,
            name: peer.name.clone(),
            why,
        };
        if peer.name.is_empty() {
            return Err(bad("empty name".into()));
        }
        if !names.insert(peer.name.as_str()) {
            return Err(bad("the name is used twice".into()));
        }
        if peer.address.is_empty() || peer.address.contains(char::is_whitespace) {
            return Err(bad(format!(
                "address {:?} is not an IP or name",
                peer.address
            )));
        }
        if peer.tcp_port == 0 || peer.http_port == 0 {
            return Err(bad("port 0".into()));
        }
        if peer.labels.len() > MAX_PEER_LABELS {
            return Err(bad(format!("more than {MAX_PEER_LABELS} labels")));
        }
        for label in peer.labels.keys() {
            if !is_label_name(label) {
                return Err(bad(format!(
                    "label {label:?} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, no leading __)"
                )));
            }
            if RESERVED_LABELS.contains(&label.as_str()) {
                return Err(bad(format!("label {label:?} is one the agent sets itself")));
            }
        }
    }
    Ok(peers)
}

/// True for a valid Prometheus label name that is not reserved for internal use.
fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.starts_with("__")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_with_defaults_and_labels() {
        let text = "- name: a\n  address: 10.0.0.1\n- name: b\n  address: node-b.example\n  tcp_port: 9001\n  labels: {zone: eu-1}\n";
        let peers = parse(text, 10).unwrap();
        assert_eq!(peers.len(), 2);
        assert_eq!(
            (peers[0].tcp_port, peers[0].http_port),
            (DEFAULT_TCP_PORT, DEFAULT_HTTP_PORT)
        );
        assert_eq!(peers[1].tcp_port, 9001);
        assert_eq!(peers[1].labels["zone"], "eu-1");
        assert!(parse("", 10).unwrap().is_empty());
    }

    #[test]
    fn bad_lists_are_refused_whole() {
        for (text, why) in [
            (
                "- name: a\n  address: x\n- name: a\n  address: y\n",
                "twice",
            ),
            ("- name: a\n  address: x\n  colour: red\n", "colour"),
            ("- name: a\n", "address"),
            ("- name: a\n  address: x\n  tcp_port: 70000\n", "YAML"),
            (
                "- name: a\n  address: x\n  labels: {peer: b}\n",
                "sets itself",
            ),
            ("- name: a\n  address: x\n  labels: {2x: b}\n", "label name"),
            (
                "- name: a\n  address: x\n  labels: {__x: b}\n",
                "label name",
            ),
            ("- name: ''\n  address: x\n", "empty name"),
            ("name: a\n", "YAML"),
            ("[unclosed", "YAML"),
        ] {
            let err = parse(text, 10).expect_err(text).to_string();
            assert!(err.contains(why), "{text:?}: {err}");
            assert!(!err.contains('\n'), "{text:?}: not one line: {err}");
        }
        let two = "- name: a\n  address: x\n- name: b\n  address: y\n";
        assert!(matches!(
            parse(two, 1),
            Err(ReadPeersError::TooMany { count: 2, max: 1 })
        ));
    }

    #[test]
    fn sources() {
        assert_eq!(
            PeerSource::parse("peers.yaml"),
            Ok(PeerSource::File("peers.yaml".into()))
        );
        assert_eq!(
            PeerSource::parse("http://cfg:8080/peers"),
            Ok(PeerSource::Url("http://cfg:8080/peers".into()))
        );
        assert!(PeerSource::parse("https://cfg/peers").is_err());
    }
}
