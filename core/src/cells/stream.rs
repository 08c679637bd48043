//! What the REPL prints, as the engine reads it: text for the active cell's
//! frame detector and the filtered view, OSC 133 marks, a Ctrl-C settling,
//! and the deadlines that end cells and retry interrupts.

use std::time::{Duration, Instant};

use super::frame::IntegrationDetector;
use super::{
    kill_hook, remove_file, reply, ActiveCell, CellEngine, EngineNote, FrameMode, BARRIER_RETRY,
    BARRIER_TRIES, HOOK_PROBE_QUIET, INTERRUPT_RETRIES, INTERRUPT_RETRY, INTERRUPT_SETTLE,
    RESULTS_KEPT, STARTUP_QUIET, STARTUP_WAIT,
};
use crate::screen::strip::Piece;
use crate::socket::protocol::{CellEvent, CellReply, CellState, ExitInfo};
use crate::time::now_iso;

impl CellEngine {
    pub fn on_output(&mut self, bytes: &[u8]) {
        self.last_output = Instant::now();
        self.watch_setup_cue(bytes);
        // The stripper is taken out for the call so that its pieces go
        // straight to the handlers: a flood arrives in chunks of megabytes,
        // and copying each piece first would double what the engine holds.
        let mut stripper = std::mem::take(&mut self.stripper);
        stripper.feed(bytes, &mut |p| match p {
            Piece::Text(t) => self.on_text(t),
            Piece::Osc(o) => self.on_osc(o),
        });
        self.stripper = stripper;
    }

    pub(super) fn on_text(&mut self, text: &[u8]) {
        let shown = self.view.text(text, &self.machinery);
        self.broadcast_lines(shown);
        if let Some(startup) = self.line_startup.as_mut() {
            let prompt = match &self.config.frame {
                FrameMode::Prompt(p) => Some(p.as_str()),
                _ => None,
            };
            if startup.output(text, prompt) {
                self.line_started();
            }
        }
        let Some(cell) = self.active.as_mut() else {
            return;
        };
        cell.last_output = Instant::now();
        if cell.timed_out || cell.pending_input.is_some() {
            return;
        }
        if let Some(end) = cell.detector.text(text, &mut cell.output) {
            self.finish_frame(end.exit_code);
        }
    }

    pub(super) fn on_osc(&mut self, payload: &[u8]) {
        if let FrameMode::Integration(_) = self.config.frame {
            if payload == format!("133;A;{}", self.config.token).as_bytes() {
                self.seen_setup_mark = true;
                return;
            }
            if payload == format!("133;C;{}", self.config.token).as_bytes() {
                self.repl_busy = true;
            }
            if self.barrier_mark(payload) {
                return;
            }
            if IntegrationDetector::end_mark(payload, &self.config.token).is_some() {
                self.repl_busy = false;
                self.line_typed = None;
                if let Some(s) = self.settling.as_mut() {
                    s.awaiting_prompt = false;
                }
                if !self.at_prompt {
                    // The first marked prompt after set-up, or the prompt an
                    // interrupt produced: the REPL is ready for code now.
                    if self.seen_setup_mark {
                        self.at_prompt = true;
                        self.send_pending();
                    }
                    return;
                }
            }
        }
        let Some(cell) = self.active.as_mut() else {
            return;
        };
        if cell.timed_out || cell.pending_input.is_some() {
            return;
        }
        if let Some(end) = cell.detector.osc(payload, &mut cell.output) {
            self.finish_frame(end.exit_code);
        }
    }

