//! The filtered view behind `k watch` and `k history`.
//!
//! A person watching a REPL wants what it printed and where cells began and
//! ended, not the machinery: ANSI sequences, frame Enters (runs of five or
//! more identical lines), and continuation prompts are hidden; cell markers,
//! completion ticks and notes are shown.
//!
//! Memory is bounded whatever a cell prints: [`KEEP`] lines of history, a
//! line is cut at [`LINE_MAX`] bytes, and of a run of identical lines only
//! the first [`FRAME_ENTERS`] are held (a longer run is noise, so only its
//! length matters).

use std::collections::VecDeque;

/// Identical consecutive lines that count as frame noise.
pub const FRAME_ENTERS: usize = 5;
/// Lines of history kept.
const KEEP: usize = 5_000;
/// Bytes of one line kept for the view; the rest is replaced by `…`.
const LINE_MAX: usize = 16 * 1024;

#[derive(Default)]
pub struct FilteredView {
    partial: Vec<u8>,
    /// The line in progress was longer than [`LINE_MAX`].
    cut: bool,
    /// The current run of identical lines: its first [`FRAME_ENTERS`]
    /// lines, held back until the run ends.
    run: Vec<String>,
    /// The run's full length (a `yes` can make it millions long).
    run_len: usize,
    lines: VecDeque<String>,
}

impl FilteredView {
    /// Stripped text from the PTY; whole lines pass to the view. Returns the
    /// lines that became visible. Lines containing any of `hide` (our own
    /// set-up and invocation lines) are left out.
    pub fn text(&mut self, text: &[u8], hide: &[String]) -> Vec<String> {
        let mut shown = Vec::new();
        for &b in text {
            if b == b'\n' {
                let mut line = String::from_utf8_lossy(&self.partial).trim_end().to_owned();
                if std::mem::take(&mut self.cut) {
                    line.push_str(" …");
                }
                self.partial.clear();
                if hide.iter().any(|h| line.contains(h)) {
                    continue;
                }
                self.line(line, &mut shown);
            } else if self.partial.len() < LINE_MAX {
                self.partial.push(b);
            } else {
                self.cut = true;
            }
        }
        shown
    }

    /// A marker or note line: shown at once, never frame noise.
    pub fn event(&mut self, line: String) -> Vec<String> {
        let mut shown = self.flush_run();
        self.keep(line.clone());
        shown.push(line);
        shown
    }

    fn line(&mut self, line: String, shown: &mut Vec<String>) {
        let clean = line.trim();
        if clean.is_empty() || clean == "..." || clean.starts_with("... ") {
            return;
        }
        if self.run.first().is_some_and(|r| r.trim() == clean) {
            self.run_len += 1;
            if self.run.len() < FRAME_ENTERS {
                self.run.push(line);
            }
            return;
        }
        shown.extend(self.flush_run());
        self.run.push(line);
        self.run_len = 1;
    }

    fn flush_run(&mut self) -> Vec<String> {
        let run = std::mem::take(&mut self.run);
        if std::mem::take(&mut self.run_len) >= FRAME_ENTERS {
            return Vec::new();
        }
        for line in &run {
            self.keep(line.clone());
        }
        run
    }

    fn keep(&mut self, line: String) {
        if self.lines.len() == KEEP {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    /// The last `n` lines, including a pending run too short to be noise.
    pub fn last(&self, n: usize) -> Vec<String> {
        let pending = if self.run_len < FRAME_ENTERS {
            self.run.len()
        } else {
            0
        };
        let all: Vec<&String> = self
            .lines
            .iter()
            .chain(self.run.iter().take(pending))
            .collect();
        all[all.len().saturating_sub(n)..]
            .iter()
            .map(|s| (*s).clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hides_frame_noise_but_keeps_short_repeats() {
        let mut v = FilteredView::default();
        v.text(
            b"out\n$\n$\n$\n$\n$\n$\nx\nx\n. /tmp/k/1.sh\ny\n",
            &["/tmp/k/".to_owned()],
        );
        v.event("-- done --".into());
        assert_eq!(v.last(10), vec!["out", "x", "x", "y", "-- done --"]);
    }

    #[test]
    fn long_runs_and_long_lines_stay_bounded() {
        let mut v = FilteredView::default();
        for _ in 0..100_000 {
            v.text(b"same\n", &[]);
        }
        assert!(v.run.len() <= FRAME_ENTERS);
        v.text(&vec![b'x'; 3 * LINE_MAX], &[]);
        v.text(b"\nend\n", &[]);
        v.event("-- done --".into());
        let last = v.last(3);
        assert_eq!(last.len(), 3);
        assert!(last[0].ends_with(" …") && last[0].len() < LINE_MAX + 8);
        assert_eq!(last[1..], ["end", "-- done --"]);
    }
}
