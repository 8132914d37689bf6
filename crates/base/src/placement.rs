//! Where rpcbench's own threads run: the CPU of the client's workers and the CPU of the
//! embedded server's threads.
//!
//! On a small VM the scheduler sometimes wakes the server on the other vCPU, and then every
//! call pays a cross-core wake-up (60-80 µs against a 5-20 µs round trip): two runs of the
//! same command differ 4-17×, and address modes that cannot matter seem to. So rpcbench
//! places its threads itself ([`Placement::Auto`]): all on one CPU for a latency run at
//! `-c 1`, the client and the embedded server on a CPU each when several workers load it.
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
    /// The default: `same-core` when one worker makes the calls (`-c 1`), or when the
    /// process has one CPU; `split` when several workers load an embedded server (each
    /// side then has a CPU of its own, as a load tool and its server on two machines
    /// would), the rows of 16 workers a default run adds too; against `--target` at `-c`
    /// above 1, the client's workers are not placed, so that they may use every CPU.
    #[default]
    Auto,
    /// Client and embedded server on one CPU: each call's wake-up stays on that core, so
    /// figures agree between runs and between transports.
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
            Placement::Auto => "auto",
            Placement::SameCore => "same-core",
            Placement::Split => "split",
            Placement::None => "none",
        }
    }
}

