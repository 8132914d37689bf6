//! Facts of the machine this process runs on: its name, kernel, CPUs and CPU placement.
//!
//! A module on the bottom floor: it uses nothing else in the crate, so the client's report
//! (`report::Environment`) and the server's `/stats` both read the machine here without
//! either depending on the other. A fact that cannot be read is an empty string (or one
//! CPU), never an error: these facts describe a run, they do not decide whether it happens.
//!
//! Facts of this process that the kernel keeps are here too: [`process_cost`] (the CPU
//! seconds, resident memory, threads and files a server reports in `/stats` and
//! `/metrics`); `self_status` reads the `Name: value` lines of `/proc/self/status`.
//!
//! Layer 1 of the map in `lib.rs` (kinds and units): uses nothing above it.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Where Linux keeps this process's state as `Name: value` lines (`man 5 proc`).
const SELF_STATUS: &str = "/proc/self/status";
/// The calling thread's state, in the same format.
const THREAD_SELF_STATUS: &str = "/proc/thread-self/status";
/// This process's state as one line of fields (`man 5 proc`): the start time is there.
const SELF_STAT: &str = "/proc/self/stat";
/// This process's open file descriptors, one entry each.
const SELF_FD: &str = "/proc/self/fd";
/// One directory per thread of this process.
const SELF_TASK: &str = "/proc/self/task";
/// The machine's counters; its `btime` line is the boot time in Unix seconds.
const PROC_STAT: &str = "/proc/stat";
/// The 1-based field of `/proc/self/stat` holding the start time, in clock ticks after
/// boot (`man 5 proc`: field 22, `starttime`).
const STAT_STARTTIME_FIELD: usize = 22;
/// The first field after the command name in `/proc/self/stat` (`state`, field 3): the
/// name is in parentheses and may hold spaces, so fields are counted after its `)`.
const STAT_FIELD_AFTER_COMM: usize = 3;
/// Bytes in a `kB` of `/proc` (which means KiB).
const PROC_KB: u64 = 1024;

/// What this process has cost so far, read from the kernel when asked: the server's own
/// cost beside the work it did, so a client can see whether the server was the limit.
///
/// A figure that cannot be read is 0 (not Linux, `/proc` not mounted), as for the facts
/// of the machine. Serialised as the `process` object of `/stats`, under these names.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProcessCost {
    /// CPU time in user mode, all threads, since the process started (`getrusage`).
    pub cpu_user_s: f64,
    /// CPU time in the kernel on the process's behalf, all threads (`getrusage`).
    pub cpu_system_s: f64,
    /// Resident memory now (`VmRSS`), in bytes.
    pub rss_bytes: u64,
    /// Threads now (`Threads`).
    pub threads: u64,
    /// File descriptors open now: every connection is one.
    pub open_fds: u64,
    /// The soft limit of open file descriptors (`RLIMIT_NOFILE`); 0 when unlimited.
    pub max_fds: u64,
    /// When the process started, in Unix seconds (0 when unknown).
    pub start_time_s: f64,
}

/// One `process_*` family as the process collector of the Prometheus client libraries
/// names it, so that dashboards made for other programs read ours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessFamily {
    pub name: &'static str,
    /// A counter (only goes up); else a gauge.
    pub counter: bool,
    pub help: &'static str,
    pub value: f64,
}

impl ProcessCost {
    /// The `process_*` families of this cost, in the client libraries' order.
    pub fn families(&self) -> [ProcessFamily; 6] {
        let family = |name, counter, help, value| ProcessFamily {
            name,
            counter,
            help,
            value,
        };
        [
            family(
                "process_cpu_seconds_total",
                true,
                "Total user and system CPU time spent in seconds.",
                self.cpu_user_s + self.cpu_system_s,
            ),
            family(
                "process_resident_memory_bytes",
                false,
                "Resident memory size in bytes.",
                self.rss_bytes as f64,
            ),
            family(
                "process_start_time_seconds",
                false,
                "Start time of the process since unix epoch in seconds.",
                self.start_time_s,
            ),
            family(
                "process_threads",
                false,
                "Number of OS threads in the process.",
                self.threads as f64,
            ),
            family(
                "process_open_fds",
                false,
                "Number of open file descriptors.",
                self.open_fds as f64,
            ),
            family(
                "process_max_fds",
                false,
                "Maximum number of open file descriptors (0: unlimited).",
                self.max_fds as f64,
            ),
        ]
    }
}

