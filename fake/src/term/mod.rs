//! The fake's own terminal: raw input, the size, and the signals that end
//! it. A trait-free pair of platform modules with one shape; main picks
//! by `cfg`.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::Terminal;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::Terminal;
