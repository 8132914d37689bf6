//! The link's TUN devices: made in this process's namespace, moved into their target
//! namespace, addressed and brought up there.
//!
//! The device is opened here with `tun-rs` (a maintained TUN crate: the `TUNSETIFF` ioctl
//! needs unsafe code, which stays in that crate) and moved with `ip link set DEV netns NS`.
//! The alternative, entering the namespace with `setns` on a thread and opening the device
//! there, needs no move but a thread per side that must never return to serve anything
//! else; the move keeps every thread of the link in one namespace. Addresses and the link
//! state are set with `ip -n NS`, the same tool the test bed uses, so a failure reads as
//! the same message a person would get.
//!
//! The device is not persistent: closing its descriptor (this process ending, even by
//! SIGKILL) deletes it, in whatever namespace it then sits.

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use tun_rs::{DeviceBuilder, SyncDevice};

/// Where `ip netns` keeps its named namespaces.
const NETNS_DIR: &str = "/run/netns";

/// Linux's limit on an interface name, without its terminating NUL (IFNAMSIZ - 1).
const MAX_IFNAME: usize = 15;

/// One side of the link: a namespace and the address the device gets in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    /// The network namespace's name (as `ip netns` lists it).
    pub netns: String,
    /// The device's IPv4 address there.
    pub addr: Ipv4Addr,
    /// The prefix length of the address (its subnet is routed through the device).
    pub prefix: u8,
}

impl std::str::FromStr for Side {
    type Err = String;

    /// Parses `NS=ADDR/PREFIX`, e.g. `rb-srv=10.78.0.1/24`.
    fn from_str(text: &str) -> Result<Side, String> {
        let bad = || format!("{text:?} is not NS=IPV4/PREFIX (e.g. rb-srv=10.78.0.1/24)");
        let (netns, cidr) = text.split_once('=').ok_or_else(bad)?;
        let (addr, prefix) = cidr.split_once('/').ok_or_else(bad)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        let name_ok = !netns.is_empty()
            && netns
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && !netns.starts_with('.');
        if !name_ok || !(1..=32).contains(&prefix) {
            return Err(bad());
        }
        Ok(Side {
            netns: netns.to_string(),
            addr,
            prefix,
        })
    }
}

/// Setting up a side of the link failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenDeviceError {
    /// The namespace does not exist.
    #[error("network namespace {0:?} does not exist (ip netns add {0})")]
    NoNamespace(String),
    /// The kernel would not make a TUN device.
    #[error("no TUN support: cannot create TUN device {name}: {source}")]
    Tun {
        /// The device name asked for.
        name: String,
        /// The kernel's answer.
        source: std::io::Error,
    },
    /// An `ip` command failed.
    #[error("`{command}` failed: {message}")]
    Ip {
        /// The command, as a person would type it.
        command: String,
        /// Its stderr, on one line, or why it did not run.
        message: String,
    },
}

/// One side's TUN device, open and configured in its namespace.
pub struct Device {
    /// The open device; closing it deletes the device.
    pub tun: SyncDevice,
    /// The device's name (the same inside its namespace).
    pub name: String,
    /// Where it sits and its address.
    pub side: Side,
}

/// The device name for side `tag` (`a` or `b`) of this process: `rbl<pid><tag>`, unique
/// among links running at once (the name must be free in this namespace before the move).
pub fn device_name(tag: char) -> String {
    let mut name = format!("rbl{}{tag}", std::process::id());
    name.truncate(MAX_IFNAME);
    name
}

/// Makes side `side`'s device named `name` with `mtu`, moves it into its namespace, turns
/// IPv6 off on it (so that router solicitations do not cross the link and its counts),
/// addresses it and brings it up. On failure the device is closed, which deletes it.
pub fn open(side: &Side, name: &str, mtu: u16) -> Result<Device, OpenDeviceError> {
    if !Path::new(NETNS_DIR).join(&side.netns).exists() {
        return Err(OpenDeviceError::NoNamespace(side.netns.clone()));
    }
    let tun = DeviceBuilder::new()
        .name(name)
        .mtu(mtu)
        .build_sync()
        .map_err(|source| OpenDeviceError::Tun {
            name: name.to_string(),
            source,
        })?;
    let ns = side.netns.as_str();
    ip(&["link", "set", name, "netns", ns])?;
    // A kernel built without IPv6 has no such sysctl, and nothing to turn off.
    let _ = run(
        "ip",
        &[
            "netns",
            "exec",
            ns,
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{name}.disable_ipv6=1"),
        ],
    );
    let cidr = format!("{}/{}", side.addr, side.prefix);
    ip(&["-n", ns, "addr", "add", &cidr, "dev", name])?;
    ip(&["-n", ns, "link", "set", name, "up"])?;
    Ok(Device {
        tun,
        name: name.to_string(),
        side: side.clone(),
    })
}

impl std::fmt::Debug for Device {
    /// The name and side; the descriptor has no `Debug` of its own.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("name", &self.name)
            .field("side", &self.side)
            .finish_non_exhaustive()
    }
}

/// Runs `ip ARGS`, failing with its stderr.
fn ip(args: &[&str]) -> Result<(), OpenDeviceError> {
    run("ip", args)
}

/// Runs `program ARGS`, failing with its stderr on one line.
fn run(program: &str, args: &[&str]) -> Result<(), OpenDeviceError> {
    let command = format!("{program} {}", args.join(" "));
    match Command::new(program).args(args).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(OpenDeviceError::Ip {
            command,
            message: String::from_utf8_lossy(&out.stderr)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        }),
        Err(e) => Err(OpenDeviceError::Ip {
            command,
            message: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_parse() {
        assert_eq!(
            "rb-srv=10.78.0.1/24".parse::<Side>(),
            Ok(Side {
                netns: "rb-srv".into(),
                addr: Ipv4Addr::new(10, 78, 0, 1),
                prefix: 24
            })
        );
        for bad in [
            "rb-srv",
            "=10.0.0.1/24",
            "a=10.0.0.1",
            "a=10.0.0.1/0",
            "a=10.0.0.1/33",
            "a=::1/64",
            "../x=10.0.0.1/24",
            "a b=10.0.0.1/24",
        ] {
            assert!(bad.parse::<Side>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn device_names_fit() {
        let name = device_name('a');
        assert!(name.len() <= MAX_IFNAME && name.starts_with("rbl"));
        assert_ne!(name, device_name('b'));
    }
}
