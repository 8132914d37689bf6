//! `rpcbench dns NAME`: the command line of [`crate::dnsdiag`].

use super::EXIT_OK;
use crate::dnsdiag::{self, DnsSpec, conf};
use crate::render;
#[cfg(doc)]
use crate::render::Format;
use anyhow::Context;
use std::io::Write;
use std::path::PathBuf;

/// Diagnoses the lookup of one name as this machine's C library would make it: the
/// queries it sends (search list, A and AAAA, retries, TCP after truncation), what each
/// costs and gets, the wasted part, getaddrinfo beside it, and what to change. Its exit
/// statuses are in [`super::manuals::EXTRAS`].
#[derive(Debug, clap::Args)]
pub struct DnsArgs {
    /// The name, as an application would look it up (a trailing dot makes it absolute).
    pub name: String,
    /// Lookups to make.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
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
    #[arg(long, value_name = "PORT", default_value_t = 53, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,
    /// Do not time getaddrinfo.
    #[arg(long, value_name = "FILE")]
    pub no_getaddrinfo: bool,
    /// Output format (no csv: the diagnosis is not one table).
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = DnsFormat::Table)]
    pub format: DnsFormat,
    /// Also write the diagnosis as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// The formats a diagnosis prints in: [`Format`] but csv, which a diagnosis of several
/// tables and sentences has no one table for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DnsFormat {
    /// Aligned tables for a terminal, then what to change.
    Table,
    /// The diagnosis as JSON.
    Json,
    /// GitHub-flavoured markdown.
    Markdown,
}

/// Reads the configuration, runs the diagnosis, prints it.
pub fn dns(args: &DnsArgs) -> anyhow::Result<u8> {
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
        DnsFormat::Json => {
            serde_json::to_writer_pretty(&mut stdout, &d).map_err(std::io::Error::from)?;
            writeln!(stdout)?;
        }
        DnsFormat::Markdown => render::dns::write_markdown(&d, &mut stdout)?,
        DnsFormat::Table => render::dns::write(&d, render::terminal_width(), &mut stdout)?,
    }
    stdout.flush()?;
    Ok(EXIT_OK)
}
