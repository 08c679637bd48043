//! Frame detection: where a cell's output ends.
//!
//! Four detectors, one trait. The first three reproduce agent-tty 0.1.5 to
//! the letter (its scripts depend on them): they read trimmed, non-empty
//! lines, skip the echo of the sent code, and end the frame on five identical
//! lines (repeat), on a line equal to the prompt (exact prompt), or when a
//! hook program exits (hook). The fourth, shell integration, reads OSC 133
//! marks that the REPL's profile installed, carrying a per-session token: it
//! ends exactly, knows the exit status, and keeps the output byte for byte.

use std::io::Write;
use std::sync::mpsc;

use super::output::OutputBuffer;
use super::view::FRAME_ENTERS;

/// The frame ended; `exit_code` where the REPL reports one.
#[derive(Debug, PartialEq, Eq)]
pub struct FrameEnd {
    pub exit_code: Option<i32>,
}

pub trait FrameDetector: Send {
    /// Stripped output text of the running cell.
    fn text(&mut self, text: &[u8], out: &mut OutputBuffer) -> Option<FrameEnd>;
    /// An OSC payload seen in the output.
    fn osc(&mut self, _payload: &[u8], _out: &mut OutputBuffer) -> Option<FrameEnd> {
        None
    }
    /// Output has been quiet for a while (hook mode probes the partial line).
    fn quiet(&mut self) {}
    /// Wants [`FrameDetector::quiet`] calls.
    fn wants_quiet(&self) -> bool {
        false
    }
    /// The hook program exited.
    fn hook_exited(&mut self, _out: &mut Vec<String>) -> Option<FrameEnd> {
        None
    }
    /// Line-mode detectors collect lines, not bytes.
    fn lines(&mut self) -> Option<&mut Vec<String>> {
        None
    }
}

/// Splits text into lines and skips the echo, as agent-tty does.
#[derive(Default)]
struct LineSplitter {
    partial: Vec<u8>,
    echo_left: usize,
}

impl LineSplitter {
    fn new(echo_lines: usize) -> Self {
        Self {
            partial: Vec::new(),
            echo_left: echo_lines,
        }
    }

    /// Calls `line` with each complete, trimmed, non-empty output line until
    /// it returns `Some`.
    fn feed<T>(&mut self, text: &[u8], mut line: impl FnMut(&str) -> Option<T>) -> Option<T> {
        for &b in text {
            if b != b'\n' {
                self.partial.push(b);
                continue;
            }
            let raw = std::mem::take(&mut self.partial);
            let raw = String::from_utf8_lossy(&raw);
            let clean = raw.trim();
            if clean.is_empty() {
                continue;
            }
            if self.echo_left > 0 {
                self.echo_left -= 1;
                continue;
            }
            if let Some(end) = line(clean) {
                return Some(end);
            }
        }
        None
    }

    fn partial_clean(&self) -> Option<String> {
        let s = String::from_utf8_lossy(&self.partial).trim().to_owned();
        (!s.is_empty() && self.echo_left == 0).then_some(s)
    }
}

fn continuation(clean: &str) -> bool {
    clean == "..." || clean.starts_with("... ")
}

/// Repeat mode: five identical consecutive lines end the frame.
pub struct RepeatDetector {
    split: LineSplitter,
    lines: Vec<String>,
    last: Option<String>,
    repeats: usize,
}

impl RepeatDetector {
    pub fn new(echo_lines: usize) -> Self {
        Self {
            split: LineSplitter::new(echo_lines),
            lines: Vec::new(),
            last: None,
            repeats: 0,
        }
    }
}

impl FrameDetector for RepeatDetector {
    fn text(&mut self, text: &[u8], _: &mut OutputBuffer) -> Option<FrameEnd> {
        let Self {
            split,
            lines,
            last,
            repeats,
        } = self;
        split.feed(text, |clean| {
            if continuation(clean) {
                *last = Some(clean.to_owned());
                return None;
            }
            *repeats = if last.as_deref() == Some(clean) {
                *repeats + 1
            } else {
                0
            };
            lines.push(clean.to_owned());
            *last = Some(clean.to_owned());
            if *repeats >= FRAME_ENTERS - 1 {
                lines.truncate(lines.len() - (*repeats + 1));
                return Some(FrameEnd { exit_code: None });
            }
            None
        })
    }

