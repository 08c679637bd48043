//! A Unix terminal: termios raw mode, `TIOCGWINSZ`, and SIGTERM/SIGHUP
//! caught as a flag the main loop reads (its wait is short).

use std::io::{self, Write};
use std::sync::atomic::{AtomicI32, Ordering};

use crate::screen::{redraw, Frame, ESC};

static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn caught(signal: libc::c_int) {
    SIGNAL.store(signal, Ordering::SeqCst);
}

pub struct Terminal {
    saved: libc::termios,
}

impl Terminal {
    /// Raw mode on stdin, restored on drop.
    pub fn raw() -> io::Result<Self> {
        // SAFETY: termios is plain data, filled by tcgetattr before use.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: fd 0 and a valid termios pointer.
        if unsafe { libc::tcgetattr(0, &mut saved) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut raw = saved;
        // SAFETY: a valid termios pointer.
        unsafe { libc::cfmakeraw(&mut raw) };
        // SAFETY: fd 0 and a valid termios.
        if unsafe { libc::tcsetattr(0, libc::TCSANOW, &raw) } != 0 {
            return Err(io::Error::last_os_error());
        }
        for signal in [libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: the handler only stores into an atomic.
            unsafe {
                libc::signal(
                    signal,
                    caught as extern "C" fn(libc::c_int) as libc::sighandler_t,
                )
            };
        }
        Ok(Self { saved })
    }

    /// Rows and columns.
    pub fn size(&self) -> (usize, usize) {
        // SAFETY: winsize is plain data, filled by the ioctl.
        let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
        // SAFETY: fd 1 and a valid winsize pointer.
        if unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) } != 0 || ws.ws_row == 0 {
            return (24, 80);
        }
        (ws.ws_row as usize, ws.ws_col as usize)
    }

    /// Starts drawing: the alternate screen (full-screen faces) and
    /// bracketed paste, as asked.
    pub fn enter(&mut self, alt_screen: bool, bracketed_paste: bool) {
        modes(alt_screen, bracketed_paste, 'h');
    }

    /// Undoes [`Terminal::enter`].
    pub fn leave(&mut self, alt_screen: bool, bracketed_paste: bool) {
        modes(alt_screen, bracketed_paste, 'l');
    }

    /// Sends `codes` (out-of-band signals such as Codex's OSC 7501), then
    /// turns the screen showing `shown` into `frame`.
    pub fn draw(
        &mut self,
        codes: &str,
        shown: Option<&Frame>,
        frame: &Frame,
        size: (usize, usize),
    ) {
        out(&(codes.to_owned() + &redraw(shown, frame, size.0, size.1)));
    }

    /// Why the fake must quit now, if a signal said so.
    pub fn ended(&self) -> Option<&'static str> {
        match SIGNAL.load(Ordering::SeqCst) {
            libc::SIGTERM => Some("sigterm"),
            libc::SIGHUP => Some("sighup"),
            _ => None,
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // SAFETY: fd 0 and the termios saved at start.
        unsafe { libc::tcsetattr(0, libc::TCSANOW, &self.saved) };
    }
}

/// Sets (`h`) or resets (`l`) the alternate screen and bracketed paste.
fn modes(alt_screen: bool, bracketed_paste: bool, set: char) {
    let mut codes = String::new();
    if alt_screen {
        codes += &format!("{ESC}[?1049{set}");
    }
    if bracketed_paste {
        codes += &format!("{ESC}[?2004{set}");
    }
    out(&codes);
}

fn out(text: &str) {
    if text.is_empty() {
        return;
    }
    let mut stdout = io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}
