//! The one bounded command runner: a command run to completion with piped
//! output, killed by pid when it outlives its bound (a hung command fails
//! its test instead of hanging the suite).

use std::fmt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use super::procs::signal;
use super::TIMEOUT;

/// What a finished command printed.
#[derive(Debug)]
pub struct Run {
    pub what: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn success(&self) -> bool {
        self.status.success()
    }

    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or(-1)
    }

    /// Asserts a zero exit status.
    #[track_caller]
    pub fn ok(self) -> Self {
        assert!(self.status.success(), "`{}` failed: {self:#?}", self.what);
        self
    }

    /// Asserts a non-zero exit status and exactly one line on stderr, as the
    /// CLI contract says errors look.
    #[track_caller]
    pub fn fails_with_one_line(self) -> Self {
        assert!(
            !self.status.success(),
            "`{}` should have failed: {self:#?}",
            self.what
        );
        assert_eq!(
            self.stderr.trim_end().lines().count(),
            1,
            "`{}` should print exactly one error line: {self:#?}",
            self.what
        );
        self
    }

    /// Asserts the exit code and the whole of stdout, and an empty stderr.
    #[track_caller]
    pub fn is(&self, code: i32, stdout: &str) -> &Self {
        assert_eq!(
            (self.code(), self.stdout.as_str(), self.stderr.as_str()),
            (code, stdout, ""),
            "`{}`",
            self.what
        );
        self
    }

    /// Asserts the exit code and the whole of stderr, and an empty stdout.
    #[track_caller]
    pub fn is_err(&self, code: i32, stderr: &str) -> &Self {
        assert_eq!(
            (self.code(), self.stdout.as_str(), self.stderr.as_str()),
            (code, "", stderr),
            "`{}`",
            self.what
        );
        self
    }

    /// stdout's only line, parsed as JSON.
    #[track_caller]
    pub fn json(&self) -> Value {
        let line = self.stdout.strip_suffix('\n').unwrap_or(&self.stdout);
        assert!(
            !line.contains('\n'),
            "`{}` printed several lines: {self:#?}",
            self.what
        );
        serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("`{}` printed no JSON ({e}): {self:#?}", self.what))
    }
}

/// A command that outlived its bound and was killed.
#[derive(Debug)]
pub struct Unfinished {
    pub what: String,
    pub limit: Duration,
    /// What it printed before it was killed, if it could be collected.
    pub output: Option<std::process::Output>,
}

impl fmt::Display for Unfinished {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` did not finish within {:?}", self.what, self.limit)
    }
}

/// Runs `cmd` (stdin closed, output piped) to completion; kills it after
/// `limit`. For callers to whom a hung command is an answer (a poll that
/// may time out), not a failure.
pub fn try_run_within(mut cmd: Command, what: &str, limit: Duration) -> Result<Run, Unfinished> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{what}`: {e}"));
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(out)) => Ok(Run {
            what: what.to_owned(),
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }),
        Ok(Err(e)) => panic!("`{what}`: {e}"),
        Err(_) => {
            // Not reaped yet (the waiter thread would have sent), so the
            // pid is still this child's.
            signal(pid, libc::SIGKILL);
            Err(Unfinished {
                what: what.to_owned(),
                limit,
                output: rx.recv().ok().and_then(Result::ok),
            })
        }
    }
}

/// [`try_run_within`], failing the test when the command does not finish.
#[track_caller]
pub fn run_within(cmd: Command, what: &str, limit: Duration) -> Run {
    try_run_within(cmd, what, limit)
        .unwrap_or_else(|u| panic!("{u}; output so far: {:?}", u.output))
}

/// [`run_within`] the harness's [`TIMEOUT`].
#[track_caller]
pub fn run_bounded(cmd: Command, what: &str) -> Run {
    run_within(cmd, what, TIMEOUT)
}
