//! How log records reach stderr: for a person, one plain line per warning
//! (`rpcbench: warning: …`); for debugging (`RUST_LOG`, `-v`), tracing's full records.
//!
//! A person reading a warning wants the sentence, not a timestamp, a level padded for
//! alignment and a module path. Someone debugging wants all of that, and the debug
//! records of the libraries underneath, so `RUST_LOG` or `-v` switch to the full format.
//! Either way colour is used only on a terminal, and never when `NO_COLOR` is set
//! (<https://no-color.org>), so a log file or a pipe holds no escape sequences.

use std::io::IsTerminal;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The filter when neither `RUST_LOG` nor `-v` asks for more: warnings and errors.
const DEFAULT_FILTER: &str = "warn";
/// The filter of `-v`: rpcbench's own debug records, the libraries' warnings.
const VERBOSE_FILTER: &str = "warn,rpcbench=debug";
/// The filter of `-vv` and more: everything.
const VERY_VERBOSE_FILTER: &str = "trace";

/// ANSI SGR codes for the level word of a plain line, and the reset after it.
const YELLOW_BOLD: &str = "\x1b[1;33m";
const RED_BOLD: &str = "\x1b[1;31m";
const RESET: &str = "\x1b[0m";

/// True when stderr may carry colour: it is a terminal, and `NO_COLOR` is unset or empty.
pub fn stderr_colour() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && std::io::stderr().is_terminal()
}

/// Sends logs to stderr. `program` starts each plain line; `verbose` is the count of
/// `-v` flags. With `RUST_LOG` (its filter) or `-v`, every record is written in full
/// (time, level, module, fields); otherwise warnings and errors, one plain line each.
pub fn init_tracing(program: &'static str, verbose: u8) {
    let colour = stderr_colour();
    let from_env = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|_| tracing_subscriber::EnvFilter::try_from_default_env().ok());
    let full = from_env.is_some() || verbose > 0;
    let filter = from_env.unwrap_or_else(|| {
        tracing_subscriber::EnvFilter::new(match verbose {
            0 => DEFAULT_FILTER,
            1 => VERBOSE_FILTER,
            _ => VERY_VERBOSE_FILTER,
        })
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour);
    // `try_init` fails only when a subscriber is already set (a test calling twice):
    // the first one stays, which is what that caller wants.
    let _ = if full {
        builder.try_init()
    } else {
        builder
            .event_format(PlainLine { program, colour })
            .try_init()
    };
}

/// One record as `program: level: message fields`, the level word in colour when
/// `colour`: how a person is told about a warning.
pub struct PlainLine {
    pub program: &'static str,
    pub colour: bool,
}

impl<S, N> FormatEvent<S, N> for PlainLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let level = *event.metadata().level();
        let word = level_word(level);
        write!(writer, "{}: ", self.program)?;
        match (self.colour, level) {
            (true, Level::ERROR) => write!(writer, "{RED_BOLD}{word}{RESET}: ")?,
            (true, Level::WARN) => write!(writer, "{YELLOW_BOLD}{word}{RESET}: ")?,
            _ => write!(writer, "{word}: ")?,
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// The word a plain line names a level with.
fn level_word(level: Level) -> &'static str {
    match level {
        Level::ERROR => "error",
        Level::WARN => "warning",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}
