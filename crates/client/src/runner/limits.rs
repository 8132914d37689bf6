//! What a run may ask for: connections per engine and transport, and the open files
//! (`RLIMIT_NOFILE`) its connections need.
//!
//! Checked before a run starts, so a `-c` the process cannot hold is one line of usage
//! error naming the limit and its value, never a run that fails half-way with `EMFILE` on
//! some connects (counted as connect errors, which would look like the server's fault).

use super::{Engine, MAX_BLOCKING_WORKERS, MAX_CONCURRENCY, RunConfig, available_cpus};
use crate::transport::{FILES_PER_RUNTIME, TransportKind};
use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit, setrlimit};
use std::sync::OnceLock;

/// Open files the process keeps besides its connections: standard streams, the embedded
/// server's listeners and runtime, the resolvers' sockets and runtimes, the progress bar.
/// Counted generously: running out is a failed run, a spare descriptor costs nothing.
const BASE_FILES: u64 = 128;

/// Why a run cannot have the connections it asks for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadLimitError {
    /// More connections than any engine runs.
    #[error("-c {asked} is above the most connections a run may have ({max})")]
    TooManyConnections {
        /// Connections asked for.
        asked: usize,
        /// [`MAX_CONCURRENCY`].
        max: u16,
    },
    /// More workers than the blocking engine runs.
    #[error(
        "-c {asked} is above the {max} worker threads of the blocking engine{}",
        workers_hint(.kind, .evloop)
    )]
    TooManyWorkers {
        kind: TransportKind,
        /// Workers asked for.
        asked: usize,
        /// [`MAX_BLOCKING_WORKERS`].
        max: usize,
        /// True when the transport could run on the event loop instead.
        evloop: bool,
    },
    /// A `udp` payload or reply that one datagram cannot carry.
    #[error("udp: --{what} {bytes} does not fit in one datagram (at most {max} bytes of payload)")]
    DatagramTooLarge {
        /// `payload` or `reply`.
        what: &'static str,
        bytes: u32,
        /// [`crate::wire::MAX_UDP_MESSAGE_PAYLOAD`].
        max: usize,
    },
    /// The event loop asked for a transport that has none.
    #[error("{kind} has no event-loop engine: use --engine blocking or auto")]
    NoEventLoop { kind: TransportKind },
    /// More open files needed than the process may have.
    #[error(
        "-c {connections} ({kind}) needs about {need} open files, but RLIMIT_NOFILE is {limit} \
         (raised to its hard limit): raise it (ulimit -n) or lower -c"
    )]
    TooFewFiles {
        kind: TransportKind,
        /// Connections asked for.
        connections: usize,
        /// Open files the run would need ([`files_needed`]).
        need: u64,
        /// The soft `RLIMIT_NOFILE`, after raising it to the hard limit.
        limit: u64,
    },
}

/// What to do about too many workers: the event loop when the transport has one, else
/// which transports do.
fn workers_hint(kind: &TransportKind, evloop: &bool) -> String {
    if *evloop {
        " (leave --engine at auto, or use evloop)".into()
    } else {
        let with_loop: Vec<&str> = TransportKind::ALL
            .iter()
            .filter(|k| k.has_async())
            .map(|k| k.name())
            .collect();
        format!(
            ", the only engine {kind} has (the event loop runs {})",
            with_loop.join(", ")
        )
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, once per process, and returns the
/// soft limit in force. Only the soft limit is ours to raise; a hard limit of "infinity"
/// is capped by the kernel (`fs.nr_open`), so when raising to it fails the limit is left
/// as it was.
pub fn raise_file_limit() -> u64 {
    static RAISED: OnceLock<u64> = OnceLock::new();
    *RAISED.get_or_init(|| {
        let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
            // Unknown: assume nothing stands in the way, as the kernel will say otherwise.
            return RLIM_INFINITY;
        };
        if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
            hard
        } else {
            soft
        }
    })
}

