//! The probing itself: the lookups a resolver makes, sent one by one as glibc would,
//! timed, and getaddrinfo's own timing to hold them against.

use super::conf::ResolvConf;
use super::{Agg, Answer, DiagnoseError, Key, conf};
use crate::measure::{Hist, Summary};
use hickory_proto::op::{Message, MessageType, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// How one lookup went.
pub(super) struct Trace {
    pub(super) total: Duration,
    pub(super) wasted: Duration,
    pub(super) answered_by: Option<String>,
    /// Every answer was REFUSED.
    pub(super) refused_only: bool,
}

/// Sends one lookup's queries and records them.
pub(super) struct Prober<'a> {
    pub(super) conf: &'a ResolvConf,
    pub(super) servers: &'a [SocketAddr],
    /// The nameserver tried first (`rotate` moves it on each lookup).
    pub(super) first: usize,
    pub(super) aggs: &'a mut BTreeMap<Key, Agg>,
    pub(super) sent: u64,
}

/// One query's result: what it got, how long it took (the timeout for a timeout).
pub(super) struct Asked {
    pub(super) answer: Answer,
    pub(super) took: Duration,
}

impl Prober<'_> {
    pub(super) fn lookup(&mut self, candidates: &[String]) -> Result<Trace, DiagnoseError> {
        let mut total = Duration::ZERO;
        let mut wasted = Duration::ZERO;
        let mut refused_only = true;
        for cand in candidates {
            let name = Name::from_ascii(cand)
                .map_err(|_| conf::CheckNameError::EmptyLabel { name: cand.clone() })?;
            let types = [RecordType::A, RecordType::AAAA];
            let mut results = Vec::new();
            let mut took = Duration::ZERO;
            if self.conf.single_request {
                for t in types {
                    let (answer, t_took, lost) = self.ask_type(cand, &name, t)?;
                    took += t_took;
                    wasted += lost;
                    results.push(answer);
                }
            } else {
                let (pair, t_took, lost) = self.ask_pair(cand, &name)?;
                took += t_took;
                wasted += lost;
                results.extend(pair);
            }
            total += took;
            refused_only &= results.iter().all(|a| {
                matches!(
                    a,
                    Answer::Code {
                        code: ResponseCode::Refused,
                        ..
                    }
                )
            });
            if results.iter().any(|a| a.has_records()) {
                return Ok(Trace {
                    total,
                    wasted,
                    answered_by: Some(cand.clone()),
                    refused_only: false,
                });
            }
            // A miss (NXDOMAIN, no data, SERVFAIL) moves on, as glibc does; a timeout on
            // every try, or a refusal, ends the search.
            wasted += took;
            let moves_on = results.iter().all(|a| {
                matches!(
                    a,
                    Answer::Code {
                        code: ResponseCode::NXDomain
                            | ResponseCode::NoError
                            | ResponseCode::ServFail,
                        ..
                    }
                )
            });
            if !moves_on {
                break;
            }
        }
        Ok(Trace {
            total,
            wasted,
            answered_by: None,
            refused_only,
        })
    }

    /// A and AAAA sent together, as glibc's getaddrinfo does: both on one socket, then
    /// both answers waited for. A type that times out is retried on its own. Returns
    /// both answers, the time until the later one, and the time lost to timeouts.
    fn ask_pair(
        &mut self,
        cand: &str,
        name: &Name,
    ) -> Result<(Vec<Answer>, Duration, Duration), DiagnoseError> {
        if self.conf.use_vc {
            let a = self.ask_type(cand, name, RecordType::A)?;
            let b = self.ask_type(cand, name, RecordType::AAAA)?;
            return Ok((vec![a.0, b.0], a.1 + b.1, a.2 + b.2));
        }
        let mut answers = [None, None];
        let types = [RecordType::A, RecordType::AAAA];
        let mut elapsed = Duration::ZERO;
        let mut lost = Duration::ZERO;
        let n = self.servers.len();
        'rounds: for attempt in 1..=self.conf.attempts {
            for k in 0..n {
                let server = self.servers[(self.first + k) % n];
                let pending: Vec<usize> = (0..2).filter(|&i| answers[i].is_none()).collect();
                if pending.is_empty() {
                    break 'rounds;
                }
                let asked = self.udp(
                    server,
                    name,
                    &pending.iter().map(|&i| types[i]).collect::<Vec<_>>(),
                )?;
                let round = asked.iter().map(|a| a.took).max().unwrap_or_default();
                elapsed += round;
                for (&i, a) in pending.iter().zip(&asked) {
                    self.record(cand, types[i], server, false, attempt, a);
                    match a.answer {
                        Answer::Timeout => {}
                        Answer::Code {
                            truncated: true, ..
                        } => {
                            // Asked again over TCP; the UDP answer is thrown away.
                            let tcp = self.tcp(server, name, types[i]);
                            self.record(cand, types[i], server, true, attempt, &tcp);
                            elapsed += tcp.took;
                            lost += a.took;
                            answers[i] = Some(tcp.answer);
                        }
                        answer => answers[i] = Some(answer),
                    }
                }
                if asked.iter().any(|a| a.answer == Answer::Timeout) {
                    lost += round
                        - asked
                            .iter()
                            .filter(|a| a.answer != Answer::Timeout)
                            .map(|a| a.took)
                            .max()
                            .unwrap_or_default();
                }
            }
        }
        let answers = answers.map(|a| a.unwrap_or(Answer::Timeout)).to_vec();
        Ok((answers, elapsed, lost))
    }

    /// One type on its own (single-request, or use-vc): tries over the nameservers and
    /// rounds until one answers.
    fn ask_type(
        &mut self,
        cand: &str,
        name: &Name,
        t: RecordType,
    ) -> Result<(Answer, Duration, Duration), DiagnoseError> {
        let mut elapsed = Duration::ZERO;
        let mut lost = Duration::ZERO;
        let n = self.servers.len();
        for attempt in 1..=self.conf.attempts {
            for k in 0..n {
                let server = self.servers[(self.first + k) % n];
                let a = if self.conf.use_vc {
                    self.tcp(server, name, t)
                } else {
                    self.udp(server, name, &[t])?.remove(0)
                };
                self.record(cand, t, server, self.conf.use_vc, attempt, &a);
                elapsed += a.took;
                match a.answer {
                    Answer::Timeout => lost += a.took,
                    Answer::Code {
                        truncated: true, ..
                    } => {
                        let tcp = self.tcp(server, name, t);
                        self.record(cand, t, server, true, attempt, &tcp);
                        elapsed += tcp.took;
                        lost += a.took;
                        return Ok((tcp.answer, elapsed, lost));
                    }
                    answer => return Ok((answer, elapsed, lost)),
                }
            }
        }
        Ok((Answer::Timeout, elapsed, lost))
    }

    /// Sends one query per type on one UDP socket, then waits for their answers until the
    /// timeout; each is timed from its own send.
    fn udp(
        &mut self,
        server: SocketAddr,
        name: &Name,
        types: &[RecordType],
    ) -> Result<Vec<Asked>, DiagnoseError> {
        let socket_err = |source| DiagnoseError::Socket { server, source };
        let bind: SocketAddr = if server.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let socket = UdpSocket::bind(bind).map_err(socket_err)?;
        socket.connect(server).map_err(socket_err)?;
        let mut pending: Vec<(u16, Instant)> = Vec::new();
        for &t in types {
            let id = query_id();
            let bytes = query_bytes(id, name, t, self.conf.edns0);
            let sent = Instant::now();
            // A send refused at once (no route) is a timeout for glibc too.
            let _ = socket.send(&bytes);
            self.sent += 1;
            pending.push((id, sent));
        }
        let deadline = pending[0].1 + self.conf.timeout();
        let mut got: Vec<Option<Asked>> = types.iter().map(|_| None).collect();
        let mut buf = [0u8; 4096];
        while got.iter().any(Option::is_none) {
            let Some(left) = deadline
                .checked_duration_since(Instant::now())
                .filter(|d| !d.is_zero())
            else {
                break;
            };
            let _ = socket.set_read_timeout(Some(left));
            let Ok(n) = socket.recv(&mut buf) else {
                // A timeout, or an ICMP error (port unreachable) from an earlier send,
                // which glibc also treats as no answer from this server.
                continue;
            };
            let now = Instant::now();
            let Ok(msg) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            if msg.metadata.message_type != MessageType::Response {
                continue;
            }
            if let Some(i) = pending.iter().position(|(id, _)| *id == msg.metadata.id)
                && got[i].is_none()
            {
                got[i] = Some(Asked {
                    answer: answer_of(&msg),
                    took: now - pending[i].1,
                });
            }
        }
        Ok(got
            .into_iter()
            .enumerate()
            .map(|(i, a)| {
                a.unwrap_or(Asked {
                    answer: Answer::Timeout,
                    took: deadline.saturating_duration_since(pending[i].1),
                })
            })
            .collect())
    }

    /// One query over TCP (RFC 7766), within the timeout.
    fn tcp(&mut self, server: SocketAddr, name: &Name, t: RecordType) -> Asked {
        self.sent += 1;
        let timeout = self.conf.timeout();
        let start = Instant::now();
        let run = || -> std::io::Result<Answer> {
            let mut s = TcpStream::connect_timeout(&server, timeout)?;
            let left = timeout
                .saturating_sub(start.elapsed())
                .max(Duration::from_millis(1));
            s.set_read_timeout(Some(left))?;
            s.set_write_timeout(Some(left))?;
            let id = query_id();
            let bytes = query_bytes(id, name, t, self.conf.edns0);
            let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(&bytes);
            s.write_all(&framed)?;
            let mut len = [0u8; 2];
            s.read_exact(&mut len)?;
            let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
            s.read_exact(&mut msg)?;
            let msg = Message::from_vec(&msg)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            Ok(answer_of(&msg))
        };
        let answer = run().unwrap_or(Answer::Timeout);
        Asked {
            answer,
            took: start.elapsed(),
        }
    }

    fn record(
        &mut self,
        cand: &str,
        t: RecordType,
        server: SocketAddr,
        tcp: bool,
        attempt: u32,
        a: &Asked,
    ) {
        let order = self.aggs.len();
        let agg = self
            .aggs
            .entry((cand.to_string(), t, server, tcp, attempt))
            .or_insert_with(|| Agg {
                order,
                answers: BTreeMap::new(),
                time: Hist::default(),
                wasted: false,
                min_ttl: None,
            });
        *agg.answers.entry(a.answer.kind()).or_default() += 1;
        agg.time.record(a.took);
        if let Answer::Code {
            min_ttl: Some(ttl), ..
        } = a.answer
        {
            agg.min_ttl = Some(agg.min_ttl.map_or(ttl, |m| m.min(ttl)));
        }
        agg.wasted |= matches!(
            a.answer,
            Answer::Timeout
                | Answer::Code {
                    truncated: true,
                    ..
                }
        );
    }
}

