//! A network namespace with its own `/etc/netns/NAME/resolv.conf`, for the root tests
//! that need the system resolver (getaddrinfo) to ask our responder on port 53.

use std::process::Command;

/// A network namespace and its /etc/netns entry, removed on drop, even when a test fails.
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// Creates namespace `name` whose processes read `resolv_conf` as /etc/resolv.conf.
    /// Panics (failing the test) without `ip`, or when the namespace cannot be made.
    pub fn create(name: &str, resolv_conf: &str) -> Netns {
        if Command::new("ip").arg("-V").output().is_err() {
            panic!("root but no `ip` command: install iproute2 (.ci/run does)");
        }
        // The value exists before anything is made, so a failure below still cleans up.
        let ns = Netns {
            name: name.to_string(),
        };
        let dir = format!("/etc/netns/{name}");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(format!("{dir}/resolv.conf"), resolv_conf).unwrap();
        let status = Command::new("ip")
            .args(["netns", "add", name])
            .status()
            .unwrap();
        assert!(status.success(), "ip netns add {name}");
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = std::fs::remove_dir_all(format!("/etc/netns/{}", self.name));
    }
}

/// Asserts that `report/testbed.sh` left nothing behind: its namespaces, its /etc/netns
/// entry, its veth pair, its server (on 10.77.0.1) and its userspace link.
pub fn assert_testbed_gone() {
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&netns.stdout);
    assert!(
        !list.contains("rb-srv") && !list.contains("rb-cli"),
        "namespaces left: {list}"
    );
    assert!(
        !std::path::Path::new("/etc/netns/rb-cli").exists(),
        "/etc/netns/rb-cli left"
    );
    let links = Command::new("ip").args(["link", "show"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&links.stdout).contains("rb-veth"),
        "veth left"
    );
    assert_not_running("rpcbench-echo .*10.77.0.1", "server");
    assert_not_running("rpcbench-link --a rb-srv", "link");
}

/// Asserts that no process whose command line matches `pattern` (`pgrep -f`) runs;
/// `what` names it in the failure.
pub fn assert_not_running(pattern: &str, what: &str) {
    let ps = Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .unwrap();
    assert!(
        ps.stdout.is_empty(),
        "{what} left running ({pattern}): {}",
        String::from_utf8_lossy(&ps.stdout)
    );
}
