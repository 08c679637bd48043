//! Sessions: any supervised program (a shell, a REPL, another agent's
//! terminal), read as text and typed into. Reading a screen is what a
//! person looking at it sees; `session_output_since` is what the program
//! printed, so an agent following a session reads each line once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use agent_comms_core::display::one_line;
use agent_comms_core::keys::key_bytes;
use agent_comms_core::session::SessionName;
use agent_comms_core::socket::codec::Message;
use agent_comms_core::socket::protocol::{Request, Response, ScreenSnapshot, StreamMode};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ask, connect, live_sessions, session_name, timeout, unexpected};
use crate::reply::{blocking, Reply, ToolError, ToolResult};
use crate::wait::{until_cancelled, CANCEL_CHECK};
use crate::Server;

const NO_SESSION: &str = "session_list shows the live ones";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotArgs {
    pub session: String,
    /// Only the last N rows that show something (default: the whole
    /// screen).
    pub rows: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputArgs {
    pub session: String,
    /// The `cursor` the previous call returned; 0 (the default) reads from
    /// the session's start.
    pub cursor: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitForArgs {
    pub session: String,
    /// Text to wait for on the screen.
    pub text: Option<String>,
    /// A regular expression to wait for on any one screen row (instead of
    /// `text`).
    pub regex: Option<String>,
    /// Seconds to wait at most (default 30).
    pub timeout: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendArgs {
    pub session: String,
    /// Text to type, as given (no Enter is added: end it with a key).
    pub text: Option<String>,
    /// Keys to press after the text, by name: Enter, Tab, Escape, BSpace,
    /// Up, Down, C-c, M-x, F1 …
    pub keys: Option<Vec<String>>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Sessions {
    pub sessions: Vec<SessionEntry>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionEntry {
    pub session: String,
    /// session, cell, interactive (an agent's runtime) or acp.
    pub kind: String,
    pub command: String,
    pub pid: u32,
    pub started: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Screen {
    pub session: String,
    pub rows: u16,
    pub cols: u16,
    /// (row, column) of the cursor, zero-based.
    pub cursor: (u16, u16),
    pub title: String,
    /// The rows shown (all, or the last `rows`), trailing blanks trimmed.
    pub lines: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub session: String,
    /// What the program printed after the cursor asked from, escapes
    /// removed.
    pub text: String,
    /// Pass this as `cursor` next time to read only what is new.
    pub cursor: u64,
    /// Bytes no longer kept between the asked cursor and `text` (the
    /// session keeps the last 256 KiB).
    pub skipped: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Seen {
    pub session: String,
    pub found: bool,
    /// The row it was seen on, zero-based, and that row's text.
    pub row: Option<usize>,
    pub line: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Sent {
    pub session: String,
    /// Bytes written to the program.
    pub bytes: usize,
}

/// What `session_wait_for` looks for on each row.
enum Pattern {
    Text(String),
    Regex(regex::Regex),
}

impl Pattern {
    fn new(text: Option<String>, regex: Option<String>) -> Result<Self, ToolError> {
        match (text, regex) {
            (Some(t), None) if !t.is_empty() => Ok(Self::Text(t)),
            (None, Some(r)) => regex::Regex::new(&r)
                .map(Self::Regex)
                .map_err(|e| ToolError::new(format!("regex does not parse: {e}"))),
            (Some(_), Some(_)) => Err(ToolError::new("give `text` or `regex`, not both")),
            _ => Err(ToolError::new("give the `text` or `regex` to wait for")),
        }
    }

    fn find(&self, lines: &[String]) -> Option<usize> {
        lines.iter().position(|l| match self {
            Self::Text(t) => l.contains(t.as_str()),
            Self::Regex(r) => r.is_match(l),
        })
    }
}

fn snapshot(session: &SessionName) -> Result<ScreenSnapshot, ToolError> {
    match ask(session, Request::Snapshot, NO_SESSION)? {
        Response::Snapshot(s) => Ok(s),
        other => Err(unexpected(other)),
    }
}

/// Watches the session's output and looks at its screen after each
/// change, until the pattern shows, the deadline passes or the caller
/// gives up.
fn wait_for(
    session: &SessionName,
    pattern: &Pattern,
    deadline: Instant,
    gave_up: &AtomicBool,
) -> Result<Seen, ToolError> {
    let mut watch = connect(session, NO_SESSION)?;
    watch
        .request(Request::Attach {
            mode: StreamMode::Watch,
            rows: None,
            cols: None,
        })
        .map_err(|e| ToolError::new(e.to_string()))?;
    let seen = |row: Option<usize>, lines: &[String]| Seen {
        session: session.to_string(),
        found: row.is_some(),
        row,
        line: row.map(|r| lines[r].clone()),
    };
    loop {
        // Watching began before this look: a change after it wakes us.
        let lines = snapshot(session)?.lines;
        if let Some(row) = pattern.find(&lines) {
            return Ok(seen(Some(row), &lines));
        }
        let changed = loop {
            if gave_up.load(Ordering::Relaxed) || Instant::now() >= deadline {
                break false;
            }
            match watch.read_frame_until(deadline.min(Instant::now() + CANCEL_CHECK)) {
                Ok(Some(frame)) if matches!(frame.message, Message::Output(_)) => break true,
                Ok(Some(frame)) if matches!(frame.message, Message::Event(_)) => {
                    // The program ended: its last screen is the answer.
                    break false;
                }
                Ok(_) => {}
                Err(_) => break false,
            }
        };
        if !changed {
            let lines = snapshot(session).map(|s| s.lines).unwrap_or_default();
            let row = pattern.find(&lines);
            return Ok(seen(row, &lines));
        }
    }
}

#[tool_router(router = session_tools, vis = "pub(crate)")]
impl Server {
    /// Every live session: shells, cell REPLs, agents' runtimes.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<Sessions>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn session_list(&self) -> ToolResult<Sessions> {
        blocking(|| {
            let sessions: Vec<SessionEntry> = live_sessions()?
                .into_iter()
                .map(|r| SessionEntry {
                    session: r.name.to_string(),
                    kind: r.kind.as_str().to_owned(),
                    command: r.command,
                    pid: r.pid,
                    started: r.started,
                })
                .collect();
            let text = if sessions.is_empty() {
                "no live sessions".to_owned()
            } else {
                sessions
                    .iter()
                    .map(|s| format!("{} {} {}", s.session, s.kind, one_line(&s.command)))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            Ok(Reply::new(Sessions { sessions }, text))
        })
        .await
    }

    /// A session's screen as text, as a person looking at it sees it.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<Screen>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn session_snapshot(
        &self,
        Parameters(args): Parameters<SnapshotArgs>,
    ) -> ToolResult<Screen> {
        blocking(move || {
            let session = session_name(&args.session)?;
            let s = snapshot(&session)?;
            let mut lines = s.lines;
            if let Some(n) = args.rows {
                // The last rows that show something: a shell's prompt sits
                // at the top of an otherwise empty screen.
                let shown = lines
                    .iter()
                    .rposition(|l| !l.is_empty())
                    .map_or(0, |i| i + 1);
                lines.truncate(shown);
                lines.drain(..lines.len().saturating_sub(n));
            }
            let text = lines.join("\n");
            let screen = Screen {
                session: session.to_string(),
                rows: s.rows,
                cols: s.cols,
                cursor: s.cursor,
                title: s.title,
                lines,
            };
            Ok(Reply::new(screen, text))
        })
        .await
    }

    /// What a session's program printed since the cursor an earlier call
    /// returned (escapes removed): each call reads only what is new.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<Output>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn session_output_since(
        &self,
        Parameters(args): Parameters<OutputArgs>,
    ) -> ToolResult<Output> {
        blocking(move || {
            let session = session_name(&args.session)?;
            let cursor = args.cursor.unwrap_or(0);
            match ask(&session, Request::OutputSince { cursor }, NO_SESSION)? {
                Response::Output(o) => {
                    let text = match o.skipped {
                        0 => o.text.clone(),
                        n => format!("[{n} bytes no longer kept]\n{}", o.text),
                    };
                    let output = Output {
                        session: session.to_string(),
                        text: o.text,
                        cursor: o.cursor,
                        skipped: o.skipped,
                    };
                    Ok(Reply::new(output, text))
                }
                other => Err(unexpected(other)),
            }
        })
        .await
    }

    /// Wait until text (or a regex) shows on a session's screen, or the
    /// timeout passes; `found` says which.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<Seen>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn session_wait_for(
        &self,
        Parameters(args): Parameters<WaitForArgs>,
        context: RequestContext<RoleServer>,
    ) -> ToolResult<Seen> {
        let wait = timeout(args.timeout, 30.0)?;
        let pattern = Pattern::new(args.text, args.regex)?;
        let session = session_name(&args.session)?;
        let seen = until_cancelled(context.ct, move |gave_up| {
            wait_for(&session, &pattern, Instant::now() + wait, gave_up)
        })
        .await?;
        let text = match (&seen.row, &seen.line) {
            (Some(row), Some(line)) => format!("seen on row {row}: {line}"),
            _ => format!(
                "not seen on {}'s screen within {}s",
                seen.session,
                wait.as_secs_f64()
            ),
        };
        Ok(Reply::new(seen, text))
    }

    /// Type text and press named keys in a session (never the session this
    /// server runs in). No Enter is added: pass it in `keys`.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<Sent>(),
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn session_send(&self, Parameters(args): Parameters<SendArgs>) -> ToolResult<Sent> {
        let shared = self.shared.clone();
        blocking(move || {
            let session = session_name(&args.session)?;
            shared.not_inside(&session, "type into")?;
            let mut bytes = args.text.unwrap_or_default().into_bytes();
            for key in args.keys.unwrap_or_default() {
                bytes.extend(key_bytes(&key).map_err(|e| ToolError::new(e.to_string()))?);
            }
            if bytes.is_empty() {
                return Err(ToolError::new(
                    "nothing to send: give `text`, `keys` or both",
                ));
            }
            let data = String::from_utf8(bytes).map_err(|_| ToolError::new("text is not UTF-8"))?;
            let sent = data.len();
            match ask(&session, Request::Write { data }, NO_SESSION)? {
                Response::Ok => Ok(Reply::new(
                    Sent {
                        session: session.to_string(),
                        bytes: sent,
                    },
                    format!("sent {sent} bytes to {session}"),
                )),
                other => Err(unexpected(other)),
            }
        })
        .await
    }
}
