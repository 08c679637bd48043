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
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Duration;

use super::output::{LineTail, OutputBuffer, OUTPUT_LIMIT};
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
    /// The hook program exited, having been written `_written`.
    fn hook_exited(&mut self, _written: HookWritten) -> Option<FrameEnd> {
        None
    }
    /// Line-mode detectors collect lines, not bytes.
    fn lines(&self) -> Option<&LineTail> {
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
                // A line longer than the output limit is cut: memory stays
                // bounded even for output without line breaks.
                if self.partial.len() < OUTPUT_LIMIT {
                    self.partial.push(b);
                }
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
    lines: LineTail,
    last: Option<String>,
    repeats: usize,
}

impl RepeatDetector {
    pub fn new(echo_lines: usize) -> Self {
        Self {
            split: LineSplitter::new(echo_lines),
            lines: LineTail::default(),
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
                for _ in 0..=*repeats {
                    lines.pop();
                }
                return Some(FrameEnd { exit_code: None });
            }
            None
        })
    }

    fn lines(&self) -> Option<&LineTail> {
        Some(&self.lines)
    }
}

/// Exact prompt: a line equal to the prompt ends the frame.
pub struct PromptDetector {
    split: LineSplitter,
    lines: LineTail,
    prompt: String,
}

impl PromptDetector {
    pub fn new(prompt: &str, echo_lines: usize) -> Self {
        Self {
            split: LineSplitter::new(echo_lines),
            lines: LineTail::default(),
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

    fn lines(&self) -> Option<&LineTail> {
        Some(&self.lines)
    }
}

/// Hook mode: every output line goes to the hook's stdin; its exit ends the
/// frame, and the line that made it exit is not output (nor are lines that
/// came after it and that it never saw).
pub struct HookDetector {
    split: LineSplitter,
    lines: LineTail,
    to_hook: mpsc::SyncSender<ToHook>,
    /// Output lines so far (the index the next line is sent with).
    pushed: u64,
    probed: Option<String>,
}

impl HookDetector {
    /// `to_hook` feeds the hook's stdin (see [`spawn_hook`]; a thread owns
    /// the pipe, so a hook that does not read never blocks the supervisor).
    pub fn new(echo_lines: usize, to_hook: mpsc::SyncSender<ToHook>) -> Self {
        Self {
            split: LineSplitter::new(echo_lines),
            lines: LineTail::default(),
            to_hook,
            pushed: 0,
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
            pushed,
            ..
        } = self;
        split.feed(text, |clean| {
            *pushed += 1;
            // A full queue means the hook reads far slower than the REPL
            // writes; it misses lines rather than grow our memory.
            let _ = to_hook.try_send(ToHook::Line(*pushed, clean.to_owned()));
            lines.push(clean.to_owned());
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
                let _ = self.to_hook.try_send(ToHook::Probe(partial.clone()));
                self.probed = Some(partial);
            }
        }
    }

    /// Drops the lines the hook never saw and the line that made it exit.
    fn hook_exited(&mut self, written: HookWritten) -> Option<FrameEnd> {
        for _ in written.lines..self.pushed {
            self.lines.pop();
        }
        if written.last_was_line {
            self.lines.pop();
        }
        Some(FrameEnd { exit_code: None })
    }

    fn lines(&self) -> Option<&LineTail> {
        Some(&self.lines)
    }
}

/// How often the feeder looks whether the hook has read the line it was
/// given (a pipe has no "drained" event).
const HOOK_READ_CHECK: Duration = Duration::from_micros(250);
/// Lines queued for a hook that reads slowly (memory stays bounded).
const HOOK_QUEUE: usize = 4096;

/// What goes to a hook's stdin: an output line (with its 1-based index among
/// the cell's output lines), or a probe of the line in progress.
pub enum ToHook {
    Line(u64, String),
    Probe(String),
}

/// Up to where the hook had read when it exited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HookWritten {
    /// Index of the last output line it read (0: none).
    pub lines: u64,
    /// The last thing it read was an output line (not a probe).
    pub last_was_line: bool,
}

struct HookState {
    stdin: Option<std::process::ChildStdin>,
    /// The last item written, and the one before it.
    written: HookWritten,
    before: HookWritten,
    exited: bool,
}

/// Bytes written to the hook's stdin that it has not read.
fn unread(stdin: &std::process::ChildStdin) -> usize {
    crate::os::unread(stdin)
}

/// Starts the hook program. One thread feeds its stdin one item at a time,
/// writing the next only once the hook has read the previous one; another
/// waits for its exit and calls `exited` with what the hook had read: all
/// that was written, or all but the last item if that one is still unread
/// in the pipe. So the exit is pinned to the line that caused it, not to
/// lines the REPL printed after it. Returns the feeder and the hook's pid.
pub fn spawn_hook(
    path: &std::path::Path,
    exited: impl FnOnce(HookWritten) + Send + 'static,
) -> std::io::Result<(mpsc::SyncSender<ToHook>, u32)> {
    let mut child = std::process::Command::new(path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let pid = child.id();
    let state = Arc::new((
        Mutex::new(HookState {
            stdin: child.stdin.take(),
            written: HookWritten::default(),
            before: HookWritten::default(),
            exited: false,
        }),
        Condvar::new(),
    ));
    let (tx, rx) = mpsc::sync_channel::<ToHook>(HOOK_QUEUE);
    let feeder_state = Arc::clone(&state);
    std::thread::spawn(move || {
        let (lock, cvar) = &*feeder_state;
        // Ends when the cell is over (the sender is dropped) or the hook
        // has gone.
        for item in rx {
            let (text, index) = match item {
                ToHook::Line(index, text) => (text, Some(index)),
                ToHook::Probe(text) => (text, None),
            };
            let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
            if st.exited {
                return;
            }
            let Some(stdin) = st.stdin.as_mut() else {
                return;
            };
            // Written under the lock, so the waiter sees a whole write or
            // none (a write to a hook that has exited fails).
            if writeln!(stdin, "{text}")
                .and_then(|_| stdin.flush())
                .is_err()
            {
                return;
            }
            st.before = st.written;
            st.written = HookWritten {
                lines: index.unwrap_or(st.written.lines),
                last_was_line: index.is_some(),
            };
            // The next item waits until the hook has read this one.
            while !st.exited && st.stdin.as_ref().is_some_and(|s| unread(s) > 0) {
                st = cvar
                    .wait_timeout(st, HOOK_READ_CHECK)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        // Close the hook's stdin: a hook reading to the end finishes.
        lock.lock().unwrap_or_else(|e| e.into_inner()).stdin = None;
    });
    std::thread::spawn(move || {
        let _ = child.wait();
        let (lock, cvar) = &*state;
        let read = {
            let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
            st.exited = true;
            let last_unread = st.stdin.as_ref().is_some_and(|s| unread(s) > 0);
            st.stdin = None;
            if last_unread {
                st.before
            } else {
                st.written
            }
        };
        cvar.notify_all();
        exited(read);
    });
    Ok((tx, pid))
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
        // An end mark before this cell's start mark is a prompt the REPL
        // drew for something else (a Ctrl-C draws one, sometimes two): it
        // must not end this frame. Every profile prints the start mark for
        // every cell (bash's PS0 runs for the `. file` each cell is).
        if !self.started {
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
        assert_eq!(d.lines().unwrap().finish(), "a");
    }

    #[test]
    fn prompt_mode_matches_the_unterminated_prompt() {
        let mut d = PromptDetector::new("(gdb)", 1);
        assert!(run(&mut d, &[b"(gdb) p 1\n$1 = 1\n"]).is_none());
        assert!(run(&mut d, &[b"(gdb) "]).is_some());
        assert_eq!(d.lines().unwrap().finish(), "$1 = 1");
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
