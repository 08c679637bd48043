//! Ending the process a takeover replaces: politely, then for certain.
//!
//! SIGTERM first — every provider saves its state and says how to resume on
//! it — then, if it is still there after the grace period, SIGKILL. "Gone"
//! means exited: a zombie waiting to be reaped by its parent holds no
//! session, so it counts as gone (a pidfd becomes readable at exit, before
//! the reap). Nothing new starts until the old process is gone.
//!
//! Windows has no polite signal a console program in another console can
//! be sent, so there the process is ended with TerminateProcess at once;
//! the checks before it are the same.

use std::time::Duration;

use super::TakeoverError;
use crate::session::wait_gone;

/// How long a provider may take to exit after SIGTERM before SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_secs(5);
/// How long SIGKILL may take.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// What it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It was already gone when we came to end it.
    AlreadyGone,
    Terminated,
    Killed,
}

#[cfg(windows)]
pub fn end_process(pid: u32, _grace: Duration) -> Result<Ended, TakeoverError> {
    if !crate::os::pid_alive(pid) {
        return Ok(Ended::AlreadyGone);
    }
    crate::os::kill(pid);
    if wait_gone(pid, KILL_GRACE) {
        return Ok(Ended::Killed);
    }
    Err(TakeoverError::WillNotDie(pid))
}

#[cfg(unix)]
pub fn end_process(pid: u32, grace: Duration) -> Result<Ended, TakeoverError> {
    use nix::errno::Errno;
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;

    let target = Pid::from_raw(pid as i32);
    match kill(target, Signal::SIGTERM) {
        Err(Errno::ESRCH) => return Ok(Ended::AlreadyGone),
        Err(e) => {
            return Err(TakeoverError::Signal {
                pid,
                reason: e.desc().to_owned(),
            })
        }
        Ok(()) => {}
    }
    if wait_gone(pid, grace) {
        return Ok(Ended::Terminated);
    }
    tracing::warn!(
        pid,
        "still running {grace:?} after SIGTERM; sending SIGKILL"
    );
    let _ = kill(target, Signal::SIGKILL);
    if wait_gone(pid, KILL_GRACE) {
        return Ok(Ended::Killed);
    }
    Err(TakeoverError::WillNotDie(pid))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A target that exits between discovery and the signal is simply gone:
    /// the takeover goes on.
    #[test]
    fn a_process_already_gone_needs_no_ending() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(end_process(pid, TERM_GRACE).unwrap(), Ended::AlreadyGone);
    }

    #[test]
    fn sigterm_first_then_sigkill() {
        let mut polite = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        assert_eq!(
            end_process(polite.id(), TERM_GRACE).unwrap(),
            Ended::Terminated
        );
        polite.wait().unwrap();
        let mut stubborn = std::process::Command::new("sh")
            // Its only child is a short sleep, gone soon after the shell.
            .args([
                "-c",
                "trap '' TERM; echo ready; while :; do sleep 0.05; done",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(stubborn.stdout.take().unwrap()),
            &mut ready,
        )
        .unwrap();
        let ended = end_process(stubborn.id(), Duration::from_millis(200)).unwrap();
        assert_eq!(ended, Ended::Killed);
        stubborn.wait().unwrap();
    }
}
