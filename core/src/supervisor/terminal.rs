//! The session as the delivery coordinator sees it.

use std::time::{Duration, Instant};

use super::Shared;
use crate::adapter::Activity;
use crate::delivery::{Observation, Terminal};

/// Without an adapter, a program counts as idle once its screen has been
/// still this long.
const QUIET_SCREEN: Duration = Duration::from_millis(500);

impl Terminal for Shared {
    fn observe(&self) -> Observation {
        let mut state = self.lock();
        let now = Instant::now();
        let lines = state.model.lines();
        let (activity, raw) = match state.activity_of(&lines) {
            Ok(report) if report.by != crate::adapter::monitor::Classifier::Nothing => {
                (report.activity, report.raw)
            }
            _ => {
                let still = now.duration_since(state.last_output) >= QUIET_SCREEN;
                let a = if still {
                    Activity::Idle
                } else {
                    Activity::Busy
                };
                (a, Activity::Unknown)
            }
        };
        let busy_at = state.activity.as_ref().and_then(|m| m.busy_at());
        let (cursor_row, _) = state.model.cursor();
        let input = state
            .input_line
            .read(&state.model.lines_without_dim(), cursor_row);
        Observation {
            activity,
            raw,
            busy_at,
            keyboard_quiet: state.keyboard.last_key().map(|t| now.duration_since(t)),
            input,
            input_rule: state.input_rule,
            screen: lines.join("\n"),
            size: state.model.size(),
            bracketed_paste: state.model.bracketed_paste(),
            resized_at: state.resized_at,
        }
    }

    fn write(&self, bytes: Vec<u8>) {
        self.lock().pty.write(bytes);
    }

    fn hold_keyboard(&self, hold: bool) {
        self.lock().hold_keyboard(hold);
    }

    fn ended(&self) -> bool {
        self.exit.borrow().is_some()
    }
}
