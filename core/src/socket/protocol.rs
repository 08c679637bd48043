//! The messages of protocol v1: what clients ask, what supervisors answer,
//! and what supervisors push. JSON shapes, carried in [`super::codec`] frames.

use serde::{Deserialize, Serialize};

use crate::session::SessionRecord;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Who and what this session is.
    Info,
    /// The current screen as text.
    Snapshot,
    /// Busy or idle, as the session's adapter reads the screen.
    Activity,
    /// Bytes for the PTY, as given (no Enter added).
    Write {
        data: String,
    },
    Resize {
        rows: u16,
        cols: u16,
    },
    /// Turn this connection into a live stream: the screen is redrawn, then
    /// every output byte follows as `Output` frames. An `Interactive` client
    /// may send `Input` and `Resize`; a `Watch` client only reads.
    Attach {
        mode: StreamMode,
        rows: Option<u16>,
        cols: Option<u16>,
    },
    /// End the child (SIGHUP+SIGTERM, then SIGKILL after `grace_ms`); the
    /// reply comes once it is gone.
    Kill {
        grace_ms: u64,
    },
    /// Start a cell. With `wait`, the reply comes when it ends (or times out).
    CellRun {
        code: String,
        timeout_ms: u64,
        wait: bool,
    },
    /// A cell's state; an ended cell's result is handed over once (as
    /// `k poll` does) unless `keep` leaves it for its owner (a read-only
    /// caller: MCP's `--tools readonly`).
    CellPoll {
        cell_id: Option<String>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        keep: bool,
    },
    CellInterrupt,
    CellStatus,
    Notify {
        from: String,
        message: String,
    },
    /// Stream cell events (`km`); `history` replays what already happened,
    /// `lines` adds the filtered view's lines (`k watch`).
    Subscribe {
        history: bool,
        lines: bool,
    },
    /// The last `lines` lines of the filtered view (`k history`).
    History {
        lines: usize,
    },
    /// What the program printed after `cursor` (a position an earlier
    /// `output` answer gave; 0 is the start), escapes removed.
    OutputSince {
        cursor: u64,
    },
    /// [`Request::OutputSince`], then a live stream: the reply is the text
    /// after `cursor`, and every later piece of text follows as a
    /// `printed` event (`session logs --follow`).
    FollowOutput {
        cursor: u64,
    },
    /// Type one line into the program with the delivery discipline (wait
    /// for idle and a quiet keyboard, verify echo and submission); the reply
    /// is `Delivered` with the evidence, or an error saying why not.
    Deliver {
        text: String,
        options: crate::delivery::DeliveryOptions,
    },
    /// New messages wait for this runtime: look in the store. With
    /// `wait_for`, the reply comes when that message's delivery ended (or
    /// after `timeout_ms`).
    Nudge {
        wait_for: Option<String>,
        timeout_ms: u64,
    },
    /// From now on, while a `deliver` or `nudge` on this connection waits,
    /// push a `waiting` event each time what it waits for changes (`ok`).
    /// A client asks for this only when a person watches its wait.
    ReportWaits,
    /// An ACP runtime's state: its agent, its session, the running turn.
    AcpStatus,
    /// End the running turn of an ACP runtime (`session/cancel`); the
    /// reply comes when the turn has ended, with its stop reason.
    Cancel,
    /// Stream an ACP runtime's transcript: the reply says where the live
    /// stream starts (the entries before it are in the transcript file),
    /// then every new entry follows as a `transcript` event.
    Follow,
    /// Stream the session's live state (`agent-comms top`): the reply is
    /// `Ok`, then a `status` event at once and another whenever it changed.
    /// A supervisor older than this request answers it with an error, as it
    /// does any request it cannot read.
    Status,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamMode {
    Interactive,
    Watch,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Response {
    Ok,
    Error { message: String },
    Info(SessionInfo),
    Snapshot(ScreenSnapshot),
    Activity(crate::adapter::monitor::ActivityReport),
    Exited(ExitInfo),
    Cell(CellReply),
    CellStatus(CellStatusReply),
    Lines { lines: Vec<String> },
    Output(OutputSince),
    Delivered(crate::delivery::Evidence),
    Invocation(InvocationOutcome),
    Acp(AcpStatus),
    TurnEnded { stop_reason: String },
    Following { next_seq: u64 },
}

/// An ACP runtime as its supervisor knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcpStatus {
    /// The ACP session the agent runs (the runtime's conversation).
    pub session_id: String,
    /// The agent's name and version, as `initialize` gave them.
    pub agent_name: Option<String>,
    pub agent_version: Option<String>,
    pub protocol_version: u16,
    /// When the running turn's prompt was sent (Unix ms); none when idle.
    pub turn_started: Option<u64>,
    /// Turns ended since the supervisor started.
    pub turns: u64,
    /// The bridge socket ACP clients attach to (`acp attach`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<std::path::PathBuf>,
    /// The clients attached now, in the order they came.
    #[serde(default)]
    pub clients: Vec<AttachedClient>,
}

