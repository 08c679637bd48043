//! Waiting out loud: while `runtime deliver`, `session deliver` or `send
//! --wait` waits, one line on stderr says what for and for how long
//! ("waiting 12 s: the program is busy"), redrawn in place and erased
//! when the wait ends. Only on a terminal: a pipe or a log file gets
//! nothing, so scripts read the same output as before.

use std::io::{IsTerminal, Write};

use agent_comms_core::display;
use agent_comms_core::socket::protocol::Waiting;
use agent_comms_core::time::unix_millis;

pub struct WaitLine {
    shown: bool,
}

impl WaitLine {
    /// A wait line, when stderr is a terminal a person watches.
    pub fn on_terminal() -> Option<Self> {
        std::io::stderr()
            .is_terminal()
            .then_some(Self { shown: false })
    }

    /// Shows `wait` (or erases the line: `None`).
    pub fn show(&mut self, wait: Option<&Waiting>) {
        let mut err = std::io::stderr().lock();
        match wait {
            Some(w) => {
                let secs = unix_millis().saturating_sub(w.since) / 1000;
                let why = display::one_line(&w.why);
                let _ = write!(err, "\r\x1b[2Kagent-comms: waiting {secs} s: {why}");
                self.shown = true;
            }
            None if self.shown => {
                let _ = write!(err, "\r\x1b[2K");
                self.shown = false;
            }
            None => {}
        }
        let _ = err.flush();
    }
}
