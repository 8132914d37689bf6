//! Where rpcbench's own threads run: the CPU of the client's workers and the CPU of the
//! embedded server's threads.
//!
//! On a small VM the scheduler sometimes wakes the server on the other vCPU, and then every
//! call pays a cross-core wake-up (60-80 µs against a 5-20 µs round trip): two runs of the
//! same command differ 4-17×, and address modes that cannot matter seem to. So rpcbench
//! places its threads itself, by default all on one CPU ([`Placement::SameCore`]).
//!
//! A thread inherits its creator's CPU mask (`sched_setaffinity(2)`), so placing is done
//! on the thread that starts everything: it takes the server's CPU while the embedded
//! server starts (its runtime, connection and pool threads are created from there), then
//! the client's CPU for the run (workers, event loops, resolvers). [`Placed`] gives the
//! thread its mask back when dropped. The CPUs are picked from the mask the process was
//! given (`taskset`, a cgroup cpuset), never outside it.
//!
//! A module on the bottom floor, beside [`crate::host`]: it uses nothing else of the crate.

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// The calling thread's own state (`man 5 proc`); field 39 is the CPU it last ran on.
const THREAD_SELF_STAT: &str = "/proc/thread-self/stat";
/// The 1-based field of a task's `stat` holding the CPU it last ran on (`processor`).
const STAT_PROCESSOR_FIELD: usize = 39;
/// The first field after the command name in a `stat` line (`state`, field 3): the name is
/// in parentheses and may hold spaces, so fields are counted after its `)`.
const STAT_FIELD_AFTER_COMM: usize = 3;

/// How rpcbench places its threads (`--placement`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Client and embedded server on one CPU: each call's wake-up stays on that core, so
    /// figures agree between runs and between transports (the default).
    #[default]
    SameCore,
    /// The client on one CPU, the embedded server on another: every call crosses cores,
    /// as it would between two busy services on one host (needs two CPUs).
    Split,
    /// Not placed: the scheduler decides, and figures may move between runs.
    None,
}

impl Placement {
    /// The name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Placement::SameCore => "same-core",
            Placement::Split => "split",
            Placement::None => "none",
        }
    }
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a run's threads were placed, as the report records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementRecord {
    /// The setting used.
    pub placement: Placement,
    /// The CPUs the process was given (its mask when the run started), e.g. `0-1`.
    pub allowed: String,
    /// The CPU of the client's threads; `null` when not placed.
    pub client_cpu: Option<usize>,
    /// The CPU of the embedded server's threads; `null` when not placed, or when the
    /// server is remote (its placement is its host's).
    pub server_cpu: Option<usize>,
}

impl PlacementRecord {
    /// How a heading says it, e.g. `placed: client and server on CPU 1`.
    pub fn describe(&self) -> String {
        match (self.client_cpu, self.server_cpu) {
            (Some(c), Some(s)) if c == s => format!("placed: client and server on CPU {c}"),
            (Some(c), Some(s)) => format!("placed: client on CPU {c}, server on CPU {s}"),
            (Some(c), None) => {
                format!("placed: client on CPU {c}; the server's placement is its host's")
            }
            _ => format!("not placed (CPUs {})", self.allowed),
        }
    }
}

/// Why threads could not be placed as asked.
#[derive(Debug, thiserror::Error)]
pub enum PlaceThreadsError {
    /// `split` needs two CPUs and the process was given one.
    #[error("--placement split needs two CPUs, and this process may run on CPUs {allowed} only")]
    OneCpu { allowed: String },
    /// `split` places the embedded server, which a run against `--target` does not have.
    #[error(
        "--placement split places the embedded server; against --target the server's placement is its host's (use same-core or none)"
    )]
    SplitRemote,
    /// The kernel refused to read or set the mask.
    #[error("cannot set the CPU affinity of rpcbench's threads")]
    Affinity(#[source] nix::Error),
}

/// A thread placed for a run; gives the thread its original mask back when dropped.
#[derive(Debug)]
pub struct Placed {
    original: Option<CpuSet>,
    record: PlacementRecord,
}

