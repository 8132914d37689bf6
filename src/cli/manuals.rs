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
/// `args.out`; returns the files written.
pub fn write(args: &ManualsArgs, programs: &[clap::Command]) -> anyhow::Result<Vec<PathBuf>> {
    let out = &args.out;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut written = Vec::new();
    for command in programs {
        let name = command.get_name().to_string();
        // Built, so that each subcommand's page is named after its full name
        // (`rpcbench-sweep.1`); the hidden ones are left out.
        let mut built = command.clone().disable_help_subcommand(true);
        built.build();
        let visible = built
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .cloned();
        for page in std::iter::once(built.clone()).chain(visible) {
            let path = clap_mangen::Man::new(page)
                .generate_to(out)
                .with_context(|| format!("writing a manual page of {name}"))?;
            written.push(path);
        }
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut command = command.clone();
            let path = clap_complete::generate_to(shell, &mut command, &name, out)
                .with_context(|| format!("writing the {shell} completions of {name}"))?;
            written.push(path);
        }
    }
    Ok(written)
}
