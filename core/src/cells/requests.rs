//! The requests a `k` session answers: run (fire or wait), poll,
//! interrupt, status, notify, and the event stream `km` subscribes to.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::sync::{broadcast, oneshot};

use super::frame::{
    self, FrameDetector, HookDetector, IntegrationDetector, PromptDetector, RepeatDetector,
};
use super::output::OutputBuffer;
use super::view::FRAME_ENTERS;
use super::{
    error_reply, is_cell_id, kill_hook, reply, write_private, ActiveCell, CellEngine, EngineNote,
    FrameMode, Integration, Settling, EVENT_HISTORY,
};
use crate::ids::random_hex;
use crate::socket::protocol::{CellEvent, CellReply, CellState, CellStatusReply};
use crate::time::now_iso;

impl CellEngine {
    /// Starts a cell. `Ok` carries the receiver of the final reply (only
    /// with `wait`); `Err` is the reply to give at once (fired, or refused).
    pub fn run(
        &mut self,
        code: String,
        timeout_ms: u64,
        wait: bool,
    ) -> Result<oneshot::Receiver<CellReply>, CellReply> {
        if let Some(active) = &self.active {
            return Err(error_reply(None, format!("active cell '{}'", active.id)));
        }
        let id = random_hex(6);
        let Prepared {
            input,
            file,
            detector,
            hook_pid,
        } = match self.prepare(&id, &code) {
            Ok(p) => p,
            Err(message) => return Err(error_reply(None, format!("send failed: {message}"))),
        };
        let now = Instant::now();
        let ready = self.at_prompt && self.settling.is_none() && self.held.is_none();
        if ready {
            self.writer.write(input.clone());
            self.line_typed = Some(now);
        }
        let (tx, rx) = oneshot::channel();
        self.active = Some(ActiveCell {
            id: id.clone(),
            deadline: now + Duration::from_millis(timeout_ms),
            detector,
            output: OutputBuffer::default(),
            waiter: wait.then_some(tx),
            pending_input: (!ready).then_some(input),
            timed_out: false,
            timeout_polled: false,
            file,
            hook_pid,
            last_output: now,
        });
        self.latest = Some(id.clone());
        self.emit_cell(&id, CellState::Fired);
        if wait {
            Ok(rx)
        } else {
            Err(reply(&id, CellState::Fired, String::new()))
        }
    }

    /// The bytes to type, the cell file, and the detector for one cell.
    pub(super) fn prepare(&self, id: &str, code: &str) -> Result<Prepared, String> {
        match &self.config.frame {
            FrameMode::Integration(i) => self.prepare_integrated(i, id, code),
            mode => self.prepare_line_mode(mode, id, code),
        }
    }

    /// Integration: one simple line is typed as is; anything else runs from
    /// a cell file; the REPL's marks frame it.
    fn prepare_integrated(
        &self,
        i: &Integration,
        id: &str,
        code: &str,
    ) -> Result<Prepared, String> {
        let detector = Box::new(IntegrationDetector::new(
            &self.config.token,
            i.newline_after_start,
            i.exit_status,
        ));
        if i.type_simple_lines && is_simple_line(code) {
            return Ok(Prepared {
                input: format!("{code}\r").into_bytes(),
                file: None,
                detector,
                hook_pid: None,
            });
        }
        let path = self.config.files_dir.join(format!("{id}{}", i.file_suffix));
        write_private(&path, &format!("{}{code}\n", i.file_prologue)).map_err(|e| e.to_string())?;
        let typed = i.run_file.replace("{file}", &path.display().to_string());
        Ok(Prepared {
            input: format!("{typed}\r").into_bytes(),
            file: Some(path),
            detector,
            hook_pid: None,
        })
    }

