//! `rpcbench dns NAME`: the command line of [`crate::dnsdiag`].

use super::EXIT_OK;
use crate::dnsdiag::{self, DnsSpec, conf};
use crate::render::{self, Format};
use anyhow::Context;
use std::io::Write;
use std::path::PathBuf;

/// Diagnoses the lookup of one name as this machine's C library would make it: the
/// queries it sends (search list, A and AAAA, retries, TCP after truncation), what each
/// costs and gets, the wasted part, getaddrinfo beside it, and what to change.
///
/// Exit status: 0 after a diagnosis (whatever it found), 1 when none could be made (an
/// unreadable resolv.conf, a bad name, no nameserver, every query refused), 2 for bad usage.
#[derive(Debug, clap::Args)]
pub struct DnsArgs {
    /// The name, as an application would look it up (a trailing dot makes it absolute).
    pub name: String,
    /// Lookups to make.
    #[arg(short = 'n', long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub lookups: u32,
    /// The resolver configuration to read.
    #[arg(long, value_name = "FILE", default_value = "/etc/resolv.conf")]
    pub resolv_conf: PathBuf,
    /// The name service switch configuration (its `hosts:` line).
    #[arg(long, value_name = "FILE", default_value = "/etc/nsswitch.conf")]
    pub nsswitch: PathBuf,
    /// The hosts file.
    #[arg(long, value_name = "FILE", default_value = "/etc/hosts")]
    pub hosts: PathBuf,
    /// Ask the nameservers on this port instead of 53 (a test responder elsewhere);
    /// getaddrinfo, which cannot be told a port, is then not timed.
    #[arg(long, default_value_t = 53, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,
    /// Do not time getaddrinfo.
    #[arg(long)]
    pub no_getaddrinfo: bool,
    /// Output format (csv is not offered: the diagnosis is not one table).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Also write the diagnosis as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Reads the configuration, runs the diagnosis, prints it.
pub fn dns(args: &DnsArgs) -> anyhow::Result<u8> {
    if args.format == Format::Csv {
        return Err(super::UsageError {
            kind: clap::error::ErrorKind::InvalidValue,
            why: "rpcbench dns prints table, json or markdown, not csv".into(),
        }
        .into());
    }
    let path = args.resolv_conf.display().to_string();
    let text = std::fs::read_to_string(&args.resolv_conf)
        .with_context(|| format!("cannot read {path}"))?;
    let hostname = crate::host::hostname();
    let conf = conf::ResolvConf::parse(&text, &path, &hostname)?;
    // A missing nsswitch.conf or hosts file is what glibc copes with too.
    let nsswitch = std::fs::read_to_string(&args.nsswitch).ok();
    let hosts = std::fs::read_to_string(&args.hosts).unwrap_or_default();
    let spec = DnsSpec {
        hosts_answer: conf::hosts_lookup(&hosts, &args.name),
        name: args.name.clone(),
        resolv_conf_path: path,
        conf,
        hosts_sources: conf::hosts_sources(nsswitch.as_deref()),
        lookups: args.lookups,
        port: args.port,
        getaddrinfo: !args.no_getaddrinfo,
    };
    let d = dnsdiag::diagnose(&spec)?;
    if let Some(path) = &args.out {
        let json = serde_json::to_string_pretty(&d)? + "\n";
        std::fs::write(path, json).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let mut stdout = std::io::stdout().lock();
    match args.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut stdout, &d).map_err(std::io::Error::from)?;
            writeln!(stdout)?;
        }
        Format::Markdown => render::dns::write_markdown(&d, &mut stdout)?,
        Format::Table | Format::Csv => {
            render::dns::write(&d, render::terminal_width(), &mut stdout)?
        }
    }
    stdout.flush()?;
    Ok(EXIT_OK)
}
