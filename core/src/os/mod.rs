//! What agent-comms needs from the operating system, one interface for Unix
//! and Windows.
//!
//! Every item here exists in both `unix.rs` and `windows.rs` with the same
//! name and meaning, and the rest of the crate calls `crate::os::…` without
//! asking which platform it runs on: the per-user directories, file
//! permissions, processes (alive, gone, killed), the terminal (raw mode,
//! size, resizes, Ctrl-C) and the plumbing of a detached supervisor. Where
//! Windows has no equivalent yet, its version says so in a comment and gives
//! the honest answer (unknown, nothing, or an error naming what is missing).
//!
//! The endpoint (`socket/`) and the pseudo-terminal (`pty/`) keep their own
//! platform files: each is one layer's business.

// One file per platform, the same items in each.
#[cfg_attr(unix, path = "unix.rs")]
#[cfg_attr(windows, path = "windows.rs")]
mod platform;
pub use platform::*;

/// A short, stable digest for endpoint names that must not grow with the
/// session name.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Why a directory or file is not the user's alone; the layer that knows
/// what the path is for words the error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotPrivate {
    ForeignOwner {
        owner: u32,
        me: u32,
    },
    /// Mode bits the group or others hold.
    Permissive {
        mode: u32,
    },
}
