//! The programs every system runs, so that each row of a table measures the
//! same work and only the system around it differs.

use std::time::Duration;

/// The terminal type every system's programs see: they draw differently
/// (some not at all) for other values.
pub const TERM: &str = "xterm-256color";

/// The prompt the startup benchmark waits for, set through `PS1`.
pub const PROMPT: &str = "ready$ ";
/// What "the prompt is drawn" means on a screen or in a byte stream.
pub const PROMPT_SHOWN: &str = "ready$";

/// A shell without start-up files: the time measured is the system's, not
/// the user's `.bashrc`.
pub const SHELL: &[&str] = &["bash", "--norc"];

/// Throughput: 200 MB of 41-byte lines. Line-oriented like real program
/// output, so every system does its line feeds and scrolling; `yes` writes
/// far faster than any terminal reads, so the reader sets the pace.
pub const THROUGHPUT_BYTES: u64 = 200_000_000;

pub fn throughput_command() -> String {
    format!("yes 0123456789012345678901234567890123456789 | head -c {THROUGHPUT_BYTES}")
}

/// Echo: `cat` on a raw terminal writes back each byte it reads, one
/// `read`/`write` pair per keystroke, as an editor or a line editor does.
/// The line discipline's own echo is turned off so the byte comes back once,
/// from the program. The marker says the terminal is raw and `cat` runs.
pub const ECHO_READY: &str = "<echo-ready>";

pub fn echo_command() -> String {
    format!("stty raw -echo; printf '{ECHO_READY}'; exec cat")
}

/// The byte typed for keystroke `i`: letters in turn, so each echo is told
/// apart from the previous one.
pub fn key(i: usize) -> u8 {
    b'a' + (i % 26) as u8
}

/// How long any single step may take before the benchmark gives up on it.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether `needle` occurs in `haystack`.
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
