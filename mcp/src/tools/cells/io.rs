//! What the cell tools take and give: their arguments and results, whose
//! schemas clients see.

use agent_comms_core::session::SessionName;
use agent_comms_core::socket::protocol::{CellReply, CellState};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::reply::Reply;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewArgs {
    /// The session's name (letters, digits, `-`, `_`, `.`).
    pub session: String,
    /// The REPL to run, as a shell command line (default `bash`). Known
    /// REPLs (bash, python3, node, gdb, sqlite3, psql …) get exact cell
    /// ends with exit codes.
    pub command: Option<String>,
    /// The REPL's exact prompt, for a REPL no profile knows: a cell ends
    /// when it shows again.
    pub prompt: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NewResult {
    pub session: String,
    pub command: String,
    /// False when the session was already running (nothing was started).
    pub started: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// The cell session (optional when only one is live).
    pub session: Option<String>,
    /// The code, as typed into the REPL; several lines are one cell.
    pub code: String,
    /// Seconds to wait for the cell to end (default 30 for `cell_run`, 300
    /// for `cell_fire`); it keeps running after, and `cell_wait` picks it up.
    pub timeout: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CellArgs {
    /// The cell session (optional when only one is live).
    pub session: Option<String>,
    /// The cell (default: the session's current or last one).
    pub cell_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitArgs {
    /// The cell session (optional when only one is live).
    pub session: Option<String>,
    /// The cell (default: the session's current or last one).
    pub cell_id: Option<String>,
    /// Seconds to wait at most (default 30).
    pub timeout: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionArgs {
    /// The cell session (optional when only one is live).
    pub session: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KillArgs {
    /// The cell session to end.
    pub session: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryArgs {
    /// The cell session (optional when only one is live).
    pub session: Option<String>,
    /// How many lines of the session's filtered view (default 25).
    pub lines: Option<usize>,
}

/// A cell's state, as `k run -j` prints it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CellResult {
    pub session: String,
    pub cell_id: Option<String>,
    /// fired, running, done, timeout (still running after the timeout),
    /// interrupted or error.
    pub status: String,
    /// What the cell printed (not while it runs).
    pub output: Option<String>,
    /// The code's exit status, where the REPL reports one.
    pub exit_code: Option<i32>,
}

impl CellResult {
    pub(super) fn new(session: &SessionName, reply: CellReply) -> Self {
        let running = matches!(reply.status, CellState::Fired | CellState::Running);
        Self {
            session: session.to_string(),
            cell_id: reply.cell_id,
            status: reply.status.as_str().to_owned(),
            output: if running { None } else { reply.output },
            exit_code: reply.exit_code,
        }
    }

    pub(super) fn reply(self) -> Reply<Self> {
        let id = self.cell_id.as_deref().unwrap_or("-");
        let text = match (self.status.as_str(), &self.output) {
            // Nothing printed still says the cell ran: an empty text reads
            // as no answer to a model that sees only text.
            ("done", None) => format!("cell {id} done, no output"),
            ("done", Some(output)) if output.is_empty() => format!("cell {id} done, no output"),
            ("done", Some(output)) => match self.exit_code {
                Some(code) if code != 0 => format!("{output}\n[exit code {code}]"),
                _ => output.clone(),
            },
            ("fired" | "running", _) => format!(
                "cell {id} is {}; cell_wait returns when it ends",
                self.status
            ),
            ("timeout", output) => format!(
                "cell {id} still runs after the timeout; cell_wait waits more, cell_interrupt stops it\n{}",
                output.as_deref().unwrap_or("")
            ),
            (status, output) => format!("cell {id}: {status}\n{}", output.as_deref().unwrap_or("")),
        };
        Reply::new(self, text)
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Done {
    pub session: String,
    pub done: String,
}

impl Done {
    pub(super) fn reply(session: &SessionName, done: &str) -> Reply<Self> {
        let text = format!("{done}: {session}");
        Reply::new(
            Self {
                session: session.to_string(),
                done: done.to_owned(),
            },
            text,
        )
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CellSessions {
    pub sessions: Vec<CellSessionState>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CellSessionState {
    pub session: String,
    pub command: String,
    /// idle, running, done or timeout.
    pub state: String,
    pub cell_id: Option<String>,
    /// Started by this server (its own to interrupt and kill).
    pub started_here: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct History {
    pub session: String,
    pub lines: Vec<String>,
}
