//! No bridge socket where there are no Unix sockets yet (Windows: its
//! named-pipe endpoint would need a bridge of its own): an ACP runtime
//! serves, and `acp attach` says it has no bridge.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Bridge;

/// Never made: [`bind`] binds nothing.
pub enum Listener {}

pub fn socket_path(endpoint: &Path, policy_socket: Option<&Path>) -> PathBuf {
    policy_socket.map_or_else(|| endpoint.with_extension("acp"), Path::to_owned)
}

pub fn bind(_path: &Path, _shared: bool) -> io::Result<Option<Listener>> {
    Ok(None)
}

pub async fn serve(_bridge: Arc<Bridge>, listener: Listener) {
    match listener {}
}
