//! A person's keystrokes: relayed to the program, timed, and held back while
//! a delivery types.
//!
//! Keys reach the supervisor from its own terminal (foreground mode) and
//! from interactive attach clients. Knowing when a person last typed is what
//! lets delivery wait for them; holding their keys during the short window
//! in which a delivery writes its text and presses Enter is what keeps a
//! message from landing in the middle of their line. Held keys are written,
//! in order, as soon as the delivery lets go.

use std::time::Instant;

use super::State;

#[derive(Default)]
pub struct Keyboard {
    last_key: Option<Instant>,
    /// Keys queued while a delivery holds the keyboard.
    held: Option<Vec<u8>>,
}

impl Keyboard {
    pub fn last_key(&self) -> Option<Instant> {
        self.last_key
    }
}

impl State {
    /// Relays a person's keystrokes to the program (or queues them while a
    /// delivery holds the keyboard).
    pub fn keys_from_person(&mut self, bytes: &[u8]) {
        // Terminal answers (focus reports, cursor positions) are not typing,
        // but a relay cannot tell them apart from keys; counting them only
        // makes delivery more patient.
        self.keyboard.last_key = Some(Instant::now());
        match self.keyboard.held.as_mut() {
            Some(held) => held.extend_from_slice(bytes),
            None => self.pty.write(bytes.to_vec()),
        }
    }

    pub fn hold_keyboard(&mut self, hold: bool) {
        match (hold, self.keyboard.held.take()) {
            (true, held) => self.keyboard.held = Some(held.unwrap_or_default()),
            (false, Some(held)) if !held.is_empty() => self.pty.write(held),
            (false, _) => {}
        }
    }
}
