//! `km`: a session's cell events, one JSON line each, pushed by the
//! supervisor as they happen (agent-tty tailed a log file for this).

use std::io::Write;

use agent_comms_core::client::{Client, ClientError};
use agent_comms_core::session::{SessionError, SessionName};
use agent_comms_core::socket::codec::Message;
use agent_comms_core::socket::protocol::{CellEvent, CellState, Event, Request};
use agent_comms_core::time::now_iso;
use serde_json::Value;

use super::cells_format::{json_object, py_repr};

const USAGE: &str = "\
km — cell events of a k session, one JSON line each (agent-tty 0.1.5 compatible)

Usage:
  km <session> [cell_id] [-1]
    -1   exit after the first completion (of cell_id if given; a completion
         that already happened counts)
  km --version

Events: fired, done, timeout, interrupted, notify, closed, error (all with \"ts\").

Examples:
  km py \"$(k fire py 'print(1)' | jq -r .cell_id)\" -1   # the fired cell's completion";

pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() || matches!(args[0].as_str(), "-h" | "--help") {
        println!("{USAGE}");
        return i32::from(args.is_empty());
    }
    if matches!(args[0].as_str(), "--version" | "-V" | "version") {
        println!("agent-comms {}", env!("CARGO_PKG_VERSION"));
        return 0;
    }
    let oneshot = args.iter().any(|a| a == "-1");
    let positional: Vec<&String> = args.iter().filter(|a| *a != "-1").collect();
    let Ok(session) = SessionName::parse(positional[0]) else {
        eprintln!("km: invalid session name: {}", py_repr(positional[0]));
        return 1;
    };
    let cell_id = positional.get(1).map(|s| s.to_string());
    if cell_id
        .as_deref()
        .is_some_and(|c| !agent_comms_core::cells::is_cell_id(c))
    {
        eprintln!("km: invalid cell_id: {}", py_repr(positional[1]));
        return 1;
    }
    // SIGINT/SIGTERM end the stream with exit 0.
    agent_comms_core::os::exit_zero_on_termination();
    monitor(&session, cell_id.as_deref(), oneshot)
}

fn emit(pairs: &[(&str, Value)]) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", json_object(pairs));
    let _ = out.flush();
}

fn emit_error(session: &SessionName, message: &str) -> i32 {
    emit(&[
        ("session", session.as_str().into()),
        ("status", "error".into()),
        ("message", message.into()),
        ("ts", now_iso().into()),
    ]);
    1
}

fn monitor(session: &SessionName, cell_id: Option<&str>, oneshot: bool) -> i32 {
    let mut client = match subscribe(session, oneshot) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let mut watch = Watch {
        session,
        cell_id,
        oneshot,
        replaying: oneshot,
        tracker: Completions::new(cell_id),
    };
    loop {
        let Ok(frame) = client.read_frame() else {
            emit_closed(session);
            return 1;
        };
        let ended = match frame.message {
            Message::Event(Event::Cell(e)) => watch.on_event(e),
            // The subscription's acknowledgement ends the replayed history.
            Message::Response(_) => watch.on_replay_end(),
            _ => None,
        };
        if let Some(code) = ended {
            return code;
        }
    }
}

/// Connects and subscribes to the session's cell events (with the history
/// for `-1`); an error has been emitted when it returns the exit code.
fn subscribe(session: &SessionName, history: bool) -> Result<Client, i32> {
    let mut client = match Client::for_session(session) {
        Ok((c, _)) => c,
        Err(ClientError::Session(SessionError::NotFound(_)) | ClientError::Stale { .. }) => {
            return Err(emit_error(
                session,
                &format!("no session '{session}'; use k new {session} bash"),
            ))
        }
        Err(e) => return Err(emit_error(session, &e.to_string())),
    };
    let subscribe = Request::Subscribe {
        history,
        lines: false,
    };
    match client.send(Message::Request(subscribe)) {
        Ok(_) => Ok(client),
        Err(e) => Err(emit_error(session, &e.to_string())),
    }
}

/// One `km` run: which events it prints, and when it ends.
struct Watch<'a> {
    session: &'a SessionName,
    cell_id: Option<&'a str>,
    /// `-1`: the first completion ends it.
    oneshot: bool,
    /// The history is still being replayed.
    replaying: bool,
    tracker: Completions<'a>,
}

impl Watch<'_> {
    /// The history ends: `-1` prints the latest completion it held.
    fn on_replay_end(&mut self) -> Option<i32> {
        if !std::mem::take(&mut self.replaying) {
            return None;
        }
        let (id, status, ts) = self.tracker.latest.take()?;
        emit_cell(self.session, &id, status, &ts);
        Some(0)
    }

    /// Prints `event` if it is wanted; `Some(code)` ends the run.
    fn on_event(&mut self, event: CellEvent) -> Option<i32> {
        let session = self.session;
        match event {
            CellEvent::Cell {
                cell_id: id,
                status,
                ts,
            } => {
                if self.replaying {
                    self.tracker.replay(&id, status, &ts);
                    // The given cell's completion ends it at once; without a
                    // cell id the latest completion wins, at the end of the
                    // replay (so only take it here when an id was given).
                    let (id, status, ts) = self.cell_id.and_then(|_| self.tracker.latest.take())?;
                    emit_cell(session, &id, status, &ts);
                    return Some(0);
                }
                if self.cell_id.is_some_and(|c| c != id) {
                    return None;
                }
                emit_cell(session, &id, status, &ts);
                (self.oneshot && status != CellState::Fired).then_some(0)
            }
            CellEvent::Notify { from, message, ts } if !self.replaying => {
                emit(&[
                    ("session", session.as_str().into()),
                    ("status", "notify".into()),
                    ("from", from.into()),
                    ("message", message.into()),
                    ("ts", ts.into()),
                ]);
                None
            }
            CellEvent::Closed { ts } if !self.replaying => {
                emit(&[
                    ("session", session.as_str().into()),
                    ("status", "closed".into()),
                    ("ts", ts.into()),
                ]);
                Some(1)
            }
            _ => None,
        }
    }
}

fn emit_cell(session: &SessionName, id: &str, status: CellState, ts: &str) {
    emit(&[
        ("cell_id", id.into()),
        ("session", session.as_str().into()),
        ("status", status.as_str().into()),
        ("ts", ts.into()),
    ]);
}

fn emit_closed(session: &SessionName) {
    emit(&[
        ("session", session.as_str().into()),
        ("status", "closed".into()),
        ("ts", now_iso().into()),
    ]);
}

/// Finds, in replayed history, the completion `-1` should report: of the
/// given cell, or the latest fired-then-completed cell (as agent-tty does).
struct Completions<'a> {
    cell_id: Option<&'a str>,
    fired: std::collections::HashSet<String>,
    latest: Option<(String, CellState, String)>,
}

impl<'a> Completions<'a> {
    fn new(cell_id: Option<&'a str>) -> Self {
        Self {
            cell_id,
            fired: Default::default(),
            latest: None,
        }
    }

    fn replay(&mut self, id: &str, status: CellState, ts: &str) {
        if status == CellState::Fired {
            if self.cell_id.is_none_or(|c| c == id) {
                self.fired.insert(id.to_owned());
            }
            return;
        }
        let wanted = match self.cell_id {
            Some(c) => c == id,
            None => self.fired.remove(id),
        };
        if wanted {
            self.latest = Some((id.to_owned(), status, ts.to_owned()));
        }
    }
}