    /// After a Ctrl-C: a lost one is sent again; once the REPL is back at
    /// its prompt and quiet, a cell that was waiting is typed.
    pub(super) fn settle_interrupt(&mut self, now: Instant) {
        if self.held.is_some() {
            return;
        }
        let Some(s) = self.settling.as_mut() else {
            return;
        };
        if s.awaiting_prompt {
            if now < s.sent + INTERRUPT_RETRY {
                return;
            }
            if s.retries < INTERRUPT_RETRIES {
                s.retries += 1;
                s.sent = now;
                self.last_output = now;
                self.writer.write(vec![0x03]);
                return;
            }
            // Still busy: the REPL ignores Ctrl-C. The cell is typed ahead
            // and runs when the REPL gets to it (or times out).
        } else if now < self.last_output + INTERRUPT_SETTLE {
            return;
        }
        if let Some(template) = self.interrupt_barrier() {
            // A barrier typed while the Ctrl-C is still being handled can
            // be discarded with the line it was read into: type another.
            let s = self.settling.as_mut().expect("checked above");
            match s.barrier {
                Some((_, typed)) if now < typed + BARRIER_RETRY => return,
                Some(_) if s.tries >= BARRIER_TRIES => {}
                Some(_) if !s.cleared => {
                    // The barrier went into a line that never ran: the
                    // Ctrl-C flushed only the end of the cell's line (its
                    // Enter among it), so the barrier was appended to what
                    // was left, perhaps inside an open quote. Another
                    // Ctrl-C discards that line; the next barrier follows
                    // once the REPL is quiet again.
                    s.cleared = true;
                    self.last_output = now;
                    self.writer.write(vec![0x03]);
                    return;
                }
                Some(_) if now < self.last_output + INTERRUPT_SETTLE => return,
                _ => {
                    // Numbered across settlings: a late mark of an earlier
                    // interrupt's barrier must not end this one.
                    self.barriers += 1;
                    let n = self.barriers;
                    s.barrier = Some((n, now));
                    s.tries += 1;
                    s.cleared = false;
                    let mark = format!("{};{n}", self.config.token);
                    self.writer
                        .write(format!("{}\r", template.replace("{barrier}", &mark)).into_bytes());
                    return;
                }
            }
        }
        self.settling = None;
        self.send_pending();
    }

    pub(super) fn interrupt_barrier(&self) -> Option<String> {
        match &self.config.frame {
            FrameMode::Integration(i) => i.interrupt_barrier.clone(),
            _ => None,
        }
    }

    /// The mark of the latest barrier came back: the interrupt is over.
    pub(super) fn barrier_mark(&mut self, payload: &[u8]) -> bool {
        let Some(settling) = self.settling.as_ref() else {
            return false;
        };
        let Some((n, _)) = settling.barrier else {
            return false;
        };
        if payload != format!("133;B;{};{n}", self.config.token).as_bytes() {
            return false;
        }
        if settling.cleared {
            // Only slow, not lost: the Ctrl-C sent to clear its line may
            // still be on its way to the REPL and would take the cell's
            // line with it. The next barrier, typed after it, decides.
            return true;
        }
        self.settling = None;
        self.send_pending();
        true
    }

    /// Line modes: the REPL has started; a cell that was waiting is typed.
    pub(super) fn line_started(&mut self) {
        self.line_startup = None;
        self.at_prompt = true;
        self.send_pending();
    }

    pub(super) fn send_pending(&mut self) {
        if self.settling.is_some() || self.held.is_some() || !self.at_prompt {
            return;
        }
        if let Some(input) = self.active.as_mut().and_then(|c| c.pending_input.take()) {
            self.writer.write(input);
            self.line_typed = Some(Instant::now());
        }
    }

