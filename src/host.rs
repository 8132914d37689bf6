//! Facts of the machine this process runs on: its name, kernel, CPUs and CPU placement.
//!
//! A module on the bottom floor: it uses nothing else in the crate, so the client's report
//! (`report::Environment`) and the server's `/stats` both read the machine here without
//! either depending on the other. A fact that cannot be read is an empty string (or one
//! CPU), never an error: these facts describe a run, they do not decide whether it happens.
//!
//! Facts of this process that the kernel keeps under `/proc/self` belong here too (the
//! CPU seconds and resident memory a server reports, say); `self_status` reads the
//! `Name: value` lines of `/proc/self/status`.

/// Where Linux keeps this process's state as `Name: value` lines (`man 5 proc`).
const SELF_STATUS: &str = "/proc/self/status";

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
    status.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix(':')?;
        Some(value.trim().to_string())
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
}
