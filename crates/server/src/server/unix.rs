//! Unix socket listener (`--unix PATH`): the raw frame protocol of `tcp.rs`, served by the
//! same code (a [`FrameStream`] for Unix sockets), on a socket file this module creates
//! and removes.
//!
//! The socket file is the server's to create and nobody else's to lose: a path that is
//! anything but a socket nobody listens on is refused ([`UnixPathError`]), so a typo
//! cannot delete a file and a second server cannot steal the first one's clients. A stale
//! socket (left by a server that was killed: connecting to it is refused) is replaced.
//!
//! The socket is bound in a private directory (mode 0700) beside the path, given its mode
//! there, and renamed into place, so it is never reachable with the umask's mode: binding
//! at the path and then calling chmod leaves a window in which anyone the umask lets in
//! can connect. [`SocketFile`] removes it again when the server is dropped, whichever way
//! it stops.

use super::stats::{ProtoCounters, Reject, Stats};
use super::tcp::{FrameStream, Listener};
use super::{Shared, stopping};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// The default mode of the socket file: only the server's user may connect.
pub const DEFAULT_UNIX_MODE: u32 = 0o600;

/// Why the socket path cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum UnixPathError {
    /// Something that is not a socket is at the path (a regular file, a directory).
    #[error("{} exists and is a {kind}, not a socket; refusing to replace it", path.display())]
    NotASocket {
        path: PathBuf,
        /// What it is, for a person: `regular file`, `directory`, `symbolic link`.
        kind: &'static str,
    },
    /// A server is listening on the socket at the path (a connect was answered).
    #[error("{} is a socket a server is listening on; refusing to replace it", path.display())]
    InUse { path: PathBuf },
    /// The path could not be examined, or connecting to the socket there failed in a way
    /// that does not say it is stale (no permission).
    #[error("cannot tell whether {} may be replaced", path.display())]
    Unknown {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Binding, setting the mode or moving the socket into place failed.
    #[error("cannot listen on unix {}", path.display())]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The socket file at a path, removed when dropped, if it is still the one we made.
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    /// Device and inode of the socket we bound: a file put at the path since is not ours.
    id: (u64, u64),
}

impl SocketFile {
    /// Where the socket is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| m.file_type().is_socket() && (m.dev(), m.ino()) == self.id);
        if !ours {
            return;
        }
        if let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!("cannot remove {}: {e}", self.path.display());
        }
    }
}

/// Checks that `path` is free or a stale socket (which is left for the rename to replace).
fn check_path(path: &Path) -> Result<(), UnixPathError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(UnixPathError::Unknown {
                path: path.into(),
                source,
            });
        }
    };
    let kind = meta.file_type();
    if !kind.is_socket() {
        let kind = if kind.is_file() {
            "regular file"
        } else if kind.is_dir() {
            "directory"
        } else if kind.is_symlink() {
            "symbolic link"
        } else {
            "special file"
        };
        return Err(UnixPathError::NotASocket {
            path: path.into(),
            kind,
        });
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(UnixPathError::InUse { path: path.into() }),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Ok(()),
        Err(source) => Err(UnixPathError::Unknown {
            path: path.into(),
            source,
        }),
    }
}

/// Tells the private directories of servers started by one process apart.
static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

/// Binds a listening socket at `path` with `mode` (see the module's opening).
pub(super) fn bind(
    path: &Path,
    mode: u32,
) -> Result<(tokio::net::UnixListener, SocketFile), UnixPathError> {
    check_path(path)?;
    let bind_error = |source| UnixPathError::Bind {
        path: path.into(),
        source,
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = parent.join(format!(
        ".rpcbench-{}-{}",
        std::process::id(),
        NEXT_DIR.fetch_add(1, Relaxed)
    ));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(bind_error)?;
    let temp = dir.join("s");
    let bound = (|| {
        let listener = std::os::unix::net::UnixListener::bind(&temp)?;
        std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(mode))?;
        std::fs::rename(&temp, path)?;
        let meta = std::fs::symlink_metadata(path)?;
        listener.set_nonblocking(true)?;
        Ok((listener, (meta.dev(), meta.ino())))
    })();
    let _ = std::fs::remove_file(&temp);
    let _ = std::fs::remove_dir(&dir);
    let (listener, id) = bound.map_err(bind_error)?;
    let file = SocketFile {
        path: path.into(),
        id,
    };
    let listener = tokio::net::UnixListener::from_std(listener).map_err(bind_error)?;
    Ok((listener, file))
}

impl FrameStream for UnixStream {
    type Parked = tokio::net::UnixStream;
    const COUNTERS: fn(&Stats) -> &ProtoCounters = |s| &s.unix;
    const THREAD_NAME: &'static str = super::THREAD_NAMES[2];

    fn set_timeouts(&self, read: Duration, write: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(read))?;
        self.set_write_timeout(Some(write))
    }

    fn park(self) -> std::io::Result<tokio::net::UnixStream> {
        self.set_nonblocking(true)?;
        tokio::net::UnixStream::from_std(self)
    }

    async fn readable(parked: &tokio::net::UnixStream) -> std::io::Result<usize> {
        // tokio has no peek for Unix streams (and std's is unstable): readiness only. A
        // client's close then wakes a thread that reads end of file, which costs a
        // hand-off but counts the same.
        parked.readable().await.map(|()| 1)
    }

    async fn writable(parked: &tokio::net::UnixStream) -> std::io::Result<()> {
        parked.writable().await
    }

    fn unpark(parked: tokio::net::UnixStream) -> std::io::Result<UnixStream> {
        let stream = parked.into_std()?;
        stream.set_nonblocking(false)?;
        Ok(stream)
    }
}

/// Accepts connections on the Unix socket until shutdown starts, with the limits and
/// counting of every other listener.
pub(super) async fn accept_loop(listener: tokio::net::UnixListener, shared: Arc<Shared>) {
    let unix = Listener::<UnixStream>::new(shared.clone());
    loop {
        let stream = tokio::select! {
            res = listener.accept() => match res {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = stopping(shared.shutdown.clone()) => return,
        };
        let Some(guard) = shared.admit(|s: &Stats| &s.unix) else {
            continue;
        };
        let Ok(stream) = stream.into_std().and_then(|s| {
            s.set_nonblocking(false)?;
            Ok(s)
        }) else {
            shared.stats.reject(Reject::IoError);
            continue;
        };
        unix.serve(stream, guard);
    }
}
