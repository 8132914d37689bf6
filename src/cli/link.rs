//! `rpcbench-link`: the userspace link's command line.
//!
//! Every setting is checked before anything is made, so a bad value exits 2 with one line
//! and no device; a failure while setting up (no TUN support, a missing namespace) exits 1
//! after closing what was made, which deletes it. Once up, the link prints one `up` line,
//! forwards until SIGINT or SIGTERM, then prints one `stats` line per direction and exits 0.

use super::{EXIT_FAILED, EXIT_OK, one_line, parse_duration};
use crate::link::device::{self, Side};
use crate::link::forward::Link;
use crate::link::{self as link, CheckLinkError, LinkSettings};
use anyhow::Context;
use clap::Parser;
use nix::sys::signal::{SigSet, Signal};
use std::io::Write;
use std::process::ExitCode;

/// The MTU the devices get unless `--mtu` says: Ethernet's, as on the veth it replaces.
const DEFAULT_MTU: u16 = 1500;

/// Userspace network link for the rpcbench test bed: joins two network namespaces through
/// TUN devices and forwards IP packets with delay, jitter, loss, duplication, reordering and
/// a rate limit, the same in both directions. For kernels without netem. Needs root.
#[derive(Debug, Parser)]
#[command(
    name = "rpcbench-link",
    version,
    after_long_help = super::manuals::after_help("rpcbench-link")
)]
pub struct LinkArgs {
    /// Side A: `NS=IPV4/PREFIX` (e.g. `rb-srv=10.78.0.1/24`); the namespace must exist.
    #[arg(long, value_name = "NS=ADDR/PREFIX")]
    pub a: Side,
    /// Side B, like --a (e.g. `rb-cli=10.78.0.2/24`), in the same subnet.
    #[arg(long, value_name = "NS=ADDR/PREFIX")]
    pub b: Side,
    /// One-way delay (e.g. 1ms, 250us): a round trip pays it twice.
    #[arg(long, value_name = "DUR", default_value = "0s", allow_hyphen_values = true,
          value_parser = parse_delay)]
    pub delay: std::time::Duration,
    /// Jitter: standard deviation of a normal draw added to the delay (cut at 3 deviations,
    /// never below zero delay). Packets keep their order.
    #[arg(long, value_name = "DUR", default_value = "0s", allow_hyphen_values = true,
          value_parser = parse_delay)]
    pub jitter: std::time::Duration,
    /// Packet loss, percent (e.g. 0.5% or 0.5): independent, or bursty with --loss-burst.
    #[arg(long, value_name = "PERCENT", default_value = "0", allow_hyphen_values = true,
          value_parser = parse_percent)]
    pub loss: f64,
    /// Mean length of a loss burst, packets (at least 1): makes the loss Gilbert-Elliott,
    /// with --loss as its mean.
    #[arg(long, value_name = "PACKETS")]
    pub loss_burst: Option<f64>,
    /// Loss in the Gilbert-Elliott bad state, percent (above --loss).
    #[arg(long, value_name = "PERCENT", default_value = "100", value_parser = parse_percent)]
    pub loss_bad: f64,
    /// Share of packets sent twice, percent.
    #[arg(long, value_name = "PERCENT", default_value = "0", allow_hyphen_values = true,
          value_parser = parse_percent)]
    pub duplicate: f64,
    /// Share of packets that skip the delay and overtake those held, percent (netem's
    /// reorder; needs a delay to reorder anything).
    #[arg(long, value_name = "PERCENT", default_value = "0", allow_hyphen_values = true,
          value_parser = parse_percent)]
    pub reorder: f64,
    /// Rate limit in bits per second, with a unit: `100mbit`, `1gbit`, `512kbit`, `9600bit`
    /// (default: none). Packets queue for the rate before the delay.
    #[arg(long, value_name = "RATE", value_parser = parse_bit_rate)]
    pub rate: Option<u64>,
    /// Packets the rate limiter queues before it drops the next (tail drop; at least 1).
    #[arg(long, value_name = "PACKETS", default_value_t = link::DEFAULT_QUEUE)]
    pub queue: usize,
    /// The devices' MTU, bytes (68 to 65535).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MTU,
          value_parser = clap::value_parser!(u16).range(68..))]
    pub mtu: u16,
    /// Seed of the random draws (loss, jitter, duplication, reordering): the same seed
    /// replays the same choices for the same packets.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
}

impl LinkArgs {
    /// The link's settings, or the first one it cannot honour.
    pub fn settings(&self) -> Result<LinkSettings, CheckLinkError> {
        if self.rate == Some(0) {
            return Err(CheckLinkError::ZeroRate);
        }
        if self.queue == 0 {
            return Err(CheckLinkError::ZeroQueue);
        }
        Ok(LinkSettings {
            delay_ns: self.delay.as_nanos() as u64,
            jitter_ns: self.jitter.as_nanos() as u64,
            loss: link::loss_model(self.loss, self.loss_burst, self.loss_bad)?,
            duplicate: link::check_share("duplication", self.duplicate)?,
            reorder: link::check_share("reordering", self.reorder)?,
            rate_bps: self.rate,
            queue: self.queue,
        })
    }
}

/// Parses a delay; a negative one gets its own message.
fn parse_delay(text: &str) -> Result<std::time::Duration, String> {
    if text.trim().starts_with('-') {
        return Err(format!("{text:?}: a delay cannot be negative"));
    }
    let d = parse_duration(text)?;
    // Beyond an hour is a typo, and would overflow nothing but would hold every packet.
    if d > std::time::Duration::from_secs(3600) {
        return Err(format!("{text:?} is above 1 hour"));
    }
    Ok(d)
}

