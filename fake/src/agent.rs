//! The agent: its input line, its turns, and each face's quirks.
//!
//! Time is milliseconds on a monotonic clock, passed in, so that the rules
//! about timing (busy periods, Codex's paste burst) are plain arithmetic.

use std::collections::VecDeque;

use serde_json::json;

use crate::input::Key;
use crate::knobs::Knobs;
use crate::log::EventLog;
use crate::screen::{cells, dim, place, stack, wrap, Frame, ESC, ST};

/// Which real CLI the fake acts as: named by the program's name, as the
/// host picks its adapter by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Face {
    /// Claude Code 2.1.197: inline, the footer says busy or idle.
    Claude,
    /// Codex 0.171.0: full screen, OSC 7501 says busy or idle.
    Codex,
}

impl Face {
    pub fn from_program(stem: &str) -> Option<Self> {
        match stem {
            "claude" => Some(Self::Claude),
            "codex" => Some(Self::Codex),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Claude => "claude",
            Self::Codex => "codex",
        }
    }

    pub fn alt_screen(self) -> bool {
        self == Self::Codex
    }
}

/// Why the fake quits.
pub struct Quit {
    pub reason: &'static str,
}

struct Turn {
    text: String,
    start: f64,
    duration: f64,
}

impl Turn {
    fn end(&self) -> f64 {
        self.start + self.duration
    }

    fn reply(&self) -> String {
        let head: String = self.text.chars().take(40).collect();
        format!("reply to: {}", head.replace('\n', " "))
    }
}

// Codex's paste-burst rule (config/providers/codex.toml, [input]).
const BURST_MIN_CHARS: u32 = 6;
const BURST_GAP_MS: f64 = 8.0;
const BURST_ENTER_MS: f64 = 120.0;

/// The title's spinner changes this often.
pub const ANIMATION_MS: f64 = 100.0;

pub struct Agent {
    pub face: Face,
    knobs: Knobs,
    pub log: EventLog,
    cwd: String,
    input: String,
    history: Vec<(bool, String)>,
    turn: Option<Turn>,
    queue: VecDeque<Turn>,
    was_busy: bool,
    drops_left: u64,
    burst: u32,
    last_char_t: Option<f64>,
    idle_osc_pending: bool,
    /// What the terminal must get before the next frame (Codex's OSCs).
    pub out: String,
}

impl Agent {
    pub fn new(face: Face, knobs: Knobs, log: EventLog, cwd: String) -> Self {
        let drops_left = knobs.drop_enter;
        Self {
            face,
            knobs,
            log,
            cwd,
            input: String::new(),
            history: Vec::new(),
            turn: None,
            queue: VecDeque::new(),
            was_busy: false,
            drops_left,
            burst: 0,
            last_char_t: None,
            idle_osc_pending: false,
            out: String::new(),
        }
    }

    pub fn bracketed_paste(&self) -> bool {
        !self.knobs.no_bracketed
    }

    /// The keys of one read, which arrived at `t`.
    pub fn read(&mut self, keys: Vec<Key>, t: f64) -> Result<(), Quit> {
        let mut typed_before = false;
        for key in keys {
            self.before_key(&key, t);
            let typed = matches!(key, Key::Text(_));
            self.key(key, t, typed_before)?;
            typed_before |= typed;
        }
        Ok(())
    }

    /// Codex: the first key after a turn's `state=done` sends `state=idle`
    /// (recordings of 0.171.0); the paste-burst count, where characters of
    /// one read are 0 ms apart.
    fn before_key(&mut self, key: &Key, t: f64) {
        if self.face != Face::Codex {
            return;
        }
        if self.idle_osc_pending && !matches!(key, Key::Other) {
            self.idle_osc_pending = false;
            self.out += &osc_7501("idle");
        }
        match key {
            Key::Text(text) => {
                for _ in text.chars() {
                    match self.last_char_t {
                        Some(last) if t - last <= BURST_GAP_MS => self.burst += 1,
                        _ => self.burst = 1,
                    }
                    self.last_char_t = Some(t);
                }
            }
            Key::Enter | Key::Other => {}
            _ => self.burst = 0,
        }
    }

