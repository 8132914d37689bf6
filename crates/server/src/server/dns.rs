//! DNS responder: a tiny authoritative zone over UDP, with injected delay and loss.
//!
//! It answers A/AAAA for one name, NXDOMAIN for other names in that name's zone and
//! REFUSED for everything else; it never forwards or recurses. `--dns-delay` makes every
//! answer late (a slow or distant resolver, like seed 004's) and `--dns-drop` drops a share
//! of queries (resolver retries and timeouts).
//!
//! Messages are parsed and built with hickory-proto, the message layer hickory-server and
//! hickory-resolver share. The receive loop is our own rather than hickory-server's
//! `ServerFuture`, because that one drops undecodable packets before any handler sees them,
//! and the responder must count those, and delay or drop single queries on purpose.

use super::stats::{Reject, Stats};
use super::{CheckSettingError, DELAY_CEILING, Shared, sleep_until, within};
use crate::listener::Listener;
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// Default name the responder answers for.
pub const DEFAULT_DNS_NAME: &str = "echo.rpcbench.test";
/// Default TTL of its answers (60 s), a common value for internal service records.
pub const DEFAULT_DNS_TTL: u32 = 60;
/// Largest TTL: RFC 2181 section 8 limits TTLs to 31 bits, and resolvers read a larger one
/// as zero, so a larger setting would not mean what it says.
pub const MAX_DNS_TTL: u32 = i32::MAX as u32;
/// Largest UDP message read; queries are far smaller, and anything larger is malformed.
const MAX_UDP: usize = 4096;

/// What the responder serves and how it misbehaves.
#[derive(Debug, Clone)]
pub struct DnsConfig {
    /// UDP listen address.
    pub addr: SocketAddr,
    /// The one name answered (case-insensitive).
    pub name: String,
    /// The address answered: an A record for IPv4, AAAA for IPv6. `None`: the TCP
    /// listener's IP, or 127.0.0.1 when that is unspecified.
    pub answer: Option<IpAddr>,
    /// TTL of answers, in seconds.
    pub ttl: u32,
    /// Every answer is sent this late.
    pub delay: Duration,
    /// Share of queries dropped without an answer, 0.0 to 1.0.
    pub drop: f64,
    /// Zones answered with an authoritative NXDOMAIN besides the name's own, so that a
    /// search list (`search a.test b.test`) can be reproduced: every candidate name in
    /// them is a miss, as a cluster's search domains are for an outside name.
    pub nxdomain_zones: Vec<String>,
    /// Query types always dropped (`AAAA`: a resolver or middlebox that drops AAAA).
    pub drop_types: Vec<RecordType>,
    /// Delay by query type, instead of `delay` for that type.
    pub type_delays: Vec<(RecordType, Duration)>,
    /// Answers over UDP that hold records are sent truncated instead (TC set, no
    /// records), so that clients ask again over TCP, where the whole answer comes.
    pub truncate: bool,
}

impl Default for DnsConfig {
    fn default() -> Self {
        DnsConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            name: DEFAULT_DNS_NAME.to_string(),
            answer: None,
            ttl: DEFAULT_DNS_TTL,
            delay: Duration::ZERO,
            drop: 0.0,
            nxdomain_zones: Vec::new(),
            drop_types: Vec::new(),
            type_delays: Vec::new(),
            truncate: false,
        }
    }
}

impl DnsConfig {
    /// Checks every setting against what the responder can honour.
    pub fn check(&self) -> Result<(), CheckSettingError> {
        check_ttl(self.ttl)?;
        check_delay(self.delay)?;
        check_drop(self.drop)?;
        for (_, delay) in &self.type_delays {
            check_delay(*delay)?;
        }
        Ok(())
    }
}

/// Checks `dns.ttl`: at most [`MAX_DNS_TTL`]; zero (do not cache) is allowed.
pub fn check_ttl(ttl: u32) -> Result<u32, CheckSettingError> {
    within("dns.ttl", ttl, 0..=MAX_DNS_TTL, || {
        format!("at most {MAX_DNS_TTL} seconds (RFC 2181)")
    })
}

/// Checks `dns.delay`: at most [`DELAY_CEILING`], the longest delay the server has; an
/// answer later than that is a dropped query, which `dns.drop` says.
pub fn check_delay(delay: Duration) -> Result<Duration, CheckSettingError> {
    within("dns.delay", delay, Duration::ZERO..=DELAY_CEILING, || {
        format!("at most {DELAY_CEILING:?}")
    })
}

/// Checks `dns.drop`: a share of queries, from 0 to 1 (NaN is not one).
pub fn check_drop(drop: f64) -> Result<f64, CheckSettingError> {
    within("dns.drop", drop, 0.0..=1.0, || "from 0 to 1".to_string())
}