    pub fn on_note(&mut self, note: EngineNote) {
        match note {
            EngineNote::HookExited { cell_id, written } => {
                let Some(cell) = self
                    .active
                    .as_mut()
                    .filter(|c| c.id == cell_id && !c.timed_out)
                else {
                    return;
                };
                if cell.detector.hook_exited(written).is_some() {
                    cell.hook_pid = None;
                    self.finish_frame(None);
                }
            }
            EngineNote::DeadlineMoved => {}
        }
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        if let Some(due) = self.setup_due() {
            return Some(due);
        }
        let startup = self.line_startup.as_ref().map(|startup| {
            let quiet = startup
                .last_output
                .filter(|_| !matches!(self.config.frame, FrameMode::Prompt(_)))
                .map(|t| t + STARTUP_QUIET);
            let cap = self.created + STARTUP_WAIT;
            quiet.map_or(cap, |q| q.min(cap))
        });
        let cell = self.active.as_ref().filter(|c| !c.timed_out).map(|cell| {
            let probe = cell
                .detector
                .wants_quiet()
                .then(|| cell.last_output + HOOK_PROBE_QUIET)
                .filter(|p| *p > Instant::now());
            probe.map_or(cell.deadline, |p| p.min(cell.deadline))
        });
        let settle = self
            .settling
            .as_ref()
            .map(|s| match (s.awaiting_prompt, s.barrier) {
                (true, _) => s.sent + INTERRUPT_RETRY,
                (false, Some((_, typed))) => typed + BARRIER_RETRY,
                (false, None) => self.last_output + INTERRUPT_SETTLE,
            });
        [startup, cell, settle, self.hold_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// `foreground`: the terminal's foreground process group now.
    pub fn on_tick(&mut self, now: Instant, foreground: Option<i32>) {
        self.release_held(foreground, now);
        self.type_setup_if_due(now);
        if let Some(startup) = &self.line_startup {
            let quiet = !matches!(self.config.frame, FrameMode::Prompt(_))
                && startup
                    .last_output
                    .is_some_and(|t| now >= t + STARTUP_QUIET);
            if quiet || now >= self.created + STARTUP_WAIT {
                self.line_started();
            }
        }
        self.settle_interrupt(now);
        let Some(cell) = self.active.as_mut().filter(|c| !c.timed_out) else {
            return;
        };
        if now < cell.deadline {
            if cell.detector.wants_quiet() && now >= cell.last_output + HOOK_PROBE_QUIET {
                cell.detector.quiet();
                // Do not probe again until more output arrives.
                cell.last_output = now + Duration::from_secs(3600);
            }
            return;
        }
        // The REPL may still be busy: the lock stays until `k int`/`k kill`.
        cell.timed_out = true;
        kill_hook(cell);
        let id = cell.id.clone();
        let reply = reply(&id, CellState::Timeout, String::new());
        if let Some(waiter) = cell.waiter.take() {
            let _ = waiter.send(reply);
        }
        self.emit_cell(&id, CellState::Timeout);
    }

    /// The frame of the active cell ended.
    pub(super) fn finish_frame(&mut self, exit_code: Option<i32>) {
        let Some(mut cell) = self.active.take() else {
            return;
        };
        kill_hook(&mut cell);
        self.line_typed = None;
        let output = match cell.detector.lines() {
            Some(lines) => lines.finish(),
            None => std::mem::take(&mut cell.output).finish(),
        };
        let mut result = reply(&cell.id, CellState::Done, output);
        result.exit_code = exit_code;
        self.settle(cell, result, CellState::Done);
    }

    /// Hands `result` to the waiting `run`, or keeps it for `poll`.
    pub(super) fn settle(&mut self, mut cell: ActiveCell, result: CellReply, event: CellState) {
        remove_file(&cell.file);
        match cell.waiter.take() {
            Some(waiter) => {
                if let Err(unsent) = waiter.send(result) {
                    self.keep_result(unsent);
                }
            }
            None => self.keep_result(result),
        }
        self.emit_cell(&cell.id, event);
    }

    pub(super) fn keep_result(&mut self, result: CellReply) {
        if self.results.len() == RESULTS_KEPT {
            self.results.pop_front();
        }
        self.results.push_back(result);
    }

    pub fn on_exit(&mut self, info: &ExitInfo) {
        if let Some(mut cell) = self.active.take() {
            kill_hook(&mut cell);
            let result = reply(
                &cell.id,
                CellState::Error,
                format!("session exited ({info})"),
            );
            remove_file(&cell.file);
            if let Some(waiter) = cell.waiter.take() {
                let _ = waiter.send(result);
            }
        }
        self.emit(CellEvent::Closed { ts: now_iso() });
        let _ = std::fs::remove_dir_all(&self.config.files_dir);
    }
}
