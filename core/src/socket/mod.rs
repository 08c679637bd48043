//! The endpoint socket: one Unix socket per session, the user's alone.
//!
//! The directory is 0700 and the socket 0600, and yet the server checks the
//! peer's uid on every connection: permissions can be loosened by mistake, and
//! a session accepts keystrokes, so a second lock costs nothing.

pub mod codec;
pub mod protocol;

use std::io;
use std::path::{Path, PathBuf};

use crate::paths::{euid, make_owner_only};
use crate::session::is_dialable;

#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("a session is already listening on {0}")]
    InUse(PathBuf),
    #[error("cannot bind {path}: {source}")]
    Bind { path: PathBuf, source: io::Error },
}

/// What `bind` did with a socket file it found in the way.
#[derive(Debug, PartialEq, Eq)]
pub enum BindOutcome {
    Fresh,
    /// A socket nobody listened on was removed first.
    ReplacedStale,
}

/// Binds `path` with mode 0600, replacing a stale socket but never a live one.
pub fn bind(path: &Path) -> Result<(tokio::net::UnixListener, BindOutcome), SocketError> {
    let mut outcome = BindOutcome::Fresh;
    if path.exists() {
        if is_dialable(path) {
            return Err(SocketError::InUse(path.to_owned()));
        }
        let _ = std::fs::remove_file(path);
        outcome = BindOutcome::ReplacedStale;
    }
    let std_listener =
        std::os::unix::net::UnixListener::bind(path).map_err(|source| SocketError::Bind {
            path: path.to_owned(),
            source,
        })?;
    make_owner_only(path).map_err(|source| SocketError::Bind {
        path: path.to_owned(),
        source,
    })?;
    std_listener
        .set_nonblocking(true)
        .and_then(|_| tokio::net::UnixListener::from_std(std_listener))
        .map(|l| (l, outcome))
        .map_err(|source| SocketError::Bind {
            path: path.to_owned(),
            source,
        })
}

/// `Ok(())` when the peer runs as our effective uid.
pub fn check_peer(stream: &tokio::net::UnixStream) -> Result<(), String> {
    let cred = stream
        .peer_cred()
        .map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
    let me = euid();
    if cred.uid() == me {
        Ok(())
    } else {
        Err(format!(
            "connection refused: peer uid {} is not the session owner (uid {me})",
            cred.uid()
        ))
    }
}
