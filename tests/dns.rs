//! Names and DNS: every address mode against the real echo server and its DNS responder.
//!
//! The responder's own query counter is the ground truth the client's counts and timings
//! are checked against.

mod common;

use common::netns::Netns;
use rpcbench::resolve::{AddrMode, Family, Names, ResolverAddr};
use rpcbench::runner::{RunConfig, TransportRun, run_transport};
use rpcbench::server::dns::{DEFAULT_DNS_NAME, DnsConfig};
use rpcbench::server::stats::Reject;
use rpcbench::server::{ServerConfig, ServerHandle};
use rpcbench::transport::{Endpoint, TransportKind};
use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// An in-process echo server with a DNS responder, alive as long as this value.
struct Server {
    server: ServerHandle,
}

impl Server {
    fn start(dns: DnsConfig) -> Server {
        let config = ServerConfig {
            dns: Some(dns),
            ..ServerConfig::loopback_any_port()
        };
        Server {
            server: ServerHandle::start(config, 1).expect("start the echo server"),
        }
    }

    fn dns(&self) -> SocketAddr {
        self.server.dns_addr.unwrap()
    }

    fn dns_queries(&self) -> u64 {
        self.server.stats().dns.requests
    }

    fn endpoint(&self, mode: AddrMode, timeout: Duration) -> Endpoint {
        let tcp = self.server.tcp_addr.unwrap();
        let http = self.server.http_addr.unwrap();
        if mode == AddrMode::Ip {
            return Endpoint::new(tcp, http);
        }
        let names = Names::new_mode(
            mode,
            DEFAULT_DNS_NAME,
            Family::V4,
            ResolverAddr::At(self.dns()),
            timeout,
        )
        .unwrap();
        Endpoint::with_names(Arc::new(names), tcp.port(), http.port())
    }

    /// Runs one transport in one mode; returns the run and the DNS queries the responder saw.
    fn run(&self, kind: TransportKind, mode: AddrMode, config: &RunConfig) -> (TransportRun, u64) {
        let before = self.dns_queries();
        let endpoint = self.endpoint(mode, config.timeout);
        let run = run_transport(kind, &endpoint, config, Arc::new(AtomicU64::new(0)));
        let t = &run.tally;
        assert_eq!(
            t.ok,
            t.calls(),
            "{kind} {mode}: {:?} {:?}",
            t.errors,
            run.dns_error
        );
        (run, self.dns_queries() - before)
    }
}

fn mean_ms(run: &TransportRun) -> f64 {
    run.tally.latency.summary().unwrap().mean / 1e3
}

const FRESH: [TransportKind; 3] = [
    TransportKind::TcpConnect,
    TransportKind::HttpFresh,
    TransportKind::CurlFresh,
];
const PERSISTENT: [TransportKind; 3] = [
    TransportKind::Tcp,
    TransportKind::HttpKeepalive,
    TransportKind::CurlReuse,
];