/// An ACP client attached to a runtime's bridge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachedClient {
    /// Its number in this run (`client-N` in the transcript).
    pub seat: u64,
    /// `controller` or `observer`.
    pub role: String,
    pub uid: u32,
    /// `socket` or `websocket`.
    pub via: String,
    /// When it connected (UTC ISO 8601).
    pub since: String,
}

/// One line of an ACP runtime's transcript: a JSON-RPC message in either
/// direction, or the supervisor's own note.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptEntry {
    pub seq: u64,
    /// UTC ISO 8601 with milliseconds.
    pub ts: String,
    pub dir: Direction,
    /// The JSON-RPC message, when the line parsed as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg: Option<serde_json::Value>,
    /// A line that was not JSON (cut to a few KiB), or the supervisor's
    /// note: a policy's answer, a refusal, the agent's exit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    ToAgent,
    FromAgent,
    /// Said by the supervisor itself.
    Note,
}

/// How one delivery of a message ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvocationOutcome {
    pub id: String,
    /// `DELIVERED`, or `PENDING` after a failed attempt.
    pub status: String,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The child ended; the supervisor is about to exit.
    Exited(ExitInfo),
    Cell(CellEvent),
    Transcript(TranscriptEntry),
    /// Text the program printed, after a [`Request::FollowOutput`].
    Printed(OutputSince),
    /// What a delivery waits for now (`None`: it no longer waits), after
    /// [`Request::ReportWaits`].
    Waiting {
        wait: Option<Waiting>,
    },
    Status(SessionStatus),
}

/// A session's live state, as [`Request::Status`] pushes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionStatus {
    /// Busy, idle or unknown as its adapter reads the screen (debounced);
    /// none when it has no adapter.
    pub activity: Option<crate::adapter::Activity>,
    pub adapter: Option<String>,
    /// Attach and watch clients connected now.
    pub clients: u32,
    /// Somebody can type into it: an interactive client, or the terminal
    /// it is served in.
    pub person_attached: bool,
    /// A person typed within the delivery's keyboard-quiet period.
    pub typing: bool,
    /// Grows each time its inbox was woken or ended a delivery: a reader of
    /// the store reads again when it changed.
    pub inbox_changes: u64,
    /// How its inbox's last delivery ended.
    pub last_delivery: Option<InvocationOutcome>,
}

/// What a delivery waits for (the delivery layer's, sent as is).
pub use crate::delivery::Waiting;

/// Text a program printed after a position ([`Request::OutputSince`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputSince {
    pub text: String,
    /// Where the next read starts.
    pub cursor: u64,
    /// Bytes after the asked position no longer kept (the supervisor keeps
    /// the last 256 KiB of text).
    pub skipped: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// What the supervisor wrote on disk; its fields are this object's own
    /// on the wire (`name`, `kind`, `pid` …).
    #[serde(flatten)]
    pub record: SessionRecord,
    /// Attach and watch clients connected now, and the terminal a
    /// foreground session (`session run`, `runtime interactive-serve`)
    /// runs in.
    pub clients: u32,
    pub rows: u16,
    pub cols: u16,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScreenSnapshot {
    pub rows: u16,
    pub cols: u16,
    /// (row, col), zero-based.
    pub cursor: (u16, u16),
    pub title: String,
    pub alternate_screen: bool,
    /// One string per screen row, trailing blanks trimmed.
    pub lines: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExitInfo {
    /// The exit code, when the child exited normally.
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<String>,
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.code, &self.signal) {
            (_, Some(sig)) => write!(f, "killed by {sig}"),
            (Some(code), None) => write!(f, "exit status {code}"),
            (None, None) => f.write_str("exit status unknown"),
        }
    }
}

/// A cell's state as `k` prints it (docs/cells-contract.md#json has the text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellReply {
    pub cell_id: Option<String>,
    pub status: CellState,
    pub output: Option<String>,
    pub exit_code: Option<i32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CellState {
    Fired,
    Running,
    Done,
    Timeout,
    Interrupted,
    Error,
}

impl CellState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fired => "fired",
            Self::Running => "running",
            Self::Done => "done",
            Self::Timeout => "timeout",
            Self::Interrupted => "interrupted",
            Self::Error => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellStatusReply {
    /// `idle`, `running`, `done` or `timeout`.
    pub state: String,
    pub cell_id: Option<String>,
}

/// One line of `km`'s event stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum CellEvent {
    Cell {
        cell_id: String,
        status: CellState,
        ts: String,
    },
    Notify {
        from: String,
        message: String,
        ts: String,
    },
    Closed {
        ts: String,
    },
    /// A line of the filtered view (only with `Subscribe { lines: true }`).
    Line {
        text: String,
    },
}