    /// Line modes, agent-tty's framing: multi-line code is run from a file
    /// where the profile says how (bash sources it); everything else is
    /// pasted line by line; the prompt, Enters or a hook end the frame.
    fn prepare_line_mode(
        &self,
        mode: &FrameMode,
        id: &str,
        code: &str,
    ) -> Result<Prepared, String> {
        let from_file = self
            .config
            .line_mode_file
            .as_ref()
            .filter(|_| !matches!(mode, FrameMode::Prompt(_)) && echo_lines(code) > 1);
        let (send, file) = if let Some(how) = from_file {
            let path = self
                .config
                .files_dir
                .join(format!("{id}{}", how.file_suffix));
            write_private(&path, &format!("{code}\n")).map_err(|e| e.to_string())?;
            let typed = how.run_file.replace("{file}", &path.display().to_string());
            (typed, Some(path))
        } else {
            (code.trim_start().to_owned(), None)
        };
        let echo = echo_lines(&send);
        let mut input = send.split('\n').collect::<Vec<_>>().join("\r");
        input.push('\r');
        let enters = "\r".repeat(FRAME_ENTERS);
        let (detector, hook_pid): (Box<dyn FrameDetector>, _) = match mode {
            FrameMode::Prompt(p) => (Box::new(PromptDetector::new(p, echo)), None),
            FrameMode::Hook(path) => {
                input.push_str(&enters);
                let (tx, pid) = self
                    .spawn_hook(id, path)
                    .map_err(|e| format!("hook {}: {e}", path.display()))?;
                (Box::new(HookDetector::new(echo, tx)), Some(pid))
            }
            _ => {
                input.push_str(&enters);
                (Box::new(RepeatDetector::new(echo)), None)
            }
        };
        Ok(Prepared {
            input: input.into_bytes(),
            file,
            detector,
            hook_pid,
        })
    }

    pub(super) fn spawn_hook(
        &self,
        id: &str,
        path: &std::path::Path,
    ) -> std::io::Result<(std::sync::mpsc::SyncSender<frame::ToHook>, u32)> {
        let notes = self.notes.clone();
        let cell_id = id.to_owned();
        frame::spawn_hook(path, move |written| {
            let _ = notes.send(EngineNote::HookExited { cell_id, written });
        })
    }

    /// The cell's state; an ended one's result is removed as it is handed
    /// over, unless `keep`.
    pub fn poll(&mut self, cell_id: Option<&str>, keep: bool) -> CellReply {
        let id = match cell_id {
            Some(id) if is_cell_id(id) => id.to_owned(),
            Some(_) => return error_reply(None, "invalid cell_id".into()),
            None => match self
                .active
                .as_ref()
                .map(|c| c.id.clone())
                .or_else(|| self.latest.clone())
            {
                Some(id) => id,
                None => return error_reply(None, format!("no active cell on '{}'", self.session)),
            },
        };
        if let Some(pos) = self
            .results
            .iter()
            .position(|r| r.cell_id.as_deref() == Some(id.as_str()))
        {
            if keep {
                return self.results[pos].clone();
            }
            let result = self.results.remove(pos).expect("position is valid");
            if self.latest.as_deref() == Some(id.as_str()) && self.active.is_none() {
                self.latest = None;
            }
            return result;
        }
        match self.active.as_mut().filter(|c| c.id == id) {
            Some(cell) if cell.timed_out => {
                let hint = if cell.timeout_polled {
                    "use k int or k kill"
                } else {
                    ""
                };
                cell.timeout_polled = true;
                reply(&id, CellState::Timeout, hint.into())
            }
            Some(_) => reply(&id, CellState::Running, String::new()),
            None if cell_id.is_none() => {
                error_reply(None, format!("no active cell on '{}'", self.session))
            }
            None => error_reply(Some(id), "unknown cell".into()),
        }
    }