    fn lines(&mut self) -> Option<&mut Vec<String>> {
        Some(&mut self.lines)
    }
}

/// Exact prompt: a line equal to the prompt ends the frame.
pub struct PromptDetector {
    split: LineSplitter,
    lines: Vec<String>,
    prompt: String,
}

impl PromptDetector {
    pub fn new(prompt: &str, echo_lines: usize) -> Self {
        Self {
            split: LineSplitter::new(echo_lines),
            lines: Vec::new(),
            prompt: prompt.trim().to_owned(),
        }
    }
}

impl FrameDetector for PromptDetector {
    fn text(&mut self, text: &[u8], _: &mut OutputBuffer) -> Option<FrameEnd> {
        let Self {
            split,
            lines,
            prompt,
        } = self;
        let echo = format!("{prompt} ");
        let end = split.feed(text, |clean| {
            if clean == prompt.as_str() {
                return Some(FrameEnd { exit_code: None });
            }
            if !continuation(clean) && !clean.starts_with(&echo) {
                lines.push(clean.to_owned());
            }
            None
        });
        // A prompt is not followed by a newline until the next input: match
        // the line in progress too (agent-tty polls the pane for this).
        end.or_else(|| {
            (split.partial_clean().as_deref() == Some(prompt.as_str()))
                .then_some(FrameEnd { exit_code: None })
        })
    }

    fn lines(&mut self) -> Option<&mut Vec<String>> {
        Some(&mut self.lines)
    }
}

/// Hook mode: every output line goes to the hook's stdin; its exit ends the
/// frame, and the line that made it exit is not output.
pub struct HookDetector {
    split: LineSplitter,
    lines: Vec<String>,
    to_hook: mpsc::Sender<String>,
    last_was_line: bool,
    probed: Option<String>,
}

impl HookDetector {
    /// `to_hook` feeds the hook's stdin (a writer thread owns the pipe, so a
    /// hook that does not read never blocks the supervisor).
    pub fn new(echo_lines: usize, to_hook: mpsc::Sender<String>) -> Self {
        Self {
            split: LineSplitter::new(echo_lines),
            lines: Vec::new(),
            to_hook,
            last_was_line: false,
            probed: None,
        }
    }
}

impl FrameDetector for HookDetector {
    fn text(&mut self, text: &[u8], _: &mut OutputBuffer) -> Option<FrameEnd> {
        let Self {
            split,
            lines,
            to_hook,
            last_was_line,
            ..
        } = self;
        split.feed(text, |clean| {
            let _ = to_hook.send(clean.to_owned());
            lines.push(clean.to_owned());
            *last_was_line = true;
            None::<FrameEnd>
        })
    }

    fn wants_quiet(&self) -> bool {
        true
    }

    /// A prompt has no newline: show the hook the line in progress once the
    /// output is quiet, as a probe that is not itself output.
    fn quiet(&mut self) {
        if let Some(partial) = self.split.partial_clean() {
            if self.probed.as_ref() != Some(&partial) {
                let _ = self.to_hook.send(partial.clone());
                self.probed = Some(partial);
                self.last_was_line = false;
            }
        }
    }

    fn hook_exited(&mut self, out: &mut Vec<String>) -> Option<FrameEnd> {
        if self.last_was_line {
            self.lines.pop();
        }
        out.append(&mut self.lines);
        Some(FrameEnd { exit_code: None })
    }

    fn lines(&mut self) -> Option<&mut Vec<String>> {
        Some(&mut self.lines)
    }
}

