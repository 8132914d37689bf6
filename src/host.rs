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

/// Where Linux keeps this process's state as `Name: value` lines (`man 5 proc`).
const SELF_STATUS: &str = "/proc/self/status";
/// This process's state as one line of fields (`man 5 proc`): the start time is there.
const SELF_STAT: &str = "/proc/self/stat";
/// This process's open file descriptors, one entry each.
const SELF_FD: &str = "/proc/self/fd";
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

/// The CPUs this process may run on (`Cpus_allowed_list`, e.g. `0` or `0-1`): how it was
/// pinned, which a latency figure cannot be read without.
pub fn cpu_affinity() -> String {
    self_status("Cpus_allowed_list").unwrap_or_default()
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
}
