//! Unix: process groups, signals, and polling the master.

use std::os::fd::RawFd;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use portable_pty::{native_pty_system, Child, MasterPty, PtyPair, PtySize};

use super::PtyError;

pub(super) fn open(size: PtySize) -> Result<PtyPair, PtyError> {
    native_pty_system()
        .openpty(size)
        .map_err(|e| PtyError::Open(e.to_string()))
}

/// Signals for the child's process group (it leads its own session) and
/// the terminal's foreground group.
pub(super) struct Control {
    leader: i32,
}

impl Control {
    pub fn new(pid: u32, _child: &dyn Child) -> Self {
        Self { leader: pid as i32 }
    }

    pub fn foreground_group(&self, master: &dyn MasterPty) -> Option<i32> {
        master.process_group_leader()
    }

    pub fn ask_to_exit(&self, master: &dyn MasterPty) {
        // SIGHUP is what a closing terminal sends: interactive shells, which
        // ignore SIGTERM, exit on it. SIGTERM covers everything else.
        self.signal_groups(master, Signal::SIGHUP);
        self.signal_groups(master, Signal::SIGCONT);
        self.signal_groups(master, Signal::SIGTERM);
    }

    pub fn kill(&self, master: &dyn MasterPty) {
        self.signal_groups(master, Signal::SIGKILL);
    }

    /// Sends `signal` to the child's process group and to the foreground
    /// group, so that a shell and the job it runs both get it.
    fn signal_groups(&self, master: &dyn MasterPty, signal: Signal) {
        let leader = self.leader;
        if leader > 0 {
            let _ = killpg(Pid::from_raw(leader), signal);
        }
        if let Some(fg) = self
            .foreground_group(master)
            .filter(|&g| g > 0 && g != leader)
        {
            let _ = killpg(Pid::from_raw(fg), signal);
        }
    }
}

/// Tells whether more output already waits in the PTY.
pub(super) struct Waiting(Option<RawFd>);

impl Waiting {
    pub fn new(master: &dyn MasterPty) -> Self {
        Self(master.as_raw_fd())
    }

    /// Whether a read on the master would return at once.
    pub fn now(&self) -> bool {
        let Some(fd) = self.0 else {
            return false;
        };
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        unsafe { libc::poll(&mut pfd, 1, 0) == 1 && pfd.revents & libc::POLLIN != 0 }
    }
}
