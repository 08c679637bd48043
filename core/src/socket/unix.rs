//! Unix: a socket file in the runtime root, and the peer's uid.

use std::path::Path;

use super::{is_dialable, BindOutcome, ForeignEndpoint, Listener, SocketError};
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

/// Connects to the endpoint at `path` and checks, before anything is
/// sent, that its server runs as our effective uid: an endpoint path comes
/// from a record (a session's, or a runtime's in the store), and a record
/// another user could once write may name a socket of theirs. Refused with
/// [`ForeignEndpoint`] (kind `PermissionDenied`).
pub fn connect(path: &Path) -> std::io::Result<ClientStream> {
    let stream = ClientStream::connect(path)?;
    let owner = server_uid(&stream)?;
    let me = euid();
    if owner != me {
        return Err(ForeignEndpoint {
            path: path.to_owned(),
            server: format!("uid {owner}"),
            me: format!("uid {me}"),
        }
        .into());
    }
    Ok(stream)
}

/// The effective uid of the process that listens at the other end (as it
/// was when it created the socket).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn server_uid(stream: &ClientStream) -> std::io::Result<u32> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    Ok(getsockopt(stream, PeerCredentials)?.uid())
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn server_uid(stream: &ClientStream) -> std::io::Result<u32> {
    Ok(nix::unistd::getpeereid(stream)?.0.as_raw())
}
