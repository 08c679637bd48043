//! The one harness of the end-to-end tests (`tests/*.rs`), which run the
//! real binaries:
//!
//! - [`acp`]: ACP runtimes served by the fake agent, and their transcripts;
//! - [`acp_client`]: an ACP client on `acp attach`;
//! - [`env`]: one test's private world ([`env::TestEnv`]) and its cleanup
//!   by pid;
//! - [`run`]: the one bounded command runner;
//! - [`term`]: the one test-side terminal (a real PTY; size and query
//!   answering are options);
//! - [`procs`]: processes by pid, from /proc;
//! - [`fakes`]: the fake providers and the `interactive-serve` command line;
//! - [`cells`]: what the `k`/`km` tests add (tests/cells.rs);
//! - [`real`]: the real provider CLIs, offline, in a network namespace of
//!   their own (tests/real_providers.rs);
//! - [`wine`]: the Windows executables under Wine, each in a terminal of
//!   the test's (tests/windows.rs).

// Every suite is a crate of its own that compiles this whole module and
// uses a different part of it (cells.rs the `k` helpers, real_providers.rs
// the namespace world, sessions.rs neither): what one suite leaves unused
// another one uses.
#![allow(dead_code)]

pub mod acp;
pub mod acp_client;
pub mod cells;
pub mod env;
pub mod fakes;
pub mod procs;
pub mod raw;
pub mod real;
pub mod run;
pub mod term;
pub mod wine;

use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_agent-comms");

/// Upper bound for anything a test waits for. Generous: debug builds, and
/// every test runs in parallel with the others.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// Polls `done` until it holds, for conditions that have no event to wait
/// on; fails the test after [`TIMEOUT`].
#[track_caller]
pub fn wait_until(what: &str, done: impl FnMut() -> bool) {
    wait_until_within(TIMEOUT, what, done);
}

/// [`wait_until`] with a longer bound, for work that takes long by design.
#[track_caller]
pub fn wait_until_within(timeout: Duration, what: &str, mut done: impl FnMut() -> bool) {
    poll_within(timeout, what, || done().then_some(()));
}

/// Polls `check` until it returns `Some`, for states offered only by
/// polling; fails the test after `timeout`.
#[track_caller]
pub fn poll_within<T>(timeout: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}
