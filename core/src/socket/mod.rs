//! The endpoint: one per session, the user's alone.
//!
//! On Unix it is a socket in the runtime root: the directory is 0700 and
//! the socket 0600, and yet the server checks the peer's uid on every
//! connection: permissions can be loosened by mistake, and a session accepts
//! keystrokes, so a second lock costs nothing. On Windows it is a named pipe
//! (see `windows.rs` for what guards it). Both offer one interface: bind,
//! accept (backing off when accepting fails), peer check and split on the
//! supervisor's side; a blocking connect for the short-lived commands,
//! which checks the server's side in turn ([`ForeignEndpoint`]): the path
//! it dials comes from a record.

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
    /// Windows: a pipe of the session's name exists, and no live session
    /// of ours holds it (that was asked first): another program took it.
    #[cfg(windows)]
    #[error("another program already holds the pipe {0} (no session of yours does); nothing was started")]
    NameTaken(PathBuf),
    #[error("cannot bind {path}: {source}")]
    Bind { path: PathBuf, source: io::Error },
}

/// An endpoint whose server is another user: nothing is sent to it and
/// nothing it says is believed. Carried in an `io::Error` of kind
/// `PermissionDenied`, so that every connect refuses it the same way, and
/// `doctor` names it on both platforms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("endpoint {} is served by {server}, not by you ({me}); nothing was sent to it. A record points at another user's endpoint: see agent-comms doctor", .path.display())]
pub struct ForeignEndpoint {
    pub path: PathBuf,
    /// The server as the platform names it: `uid 1001` on Unix, `process
    /// 4242` on Windows (whose user may not even be readable).
    pub server: String,
    /// This process's user: `uid 1000`, or a Windows SID.
    pub me: String,
}

impl From<ForeignEndpoint> for io::Error {
    fn from(e: ForeignEndpoint) -> Self {
        io::Error::new(io::ErrorKind::PermissionDenied, e)
    }
}

impl ForeignEndpoint {
    /// The refusal inside a connect error, if that is what it is.
    pub fn in_error(e: &io::Error) -> Option<&ForeignEndpoint> {
        e.get_ref()?.downcast_ref()
    }
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
