//! What a run calls and how ([`Plan`]): the name, its ports and address modes, the
//! resolver, the security modes and their TLS, the jobs, and the probe of each listener.

use super::{BenchSpec, RunBenchError, SkippedMode, default_modes};
use crate::dnsdiag::conf::ResolvConf;
use crate::resolve::{
    AddrMode, Family, Names, ResolveNameError, ResolverAddr, SYSTEM_RESOLV_CONF, read_resolv_conf,
    system_resolv_conf,
};
use crate::server::ServerHandle;
use crate::server::dns::DEFAULT_DNS_NAME;
use crate::transport::Endpoint;
use crate::transport::tls::{Security, TlsClient, TlsOptions};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One mode's name check: the resolver it set up, and why the lookup failed, if it did.
pub(super) struct Checked {
    pub(super) mode: AddrMode,
    pub(super) names: Arc<Names>,
    /// The address the lookup found.
    pub(super) found: Option<IpAddr>,
    pub(super) failed: Option<String>,
}

/// What the run calls and how it finds it.
pub(super) struct Plan {
    /// The name (or IP literal) being called.
    pub(super) name: String,
    /// How the report names the target.
    pub(super) label: String,
    pub(super) tcp_port: u16,
    pub(super) http_port: u16,
    /// The UDP port, when there is one to call.
    pub(super) udp_port: Option<u16>,
    /// The QUIC port, when there is one to call.
    pub(super) quic_port: Option<u16>,
    /// The Unix socket, when there is one to call.
    pub(super) unix: Option<std::path::PathBuf>,
    pub(super) resolver: ResolverAddr,
    /// The modes that will run: those asked for, less those the name did not resolve in.
    pub(super) modes: Vec<AddrMode>,
    /// Mode `ip`'s address, looked up once for the whole run (shared by every transport).
    pub(super) ip: Option<Arc<Names>>,
    /// The configuration `uncached-search` follows, when it runs.
    pub(super) search_conf: Option<Arc<ResolvConf>>,
    /// The names a `system` lookup tries, from /etc/resolv.conf (empty when it cannot be
    /// read: the prediction is left out, the mode still runs).
    pub(super) system_search: Vec<String>,
    /// The target's address as the check before the run found it: where `GET /stats`
    /// goes, so that asking the server for its counters looks nothing up (and adds no
    /// query to the responder's count of a run).
    pub(super) stats_ip: Option<IpAddr>,
    /// The raw-frames-over-TLS port.
    pub(super) tls_port: u16,
    /// The HTTPS port.
    pub(super) https_port: u16,
    /// How TLS runs verify and are verified; `None` when every mode is plain.
    pub(super) tls: Option<TlsOptions>,
}

/// The TLS options of a run with a TLS mode: the CA from `--ca`, else the embedded
/// server's; the client certificate from the spec, else the one generated for the
/// embedded server. `None` when every mode is plain.
pub(super) fn tls_options(
    spec: &BenchSpec,
    embedded: Option<&ServerHandle>,
    client: Option<&crate::server::tls::GeneratedCerts>,
) -> Result<Option<TlsOptions>, RunBenchError> {
    let secured = |k: &crate::transport::TransportKind| {
        security_modes(spec)
            .into_iter()
            .any(|s| k.security_in(s).is_some_and(Security::is_tls))
    };
    if !spec.transports.iter().any(secured) {
        return Ok(None);
    }
    let ca = spec
        .ca_pem
        .clone()
        .or_else(|| embedded.and_then(|e| e.ca_pem.clone()))
        .unwrap_or_default();
    let client_cert = match (&spec.client_cert_pem, client) {
        (Some((cert, key)), _) => Some((cert.as_str(), key.as_str())),
        (None, Some(c)) => Some((c.leaf_pem.as_str(), c.leaf_key_pem.as_str())),
        (None, None) => None,
    };
    TlsOptions::from_pem(&ca, client_cert, spec.insecure)
        .map(Some)
        .map_err(|e| RunBenchError::TlsPem(e.to_string()))
}