/// This process's [`ProcessCost`] now.
pub fn process_cost() -> ProcessCost {
    use nix::sys::resource::{Resource, UsageWho, getrlimit, getrusage};
    let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    let (cpu_user_s, cpu_system_s) = getrusage(UsageWho::RUSAGE_SELF)
        .map(|u| (seconds(u.user_time()), seconds(u.system_time())))
        .unwrap_or_default();
    let status = std::fs::read_to_string(SELF_STATUS).unwrap_or_default();
    let number = |name| {
        status_field(&status, name)
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let max_fds = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, _)) if soft != nix::sys::resource::RLIM_INFINITY => soft,
        _ => 0,
    };
    ProcessCost {
        cpu_user_s,
        cpu_system_s,
        rss_bytes: number("VmRSS") * PROC_KB,
        threads: number("Threads"),
        open_fds: std::fs::read_dir(SELF_FD).map_or(0, |d| d.count() as u64),
        max_fds,
        start_time_s: start_time_s(),
    }
}

/// CPU seconds, user and system, of some of this process's threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ThreadsCpu {
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
}

/// Fields of `/proc/<pid>/task/<tid>/stat` (1-based, `man 5 proc`): CPU ticks in user and
/// kernel mode.
const STAT_UTIME_FIELD: usize = 14;
const STAT_STIME_FIELD: usize = 15;

/// Microseconds of CPU, user and system, that threads counted by [`threads_cpu`] had used
/// when they ended ([`note_thread_end`]): a thread that is gone is no longer in
/// `/proc/self/task`, but its work was done.
static ENDED_USER_US: AtomicU64 = AtomicU64::new(0);
static ENDED_SYSTEM_US: AtomicU64 = AtomicU64::new(0);

/// The CPU time of this process's threads named one of `names` (their `comm`, at most 15
/// bytes): the live ones from `/proc/self/task` (in clock ticks, 10 ms each on Linux), plus
/// the ended ones that called [`note_thread_end`]. How an echo server embedded in the
/// client's process tells its own cost from the client's.
pub fn threads_cpu(names: &[&str]) -> ThreadsCpu {
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    let mut ticks = (0u64, 0u64);
    for task in std::fs::read_dir(SELF_TASK).into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue; // ended meanwhile
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !names.contains(&&stat[open + 1..close]) {
            continue;
        }
        let mut fields = stat[close + 1..].split_whitespace();
        let mut field =
            |n: usize| -> u64 { fields.nth(n).and_then(|v| v.parse().ok()).unwrap_or(0) };
        let user = field(STAT_UTIME_FIELD - STAT_FIELD_AFTER_COMM);
        let system = field(STAT_STIME_FIELD - STAT_UTIME_FIELD - 1);
        ticks = (ticks.0 + user, ticks.1 + system);
    }
    ThreadsCpu {
        cpu_user_s: ticks.0 as f64 / hz + ENDED_USER_US.load(Relaxed) as f64 / 1e6,
        cpu_system_s: ticks.1 as f64 / hz + ENDED_SYSTEM_US.load(Relaxed) as f64 / 1e6,
    }
}

/// Called by a thread that [`threads_cpu`] counts, as it ends: keeps its CPU time.
pub fn note_thread_end() {
    use nix::sys::resource::{UsageWho, getrusage};
    if let Ok(u) = getrusage(UsageWho::RUSAGE_THREAD) {
        let us = |t: nix::sys::time::TimeVal| (t.tv_sec() * 1_000_000 + t.tv_usec()) as u64;
        ENDED_USER_US.fetch_add(us(u.user_time()), Relaxed);
        ENDED_SYSTEM_US.fetch_add(us(u.system_time()), Relaxed);
    }
}

