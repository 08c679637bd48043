//! The endpoint: one per session, the user's alone.
//!
//! On Unix it is a socket in the runtime root: the directory is 0700 and
//! the socket 0600, and yet the server checks the peer's uid on every
//! connection: permissions can be loosened by mistake, and a session accepts
//! keystrokes, so a second lock costs nothing. On Windows it is a named pipe
//! (see `windows.rs` for what guards it). Both offer one interface: bind,
//! accept (backing off when accepting fails), peer check and split on the
//! supervisor's side; a blocking connect for the short-lived commands.

mod accept;
pub mod codec;
pub mod limits;
pub mod protocol;

// One file per platform, the same items in each.
#[cfg_attr(unix, path = "unix.rs")]
#[cfg_attr(windows, path = "windows.rs")]
mod platform;
pub use platform::*;

use std::io;
use std::path::PathBuf;

pub use accept::Listener;

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

/// True when something accepts connections on `socket`: the probe the
/// session registry is given to tell a live session from a stale record.
pub fn is_dialable(socket: &std::path::Path) -> bool {
    connect(socket).is_ok()
}
