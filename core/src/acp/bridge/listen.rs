//! The bridge socket (Unix): beside the runtime's endpoint, the owner's
//! alone (0600 in the 0700 runtime directory) — or, when the policy lets
//! others attach, at the path it names, in a directory of the owner's that
//! nobody else may write to, open to all (0666) and guarded by the peer
//! check instead: the file mode cannot say "these uids and no others".
//!
//! A refused connection is told why in one JSON-RPC error (id null, as for
//! a request that could not be read) and closed; the refusal is counted
//! ([`Bridge::refused`]). Each uid holds a bounded number of connections
//! ([`bounds`](super::bounds)).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

use super::access::{admit, Credentials};
use super::{wire, Bridge, ClientLines, Peer};
pub use crate::socket::Listener;

/// Where the bridge listens: the policy's socket, else beside `endpoint`.
pub fn socket_path(endpoint: &Path, policy_socket: Option<&Path>) -> PathBuf {
    match policy_socket {
        Some(path) => path.to_owned(),
        None => endpoint.with_extension("acp.sock"),
    }
}

/// Binds the bridge socket at `path`; `shared`: others may reach it.
pub fn bind(path: &Path, shared: bool) -> io::Result<Option<Listener>> {
    if shared {
        let dir = path.parent().unwrap_or(Path::new("/"));
        let meta = std::fs::metadata(dir)?;
        crate::os::check_unwritable_dir(&meta).map_err(|why| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "the bridge socket's directory {} must be yours and writable by nobody else ({why:?}); pick another [clients] socket",
                    dir.display()
                ),
            )
        })?;
    }
    let (listener, _) = crate::socket::bind(path).map_err(io::Error::other)?;
    if shared {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    }
    Ok(Some(listener))
}

/// Accepts clients until the task is dropped; no faster than refusals are
/// paid back ([`bounds::REFUSED_PER_SECOND`](super::bounds::REFUSED_PER_SECOND)).
pub async fn serve(bridge: Arc<Bridge>, mut listener: Listener) {
    loop {
        let delay = bridge.connections().accept_delay();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let stream = listener.accept().await;
        tokio::spawn(admit_and_serve(bridge.clone(), stream));
    }
}

async fn admit_and_serve(bridge: Arc<Bridge>, mut stream: UnixStream) {
    let credentials = match credentials(&stream) {
        Ok(c) => c,
        Err(e) => {
            return refuse(
                &bridge,
                &mut stream,
                &format!("cannot read the peer's credentials: {e}"),
            )
            .await
        }
    };
    let role = match admit(bridge.policy(), crate::paths::euid(), &credentials) {
        Ok(role) => role,
        Err(why) => return refuse(&bridge, &mut stream, &why).await,
    };
    let _held = match bridge.connection_from(credentials.uid) {
        Ok(ticket) => ticket,
        Err(why) => return refuse(&bridge, &mut stream, &why).await,
    };
    let (read, write) = stream.into_split();
    let written = Arc::default();
    let lines = ClientLines {
        incoming: wire::incoming(read),
        outgoing: wire::outgoing(write, Arc::clone(&written)),
        written,
    };
    let peer = Peer {
        uid: credentials.uid,
        role,
        via: "socket",
    };
    bridge.serve(lines, peer).await;
}

async fn refuse(bridge: &Bridge, stream: &mut UnixStream, why: &str) {
    bridge.refused(&format!("a client: {why}"));
    bridge.connections().refused();
    let error = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": -32001, "message": why },
    });
    let mut line = error.to_string().into_bytes();
    line.push(b'\n');
    let _ = stream.write_all(&line).await;
    let _ = stream.shutdown().await;
}

fn credentials(stream: &UnixStream) -> io::Result<Credentials> {
    let cred = stream.peer_cred()?;
    let mut gids = vec![cred.gid()];
    if let Some(pid) = cred.pid() {
        gids.extend(supplementary_groups(pid as u32));
    }
    Ok(Credentials {
        uid: cred.uid(),
        gids,
    })
}

/// The peer's supplementary groups, from `/proc` where there is one (the
/// socket's credentials carry the primary group only).
fn supplementary_groups(pid: u32) -> Vec<u32> {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return Vec::new();
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|groups| {
            groups
                .split_whitespace()
                .filter_map(|g| g.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}