    /// Line editing works while busy too: the real CLIs let you type ahead.
    fn key(&mut self, key: Key, t: f64, typed_before: bool) -> Result<(), Quit> {
        match key {
            Key::Text(text) | Key::Paste(text) => self.input += &text,
            Key::Newline => self.input.push('\n'),
            Key::Backspace => {
                self.input.pop();
            }
            Key::Clear => self.input.clear(),
            Key::Interrupt if self.input.is_empty() => return Err(Quit { reason: "ctrl-c" }),
            Key::Interrupt => self.input.clear(),
            Key::Eof if self.input.is_empty() => return Err(Quit { reason: "ctrl-d" }),
            Key::Enter => self.enter(t, typed_before),
            Key::Esc => self.interrupt_turn(t),
            Key::Eof | Key::Other => {}
        }
        Ok(())
    }

    fn enter(&mut self, t: f64, typed_before: bool) {
        if self.enter_taken(t, typed_before) {
            return;
        }
        if self.input.is_empty() {
            self.log.write("empty-enter", json!({}));
        } else if self.drops_left > 0 {
            self.drops_left -= 1;
            self.log.write("dropped-enter", json!({}));
        } else {
            self.submit(t);
        }
    }

    /// Each face's quirk about an Enter.
    fn enter_taken(&mut self, t: f64, typed_before: bool) -> bool {
        match self.face {
            // Reproduces: Claude Code swallows an Enter that arrives in the
            // same read as typed (not pasted) text (claude-code.toml,
            // [input]); the host waits enter_delay_ms before the Enter.
            Face::Claude if typed_before => {
                self.log.write("swallowed-enter", json!({}));
                true
            }
            // Reproduces Codex's paste-burst rule (codex.toml, [input]):
            // without bracketed paste, 6 or more characters 8 ms or less
            // apart are a paste, and an Enter within 120 ms of the last is
            // a newline, which extends the burst.
            Face::Codex
                if self.burst >= BURST_MIN_CHARS
                    && self
                        .last_char_t
                        .is_some_and(|last| t - last <= BURST_ENTER_MS) =>
            {
                self.input.push('\n');
                self.last_char_t = Some(t);
                self.log.write("newline-inserted", json!({}));
                true
            }
            _ => false,
        }
    }

    /// The message goes to the history and the log, the line empties, and
    /// a turn starts, queued behind the current one if busy, as the real
    /// CLIs queue a message sent while they work.
    fn submit(&mut self, t: f64) {
        let text = std::mem::take(&mut self.input);
        self.log.write(
            "submit",
            json!({"text": text, "while_busy": self.turn.is_some()}),
        );
        self.history.push((true, text.clone()));
        let turn = Turn {
            duration: busy_ms_for(&text, self.knobs.busy_ms) as f64,
            text,
            start: t,
        };
        if self.turn.is_none() {
            self.turn = Some(turn);
        } else {
            self.queue.push_back(turn);
        }
    }

    /// Esc while a turn runs ends it now, as the footers' "esc to
    /// interrupt" says; turns queued behind it still run.
    fn interrupt_turn(&mut self, t: f64) {
        if let Some(turn) = &mut self.turn {
            self.log.write("interrupted", json!({"text": turn.text}));
            turn.duration = (t - turn.start).max(0.0);
        }
    }

    pub fn busy(&self) -> bool {
        self.turn.is_some()
    }

    /// When the current turn ends, for the main loop's wait.
    pub fn next_change(&self) -> Option<f64> {
        self.turn.as_ref().map(Turn::end)
    }