/// A query id: the low bits of the clock, different from one query to the next.
pub(super) fn query_id() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering::Relaxed};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (nanos as u16) ^ NEXT.fetch_add(0x9e37, Relaxed)
}

/// The bytes of a recursive query for `name`/`t`.
pub(super) fn query_bytes(id: u16, name: &Name, t: RecordType, edns0: bool) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = id;
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(name.clone(), t));
    if edns0 {
        let mut edns = hickory_proto::op::Edns::new();
        edns.set_max_payload(1232);
        m.set_edns(edns);
    }
    m.to_vec().unwrap_or_default()
}

pub(super) fn answer_of(msg: &Message) -> Answer {
    Answer::Code {
        code: msg.metadata.response_code,
        records: msg.answers.len(),
        min_ttl: msg.answers.iter().map(|r| r.ttl).min(),
        truncated: msg.metadata.truncation,
    }
}

/// Times `getaddrinfo(name)` (all families, as an application would ask) `n` times.
pub(super) fn time_getaddrinfo(name: &str, n: u32) -> Option<Summary> {
    use std::net::ToSocketAddrs;
    let mut h = Hist::default();
    for _ in 0..n {
        let start = Instant::now();
        let _ = (name.trim_end_matches('.'), 0).to_socket_addrs();
        h.record(start.elapsed());
    }
    h.summary()
}