/// Feeds a hook's stdin from its own thread.
pub fn hook_writer(mut stdin: std::process::ChildStdin) -> mpsc::Sender<String> {
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in rx {
            if writeln!(stdin, "{line}")
                .and_then(|_| stdin.flush())
                .is_err()
            {
                break;
            }
        }
    });
    tx
}

/// Shell integration: output between the start mark and the end mark.
pub struct IntegrationDetector {
    start: Vec<u8>,
    end_prefix: Vec<u8>,
    end_suffix: Vec<u8>,
    started: bool,
    skip_newline: bool,
    newline_after_start: bool,
    exit_status: bool,
}

impl IntegrationDetector {
    pub fn new(token: &str, newline_after_start: bool, exit_status: bool) -> Self {
        Self {
            start: format!("133;C;{token}").into_bytes(),
            end_prefix: b"133;D;".to_vec(),
            end_suffix: format!(";{token}").into_bytes(),
            started: false,
            skip_newline: false,
            newline_after_start,
            exit_status,
        }
    }

    /// The status in an end mark of this session, if `payload` is one.
    pub fn end_mark(payload: &[u8], token: &str) -> Option<i32> {
        let rest = payload.strip_prefix(b"133;D;")?;
        let status = rest.strip_suffix(format!(";{token}").as_bytes())?;
        std::str::from_utf8(status).ok()?.parse().ok()
    }
}

impl FrameDetector for IntegrationDetector {
    fn text(&mut self, mut text: &[u8], out: &mut OutputBuffer) -> Option<FrameEnd> {
        if !self.started {
            return None;
        }
        if self.skip_newline {
            if let Some(rest) = text.strip_prefix(b"\n") {
                text = rest;
            }
            self.skip_newline = text.is_empty();
        }
        out.push(text);
        None
    }

    fn osc(&mut self, payload: &[u8], _: &mut OutputBuffer) -> Option<FrameEnd> {
        if payload == self.start.as_slice() {
            self.started = true;
            self.skip_newline = self.newline_after_start;
            return None;
        }
        let status = payload
            .strip_prefix(self.end_prefix.as_slice())?
            .strip_suffix(self.end_suffix.as_slice())?;
        let code = std::str::from_utf8(status).ok()?.parse().ok();
        Some(FrameEnd {
            exit_code: if self.exit_status { code } else { None },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(d: &mut dyn FrameDetector, chunks: &[&[u8]]) -> Option<FrameEnd> {
        let mut out = OutputBuffer::default();
        chunks.iter().find_map(|c| d.text(c, &mut out))
    }

    #[test]
    fn repeat_mode_ends_on_five_identical_lines_and_drops_them() {
        let mut d = RepeatDetector::new(1);
        let end = run(&mut d, &[b"$ echo a\na\n\n$\n$\n", b"$\n$\n$\n$ "]);
        assert_eq!(end, Some(FrameEnd { exit_code: None }));
        assert_eq!(d.lines().unwrap().as_slice(), ["a"]);
    }

    #[test]
    fn prompt_mode_matches_the_unterminated_prompt() {
        let mut d = PromptDetector::new("(gdb)", 1);
        assert!(run(&mut d, &[b"(gdb) p 1\n$1 = 1\n"]).is_none());
        assert!(run(&mut d, &[b"(gdb) "]).is_some());
        assert_eq!(d.lines().unwrap().as_slice(), ["$1 = 1"]);
    }

    #[test]
    fn integration_keeps_output_exactly() {
        let mut d = IntegrationDetector::new("t0k", false, true);
        let mut out = OutputBuffer::default();
        assert!(d.text(b"echo hi\n", &mut out).is_none());
        d.osc(b"133;C;t0k", &mut out);
        d.text(b"  a\n\nsame\nsame\n", &mut out);
        assert!(d.osc(b"133;D;0;other", &mut out).is_none());
        assert_eq!(
            d.osc(b"133;D;3;t0k", &mut out),
            Some(FrameEnd { exit_code: Some(3) })
        );
        assert_eq!(out.finish(), "  a\n\nsame\nsame");
    }
}