impl Plan {
    /// Works out the plan and checks that the name resolves in each mode; returns the
    /// modes that did not, or an error when none did.
    pub(super) fn new(
        spec: &BenchSpec,
        embedded: Option<&ServerHandle>,
    ) -> Result<(Plan, Vec<SkippedMode>), RunBenchError> {
        let modes = spec
            .names
            .clone()
            .unwrap_or_else(|| default_modes(spec.target.as_deref()));
        let timeout = spec.run.timeout;
        let mut plan = match (embedded, &spec.target) {
            (Some(e), _) => {
                // The embedded server always has all three; `start_embedded` enables them.
                let (tcp, http, dns) = (
                    e.tcp_addr.expect("embedded tcp listener"),
                    e.http_addr.expect("embedded http listener"),
                    e.dns_addr.expect("embedded dns responder"),
                );
                Plan {
                    name: DEFAULT_DNS_NAME.to_string(),
                    label: format!(
                        "{} ({DEFAULT_DNS_NAME} = {}, DNS at {dns})",
                        crate::report::Target::EMBEDDED,
                        tcp.ip()
                    ),
                    tcp_port: tcp.port(),
                    http_port: http.port(),
                    udp_port: e.udp_addr.map(|a| a.port()),
                    quic_port: e.quic_addr.map(|a| a.port()),
                    unix: e.unix_path.clone(),
                    resolver: ResolverAddr::At(spec.resolver.unwrap_or(dns)),
                    modes,
                    ip: Some(Arc::new(Names::fixed(tcp.ip()))),
                    search_conf: None,
                    system_search: Vec::new(),
                    stats_ip: None,
                    tls_port: e.tls_addr.map_or(0, |a| a.port()),
                    https_port: e.https_addr.map_or(0, |a| a.port()),
                    tls: None,
                }
            }
            (None, target) => {
                if spec.tcp_port == 0
                    || spec.http_port == 0
                    || spec.udp_port == Some(0)
                    || spec.quic_port == Some(0)
                {
                    return Err(RunBenchError::ZeroPort);
                }
                let host = target.clone().unwrap_or_default();
                Plan {
                    name: host.clone(),
                    label: host,
                    tcp_port: spec.tcp_port,
                    http_port: spec.http_port,
                    udp_port: spec.udp_port,
                    quic_port: spec.quic_port,
                    unix: spec.unix.clone(),
                    resolver: spec.resolver.map_or(ResolverAddr::System, ResolverAddr::At),
                    modes,
                    ip: None,
                    search_conf: None,
                    system_search: Vec::new(),
                    stats_ip: None,
                    tls_port: spec.tls_port,
                    https_port: spec.https_port,
                    tls: None,
                }
            }
        };
        if plan.modes.contains(&AddrMode::UncachedSearch) {
            let path = spec
                .resolv_conf
                .as_deref()
                .unwrap_or(std::path::Path::new(SYSTEM_RESOLV_CONF));
            plan.search_conf = Some(Arc::new(read_resolv_conf(path)?));
        }
        if plan.modes.contains(&AddrMode::System) {
            plan.system_search = system_resolv_conf()
                .map(|c| c.candidates(&plan.name))
                .unwrap_or_default();
        }
        let skipped = plan.preflight(spec.family, timeout)?;
        if plan.modes.is_empty() {
            return Err(RunBenchError::Unresolvable(skipped));
        }
        Ok((plan, skipped))
    }

    /// What the preflight probes at `ip`: every listener a transport of `spec` calls (in
    /// any of its security modes), an HTTP listener in each HTTP version the transports
    /// calling it speak (their `alpn`), and the HTTP one, for `/stats`, marked not needed
    /// when none calls it; `udp` and `unix` only when the target has them.
    pub(super) fn probes(&self, spec: &BenchSpec, ip: IpAddr) -> Vec<crate::preflight::Probe> {
        use crate::preflight::{Address, Listener, Probe};
        use crate::transport::tls::Alpn;
        let at = |port: u16| Address::Socket(SocketAddr::new(ip, port));
        // Each listener a run calls, once per protocol its transports speak there: HTTP/2
        // or HTTP/1.1 on an HTTP listener, HTTP/3 or the raw frames on the QUIC one.
        let mut needed: Vec<(Listener, bool, bool)> = Vec::new();
        for &security in &security_modes(spec) {
            for &kind in spec
                .transports
                .iter()
                .filter(|&&k| k.runs_secured(security))
            {
                let listener = kind.listener(security.is_tls());
                let located = match listener {
                    Listener::Udp => self.udp_port.is_some(),
                    Listener::Quic => self.quic_port.is_some(),
                    Listener::Unix => self.unix.is_some(),
                    _ => true,
                };
                let alpn = kind.facts().alpn;
                let (http2, h3) = (alpn == Alpn::H2, alpn == Alpn::H3);
                if located && !needed.contains(&(listener, http2, h3)) {
                    needed.push((listener, http2, h3));
                }
            }
        }
        let mut probes: Vec<Probe> = needed
            .iter()
            .map(|&(listener, http2, h3)| Probe {
                listener,
                at: match listener {
                    Listener::Tcp => at(self.tcp_port),
                    Listener::Http => at(self.http_port),
                    Listener::Udp => at(self.udp_port.unwrap_or_default()),
                    Listener::Quic => at(self.quic_port.unwrap_or_default()),
                    Listener::Tls => at(self.tls_port),
                    Listener::Https => at(self.https_port),
                    Listener::Unix => Address::Path(self.unix.clone().unwrap_or_default()),
                    // `TransportKind::listener` names the echo's listeners only.
                    Listener::Dns | Listener::DnsTcp => {
                        unreachable!("no transport calls the DNS responder")
                    }
                },
                needed: true,
                http2,
                h3,
            })
            .collect();
        if !needed.iter().any(|&(l, _, _)| l == Listener::Http) {
            probes.push(Probe {
                listener: Listener::Http,
                at: at(self.http_port),
                needed: false,
                http2: false,
                h3: false,
            });
        }
        probes.sort_by_key(|p| (p.listener, p.http2, p.h3));
        probes
    }