/// Checks that `name` can be the responder's name: a DNS name of two labels or more.
pub fn check_name(name: &str) -> Result<(), BuildZoneError> {
    zone_name(name).map(drop)
}

/// `name` as a lower-case, fully qualified DNS name.
fn fqdn(name: &str) -> Result<Name, BuildZoneError> {
    let mut parsed = Name::from_ascii(name)
        .map_err(|source| BuildZoneError::NotAName {
            name: name.to_string(),
            source,
        })?
        .to_lowercase();
    parsed.set_fqdn(true);
    Ok(parsed)
}

/// `name` as a lower-case, fully qualified DNS name with a parent zone.
fn zone_name(name: &str) -> Result<Name, BuildZoneError> {
    let parsed = fqdn(name)?;
    if parsed.num_labels() < 2 {
        return Err(BuildZoneError::TooFewLabels {
            name: name.to_string(),
        });
    }
    Ok(parsed)
}

/// Why the responder's zone cannot be built from its settings.
#[derive(Debug, thiserror::Error)]
pub enum BuildZoneError {
    /// The name does not parse as a DNS name.
    #[error("{name:?} is not a DNS name")]
    NotAName {
        name: String,
        source: hickory_proto::ProtoError,
    },
    /// A one-label name has no parent to be the zone apex.
    #[error("{name:?} needs at least two labels (a name and its zone)")]
    TooFewLabels { name: String },
    /// A setting outside what the responder can honour.
    #[error(transparent)]
    Setting(#[from] CheckSettingError),
}

/// The zone, ready to answer.
#[derive(Debug)]
pub(super) struct Zone {
    name: Name,
    apex: Name,
    /// Zones answered NXDOMAIN besides `apex`.
    nxdomain: Vec<Name>,
    answer: IpAddr,
    ttl: u32,
    delay: Duration,
    drop: f64,
    drop_types: Vec<RecordType>,
    type_delays: Vec<(RecordType, Duration)>,
    pub truncate: bool,
    /// Queries seen, to spread drops evenly.
    seen: AtomicU64,
}

impl Zone {
    /// Builds the zone; the apex is the name's parent (`rpcbench.test` for the default).
    pub fn new(config: &DnsConfig, answer: IpAddr) -> Result<Zone, BuildZoneError> {
        config.check()?;
        let name = zone_name(&config.name)?;
        let nxdomain = config
            .nxdomain_zones
            .iter()
            .map(|z| fqdn(z))
            .collect::<Result<_, _>>()?;
        Ok(Zone {
            apex: name.base_name(),
            name,
            nxdomain,
            answer,
            ttl: config.ttl,
            delay: config.delay,
            drop: config.drop,
            drop_types: config.drop_types.clone(),
            type_delays: config.type_delays.clone(),
            truncate: config.truncate,
            seen: AtomicU64::new(0),
        })
    }

    /// Whether query number `i` (from 0) is dropped: exactly `floor(n * drop)` of the first
    /// `n` queries are, spread evenly, so tests know what to expect.
    fn drops(&self, i: u64) -> bool {
        ((i + 1) as f64 * self.drop).floor() > (i as f64 * self.drop).floor()
    }

    /// What happens to a query of `rtype`: dropped (`None`), or answered after the delay.
    fn policy(&self, rtype: Option<RecordType>, i: u64) -> Option<Duration> {
        let by_type = rtype.filter(|t| self.drop_types.contains(t));
        if by_type.is_some() || self.drops(i) {
            return None;
        }
        let typed = rtype.and_then(|t| self.type_delays.iter().find(|(k, _)| *k == t));
        Some(typed.map_or(self.delay, |(_, d)| *d))
    }