/// When this process started, in Unix seconds: boot time plus the start's clock ticks
/// after boot. Read once; 0 when unknown.
fn start_time_s() -> f64 {
    static START: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *START.get_or_init(|| {
        let read = || -> Option<f64> {
            let stat = std::fs::read_to_string(SELF_STAT).ok()?;
            let after_comm = &stat[stat.rfind(')')? + 1..];
            let ticks: f64 = after_comm
                .split_whitespace()
                .nth(STAT_STARTTIME_FIELD - STAT_FIELD_AFTER_COMM)?
                .parse()
                .ok()?;
            let boot: f64 = std::fs::read_to_string(PROC_STAT)
                .ok()?
                .lines()
                .find_map(|l| l.strip_prefix("btime "))?
                .trim()
                .parse()
                .ok()?;
            let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
            Some(boot + ticks / hz as f64)
        };
        read().unwrap_or(0.0)
    })
}

/// The facts of a machine a peer reports about itself: the server's in `/stats`, so a
/// client's report names both ends of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HostFacts {
    /// [`hostname`].
    pub hostname: String,
    /// [`kernel`].
    pub kernel: String,
    /// [`cpus`]: the CPUs the process may run on.
    pub cpus: usize,
}

impl HostFacts {
    /// This machine's facts.
    pub fn detect() -> HostFacts {
        HostFacts {
            hostname: hostname(),
            kernel: kernel(),
            cpus: cpus(),
        }
    }
}

/// The addresses another host may call this one at: every address of an interface that is
/// up, but not loopback, nor IPv6 link-local (which needs the caller to name its own
/// interface too); IPv4 first. Empty when none can be read.
pub fn interface_addrs() -> Vec<std::net::IpAddr> {
    use nix::net::if_::InterfaceFlags;
    use std::net::IpAddr;
    let Ok(interfaces) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    let mut addrs: Vec<IpAddr> = interfaces
        .filter(|i| {
            i.flags.contains(InterfaceFlags::IFF_UP)
                && !i.flags.contains(InterfaceFlags::IFF_LOOPBACK)
        })
        .filter_map(|i| {
            let a = i.address?;
            a.as_sockaddr_in()
                .map(|v4| IpAddr::V4(v4.ip()))
                .or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
        })
        .filter(|ip| match ip {
            IpAddr::V4(v4) => !v4.is_loopback() && !v4.is_unspecified(),
            // fe80::/10: link-local.
            IpAddr::V6(v6) => {
                !v6.is_loopback() && !v6.is_unspecified() && (v6.segments()[0] & 0xffc0) != 0xfe80
            }
        })
        .collect();
    addrs.sort_by_key(|ip| (ip.is_ipv6(), *ip));
    addrs.dedup();
    addrs
}

/// The host name (`gethostname`).
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The kernel's name and release (`uname`), e.g. `Linux 6.1.0-18-amd64`.
pub fn kernel() -> String {
    nix::sys::utsname::uname()
        .map(|u| {
            format!(
                "{} {}",
                u.sysname().to_string_lossy(),
                u.release().to_string_lossy()
            )
        })
        .unwrap_or_default()
}

/// The CPUs this process may run on, as a count (1 when unknown).
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The CPUs the calling thread may run on (`Cpus_allowed_list`, e.g. `0` or `0-1`): how
/// it was pinned, which a latency figure cannot be read without. The thread's, not the
/// process's main thread's: rpcbench places the client's and the embedded server's
/// threads apart ([`crate::placement`]), and each side reads its own.
pub fn cpu_affinity() -> String {
    std::fs::read_to_string(THREAD_SELF_STATUS)
        .ok()
        .and_then(|s| status_field(&s, "Cpus_allowed_list").map(str::to_string))
        .or_else(|| self_status("Cpus_allowed_list"))
        .unwrap_or_default()
}