    /// Resolves the name once in every mode, all at once, so the whole check takes one
    /// `--timeout` at most. A mode the name does not resolve in is taken out of the run:
    /// every one of its calls would fail the same way, each waiting up to `--timeout`.
    /// Mode `ip` keeps its lookup as the run's address.
    fn preflight(
        &mut self,
        family: Family,
        timeout: Duration,
    ) -> Result<Vec<SkippedMode>, RunBenchError> {
        let deadline = Instant::now() + timeout;
        let known_ip = self.ip.clone();
        let plan = &*self;
        let checked: Vec<Result<Checked, RunBenchError>> = std::thread::scope(|scope| {
            let checks: Vec<_> = self
                .modes
                .iter()
                .map(|&mode| {
                    let known_ip = known_ip.clone();
                    scope.spawn(move || {
                        let names = match (mode, known_ip) {
                            (AddrMode::Ip, Some(ip)) => ip,
                            _ => Arc::new(plan.names(mode, family, timeout)?),
                        };
                        let (found, failed) = match names.lookup(deadline) {
                            Ok((ip, _)) => (Some(ip), None),
                            Err(e) => (
                                None,
                                Some(names.first_error().unwrap_or_else(|| e.to_string())),
                            ),
                        };
                        Ok(Checked {
                            mode,
                            names,
                            found,
                            failed,
                        })
                    })
                })
                .collect();
            checks
                .into_iter()
                .map(|check| {
                    check
                        .join()
                        .unwrap_or_else(|p| std::panic::resume_unwind(p))
                })
                .collect()
        });
        let mut skipped = Vec::new();
        self.modes.clear();
        for check in checked {
            let Checked {
                mode,
                names,
                found,
                failed,
            } = check?;
            self.stats_ip = self.stats_ip.or(found);
            match failed {
                Some(why) => skipped.push(SkippedMode { mode, why }),
                None => {
                    if mode == AddrMode::Ip {
                        self.ip = Some(names);
                    }
                    self.modes.push(mode);
                }
            }
        }
        Ok(skipped)
    }

    /// A resolver for the name in `mode`, with nothing cached yet.
    fn names(
        &self,
        mode: AddrMode,
        family: Family,
        timeout: Duration,
    ) -> Result<Names, ResolveNameError> {
        match (mode, &self.search_conf) {
            (AddrMode::UncachedSearch, Some(conf)) => {
                Names::new_searching(&self.name, family, self.resolver, timeout, conf)
            }
            _ => Names::new_mode(mode, &self.name, family, self.resolver, timeout),
        }
    }

    /// The names one lookup in `mode` tries, in order, when the mode follows a search list.
    pub(super) fn search_for(&self, mode: AddrMode) -> Vec<String> {
        match (mode, &self.search_conf) {
            (AddrMode::System, _) => self.system_search.clone(),
            (AddrMode::UncachedSearch, Some(conf)) => conf.candidates(&self.name),
            _ => Vec::new(),
        }
    }

    /// A fresh endpoint for one transport run: its own resolver, so caches start cold and
    /// the query count is the run's own.
    pub(super) fn endpoint(
        &self,
        mode: AddrMode,
        security: Security,
        spec: &BenchSpec,
    ) -> Result<Endpoint, RunBenchError> {
        let names = match (mode, &self.ip) {
            (AddrMode::Ip, Some(ip)) => ip.clone(),
            _ => Arc::new(self.names(mode, spec.family, spec.run.timeout)?),
        };
        if let (true, Some(options)) = (security.is_tls(), &self.tls) {
            let tls = TlsClient::new(security, &names.host(), options)?;
            return Ok(Endpoint::with_names(names, self.tls_port, self.https_port)
                .with_tls(Some(tls))
                .with_quic_port(self.quic_port.unwrap_or(0)));
        }
        Ok(Endpoint::with_names(names, self.tcp_port, self.http_port)
            .with_udp_port(self.udp_port.unwrap_or(0))
            .with_unix(self.unix.clone()))
    }
}

/// The security modes of a run: those asked for, `plain` when none are.
pub(super) fn security_modes(spec: &BenchSpec) -> Vec<Security> {
    if spec.security.is_empty() {
        vec![Security::Plain]
    } else {
        spec.security.clone()
    }
}