/// Parses a percentage, `0.5%` or `0.5`, from 0 to 100.
fn parse_percent(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let number = t.strip_suffix('%').unwrap_or(t);
    match number.trim().parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
        Ok(v) if v.is_finite() => Err(format!("{text:?} is outside 0 to 100%")),
        _ => Err(format!("{text:?} is not a percentage (e.g. 0.5%)")),
    }
}

/// Parses a rate in bits per second as tc writes it: `100mbit`, `1gbit`, `512kbit`,
/// `9600bit` (decimal prefixes). Zero is refused by [`LinkArgs::settings`] with its own
/// message.
pub fn parse_bit_rate(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let split = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let (number, unit) = lower.split_at(split);
    let scale = match unit {
        "bit" | "bps" => 1e0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        _ => {
            return Err(format!(
                "{text:?} is not a rate (use bit, kbit, mbit or gbit, e.g. 100mbit)"
            ));
        }
    };
    match number.parse::<f64>() {
        Ok(v) if v >= 0.0 && v * scale <= 1e12 => Ok((v * scale) as u64),
        _ => Err(format!("{text:?} is not a rate from 0 to 1000gbit")),
    }
}

/// Runs the link until SIGINT or SIGTERM. Exit 0 after a clean stop, 1 when it could not
/// be set up, 2 for bad usage; every failure is one line on stderr.
pub fn main() -> ExitCode {
    crate::init_tracing("rpcbench-link", 0);
    let args = LinkArgs::try_parse().unwrap_or_else(|e| super::usage_exit("rpcbench-link", e));
    let settings = match args.settings() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rpcbench-link: {e}");
            return ExitCode::from(super::EXIT_USAGE);
        }
    };
    match run(&args, &settings) {
        Ok(()) => ExitCode::from(EXIT_OK),
        Err(e) => {
            eprintln!("rpcbench-link: {}", one_line(&e));
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// Sets the link up, forwards until a signal, prints the counts.
fn run(args: &LinkArgs, settings: &LinkSettings) -> anyhow::Result<()> {
    if args.a.netns == args.b.netns {
        anyhow::bail!("--a and --b are both in namespace {:?}", args.a.netns);
    }
    // Blocked before any thread starts, so every thread inherits the mask and the signal
    // waits for the main thread's sigwait instead of killing the process mid-count.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals
        .thread_block()
        .context("cannot block SIGINT and SIGTERM")?;
    let a = device::open(&args.a, &device::device_name('a'), args.mtu)?;
    // If side B fails, returning drops A's device, which deletes it.
    let b = device::open(&args.b, &device::device_name('b'), args.mtu)?;
    let line = format!(
        "rpcbench-link: up {} in {} {}/{} <-> {} in {} {}/{}; {settings}",
        a.name,
        a.side.netns,
        a.side.addr,
        a.side.prefix,
        b.name,
        b.side.netns,
        b.side.addr,
        b.side.prefix
    );
    let link = Link::start(a, b, settings, args.seed).context("cannot start the link's threads")?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()?;
    let signal = signals.wait().context("waiting for SIGINT or SIGTERM")?;
    for stats in link.stats() {
        writeln!(out, "rpcbench-link: stats {stats}")?;
    }
    writeln!(out, "rpcbench-link: stopped by {}", signal.as_str())?;
    out.flush()?;
    // The devices close with the process, which deletes them; the threads blocked in
    // reads end with it, and need no join.
    std::process::exit(EXIT_OK.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &[&str]) -> Result<LinkSettings, String> {
        let args = [
            "rpcbench-link",
            "--a",
            "x=10.78.0.1/24",
            "--b",
            "y=10.78.0.2/24",
        ];
        let args = LinkArgs::try_parse_from(args.iter().chain(extra)).map_err(|e| e.to_string())?;
        args.settings().map_err(|e| e.to_string())
    }

    #[test]
    fn good_settings() {
        let s = parse(&["--delay", "5ms", "--loss", "0.5%", "--rate", "100mbit"]).unwrap();
        assert_eq!(s.delay_ns, 5_000_000);
        assert_eq!(s.loss, link::Loss::Independent(0.005));
        assert_eq!(s.rate_bps, Some(100_000_000));
    }

    #[test]
    fn bad_settings_are_refused() {
        for bad in [
            &["--delay", "-1ms"][..],
            &["--jitter", "-5us"],
            &["--loss", "101%"],
            &["--loss", "-1"],
            &["--duplicate", "200"],
            &["--rate", "0"],
            &["--rate", "0mbit"],
            &["--rate", "fast"],
            &["--queue", "0", "--rate", "1mbit"],
            &["--loss", "1", "--loss-burst", "0.5"],
            &["--mtu", "10"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(
            parse(&["--delay", "-1ms"])
                .unwrap_err()
                .contains("negative")
        );
    }

    #[test]
    fn bit_rates() {
        assert_eq!(parse_bit_rate("100mbit"), Ok(100_000_000));
        assert_eq!(parse_bit_rate("1.5Gbit"), Ok(1_500_000_000));
        assert_eq!(parse_bit_rate("9600bit"), Ok(9600));
        assert!(parse_bit_rate("100").is_err());
        assert!(parse_bit_rate("100MB").is_err());
    }
}