#[test]
fn slow_dns_costs_fresh_connections_only_and_caching_removes_it() {
    let delay = Duration::from_millis(20);
    let server = Server::start(DnsConfig {
        delay,
        ..DnsConfig::default()
    });
    let config = RunConfig {
        calls: 25,
        warmup: 3,
        timeout: Duration::from_secs(2),
        ..RunConfig::default()
    };
    let calls_and_warmup = config.calls + config.warmup;
    for kind in FRESH {
        let (ip, ip_queries) = server.run(kind, AddrMode::Ip, &config);
        let (uncached, uncached_queries) = server.run(kind, AddrMode::Uncached, &config);
        let (cached, cached_queries) = server.run(kind, AddrMode::Cached, &config);
        let (ip_ms, uncached_ms, cached_ms) = (mean_ms(&ip), mean_ms(&uncached), mean_ms(&cached));
        assert_eq!(ip_queries, 0, "{kind}: mode ip asks nothing");
        // One query per new connection (family 4: A only), warm-up included.
        assert_eq!(uncached_queries, calls_and_warmup, "{kind} uncached");
        assert_eq!(
            uncached.dns_queries, calls_and_warmup,
            "{kind}: the client counts what it asked"
        );
        // One per TTL (60 s): the first lookup, in warm-up.
        assert_eq!(cached_queries, 1, "{kind} cached");
        assert_eq!(cached.dns_queries, 1, "{kind} cached, client count");
        assert!(
            uncached_ms - ip_ms >= 20.0,
            "{kind}: uncached {uncached_ms:.3} ms vs ip {ip_ms:.3} ms: every call should pay the 20 ms lookup"
        );
        // Half the injected delay: either a call paid the lookup or it did not.
        assert!(
            (cached_ms - ip_ms).abs() < 10.0,
            "{kind}: cached {cached_ms:.3} ms vs ip {ip_ms:.3} ms: a cached lookup costs no 20 ms"
        );
        let dns = uncached
            .tally
            .phase(rpcbench::measure::Phase::Dns)
            .summary()
            .unwrap();
        assert!(dns.mean >= 20_000.0, "{kind}: dns phase {dns:?} µs");
    }
    for kind in PERSISTENT {
        let (ip, _) = server.run(kind, AddrMode::Ip, &config);
        let (uncached, uncached_queries) = server.run(kind, AddrMode::Uncached, &config);
        // The one lookup is at the one connect, during warm-up.
        assert_eq!(uncached_queries, 1, "{kind}: one connection, one query");
        assert_eq!(uncached.tally.connects, 1, "{kind}");
        let (ip_ms, uncached_ms) = (mean_ms(&ip), mean_ms(&uncached));
        assert!(
            (uncached_ms - ip_ms).abs() < 10.0,
            "{kind}: uncached {uncached_ms:.3} ms vs ip {ip_ms:.3} ms: a persistent connection pays no lookup per call"
        );
    }
}

#[test]
fn cached_asks_again_when_the_ttl_runs_out() {
    let server = Server::start(DnsConfig {
        ttl: 1,
        ..DnsConfig::default()
    });
    let config = RunConfig {
        duration: Some(Duration::from_millis(2500)),
        warmup: 1,
        timeout: Duration::from_secs(2),
        ..RunConfig::default()
    };
    let (run, queries) = server.run(TransportKind::TcpConnect, AddrMode::Cached, &config);
    assert!(
        queries >= 2,
        "a 1 s TTL over 2.5 s must be asked again; the responder saw {queries}"
    );
    assert!(
        queries <= 4,
        "but not on every call: {queries} queries for {} calls",
        run.tally.calls()
    );
    assert_eq!(
        run.dns_queries, queries,
        "the client's count matches the responder's"
    );
}