/// About how many open files a run of `kind` over `connections` on `engine` needs:
/// a socket per connection (fresh transports hold one at a time), what each engine thread
/// or handle keeps besides, and, with the server in this process, the server's side of
/// each connection.
pub fn files_needed(
    kind: TransportKind,
    connections: usize,
    engine: Engine,
    server_in_process: bool,
) -> u64 {
    let connections = connections as u64;
    let per_connection = match engine {
        Engine::Evloop => 1,
        Engine::Blocking | Engine::Auto => 1 + kind.facts().files_per_worker,
    };
    let loops = match engine {
        Engine::Evloop => available_cpus() as u64 * FILES_PER_RUNTIME,
        Engine::Blocking | Engine::Auto => 0,
    };
    BASE_FILES + loops + connections * (per_connection + u64::from(server_in_process))
}

/// Fails when a run of `kind` over `connections` needs more open files than the process
/// may have, after raising the soft limit to the hard one.
pub(super) fn check_files(
    kind: TransportKind,
    connections: usize,
    engine: Engine,
    server_in_process: bool,
) -> Result<(), LoadLimitError> {
    let need = files_needed(kind, connections, engine, server_in_process);
    let limit = raise_file_limit();
    if need > limit {
        return Err(LoadLimitError::TooFewFiles {
            kind,
            connections,
            need,
            limit,
        });
    }
    Ok(())
}

/// Checks, before a run, that every transport in `transports` can run with `config`'s
/// connections and engine, and that the process may open the files they need (raising
/// its soft limit first); `server_in_process` counts the embedded server's side of each
/// connection too. The command line turns a failure into a usage error.
pub fn check_limits(
    transports: &[TransportKind],
    config: &RunConfig,
    server_in_process: bool,
) -> Result<(), LoadLimitError> {
    let connections = config.concurrency.max(1);
    debug_assert!(connections <= usize::from(MAX_CONCURRENCY) || transports.is_empty());
    debug_assert!(MAX_BLOCKING_WORKERS <= usize::from(MAX_CONCURRENCY));
    let cpus = available_cpus();
    for &kind in transports {
        if kind.port() == crate::transport::Port::Udp {
            check_datagram(config)?;
        }
        let engine = config.engine.pick(kind, connections, cpus)?;
        check_files(kind, connections, engine, server_in_process)?;
    }
    Ok(())
}

/// Fails when a `udp` request or reply of `config` cannot be one datagram.
fn check_datagram(config: &RunConfig) -> Result<(), LoadLimitError> {
    let max = crate::wire::MAX_UDP_MESSAGE_PAYLOAD;
    for (what, bytes) in [("payload", Some(config.payload)), ("reply", config.reply)] {
        if let Some(bytes) = bytes.filter(|&b| b as usize > max) {
            return Err(LoadLimitError::DatagramTooLarge { what, bytes, max });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_per_connection_by_engine_and_server() {
        let tcp = files_needed(
            TransportKind::from_name("tcp").unwrap(),
            1000,
            Engine::Blocking,
            false,
        );
        assert_eq!(tcp, BASE_FILES + 1000);
        let embedded = files_needed(
            TransportKind::from_name("tcp").unwrap(),
            1000,
            Engine::Blocking,
            true,
        );
        assert_eq!(embedded, BASE_FILES + 2000);
        let runtimes = files_needed(
            TransportKind::from_name("h2").unwrap(),
            1000,
            Engine::Blocking,
            false,
        );
        assert_eq!(runtimes, BASE_FILES + 1000 * (1 + FILES_PER_RUNTIME));
        let evloop = files_needed(
            TransportKind::from_name("h2").unwrap(),
            1000,
            Engine::Evloop,
            false,
        );
        assert!(evloop < runtimes && evloop > BASE_FILES + 1000, "{evloop}");
    }

    #[test]
    fn the_limit_is_raised_once_and_never_lowered() {
        let (soft_before, _) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        let raised = raise_file_limit();
        assert!(raised >= soft_before);
        assert_eq!(raise_file_limit(), raised);
        let too_many = LoadLimitError::TooFewFiles {
            kind: TransportKind::from_name("tcp").unwrap(),
            connections: 5000,
            need: 10_128,
            limit: 256,
        }
        .to_string();
        assert!(
            too_many.contains("RLIMIT_NOFILE is 256") && too_many.contains("10128"),
            "{too_many}"
        );
    }
}
