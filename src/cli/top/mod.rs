//! `agent-comms top`: every session and runtime, and the latest messages,
//! live in one screen (ratatui on crossterm).
//!
//! The state comes pushed (see `feed`): each supervisor streams its own
//! as it changes, and the store is read again when one of them says
//! something happened. Keys act through the commands a person would type
//! (`session attach`, `message redeliver`), run as child processes of this
//! binary, so that what they do and say is theirs.
//!
//! The terminal is given back as found on every way out, a panic, SIGTERM
//! and SIGHUP included: the alternate screen left, raw mode off, the
//! cursor shown.

mod board;
mod draw;
mod feed;

use std::collections::HashSet;
use std::io::{IsTerminal, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use agent_comms_core::control::messages::{show, InvocationView};
use agent_comms_core::control::open_store;
use agent_comms_core::ids::Id;
use agent_comms_core::time::unix_millis;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, Clear, ClearType, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::crossterm::{cursor, execute};
use ratatui::prelude::CrosstermBackend;
use ratatui::Terminal;

use board::{Board, Focus};
use draw::Footer;
use feed::{follow_store, live_sessions, read_store, watch, Update, DISCOVER};

/// How often keys are looked for between updates (and so the longest an
/// update waits to be drawn).
const KEY_WAIT: Duration = Duration::from_millis(50);
/// Ages on screen (heartbeat, message) are redrawn this often.
const AGES: Duration = Duration::from_secs(1);

type Term = Terminal<CrosstermBackend<std::io::Stdout>>;

/// What the screen shows besides the board.
enum Mode {
    Board,
    Filtering,
    Message(Box<InvocationView>),
}

pub fn run() -> anyhow::Result<i32> {
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        anyhow::bail!(
            "top needs a terminal (its input and output are not one); scripts read the same with: agent-comms session ls --json, agent-comms runtime list --json, agent-comms message list --json"
        );
    }
    let ended = agent_comms_core::os::flag_termination();
    let mut terminal = enter()?;
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        leave();
        previous(info);
    }));
    let result = Top::default().run(&mut terminal, ended);
    leave();
    result.map(|()| 0)
}

/// Raw mode, the alternate screen, no cursor.
fn enter() -> anyhow::Result<Term> {
    enable_raw_mode()?;
    // Cleared here, not with `Terminal::clear`, which asks the terminal
    // where its cursor is and fails when no answer comes.
    execute!(
        std::io::stdout(),
        EnterAlternateScreen,
        cursor::Hide,
        Clear(ClearType::All)
    )?;
    Ok(Terminal::new(CrosstermBackend::new(std::io::stdout()))?)
}

/// The terminal as it was: safe to call twice.
fn leave() {
    let _ = disable_raw_mode();
    let mut out = std::io::stdout();
    let _ = execute!(out, LeaveAlternateScreen, cursor::Show);
    let _ = out.flush();
}

#[derive(Default)]
struct Top {
    board: Board,
    said: Option<String>,
}

impl Top {
    /// Until `q`, or until `ended` is raised (a signal to end).
    fn run(&mut self, terminal: &mut Term, ended: &AtomicBool) -> anyhow::Result<()> {
        let (tx, rx) = mpsc::channel();
        let mut watched = HashSet::new();
        let mut mode = Mode::Board;
        follow_store(tx.clone());
        let (mut next_discover, mut next_ages) = (Instant::now(), Instant::now());
        self.board.set_stored(read_store());
        while !ended.load(Ordering::SeqCst) {
            let now = Instant::now();
            let mut dirty = false;
            if now >= next_discover {
                let live = live_sessions();
                for record in &live {
                    if watched.insert(record.name.to_string()) {
                        watch(record.clone(), tx.clone());
                    }
                }
                self.board.set_sessions(live);
                next_discover = now + DISCOVER;
                dirty = true;
            }
            let mut store_due = false;
            while let Ok(update) = rx.try_recv() {
                match &update {
                    Update::Gone(name) => {
                        watched.remove(name);
                    }
                    Update::StoreChanged => store_due = true,
                    _ => {}
                }
                self.board.apply(update);
                dirty = true;
            }
            if store_due {
                self.board.set_stored(read_store());
                dirty = true;
            }
            if dirty || now >= next_ages {
                self.draw(terminal, &mode)?;
                next_ages = now + AGES;
            }
            if !event::poll(KEY_WAIT)? {
                continue;
            }
            let Event::Key(key) = event::read()? else {
                // A resize: draw at the new size.
                next_ages = now;
                continue;
            };
            if key.kind != KeyEventKind::Press {
                continue;
            }
            match self.key(key, &mut mode, terminal)? {
                Step::Quit => return Ok(()),
                Step::Go => next_ages = now,
            }
        }
        Ok(())
    }