    /// Ends the turns that are over by `now` and starts the queued ones.
    pub fn tick(&mut self, now: f64) {
        while let Some(turn) = self.turn.take_if(|turn| now >= turn.end()) {
            self.history.push((false, turn.reply()));
            let end = turn.end();
            self.turn = self.queue.pop_front().map(|mut next| {
                next.start = end;
                next
            });
        }
        let busy = self.busy();
        if busy != self.was_busy {
            self.was_busy = busy;
            // Reproduces: Codex reports turns with OSC 7501, `working` at
            // the start and `done` at the end (codex.toml).
            if self.face == Face::Codex {
                self.out += &osc_7501(if busy { "working" } else { "done" });
                self.idle_osc_pending = !busy;
            }
        }
    }

    pub fn render(&self, now: f64, height: usize, width: usize) -> Frame {
        match self.face {
            Face::Claude => self.render_claude(now, height, width),
            Face::Codex => self.render_codex(now, height, width),
        }
    }

    /// Reproduces the 2.1.197 layout (claude-code.toml samples): history,
    /// the spinner line while busy, the input box between two rules, and
    /// the footer the detection rules read.
    fn render_claude(&self, now: f64, height: usize, width: usize) -> Frame {
        let mut above = vec!["Claude Code (fake)".to_owned(), String::new()];
        above.extend(self.history_rows(("❯ ", "  "), ("● ", "  "), width, height));
        let mut bottom = Vec::new();
        if let Some(turn) = &self.turn {
            let seconds = ((now - turn.start).max(0.0) / 1000.0) as u64;
            bottom.extend([format!("✽ Working… ({seconds}s)"), String::new()]);
        }
        let (rows, (crow, ccol)) = self.input_rows("❯ ", "  ", "", width);
        let cursor = (bottom.len() + 1 + crow, ccol);
        let rule = "─".repeat(width);
        let hint = if self.busy() {
            "esc to interrupt"
        } else {
            "? for shortcuts"
        };
        bottom.push(rule.clone());
        bottom.extend(rows);
        bottom.extend([rule, format!("  {hint} · ← for agents")]);
        let (screen, origin) = stack(&above, &bottom, height, false);
        // Reproduces: a braille spinner in the title while busy, ✳ idle.
        let title = if self.busy() {
            format!("{} fake", spinner("⠂⠐", now))
        } else {
            "✳ fake".to_owned()
        };
        Frame {
            cursor: place(&screen, origin, cursor),
            rows: screen,
            title,
        }
    }

    /// Reproduces the 0.171.0 layout (codex.toml samples): header, history,
    /// `• Working (Ns • esc to interrupt)` two rows above the composer for
    /// the first third of a turn (then the reply streams and nothing on
    /// screen says busy), the composer, and the model and directory row.
    fn render_codex(&self, now: f64, height: usize, width: usize) -> Frame {
        let mut above = vec![
            String::new(),
            "  >_ OpenAI Codex (fake)".to_owned(),
            String::new(),
        ];
        above.extend(self.history_rows(("› ", "  "), ("• ", "  "), width, height));
        let mut working = String::new();
        if let Some(turn) = &self.turn {
            let elapsed = (now - turn.start).max(0.0);
            let shown_for = turn.duration / 3.0;
            if elapsed < shown_for {
                working = format!(
                    "• Working ({}s • esc to interrupt)",
                    (elapsed / 1000.0) as u64
                );
            } else {
                let reply = turn.reply();
                let fraction = (elapsed - shown_for) / (turn.duration - shown_for).max(1.0);
                let total = reply.chars().count();
                let shown = ((total as f64 * fraction).ceil() as usize).clamp(1, total);
                let partial: String = reply.chars().take(shown).collect();
                above.extend(wrap(&partial, "• ", "  ", width));
            }
        }
        let (rows, (crow, ccol)) = self.input_rows("› ", "  ", "Ask Codex to do anything", width);
        let mut bottom = vec![working, String::new()];
        bottom.extend(rows);
        bottom.extend([String::new(), format!("  fake-model · {}", self.cwd)]);
        let (screen, origin) = stack(&above, &bottom, height, true);
        let base = self
            .cwd
            .trim_end_matches(['/', '\\'])
            .rsplit(['/', '\\'])
            .next()
            .filter(|b| !b.is_empty())
            .unwrap_or("/");
        let mut title = format!("fake | {base}");
        if self.busy() {
            title = format!("{} {title}", spinner("⠋⠙⠹⠸", now));
        }
        Frame {
            cursor: place(&screen, origin, (2 + crow, ccol)),
            rows: screen,
            title,
        }
    }