impl Placed {
    /// Picks the CPUs for `placement` from the calling thread's mask, with an embedded
    /// server or not, and moves the calling thread onto the server's CPU (when there is
    /// one to start) or the client's. Call [`Placed::enter_client`] once the server runs.
    pub fn new(placement: Placement, embedded: bool) -> Result<Placed, PlaceThreadsError> {
        let original = sched_getaffinity(Pid::from_raw(0)).map_err(PlaceThreadsError::Affinity)?;
        let cpus = cpus_of(&original);
        let allowed = cpu_list(&cpus);
        let here = current_cpu().filter(|c| cpus.contains(c));
        let first = here.or_else(|| cpus.first().copied());
        let (client_cpu, server_cpu) = match placement {
            Placement::None => (None, None),
            Placement::SameCore => (first, if embedded { first } else { None }),
            Placement::Split if !embedded => return Err(PlaceThreadsError::SplitRemote),
            Placement::Split => {
                let client = first;
                let server = cpus.iter().copied().find(|&c| Some(c) != client);
                match server {
                    Some(s) => (client, Some(s)),
                    None => return Err(PlaceThreadsError::OneCpu { allowed }),
                }
            }
        };
        let placed = Placed {
            original: client_cpu.map(|_| original),
            record: PlacementRecord {
                placement,
                allowed,
                client_cpu,
                server_cpu,
            },
        };
        if let Some(cpu) = server_cpu.or(client_cpu) {
            pin_current_thread(cpu)?;
        }
        Ok(placed)
    }

    /// Moves the calling thread onto the client's CPU: threads it creates from now on (the
    /// run's workers) inherit it.
    pub fn enter_client(&self) -> Result<(), PlaceThreadsError> {
        match self.record.client_cpu {
            Some(cpu) => pin_current_thread(cpu),
            None => Ok(()),
        }
    }

    /// What was placed where.
    pub fn record(&self) -> &PlacementRecord {
        &self.record
    }
}

impl Drop for Placed {
    fn drop(&mut self) {
        if let Some(original) = self.original.take() {
            let _ = sched_setaffinity(Pid::from_raw(0), &original);
        }
    }
}

/// Pins the calling thread to `cpu`.
fn pin_current_thread(cpu: usize) -> Result<(), PlaceThreadsError> {
    let mut set = CpuSet::new();
    set.set(cpu).map_err(PlaceThreadsError::Affinity)?;
    sched_setaffinity(Pid::from_raw(0), &set).map_err(PlaceThreadsError::Affinity)
}

/// The CPUs in a mask, ascending.
fn cpus_of(set: &CpuSet) -> Vec<usize> {
    (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect()
}

/// CPUs as a `Cpus_allowed_list` writes them: `0-1`, `0,2-3`.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        parts.push(if end == start {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// The CPU the calling thread last ran on: starting on it moves nothing, and separate
/// runs (tests in one process, two rpcbench processes) spread over the CPUs they have
/// rather than all taking the first. `None` when `/proc` cannot tell.
fn current_cpu() -> Option<usize> {
    let stat = std::fs::read_to_string(THREAD_SELF_STAT).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 1..];
    after_comm
        .split_whitespace()
        .nth(STAT_PROCESSOR_FIELD - STAT_FIELD_AFTER_COMM)?
        .parse()
        .ok()
}

/// The CPUs the thread `tid` of this process may run on (`Cpus_allowed_list` of
/// `/proc/self/task/TID/status`), for checking where threads were placed.
pub fn thread_cpus(tid: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| Some(line.strip_prefix("Cpus_allowed_list:")?.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list(&[0]), "0");
        assert_eq!(cpu_list(&[0, 1]), "0-1");
        assert_eq!(cpu_list(&[0, 2, 3, 5]), "0,2-3,5");
        assert_eq!(cpu_list(&[]), "");
    }

    #[test]
    fn the_current_cpu_is_allowed() {
        let mask = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let cpu = current_cpu().expect("/proc/thread-self/stat has the processor field");
        assert!(mask.is_set(cpu).unwrap(), "ran on CPU {cpu}");
    }

    #[test]
    fn same_core_pins_the_thread_and_gives_the_mask_back() {
        std::thread::spawn(|| {
            let before = sched_getaffinity(Pid::from_raw(0)).unwrap();
            let placed = Placed::new(Placement::SameCore, true).unwrap();
            let r = placed.record().clone();
            let cpu = r.client_cpu.unwrap();
            assert_eq!(r.server_cpu, Some(cpu));
            let tid = nix::unistd::gettid().to_string();
            assert_eq!(thread_cpus(&tid).unwrap(), cpu.to_string());
            // A thread started now inherits the CPU.
            let child = std::thread::spawn(|| thread_cpus(&nix::unistd::gettid().to_string()));
            assert_eq!(child.join().unwrap().unwrap(), cpu.to_string());
            drop(placed);
            assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn none_places_nothing_and_split_needs_an_embedded_server() {
        let placed = Placed::new(Placement::None, true).unwrap();
        assert_eq!(placed.record().client_cpu, None);
        assert!(placed.record().describe().starts_with("not placed"));
        assert!(matches!(
            Placed::new(Placement::Split, false),
            Err(PlaceThreadsError::SplitRemote)
        ));
    }
}