/// Runs the `rpcbench` binary; returns its exit code, stdout and stderr.
fn rpcbench(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rpcbench"))
        .args(args)
        .output()
        .expect("run rpcbench");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn report(stdout: &str) -> rpcbench::report::Report {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn system_resolver_through_getaddrinfo_on_localhost() {
    let server = Server::start(DnsConfig::default());
    let tcp = server.server.tcp_addr.unwrap().port().to_string();
    let http = server.server.http_addr.unwrap().port().to_string();
    let udp = server.server.udp_addr.unwrap().port().to_string();
    let (code, stdout, stderr) = rpcbench(&[
        "--target",
        "localhost",
        "--tcp-port",
        &tcp,
        "--http-port",
        &http,
        "--udp-port",
        &udp,
        "-n",
        "20",
        "--warmup",
        "2",
        "--names",
        "system",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let r = report(&stdout);
    // Every transport but unix, which has no name to look up (and no --unix here), and
    // QUIC's (no --quic-port here).
    let quic = TransportKind::by_default()
        .into_iter()
        .filter(|k| k.port() == rpcbench::transport::Port::Quic)
        .count();
    assert_eq!(r.runs.len(), TransportKind::by_default().len() - 1 - quic);
    assert!(stderr.contains("unix not run"), "{stderr}");
    assert!(stderr.contains("quic not run"), "{stderr}");
    for run in &r.runs {
        assert_eq!(
            (run.addr_mode, run.ok),
            (AddrMode::System, 20),
            "{}",
            run.transport
        );
        assert!(
            run.dns_queries >= 1,
            "{}: getaddrinfo was asked",
            run.transport
        );
    }
    let fresh = r
        .runs
        .iter()
        .find(|r| r.transport == TransportKind::TcpConnect)
        .unwrap();
    assert_eq!(fresh.dns_queries, 22, "one getaddrinfo per new connection");
    assert!(fresh.phases_us.dns.is_some());
}

/// The target's ports and the responder's address, as `rpcbench` arguments.
fn target_args(server: &Server) -> Vec<String> {
    let tcp = server.server.tcp_addr.unwrap().port().to_string();
    let http = server.server.http_addr.unwrap().port().to_string();
    let resolver = server.dns().to_string();
    [
        "--tcp-port",
        &tcp,
        "--http-port",
        &http,
        "--resolver",
        &resolver,
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn an_unresolvable_target_fails_within_one_timeout() {
    let server = Server::start(DnsConfig::default());
    let resolver = server.dns().to_string();
    let timeout = Duration::from_secs(3);
    let mut args = target_args(&server);
    args.extend(
        [
            "--target",
            "nope.rpcbench.test",
            "--names",
            "ip,cached,uncached",
        ]
        .map(String::from),
    );
    args.extend(["--timeout", "3s", "--format", "json"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = Instant::now();
    let (code, stdout, stderr) = rpcbench(&args);
    // The responder answers NXDOMAIN at once; the bound is the one --timeout the check
    // may take, never a timeout per call.
    assert!(started.elapsed() < timeout, "took {:?}", started.elapsed());
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stdout.is_empty(),
        "no report for a run that could not start: {stdout}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("nope.rpcbench.test") && stderr.contains(&resolver),
        "the message names the name and the resolver: {stderr}"
    );
    assert!(stderr.contains("NXDOMAIN"), "{stderr}");
}

#[test]
fn a_silent_resolver_fails_within_one_timeout() {
    let server = Server::start(DnsConfig::default());
    // A UDP socket that reads nothing and answers nothing.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let resolver = silent.local_addr().unwrap().to_string();
    let tcp = server.server.tcp_addr.unwrap().port().to_string();
    let http = server.server.http_addr.unwrap().port().to_string();
    let timeout = Duration::from_secs(1);
    let started = Instant::now();
    let (code, stdout, stderr) = rpcbench(&[
        "--target",
        DEFAULT_DNS_NAME,
        "--tcp-port",
        &tcp,
        "--http-port",
        &http,
        "--resolver",
        &resolver,
        "--names",
        "ip,cached,uncached",
        "--timeout",
        "1s",
        "--format",
        "json",
    ]);
    // Every mode's check runs at once: one timeout in all, plus start-up, not one per mode.
    assert!(
        started.elapsed() < 2 * timeout,
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains(&resolver), "{stderr}");
}

#[test]
fn a_mode_the_name_does_not_resolve_in_is_left_out_and_fails_the_run() {
    // The embedded server's address is known (mode ip needs no lookup), but the resolver
    // given for mode uncached never answers, so only mode ip can run.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let resolver = silent.local_addr().unwrap().to_string();
    let (code, stdout, stderr) = rpcbench(&[
        "--resolver",
        &resolver,
        "--names",
        "ip,uncached",
        "--transports",
        "tcp,http-fresh",
        "-n",
        "5",
        "--warmup",
        "1",
        "--timeout",
        "500ms",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(1), "a mode left out fails the run: {stderr}");
    let r = report(&stdout);
    assert_eq!(r.runs.len(), 2, "both transports ran in mode ip");
    for run in &r.runs {
        assert_eq!(run.ok, 5, "{run:?}");
        assert_eq!(run.addr_mode.to_string(), "ip");
    }
    assert!(
        stderr.contains("mode uncached not run") && stderr.contains(&resolver),
        "{stderr}"
    );
}

/// Runs `kinds` against a name that `names` cannot resolve; every call must be counted
/// as an error of `kind`, none lost, none ok.
fn assert_counted_lookup_failures(
    server: &Server,
    names: Names,
    kinds: &[TransportKind],
    config: &RunConfig,
    error: &str,
) {
    let names = Arc::new(names);
    for &kind in kinds {
        let endpoint = Endpoint::with_names(
            names.clone(),
            server.server.tcp_addr.unwrap().port(),
            server.server.http_addr.unwrap().port(),
        );
        let run = run_transport(kind, &endpoint, config, Arc::new(AtomicU64::new(0)));
        let t = &run.tally;
        assert_eq!(t.calls(), config.calls, "{kind}");
        assert_eq!(
            t.errors_by_key().get(error),
            Some(&config.calls),
            "{kind}: {:?}",
            t.errors
        );
        assert_eq!(t.ok + t.lost + t.mismatched, 0, "{kind}");
        assert!(run.dns_error.is_some(), "{kind}: the failure is worded");
    }
}

#[test]
fn lookups_that_fail_during_a_run_are_counted_per_call() {
    // The name check before a run catches a dead name; these are the failures that come
    // later (a record removed, a resolver gone quiet), counted call by call.
    let server = Server::start(DnsConfig::default());
    let config = RunConfig {
        calls: 4,
        warmup: 0,
        timeout: Duration::from_millis(300),
        ..RunConfig::default()
    };
    let nxdomain = Names::new_mode(
        AddrMode::Uncached,
        "nope.rpcbench.test",
        Family::V4,
        ResolverAddr::At(server.dns()),
        config.timeout,
    )
    .unwrap();
    // Every transport that looks a name up: unix calls a path, with no name to resolve.
    let by_name: Vec<TransportKind> = TransportKind::ALL
        .into_iter()
        .filter(|&k| k != TransportKind::Unix)
        .collect();
    assert_counted_lookup_failures(&server, nxdomain, &by_name, &config, "dns");
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let quiet = Names::new_mode(
        AddrMode::Uncached,
        DEFAULT_DNS_NAME,
        Family::V4,
        ResolverAddr::At(silent.local_addr().unwrap()),
        config.timeout,
    )
    .unwrap();
    let config = RunConfig { calls: 2, ..config };
    assert_counted_lookup_failures(&server, quiet, &FRESH, &config, "dns_timeout");
}

/// A small deterministic generator (xorshift), so failures can be replayed.
fn noise(seed: &mut u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed as u8
        })
        .collect()
}

#[test]
fn garbage_packets_are_counted_and_the_responder_keeps_answering() {
    use hickory_proto::op::{Message, Query};
    use hickory_proto::rr::{Name, RecordType};
    let server = Server::start(DnsConfig::default());
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut query = Message::query();
    query.add_query(Query::query(
        Name::from_ascii("echo.rpcbench.test.").unwrap(),
        RecordType::A,
    ));
    let valid = query.to_vec().unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15;
    let mut sent = 0;
    for i in 0..200 {
        let packet = noise(&mut seed, 1 + i % 100);
        client.send_to(&packet, server.dns()).unwrap();
        sent += 1;
    }
    // Truncations of a valid query (the header alone is 12 bytes; anything shorter, or
    // cut inside the question, cannot parse).
    for cut in [1, 5, 11, 13, valid.len() - 3] {
        client.send_to(&valid[..cut], server.dns()).unwrap();
        sent += 1;
    }
    // Still answering: a real query gets its A record.
    client.send_to(&valid, server.dns()).unwrap();
    let mut buf = [0u8; 512];
    let deadline = Instant::now() + Duration::from_secs(2);
    let answer = loop {
        let (n, _) = client
            .recv_from(&mut buf)
            .expect("the responder still answers");
        let msg = Message::from_vec(&buf[..n]).unwrap();
        // Garbage that happened to parse as a query may have been answered too; skip it.
        if msg.metadata.id == query.metadata.id && !msg.answers.is_empty() {
            break msg;
        }
        assert!(Instant::now() < deadline);
    };
    assert_eq!(answer.answers.len(), 1);
    let stats = server.server.stats();
    let malformed = stats.rejected(Reject::DnsMalformed);
    // Every packet is counted once: as malformed, or (random bytes that happen to parse)
    // as a query. The valid query is the one more.
    assert_eq!(malformed + stats.dns.requests, sent + 1, "{stats:?}");
    assert!(
        malformed >= sent * 9 / 10,
        "most garbage is malformed: {malformed} of {sent}"
    );
}

/// `system` mode against the responder through a private resolv.conf: a network
/// namespace whose `/etc/netns/NAME/resolv.conf` points at the responder on port 53 inside
/// it. Needs root: `.ci/run` runs it as root with `--include-ignored`.
#[test]
#[ignore = "needs root"]
fn system_resolver_through_a_private_resolv_conf() {
    let ns = Netns::create(
        &format!("rbdns{}", std::process::id()),
        "nameserver 127.0.0.1\nsearch a.test b.test\noptions attempts:1 timeout:2 ndots:5\n",
    );
    let echo = env!("CARGO_BIN_EXE_rpcbench-echo");
    let bench = env!("CARGO_BIN_EXE_rpcbench");
    // Inside the namespace, port 53 is ours: nothing else lives there. The other ports
    // are picked by the kernel and read back.
    let script = format!(
        r#"set -eu
ip link set lo up
out=$(mktemp)
{echo} --tcp 127.0.0.1:0 --http 127.0.0.1:0 --dns 127.0.0.1:53 --dns-delay 5ms \
    --dns-nxdomain-zone a.test,b.test >"$out" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$out"' EXIT
for _ in $(seq 50); do [ "$(wc -l <"$out")" -ge 3 ] && break; sleep 0.1; done
tcp=$(awk '$2=="tcp"{{split($3,a,":"); print a[2]}}' "$out")
http=$(awk '$2=="http"{{split($3,a,":"); print a[2]}}' "$out")
{bench} --target {DEFAULT_DNS_NAME} --tcp-port "$tcp" --http-port "$http" \
    --names system,uncached-search --transports tcp-connect,http-fresh,tcp -n 20 --warmup 1 \
    --timeout 2s --format json
"#
    );
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, "bash", "-c", &script])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let r = report(&String::from_utf8_lossy(&out.stdout));
    // `echo.rpcbench.test` has two dots and ndots is 5: both search domains come first,
    // each miss a query the responder counts.
    let search: Vec<String> = [".a.test.", ".b.test.", "."]
        .iter()
        .map(|d| format!("{DEFAULT_DNS_NAME}{d}"))
        .collect();
    assert_eq!(r.runs.len(), 6, "{stderr}");
    for run in &r.runs {
        assert_eq!(run.ok, 20, "{} {}: {stderr}", run.transport, run.addr_mode);
        let lookup = run.dns_lookup.as_ref().expect("a lookup record");
        assert_eq!(lookup.search, search, "{} {}", run.transport, run.addr_mode);
        // getaddrinfo asks A and AAAA for every name it tries; rpcbench's resolver asks
        // for family 4 only (A).
        let per_lookup = match run.addr_mode {
            AddrMode::System => 6.0,
            _ => 3.0,
        };
        assert_eq!(
            lookup.queries_per_lookup,
            Some(per_lookup),
            "{} {}: {lookup:?}",
            run.transport,
            run.addr_mode
        );
    }
    let fresh = r
        .runs
        .iter()
        .find(|r| r.transport == TransportKind::TcpConnect && r.addr_mode == AddrMode::System)
        .unwrap();
    let dns = fresh.phases_us.dns.expect("dns phase");
    // getaddrinfo went to our responder, which answers 5 ms late: every fresh call pays it,
    // once per name it tries.
    assert!(dns.mean >= 15_000.0, "dns phase {dns:?} µs");
    assert_eq!(fresh.dns_queries, 21);
    let persistent = r
        .runs
        .iter()
        .find(|r| r.transport == TransportKind::Tcp && r.addr_mode == AddrMode::System)
        .unwrap();
    assert_eq!(persistent.dns_queries, 1);
}

/// `uncached-search` follows a resolv.conf's search list: with `search a.test b.test` and
/// `ndots:5`, a two-dot name is first tried under both search domains, and each miss is a
/// query the responder counts. The responder is the test's own, so its count is exact.
#[test]
fn uncached_search_asks_every_search_domain_first() {
    let server = Server::start(DnsConfig {
        nxdomain_zones: vec!["a.test".into(), "b.test".into()],
        ..DnsConfig::default()
    });
    let dir = std::env::temp_dir().join(format!("rpcbench-search-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("resolv.conf");
    std::fs::write(
        &conf,
        format!(
            "nameserver {}\nsearch a.test b.test\noptions ndots:5\n",
            server.dns().ip()
        ),
    )
    .unwrap();
    let mut args = target_args(&server);
    args.extend(
        [
            "--target",
            DEFAULT_DNS_NAME,
            "--names",
            "uncached,uncached-search",
            "--resolv-conf",
            conf.to_str().unwrap(),
            "--transports",
            "tcp-connect,tcp",
            "-n",
            "20",
            "--warmup",
            "2",
            "--format",
            "json",
        ]
        .map(String::from),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = rpcbench(&args);
    let answers = server.server.stats().dns_answers_by_code;
    // The same run as a table ends with the finding that names the search list.
    let table_args: Vec<&str> = args
        .iter()
        .map(|a| if *a == "json" { "table" } else { a })
        .collect();
    let (table_code, table, _) = rpcbench(&table_args);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(table_code, Some(0));
    assert!(
        table.contains("uncached-search lookup of echo.rpcbench.test tries 3 names")
            && table.contains("makes 3 queries"),
        "{table}"
    );
    let r = report(&stdout);
    let expected: Vec<String> = [".a.test.", ".b.test.", "."]
        .iter()
        .map(|d| format!("{DEFAULT_DNS_NAME}{d}"))
        .collect();
    assert_eq!(r.runs.len(), 4);
    for run in &r.runs {
        let lookup = run.dns_lookup.as_ref().expect("a lookup record");
        // A fresh connection per call (20 + 2 warm-up), or one for the only worker.
        let lookups = if run.transport == TransportKind::TcpConnect {
            22
        } else {
            1
        };
        // Family 4: one A query per name tried.
        let (names, per_lookup) = match run.addr_mode {
            AddrMode::UncachedSearch => (expected.clone(), 3),
            AddrMode::Uncached => (Vec::new(), 1),
            other => panic!("mode {other} was not asked for"),
        };
        assert_eq!(
            (run.ok, lookup.lookups, &lookup.search),
            (20, lookups, &names),
            "{} {}",
            run.transport,
            run.addr_mode
        );
        assert_eq!(
            lookup.responder_queries,
            Some(lookups * per_lookup),
            "{} {}: the responder counted every query",
            run.transport,
            run.addr_mode
        );
        assert_eq!(
            run.dns_queries,
            lookups * per_lookup,
            "rpcbench's own count"
        );
        assert_eq!(lookup.queries_per_lookup, Some(per_lookup as f64));
    }
    // Two misses per `uncached-search` lookup: the check before the run, 22 fresh
    // connections and one persistent one.
    assert_eq!(answers.get("nxdomain"), Some(&(2 * 24)), "{answers:?}");
}