    /// Ctrl-C to the REPL; the active cell resolves as interrupted.
    /// `foreground` is the terminal's foreground process group: a Ctrl-C
    /// may wait for the cell's command to take the terminal ([`super::hold`]).
    pub fn interrupt(&mut self, foreground: Option<i32>) {
        let mut bytes = vec![0x03];
        match self.config.frame {
            FrameMode::Integration(_) => {
                if self.at_prompt {
                    // Code typed while the REPL is still handling the
                    // Ctrl-C could be eaten: the next cell waits for it to
                    // settle.
                    let now = Instant::now();
                    self.settling = Some(Settling {
                        sent: now,
                        awaiting_prompt: self.repl_busy,
                        retries: 0,
                        barrier: None,
                        tries: 0,
                        cleared: false,
                    });
                    self.last_output = now;
                }
            }
            FrameMode::Repeat | FrameMode::Hook(_) => bytes.extend(b"\r".repeat(FRAME_ENTERS)),
            FrameMode::Prompt(_) => {}
        }
        self.write_interrupt(bytes, foreground);
        if let Some(mut cell) = self.active.take() {
            kill_hook(&mut cell);
            // `k int` releases the lock, as agent-tty's did: a later `k poll`
            // without an id finds no active cell, while `k poll ID` still
            // gets `interrupted`.
            if self.latest.as_deref() == Some(cell.id.as_str()) {
                self.latest = None;
            }
            let result = error_reply(Some(cell.id.clone()), "interrupted".into());
            self.settle(cell, result, CellState::Interrupted);
        }
    }

    pub fn status(&self) -> CellStatusReply {
        let (state, id) = match &self.active {
            Some(c) if c.timed_out => ("timeout", Some(c.id.clone())),
            Some(c) => ("running", Some(c.id.clone())),
            None => match self
                .latest
                .as_ref()
                // A finished cell nobody polled yet (an interrupted one is not).
                .filter(|id| {
                    self.results
                        .iter()
                        .any(|r| r.cell_id.as_ref() == Some(*id) && r.status == CellState::Done)
                }) {
                Some(id) => ("done", Some(id.clone())),
                None => ("idle", None),
            },
        };
        CellStatusReply {
            state: state.into(),
            cell_id: id,
        }
    }

    pub fn notify(&mut self, from: String, message: String) {
        let line = format!("📢 {message} ({from})");
        let shown = self.view.event(line);
        self.broadcast_lines(shown);
        self.emit(CellEvent::Notify {
            from,
            message,
            ts: now_iso(),
        });
    }

    pub fn history(&self, lines: usize) -> Vec<String> {
        self.view.last(lines)
    }

    pub fn subscribe(&self, history: bool) -> (Vec<CellEvent>, broadcast::Receiver<CellEvent>) {
        let past = if history {
            self.past.iter().cloned().collect()
        } else {
            Vec::new()
        };
        (past, self.events.subscribe())
    }

    pub(super) fn emit_cell(&mut self, id: &str, status: CellState) {
        let marker = match status {
            CellState::Fired => format!("── {} ──", &id[..8]),
            CellState::Done => "── ✓ ──".into(),
            CellState::Timeout => "── ⏱ ──".into(),
            _ => "── ✗ ──".into(),
        };
        let shown = self.view.event(marker);
        self.broadcast_lines(shown);
        self.emit(CellEvent::Cell {
            cell_id: id.to_owned(),
            status,
            ts: now_iso(),
        });
    }

    pub(super) fn broadcast_lines(&self, lines: Vec<String>) {
        for text in lines {
            let _ = self.events.send(CellEvent::Line { text });
        }
    }

    pub(super) fn emit(&mut self, event: CellEvent) {
        if self.past.len() == EVENT_HISTORY {
            self.past.pop_front();
        }
        self.past.push_back(event.clone());
        let _ = self.events.send(event);
    }
}

/// What typing one cell takes: the bytes, the cell file (removed when the
/// cell ends), the detector of its frame's end, and a hook's pid.
pub(super) struct Prepared {
    input: Vec<u8>,
    file: Option<PathBuf>,
    detector: Box<dyn FrameDetector>,
    hook_pid: Option<u32>,
}

/// Lines the REPL echoes: the code's lines up to the last non-blank one.
fn echo_lines(code: &str) -> usize {
    let lines: Vec<&str> = code.trim_start().split('\n').collect();
    lines
        .iter()
        .rposition(|l| !l.trim().is_empty())
        .map_or(0, |i| i + 1)
}

/// One line a line editor takes as typed: no control characters, not huge.
fn is_simple_line(code: &str) -> bool {
    !code.is_empty() && code.len() < 2048 && !code.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_lines_ignores_trailing_blank_lines() {
        assert_eq!(echo_lines("a\nb\n\n"), 2);
        assert_eq!(echo_lines("\n  x"), 1);
        assert_eq!(echo_lines(""), 0);
    }
}