impl Placement {
    /// What `auto` stands for in a run of `concurrency` workers, with an embedded server
    /// or against a target, on a process allowed `cpus` CPUs; any other setting is itself.
    ///
    /// One worker waits for each reply, so a second CPU only adds a cross-core wake-up to
    /// every call: same core. Several workers keep the server busy, and on one CPU the
    /// client's and the server's work would queue behind each other: split, when there
    /// are two CPUs to split over.
    pub fn resolve(self, concurrency: usize, embedded: bool, cpus: usize) -> Placement {
        match self {
            Placement::Auto if concurrency <= 1 || cpus < 2 => Placement::SameCore,
            Placement::Auto if embedded => Placement::Split,
            Placement::Auto => Placement::None,
            other => other,
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
    /// The server is another process (`--target`): its placement is its host's
    /// (`rpcbench-echo --cpus` there). False in reports from before it.
    #[serde(default)]
    pub remote_server: bool,
    /// The client's CPU for the runs of several workers that a one-worker run with the
    /// embedded server adds (the multiplexing rows of a default run at 16 workers):
    /// `auto` splits them off the server's CPU, as it places a run of several workers.
    /// Absent when no run was so placed, and in reports from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_client_cpu: Option<usize>,
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
    /// Where `auto` puts the client of a run of several workers when it put the run's
    /// one worker on the server's CPU: another CPU (split).
    split_client_cpu: Option<usize>,
    /// Set once a run was placed on `split_client_cpu`.
    split_used: std::sync::atomic::AtomicBool,
}

impl Placed {
    /// Picks the CPUs for `placement` (`auto` resolved for `concurrency` workers) from
    /// the calling thread's mask, with an embedded server or not, and moves the calling
    /// thread onto the server's CPU (when there is one to start) or the client's. Call
    /// [`Placed::enter_client`] once the server runs.
    pub fn new(
        placement: Placement,
        concurrency: usize,
        embedded: bool,
    ) -> Result<Placed, PlaceThreadsError> {
        let original = sched_getaffinity(Pid::from_raw(0)).map_err(PlaceThreadsError::Affinity)?;
        let cpus = cpus_of(&original);
        let allowed = cpu_list(&cpus);
        let asked = placement;
        let placement = placement.resolve(concurrency, embedded, cpus.len());
        let here = current_cpu().filter(|c| cpus.contains(c));
        let first = here.or_else(|| cpus.first().copied());
        let (client_cpu, server_cpu) = match placement {
            Placement::None | Placement::Auto => (None, None),
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
        // `auto` at one worker, with an embedded server and a CPU to spare: a run of
        // several workers in it (a default run's multiplexing rows) is split off.
        let split_client_cpu = match (asked, placement, server_cpu) {
            (Placement::Auto, Placement::SameCore, Some(server)) => {
                cpus.iter().copied().find(|&c| c != server)
            }
            _ => None,
        };
        let placed = Placed {
            original: client_cpu.map(|_| original),
            record: PlacementRecord {
                placement,
                allowed,
                client_cpu,
                server_cpu,
                remote_server: !embedded,
                loaded_client_cpu: None,
            },
            split_client_cpu,
            split_used: std::sync::atomic::AtomicBool::new(false),
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

    /// Moves the calling thread onto the client's CPU for a run of `workers`: the
    /// client's, or, for several workers in a one-worker `auto` run with the embedded
    /// server, a CPU other than the server's (recorded as
    /// [`PlacementRecord::loaded_client_cpu`]). The threads the run starts inherit it.
    pub fn enter_for(&self, workers: usize) -> Result<(), PlaceThreadsError> {
        match self.split_client_cpu {
            Some(cpu) if workers > 1 => {
                self.split_used
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                pin_current_thread(cpu)
            }
            _ => self.enter_client(),
        }
    }

    /// What was placed where.
    pub fn record(&self) -> PlacementRecord {
        let used = self.split_used.load(std::sync::atomic::Ordering::Relaxed);
        PlacementRecord {
            loaded_client_cpu: self.split_client_cpu.filter(|_| used),
            ..self.record.clone()
        }
    }
}

impl Drop for Placed {
    fn drop(&mut self) {
        if let Some(original) = self.original.take() {
            let _ = sched_setaffinity(Pid::from_raw(0), &original);
        }
    }
}

/// Confines the calling thread, and every thread it starts from now on, to `cpus`
/// (`rpcbench-echo --cpus`): called first thing, before the server makes any thread.
/// Refused when a CPU is not in the mask the process was given (`taskset`, a cgroup), so
/// the server is never placed outside it.
pub fn confine(cpus: &[usize]) -> Result<(), ConfineError> {
    let original = sched_getaffinity(Pid::from_raw(0)).map_err(ConfineError::Affinity)?;
    let allowed = cpus_of(&original);
    if let Some(&outside) = cpus.iter().find(|c| !allowed.contains(c)) {
        return Err(ConfineError::Outside {
            cpu: outside,
            allowed: cpu_list(&allowed),
        });
    }
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu).map_err(ConfineError::Affinity)?;
    }
    sched_setaffinity(Pid::from_raw(0), &set).map_err(ConfineError::Affinity)
}

/// Why `rpcbench-echo --cpus` could not confine the server.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// A CPU of the list is not one this process may run on.
    #[error("--cpus: CPU {cpu} is not one this process may run on (CPUs {allowed})")]
    Outside { cpu: usize, allowed: String },
    /// The kernel refused to read or set the mask.
    #[error("--cpus: cannot set the CPU affinity")]
    Affinity(#[source] nix::Error),
}

/// A list of CPUs from the command line (`rpcbench-echo --cpus`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl CpuList {
    /// Parses the list ([`parse_cpu_list`]).
    pub fn parse(text: &str) -> Result<CpuList, String> {
        parse_cpu_list(text).map(CpuList)
    }
}

/// Parses a CPU list as `taskset -c` and `Cpus_allowed_list` write it (`0`, `0-1`,
/// `0,2-3`), ascending and without repeats.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("'{text}' is not a CPU list (such as 0, 1-3 or 0,2)");
    let mut cpus = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo, hi),
            None => (part, part),
        };
        let lo: usize = lo.trim().parse().map_err(|_| bad())?;
        let hi: usize = hi.trim().parse().map_err(|_| bad())?;
        if lo > hi || hi >= CpuSet::count() {
            return Err(bad());
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
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
    status_field(&status, "Cpus_allowed_list:")
}

/// A thread as `/proc` shows it: its id, name and the CPUs it may run on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ThreadMask {
    pub tid: String,
    pub name: String,
    pub cpus: String,
}