    /// The response to one query message.
    fn answer(&self, query: &Message) -> Message {
        let mut resp = Message::response(query.metadata.id, query.metadata.op_code);
        resp.metadata.recursion_desired = query.metadata.recursion_desired;
        resp.add_queries(query.queries.iter().cloned());
        let Some(q) = query.queries.first() else {
            resp.metadata.response_code = ResponseCode::FormErr;
            return resp;
        };
        if query.metadata.op_code != OpCode::Query || query.queries.len() != 1 {
            resp.metadata.response_code = ResponseCode::NotImp;
            return resp;
        }
        let qname = q.name().to_lowercase();
        if qname != self.name
            && !self.apex.zone_of(&qname)
            && !self.nxdomain.iter().any(|z| z.zone_of(&qname))
        {
            resp.metadata.response_code = ResponseCode::Refused;
            return resp;
        }
        resp.metadata.authoritative = true;
        if qname != self.name {
            resp.metadata.response_code = ResponseCode::NXDomain;
            return resp;
        }
        let rdata = match (q.query_type(), self.answer) {
            (RecordType::A, IpAddr::V4(ip)) => Some(RData::A(A(ip))),
            (RecordType::AAAA, IpAddr::V6(ip)) => Some(RData::AAAA(AAAA(ip))),
            // Any other type (or the other family) exists as a name with no such data.
            _ => None,
        };
        if let Some(rdata) = rdata {
            resp.add_answer(Record::from_rdata(q.name().clone(), self.ttl, rdata));
        }
        resp
    }
}

/// What to do with one query that arrived: its answer's bytes and when to send them, or
/// nothing (malformed, or dropped on purpose). Counts the query by type and its answer
/// by code; over UDP an answer with records is truncated when the zone says so.
fn respond(
    zone: &Zone,
    packet: &[u8],
    stats: &Stats,
    over_tcp: bool,
) -> Option<(Vec<u8>, Duration)> {
    let query = match Message::from_vec(packet) {
        Ok(m) if m.metadata.message_type == MessageType::Query => m,
        _ => {
            stats.reject(Reject::DnsMalformed);
            return None;
        }
    };
    stats.dns.requests.fetch_add(1, Relaxed);
    let rtype = query.queries.first().map(|q| q.query_type());
    stats.dns_detail.query(rtype, over_tcp);
    let Some(delay) = zone.policy(rtype, zone.seen.fetch_add(1, Relaxed)) else {
        stats.dns_dropped.fetch_add(1, Relaxed);
        return None;
    };
    let mut resp = zone.answer(&query);
    if zone.truncate && !over_tcp && !resp.answers.is_empty() {
        resp.answers.clear();
        resp.metadata.truncation = true;
        stats.dns_detail.truncated.fetch_add(1, Relaxed);
    }
    stats.dns_detail.answer(resp.metadata.response_code);
    let Ok(bytes) = resp.to_vec() else {
        stats.reject(Reject::DnsMalformed);
        return None;
    };
    if !delay.is_zero() {
        stats.dns_delayed.fetch_add(1, Relaxed);
    }
    Some((bytes, delay))
}

/// Tries for a free port shared by UDP and TCP, when asked for any port.
const BIND_TRIES: usize = 32;

/// Binds the responder's UDP socket and its TCP listener on one port: `addr`'s, or when
/// that is 0 a port free for both (the TCP listener takes a free port, then UDP asks for
/// the same one; another is tried while UDP has it taken).
pub(super) async fn bind(
    addr: SocketAddr,
) -> Result<(UdpSocket, TcpListener, SocketAddr), super::StartServerError> {
    let err = |proto, addr, source| super::StartServerError::Bind {
        proto,
        addr,
        source,
    };
    let mut last = None;
    for _ in 0..BIND_TRIES {
        let tcp = TcpListener::bind(addr)
            .await
            .map_err(|e| err(Listener::DnsTcp, addr, e))?;
        let bound = tcp
            .local_addr()
            .map_err(|e| err(Listener::DnsTcp, addr, e))?;
        match UdpSocket::bind(bound).await {
            Ok(udp) => return Ok((udp, tcp, bound)),
            Err(e) if addr.port() == 0 => last = Some(e),
            Err(e) => return Err(err(Listener::Dns, addr, e)),
        }
    }
    Err(err(
        Listener::Dns,
        addr,
        last.unwrap_or_else(|| std::io::Error::from(std::io::ErrorKind::AddrInUse)),
    ))
}

/// Serves UDP queries until shutdown starts.
pub(super) async fn serve(socket: UdpSocket, zone: Arc<Zone>, shared: Arc<Shared>) {
    let socket = Arc::new(socket);
    let stats = &shared.stats;
    let mut buf = vec![0u8; MAX_UDP];
    loop {
        let (n, peer) = tokio::select! {
            res = socket.recv_from(&mut buf) => match res {
                Ok(got) => got,
                Err(e) => {
                    // ICMP errors from earlier sends surface here on Linux; keep serving.
                    tracing::debug!("dns recv failed: {e}");
                    continue;
                }
            },
            _ = super::stopping(shared.shutdown.clone()) => return,
        };
        stats.dns.bytes_in.fetch_add(n as u64, Relaxed);
        let Some((bytes, delay)) = respond(&zone, &buf[..n], stats, false) else {
            continue;
        };
        if delay.is_zero() {
            send(&socket, &bytes, peer, &shared).await;
        } else {
            let (socket, shared, deadline) =
                (socket.clone(), shared.clone(), Instant::now() + delay);
            tokio::spawn(async move {
                sleep_until(deadline).await;
                send(&socket, &bytes, peer, &shared).await;
            });
        }
    }
}

async fn send(socket: &UdpSocket, bytes: &[u8], peer: SocketAddr, shared: &Shared) {
    if socket.send_to(bytes, peer).await.is_ok() {
        shared
            .stats
            .dns
            .bytes_out
            .fetch_add(bytes.len() as u64, Relaxed);
        shared.stats.dns_answered.fetch_add(1, Relaxed);
    }
}

/// Longest a DNS-over-TCP connection may stay silent before it is closed (RFC 7766
/// suggests a few seconds for an idle connection).
const TCP_IDLE: Duration = Duration::from_secs(10);

/// Serves DNS over TCP (RFC 7766: each message behind a two-byte length) on the UDP
/// port, until shutdown starts: the retry of a truncated answer comes here.
pub(super) async fn serve_tcp(listener: TcpListener, zone: Arc<Zone>, shared: Arc<Shared>) {
    while let Some((stream, guard)) = shared.next_connection(&listener, |s: &Stats| &s.dns).await {
        let (zone, shared) = (zone.clone(), shared.clone());
        tokio::spawn(async move {
            let _guard = guard;
            if let Err(e) = serve_tcp_connection(stream, &zone, &shared).await {
                tracing::debug!("dns over tcp: {e}");
            }
        });
    }
}

/// Answers one TCP connection's queries, in order, until it closes or idles out.
async fn serve_tcp_connection(
    mut stream: TcpStream,
    zone: &Zone,
    shared: &Shared,
) -> std::io::Result<()> {
    let stats = &shared.stats;
    loop {
        let mut len = [0u8; 2];
        match tokio::time::timeout(TCP_IDLE, stream.read_exact(&mut len)).await {
            Ok(Ok(_)) => {}
            // Closed between messages, or idle: the end of the conversation.
            Ok(Err(_)) | Err(_) => return Ok(()),
        }
        let mut packet = vec![0u8; usize::from(u16::from_be_bytes(len))];
        if tokio::time::timeout(TCP_IDLE, stream.read_exact(&mut packet))
            .await
            .is_err()
        {
            stats.reject(Reject::DnsMalformed);
            return Ok(());
        }
        stats
            .dns
            .bytes_in
            .fetch_add(2 + packet.len() as u64, Relaxed);
        let Some((bytes, delay)) = respond(zone, &packet, stats, true) else {
            continue;
        };
        if !delay.is_zero() {
            sleep_until(Instant::now() + delay).await;
        }
        let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&bytes);
        stream.write_all(&framed).await?;
        stats.dns.bytes_out.fetch_add(framed.len() as u64, Relaxed);
        stats.dns_answered.fetch_add(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;

    fn zone(drop: f64) -> Zone {
        let config = DnsConfig {
            drop,
            ..DnsConfig::default()
        };
        Zone::new(&config, IpAddr::from([10, 0, 0, 7])).unwrap()
    }

    fn ask(zone: &Zone, name: &str, rtype: RecordType) -> Message {
        let mut q = Message::query();
        q.add_query(Query::query(Name::from_ascii(name).unwrap(), rtype));
        let bytes = zone.answer(&q).to_vec().unwrap();
        Message::from_vec(&bytes).unwrap()
    }

    #[test]
    fn answers_the_zone_and_refuses_the_rest() {
        let z = zone(0.0);
        let a = ask(&z, "Echo.RPCbench.test.", RecordType::A);
        assert_eq!(a.metadata.response_code, ResponseCode::NoError);
        assert!(a.metadata.authoritative);
        assert_eq!(a.answers.len(), 1);
        assert_eq!(a.answers[0].ttl, DEFAULT_DNS_TTL);
        let aaaa = ask(&z, "echo.rpcbench.test.", RecordType::AAAA);
        assert_eq!(aaaa.metadata.response_code, ResponseCode::NoError);
        assert!(aaaa.answers.is_empty(), "no IPv6 answer configured");
        let other = ask(&z, "other.rpcbench.test.", RecordType::A);
        assert_eq!(other.metadata.response_code, ResponseCode::NXDomain);
        let outside = ask(&z, "example.com.", RecordType::A);
        assert_eq!(outside.metadata.response_code, ResponseCode::Refused);
        assert!(outside.answers.is_empty());
    }

    #[test]
    fn drops_exactly_the_share_asked() {
        for (fraction, expected) in [(0.0, 0), (0.25, 25), (0.5, 50), (1.0, 100)] {
            let z = zone(fraction);
            assert_eq!(
                (0..100).filter(|&i| z.drops(i)).count(),
                expected,
                "{fraction}"
            );
        }
    }

    #[test]
    fn bad_configs_are_errors() {
        for (name, drop) in [
            ("nolabels", 0.0),
            ("a..b", 0.0),
            ("echo.rpcbench.test", 1.5),
            ("echo.rpcbench.test", f64::NAN),
        ] {
            let config = DnsConfig {
                name: name.into(),
                drop,
                ..DnsConfig::default()
            };
            assert!(
                Zone::new(&config, IpAddr::from([127, 0, 0, 1])).is_err(),
                "{name} {drop}"
            );
        }
    }
}
