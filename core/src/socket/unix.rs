//! Unix: a socket file in the runtime root, and the peer's uid.

use std::path::{Path, PathBuf};

use super::{fnv1a, BindOutcome, Listener, SocketError};
use crate::paths::{euid, make_owner_only};
use crate::session::{is_dialable, SessionName};

/// A connection as the supervisor sees it.
pub type Stream = tokio::net::UnixStream;
pub type ReadHalf = tokio::net::unix::OwnedReadHalf;
pub type WriteHalf = tokio::net::unix::OwnedWriteHalf;
/// A connection as a short-lived command sees it (blocking).
pub type ClientStream = std::os::unix::net::UnixStream;

/// Longest socket path we bind. `sun_path` holds 108 bytes on Linux and 104 on
/// the BSDs; leave room for the terminating NUL.
const MAX_SOCKET_PATH: usize = 100;

/// `<root>/<name>.sock`, or a hashed name when that would not fit.
pub fn endpoint_path(root: &Path, name: &SessionName) -> PathBuf {
    let plain = root.join(format!("{name}.sock"));
    if plain.as_os_str().len() <= MAX_SOCKET_PATH {
        plain
    } else {
        // A long root or name would overflow sun_path: hash the name. The
        // record (whose file name has no such limit) says which it is.
        // If even this does not fit, the root itself is too long and
        // binding fails with an error naming the path.
        root.join(format!("h{:016x}.sock", fnv1a(name.as_str().as_bytes())))
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_get_short_socket_paths() {
        let name = SessionName::parse(&"n".repeat(150)).unwrap();
        let paths = crate::session::SessionPaths::new(Path::new("/tmp/agent-comms-0"), &name);
        assert!(paths.socket.as_os_str().len() <= MAX_SOCKET_PATH);
        assert!(paths.record.ends_with(format!("{name}.json")));
    }
}
