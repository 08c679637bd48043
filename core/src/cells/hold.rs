//! Holding a Ctrl-C back while the REPL hands its terminal to a command.
//!
//! bash (5.2 here) forks a command and the child then takes the terminal
//! (`tcsetpgrp`). A Ctrl-C that lands between the fork and that hand-over
//! reaches bash's own process group: bash takes the terminal back, the
//! child's late `tcsetpgrp` then gives it away again, and bash's next read
//! of the terminal fails (EIO), which it takes for end of input — it exits
//! with status 130 and the session's state is gone. Reproduced without
//! agent-comms (a bare PTY, `sleep 60` typed, Ctrl-C 0–400 µs later): 15
//! deaths and 50 lost Ctrl-Cs in 100 tries; waiting until the terminal's
//! foreground group is no longer the REPL's: none in 300.
//!
//! So a Ctrl-C asked for shortly after a cell's line was typed waits while
//! the REPL's own group still holds the terminal: until the command took
//! it (the Ctrl-C then reaches the command alone), the REPL came back to
//! its prompt, or [`COMMAND_START_HOLD`] passed (a REPL that runs the cell
//! itself — a builtin loop, python — never hands the terminal over). A
//! cell that forks again later (a loop of commands) still has a window at
//! each fork; its odds are those of any terminal.

use std::time::{Duration, Instant};

use super::{CellEngine, EngineNote};

/// How long after a cell's line was typed a Ctrl-C may wait for the
/// command to take the terminal.
pub(super) const COMMAND_START_HOLD: Duration = Duration::from_millis(250);
/// How often the terminal's foreground group is looked at while one waits.
const HOLD_POLL: Duration = Duration::from_millis(1);

impl CellEngine {
    /// Whether a Ctrl-C written now could meet the REPL between forking the
    /// cell's command and handing it the terminal. `foreground` is the
    /// terminal's foreground process group (None where there is none).
    pub(super) fn command_starting(&self, foreground: Option<i32>, now: Instant) -> bool {
        foreground.is_some()
            && foreground == self.repl_group
            && self
                .line_typed
                .is_some_and(|typed| now < typed + COMMAND_START_HOLD)
    }

    /// Writes `bytes` (a Ctrl-C and what goes with it) now, or holds them
    /// until [`CellEngine::release_held`] finds the moment safe.
    pub(super) fn write_interrupt(&mut self, bytes: Vec<u8>, foreground: Option<i32>) {
        if self.held.is_some() || self.command_starting(foreground, Instant::now()) {
            self.held.get_or_insert_with(Vec::new).extend(bytes);
            // The request came in on a connection's task; the event loop
            // must start polling.
            let _ = self.notes.send(EngineNote::DeadlineMoved);
        } else {
            self.writer.write(bytes);
        }
    }

    /// A tick: held Ctrl-Cs go once the command took the terminal, the REPL
    /// is back at its prompt, or the hold ran out. The interrupt's settling
    /// counts from then.
    pub(super) fn release_held(&mut self, foreground: Option<i32>, now: Instant) {
        if self.held.is_none() || self.command_starting(foreground, now) {
            return;
        }
        if let Some(bytes) = self.held.take() {
            self.writer.write(bytes);
        }
        if let Some(s) = self.settling.as_mut() {
            s.sent = now;
        }
        self.last_output = now;
    }

    /// When held Ctrl-Cs need another look.
    pub(super) fn hold_deadline(&self) -> Option<Instant> {
        self.held.as_ref().map(|_| Instant::now() + HOLD_POLL)
    }
}
