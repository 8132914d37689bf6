//! A running `rpcbench-link` between two namespaces, for the root tests of the link and
//! of the round-trip model: started under SCHED_FIFO where allowed, stopped with SIGINT
//! (its stats lines read back) or killed on drop.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest wait for the link to stop: 10× and more what it needs.
const PATIENCE: Duration = Duration::from_secs(10);

/// A running `rpcbench-link`, stopped with SIGINT (and its stats read) or killed on drop.
pub struct LinkProcess {
    pub child: Child,
}

impl LinkProcess {
    /// Starts the link between `a` and `b` (namespaces) on 10.`net`.0.1 and .2, with
    /// `extra` settings, under SCHED_FIFO where allowed; waits for its `up` line.
    pub fn start(a: &str, b: &str, net: u8, extra: &[&str]) -> LinkProcess {
        let bin = env!("CARGO_BIN_EXE_rpcbench-link");
        let mut cmd = if Command::new("chrt")
            .args(["-f", "50", "true"])
            .status()
            .is_ok_and(|s| s.success())
        {
            let mut c = Command::new("chrt");
            c.args(["-f", "50", bin]);
            c
        } else {
            Command::new(bin)
        };
        let mut child = cmd
            .arg("--a")
            .arg(format!("{a}=10.{net}.0.1/24"))
            .arg("--b")
            .arg(format!("{b}=10.{net}.0.2/24"))
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rpcbench-link");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("rpcbench-link: up "), "not up: {line:?}");
        LinkProcess { child }
    }

    /// Stops the link with SIGINT; returns its exit status and its stats lines as key-value
    /// maps, a to b first.
    pub fn stop(mut self) -> (Option<i32>, Vec<std::collections::HashMap<String, String>>) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "link did not stop on SIGINT");
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut out = String::new();
        std::io::Read::read_to_string(self.child.stdout.as_mut().unwrap(), &mut out).unwrap();
        let stats = out
            .lines()
            .filter_map(|l| l.strip_prefix("rpcbench-link: stats "))
            .map(|l| {
                l.split(' ')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            })
            .collect();
        (status.code(), stats)
    }
}

impl Drop for LinkProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A count from a stats line.
pub fn count(stats: &std::collections::HashMap<String, String>, key: &str) -> u64 {
    stats[key]
        .parse()
        .unwrap_or_else(|_| panic!("{key} in {stats:?}"))
}
