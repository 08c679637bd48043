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

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;