    /// The input's rows and the cursor in them: at the end of the text, or
    /// at the start of a (dim) placeholder.
    fn input_rows(
        &self,
        prefix: &str,
        cont: &str,
        placeholder: &str,
        width: usize,
    ) -> (Vec<String>, (usize, usize)) {
        if self.input.is_empty() && !placeholder.is_empty() {
            return (
                vec![format!("{prefix}{}", dim(placeholder))],
                (0, cells(prefix)),
            );
        }
        let rows = wrap(&self.input, prefix, cont, width);
        let last = rows.len() - 1;
        let col = cells(&rows[last]).min(width.saturating_sub(1));
        (rows, (last, col))
    }

    /// The newest history entries that can still show, as rows.
    fn history_rows(
        &self,
        user: (&str, &str),
        reply: (&str, &str),
        width: usize,
        height: usize,
    ) -> Vec<String> {
        let mut rows: Vec<String> = Vec::new();
        for (from_user, text) in self.history.iter().rev() {
            if rows.len() >= height {
                break;
            }
            let (prefix, cont) = if *from_user { user } else { reply };
            let mut entry = wrap(text, prefix, cont, width);
            entry.append(&mut rows);
            rows = entry;
        }
        rows
    }
}

/// A `BUSY=N` token in the message sets its busy time to N ms.
fn busy_ms_for(text: &str, default: u64) -> u64 {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix("BUSY=")?.parse().ok())
        .unwrap_or(default)
}

fn spinner(frames: &str, now: f64) -> char {
    let frames: Vec<char> = frames.chars().collect();
    frames[(now / ANIMATION_MS) as usize % frames.len()]
}

fn osc_7501(state: &str) -> String {
    format!("{ESC}]7501;state={state}:app=codex{ST}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(face: Face) -> Agent {
        let knobs = Knobs::from_env(|_| None).unwrap();
        Agent::new(face, knobs, EventLog::open(None).unwrap(), "/w".into())
    }

    fn text(s: &str) -> Key {
        Key::Text(s.into())
    }

    #[test]
    fn claude_swallows_an_enter_read_with_typed_text_but_not_after_a_paste() {
        let mut a = agent(Face::Claude);
        a.read(vec![text("hi"), Key::Enter], 0.0).ok();
        assert!(!a.busy());
        a.read(vec![Key::Enter], 20.0).ok();
        assert!(a.busy());
        a.read(vec![Key::Paste("x".into()), Key::Enter], 30.0).ok();
        assert_eq!(
            a.queue.len(),
            1,
            "a pasted message is queued behind the turn"
        );
    }

    #[test]
    fn codex_takes_an_enter_right_after_a_burst_as_a_newline() {
        let mut a = agent(Face::Codex);
        a.read(vec![text("abcdef")], 0.0).ok();
        a.read(vec![Key::Enter], 50.0).ok();
        assert_eq!(a.input, "abcdef\n");
        a.read(vec![Key::Backspace], 200.0).ok();
        a.read(vec![Key::Enter], 400.0).ok();
        assert!(a.busy());
    }

    #[test]
    fn turns_queue_and_end_in_order_with_their_busy_time() {
        let mut a = agent(Face::Codex);
        a.input = "one BUSY=100".into();
        a.read(vec![Key::Enter], 0.0).ok();
        a.input = "two".into();
        a.read(vec![Key::Enter], 10.0).ok();
        a.tick(99.0);
        assert!(a.out.contains("state=working"));
        a.tick(100.0);
        assert_eq!(a.next_change(), Some(400.0));
        a.tick(400.0);
        assert!(!a.busy() && a.out.ends_with(&osc_7501("done")));
        assert_eq!(a.history.len(), 4);
    }
}