/// Every thread of process `pid` (`self` for this one) now, with where it may run, for
/// checking where threads were placed; empty when the process is gone.
pub fn thread_masks(pid: &str) -> Vec<ThreadMask> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        // A thread gone since the listing is left out.
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        let name = status_field(&status, "Name:");
        let cpus = status_field(&status, "Cpus_allowed_list:");
        if let (Some(name), Some(cpus)) = (name, cpus) {
            let tid = task.file_name().to_string_lossy().into_owned();
            out.push(ThreadMask { tid, name, cpus });
        }
    }
    out
}

/// The trimmed value of a `/proc/.../status` line that starts with `field`.
fn status_field(status: &str, field: &str) -> Option<String> {
    status
        .lines()
        .find_map(|line| Some(line.strip_prefix(field)?.trim().to_string()))
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
    fn cpu_lists_parse_as_taskset_writes_them() {
        assert_eq!(parse_cpu_list("0").unwrap(), [0]);
        assert_eq!(parse_cpu_list("0,2-3,5").unwrap(), [0, 2, 3, 5]);
        assert_eq!(parse_cpu_list("3,1-2,2").unwrap(), [1, 2, 3]);
        for bad in ["", "a", "1-", "3-1", "1,,2", "-1", "99999"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn auto_is_same_core_for_one_worker_and_split_for_load() {
        use Placement::*;
        assert_eq!(Auto.resolve(1, true, 2), SameCore);
        assert_eq!(Auto.resolve(16, true, 2), Split);
        assert_eq!(Auto.resolve(16, true, 1), SameCore);
        assert_eq!(Auto.resolve(1, false, 4), SameCore);
        assert_eq!(Auto.resolve(8, false, 4), None);
        assert_eq!(Split.resolve(1, true, 2), Split);
        assert_eq!(None.resolve(1, true, 2), None);
    }

    #[test]
    fn confining_outside_the_mask_is_refused() {
        let mask = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let outside = (0..CpuSet::count())
            .find(|&c| !mask.is_set(c).unwrap())
            .unwrap();
        let err = confine(&[outside]).unwrap_err();
        assert!(
            err.to_string().contains(&format!("CPU {outside} is not")),
            "{err}"
        );
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
            let placed = Placed::new(Placement::SameCore, 1, true).unwrap();
            let r = placed.record();
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

    /// `auto` at one worker with the embedded server puts both on one CPU, and a run of
    /// several workers in it (a default run's multiplexing rows) on another; the record
    /// says so once such a run was placed. Said only where the process has two CPUs.
    #[test]
    fn auto_splits_the_runs_of_several_workers_off_the_server_s_cpu() {
        let allowed = cpus_of(&sched_getaffinity(Pid::from_raw(0)).unwrap());
        if allowed.len() < 2 {
            return;
        }
        std::thread::spawn(|| {
            let placed = Placed::new(Placement::Auto, 1, true).unwrap();
            let r = placed.record();
            let server = r.server_cpu.unwrap();
            assert_eq!(r.client_cpu, Some(server), "one worker: same core");
            assert_eq!(r.loaded_client_cpu, None, "no run of several workers yet");
            let tid = || nix::unistd::gettid().to_string();
            placed.enter_for(1).unwrap();
            assert_eq!(thread_cpus(&tid()).unwrap(), server.to_string());
            placed.enter_for(16).unwrap();
            let loaded = placed.record().loaded_client_cpu.expect("recorded");
            assert_ne!(loaded, server);
            assert_eq!(thread_cpus(&tid()).unwrap(), loaded.to_string());
            placed.enter_for(1).unwrap();
            assert_eq!(thread_cpus(&tid()).unwrap(), server.to_string());
            // Asked for by name, same-core stays same-core for every run.
            let same = Placed::new(Placement::SameCore, 1, true).unwrap();
            same.enter_for(16).unwrap();
            assert_eq!(same.record().loaded_client_cpu, None);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn none_places_nothing_and_split_needs_an_embedded_server() {
        let placed = Placed::new(Placement::None, 1, true).unwrap();
        assert_eq!(placed.record().client_cpu, None);
        assert!(matches!(
            Placed::new(Placement::Split, 1, false),
            Err(PlaceThreadsError::SplitRemote)
        ));
    }
}
