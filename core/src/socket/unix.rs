//! Unix: a socket file in the runtime root, and the peer's uid.

use std::path::Path;

use super::{is_dialable, BindOutcome, Listener, SocketError};
use crate::paths::{euid, make_owner_only};

/// A connection as the supervisor sees it.
pub type Stream = tokio::net::UnixStream;
pub type ReadHalf = tokio::net::unix::OwnedReadHalf;
pub type WriteHalf = tokio::net::unix::OwnedWriteHalf;
/// A connection as a short-lived command sees it (blocking).
pub type ClientStream = std::os::unix::net::UnixStream;

pub(super) struct RawListener(tokio::net::UnixListener);

impl RawListener {
    pub async fn accept(&mut self) -> std::io::Result<Stream> {
        self.0.accept().await.map(|(stream, _)| stream)
    }
}

/// Binds `path` with mode 0600, replacing a stale socket but never a live one.
pub fn bind(path: &Path) -> Result<(Listener, BindOutcome), SocketError> {
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
        .map(|l| (Listener::new(RawListener(l)), outcome))
        .map_err(|source| SocketError::Bind {
            path: path.to_owned(),
            source,
        })
}

/// `Ok(())` when the peer runs as our effective uid.
pub fn check_peer(stream: &Stream) -> Result<(), String> {
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

/// Reading and writing halves that can live in one task each.
pub fn split(stream: Stream) -> (ReadHalf, WriteHalf) {
    stream.into_split()
}

pub fn connect(path: &Path) -> std::io::Result<ClientStream> {
    ClientStream::connect(path)
}
