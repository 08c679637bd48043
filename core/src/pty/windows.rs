//! Windows: ConPTY, which portable-pty drives; it needs Windows 10 1809
//! (build 17763) or later.

use std::sync::Mutex;

use portable_pty::{native_pty_system, Child, ChildKiller, MasterPty, PtyPair, PtySize};
use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};

use super::PtyError;

pub(super) fn open(size: PtySize) -> Result<PtyPair, PtyError> {
    // portable-pty looks CreatePseudoConsole up on first use and panics
    // when kernel32.dll lacks it (Windows before 10 1809): ask first.
    if !has_pseudo_console() {
        return Err(PtyError::NoConsole(
            "this system's kernel32.dll has no CreatePseudoConsole".into(),
        ));
    }
    native_pty_system()
        .openpty(size)
        .map_err(|e| PtyError::NoConsole(e.to_string()))
}

fn has_pseudo_console() -> bool {
    let kernel32: Vec<u16> = "kernel32.dll".encode_utf16().chain(Some(0)).collect();
    // SAFETY: NUL-terminated names; kernel32 is loaded in every process and
    // the module handle is not released.
    unsafe {
        let module = GetModuleHandleW(kernel32.as_ptr());
        !module.is_null()
            && GetProcAddress(module, c"CreatePseudoConsole".as_ptr().cast()).is_some()
    }
}

/// Ends the child through portable-pty's killer (TerminateProcess).
pub(super) struct Control {
    killer: Mutex<Box<dyn ChildKiller + Send + Sync>>,
}

impl Control {
    pub fn new(_pid: u32, child: &dyn Child) -> Self {
        Self {
            killer: Mutex::new(child.clone_killer()),
        }
    }

    /// A console has no foreground process group to ask about.
    pub fn foreground_group(&self, _master: &dyn MasterPty) -> Option<i32> {
        None
    }

    /// Missing on Windows: a polite request to exit. Console programs get no
    /// SIGHUP or SIGTERM; closing the pseudo console (CTRL_CLOSE_EVENT) is
    /// the nearest thing, but it lives as long as the session does. So the
    /// child is ended at once and the grace period is skipped.
    pub fn ask_to_exit(&self, master: &dyn MasterPty) {
        self.kill(master);
    }

    /// TerminateProcess on the child. Its own children live on: unlike a
    /// Unix process group, ending them would take a job object.
    pub fn kill(&self, _master: &dyn MasterPty) {
        let _ = self.killer.lock().unwrap_or_else(|p| p.into_inner()).kill();
    }
}

/// Missing on Windows: asking whether output waits without reading it (the
/// reader is portable-pty's pipe, and we hold no handle to peek at). The
/// reader hands over chunk by chunk instead of merging a flood.
pub(super) struct Waiting;

impl Waiting {
    pub fn new(_master: &dyn MasterPty) -> Self {
        Self
    }

    pub fn now(&self) -> bool {
        false
    }
}
