//! A background process (`km`, a `k run` waited on) whose stdout is read
//! line by line as it prints.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc;
use std::time::Duration;

use super::TIMEOUT;
use crate::support::procs::{signal, wait_gone};

/// A background process whose stdout is read line by line.
pub struct Bg {
    pub what: String,
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    status: Option<ExitStatus>,
}

impl Bg {
    /// Starts `cmd`, whose stdout and stderr are piped.
    pub fn start(mut cmd: Command, what: &str) -> Self {
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{what}`: {e}"));
        let lines = reader(child.stdout.take().expect("piped"));
        let stderr = reader(child.stderr.take().expect("piped"));
        Self {
            what: what.to_owned(),
            child,
            lines,
            stderr,
            status: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line, waiting at most `within`; `None` on timeout or end.
    pub fn try_line(&self, within: Duration) -> Option<String> {
        self.lines.recv_timeout(within).ok()
    }

    /// The next line (fails the test after [`TIMEOUT`] or at the end).
    #[track_caller]
    pub fn line(&self) -> String {
        match self.lines.recv_timeout(TIMEOUT) {
            Ok(l) => l,
            Err(e) => panic!(
                "`{}` printed no further line ({e:?}); stderr: {:?}",
                self.what,
                self.stderr.try_iter().collect::<Vec<_>>()
            ),
        }
    }

    /// The next line that `keep` accepts (others are skipped).
    #[track_caller]
    pub fn line_where(&self, keep: impl Fn(&str) -> bool) -> String {
        loop {
            let l = self.line();
            if keep(&l) {
                return l;
            }
        }
    }

    /// Lines printed so far and not read yet.
    pub fn pending(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    pub fn stderr(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }

    pub fn signal(&self, sig: i32) {
        if self.status.is_none() {
            // Our own unreaped child: the pid is still its.
            signal(self.pid(), sig);
        }
    }

    /// Waits (bounded) for the exit and returns its status.
    #[track_caller]
    pub fn wait(&mut self) -> ExitStatus {
        if let Some(s) = self.status {
            return s;
        }
        // Its exit is an event (a pidfd); then reaping it does not block.
        assert!(
            wait_gone(self.child.id(), TIMEOUT),
            "`{}` did not exit within {TIMEOUT:?}",
            self.what
        );
        let s = self.child.wait().expect("wait");
        self.status = Some(s);
        s
    }

    /// Everything it printed after the lines already read, once it exited.
    #[track_caller]
    pub fn rest(&mut self) -> Vec<String> {
        self.wait();
        // The reader thread ends at EOF; collect until then.
        let mut out = Vec::new();
        while let Ok(l) = self.lines.recv_timeout(TIMEOUT) {
            out.push(l);
        }
        out
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        if self.status.is_none() {
            signal(self.pid(), libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// The lines of `stream`, sent as they are read, until its end.
fn reader(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(l) = line else { return };
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    rx
}