/// The value of the `name:` line of `/proc/self/status`, trimmed; `None` when the file or
/// the line is missing (not Linux, or a kernel without that field).
fn self_status(name: &str) -> Option<String> {
    let status = std::fs::read_to_string(SELF_STATUS).ok()?;
    status_field(&status, name).map(str::to_string)
}

/// The value of the `name:` line of a `/proc/.../status` text, trimmed.
fn status_field<'a>(status: &'a str, name: &str) -> Option<&'a str> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix(':')?;
        Some(value.trim())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_has_facts() {
        assert!(cpus() >= 1);
        assert!(!kernel().is_empty());
        // A CPU list is digits, commas and ranges, and lists at least one CPU.
        let affinity = cpu_affinity();
        assert!(
            !affinity.is_empty()
                && affinity
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == ',' || c == '-'),
            "{affinity:?}"
        );
        assert_eq!(self_status("No such field"), None);
    }

    #[test]
    fn this_process_has_a_cost() {
        // Burn a little CPU so that the figure cannot be a zero that was never read.
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(20) {
            std::hint::black_box(spin.elapsed());
        }
        let cost = process_cost();
        assert!(cost.cpu_user_s + cost.cpu_system_s > 0.0, "{cost:?}");
        assert!(
            cost.rss_bytes > 0 && cost.threads >= 1 && cost.open_fds >= 3,
            "{cost:?}"
        );
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // Started before now, and after 2020 (a start time of 0 or in ticks is a bug).
        assert!(
            cost.start_time_s <= now + 1.0 && cost.start_time_s > 1.577e9,
            "{cost:?}"
        );
    }

    /// The CPU of named threads: a thread that has burnt 200 ms of its own CPU is counted
    /// while it runs and, after [`note_thread_end`], once it is gone; a name no thread has
    /// counts nothing of them.
    #[test]
    fn named_threads_cpu_is_kept_after_they_end() {
        use nix::sys::resource::{UsageWho, getrusage};
        const NAME: &str = "rb-test-burn";
        let own_cpu = || {
            let u = getrusage(UsageWho::RUSAGE_THREAD).unwrap();
            let s = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            s(u.user_time()) + s(u.system_time())
        };
        let ended_before = ENDED_USER_US.load(Relaxed) + ENDED_SYSTEM_US.load(Relaxed);
        let (burnt_tx, burnt_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let burner = std::thread::Builder::new()
            .name(NAME.into())
            .spawn(move || {
                while own_cpu() < 0.2 {
                    std::hint::black_box(own_cpu());
                }
                burnt_tx.send(()).unwrap();
                let _ = go_rx.recv();
                note_thread_end();
            })
            .unwrap();
        burnt_rx.recv().unwrap();
        let live = threads_cpu(&[NAME]);
        let ended = (ENDED_USER_US.load(Relaxed) + ENDED_SYSTEM_US.load(Relaxed)) as f64 / 1e6;
        // Ticks of 10 ms: 200 ms burnt reads as at least 190.
        let live_own = live.cpu_user_s + live.cpu_system_s - ended;
        assert!(live_own >= 0.19, "{live:?}, ended {ended}");
        go_tx.send(()).unwrap();
        burner.join().unwrap();
        let ended_now = ENDED_USER_US.load(Relaxed) + ENDED_SYSTEM_US.load(Relaxed);
        assert!(
            (ended_now - ended_before) as f64 / 1e6 >= 0.2,
            "the ended thread's CPU was not kept"
        );
        // Other tests' server threads may end meanwhile, which only adds.
        let none = threads_cpu(&["no such thread"]);
        let ended_after = (ENDED_USER_US.load(Relaxed) + ENDED_SYSTEM_US.load(Relaxed)) as f64;
        assert!(
            none.cpu_user_s + none.cpu_system_s <= ended_after / 1e6 + 1e-6,
            "a name no thread has counts only ended threads: {none:?}"
        );
    }
}