    fn draw(&self, terminal: &mut Term, mode: &Mode) -> anyhow::Result<()> {
        let now = unix_millis();
        terminal.draw(|frame| {
            let footer = match (mode, &self.said) {
                (Mode::Filtering, _) => Footer::Filtering,
                (_, Some(said)) => Footer::Said(said),
                _ => Footer::Keys,
            };
            draw::board(frame, &self.board, now, footer);
            if let Mode::Message(view) = mode {
                draw::message(frame, view);
            }
        })?;
        Ok(())
    }

    fn key(&mut self, key: KeyEvent, mode: &mut Mode, terminal: &mut Term) -> anyhow::Result<Step> {
        let ctrl_c =
            key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl_c {
            return Ok(Step::Quit);
        }
        if let Mode::Filtering = mode {
            match key.code {
                KeyCode::Enter => *mode = Mode::Board,
                KeyCode::Esc => {
                    self.board.filter.clear();
                    *mode = Mode::Board;
                }
                KeyCode::Backspace => {
                    self.board.filter.pop();
                }
                KeyCode::Char(c) => self.board.filter.push(c),
                _ => {}
            }
            self.board.selected_session = 0;
            self.board.selected_message = 0;
            return Ok(Step::Go);
        }
        if let Mode::Message(view) = mode {
            match key.code {
                KeyCode::Char('r') => {
                    let id = view.id.clone();
                    *mode = Mode::Board;
                    self.redeliver(&id);
                }
                KeyCode::Esc | KeyCode::Char('q' | 'm') | KeyCode::Enter => *mode = Mode::Board,
                _ => {}
            }
            return Ok(Step::Go);
        }
        self.said = None;
        let now = unix_millis();
        let (sessions, messages) = (self.board.rows(now), self.board.messages().len());
        let len = match self.board.focus() {
            Focus::Sessions => sessions.len(),
            Focus::Messages => messages,
        };
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return Ok(Step::Quit),
            KeyCode::Up | KeyCode::Char('k') => self.board.move_selection(-1, len),
            KeyCode::Down | KeyCode::Char('j') => self.board.move_selection(1, len),
            KeyCode::Tab | KeyCode::BackTab => self.board.focus_messages ^= true,
            KeyCode::Char('/') => *mode = Mode::Filtering,
            KeyCode::Enter | KeyCode::Char('a') if self.board.focus() == Focus::Sessions => {
                match sessions.get(self.board.selected_session) {
                    Some(row) if row.live => self.attach(&row.name, terminal)?,
                    Some(row) => {
                        self.said = Some(format!("{} has no live session to attach to", row.name))
                    }
                    None => {}
                }
            }
            KeyCode::Enter | KeyCode::Char('m') => match self.selected_message() {
                Some(id) => match open_store()
                    .map_err(anyhow::Error::from)
                    .and_then(|s| Ok(show(s.as_ref(), &Id::message(&id)?)?))
                {
                    Ok(view) => *mode = Mode::Message(Box::new(view)),
                    Err(e) => self.said = Some(e.to_string()),
                },
                None => self.said = Some("no message selected: Tab moves to the messages".into()),
            },
            KeyCode::Char('r') => match self.selected_message() {
                Some(id) => self.redeliver(&id),
                None => self.said = Some("no message selected: Tab moves to the messages".into()),
            },
            _ => {}
        }
        Ok(Step::Go)
    }

    fn selected_message(&self) -> Option<String> {
        if self.board.focus() != Focus::Messages {
            return None;
        }
        let messages = self.board.messages();
        messages
            .get(self.board.selected_message)
            .map(|m| m.id.clone())
    }

    /// `session attach NAME` in this terminal, the board put away until it
    /// returns.
    fn attach(&mut self, name: &str, terminal: &mut Term) -> anyhow::Result<()> {
        leave();
        let status = Command::new(std::env::current_exe()?)
            .args(["session", "attach", name])
            .status();
        *terminal = enter()?;
        self.said = Some(match status {
            Ok(s) if s.success() => format!("back from {name}"),
            Ok(s) => format!("attach to {name} ended: {s}"),
            Err(e) => format!("cannot run session attach: {e}"),
        });
        Ok(())
    }

    /// `message redeliver --id ID`; its first line goes to the status line.
    fn redeliver(&mut self, id: &str) {
        let out = std::env::current_exe().and_then(|exe| {
            Command::new(exe)
                .args(["message", "redeliver", id])
                .stdin(Stdio::null())
                .output()
        });
        self.said = Some(match out {
            Ok(out) => {
                let text = if out.status.success() {
                    out.stdout
                } else {
                    out.stderr
                };
                String::from_utf8_lossy(&text)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_owned()
            }
            Err(e) => format!("cannot run message redeliver: {e}"),
        });
    }
}

enum Step {
    Go,
    Quit,
}
