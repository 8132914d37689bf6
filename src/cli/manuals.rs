//! `rpcbench manuals --out DIR` (hidden): the manual pages and shell completions of the
//! three programs, generated from the same clap definitions as their `--help`, so that
//! they cannot drift from it.
//!
//! Writes `rpcbench.1` (listing every subcommand), one page per subcommand
//! (`rpcbench-sweep.1`, ...), `rpcbench-echo.1` and `rpcbench-link.1`, and for each
//! program its bash (`NAME.bash`), zsh (`_NAME`) and fish (`NAME.fish`) completions.

use anyhow::Context;
use clap_complete::Shell;
use std::path::PathBuf;

/// Where to write the manual pages and completions.
#[derive(Debug, clap::Args)]
pub struct ManualsArgs {
    /// Directory to write into, created if missing.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Writes every page and completion file of `programs` (their clap commands) into
/// `args.out`; returns the files in it.
pub fn write(args: &ManualsArgs, programs: &[clap::Command]) -> anyhow::Result<Vec<PathBuf>> {
    let out = &args.out;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for command in programs {
        let name = command.get_name().to_string();
        // A page for the program and one for each subcommand (`rpcbench-sweep.1`), the
        // hidden ones left out.
        clap_mangen::generate_to(command.clone(), out)
            .with_context(|| format!("writing the manual pages of {name}"))?;
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut command = command.clone();
            clap_complete::generate_to(shell, &mut command, &name, out)
                .with_context(|| format!("writing the {shell} completions of {name}"))?;
        }
    }
    let mut written: Vec<PathBuf> = std::fs::read_dir(out)
        .with_context(|| format!("reading {}", out.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    written.sort();
    Ok(written)
}
