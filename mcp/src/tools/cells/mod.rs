//! Cells: a persistent REPL per session, as `k` gives the command line
//! (docs/cells.md). A cell id is optional wherever the session's current
//! cell is meant, and so is the session when exactly one cell session is
//! live (or `K_SESSION` names one).
//!
//! Waits block here, in the server: `cell_run` until the cell ends (with
//! progress notifications carrying its output), `cell_wait` until a fired
//! cell ends. The model never polls.
//!
//! `io` holds what the tools take and give (their schemas), `events` the
//! waits on a session's cell events.

mod events;
mod io;

pub(crate) use events::on_cell_ends;
use events::{wait_for_cell, Progress};
pub use io::*;

use std::time::Instant;

use agent_comms_core::cells::FrameMode;
use agent_comms_core::paths::ensure_runtime_root;
use agent_comms_core::session::{Liveness, Registry, SessionKind, SessionName};
use agent_comms_core::socket::is_dialable;
use agent_comms_core::socket::protocol::{Request, Response};
use agent_comms_core::supervisor::cell_session::{missing_program, CellSession};
use agent_comms_core::supervisor::launch::spawn_detached;
use agent_comms_core::supervisor::DEFAULT_KILL_GRACE;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};

use super::{ask, connect_with_record, live_sessions, session_name, timeout, unexpected};
use crate::reply::{blocking, Reply, ToolError, ToolResult};
use crate::server::Shared;
use crate::wait::{until_cancelled, CANCEL_CHECK};
use crate::Server;

const NO_SESSION: &str = "cell_new creates one";

/// The live cell sessions and their state. A session that ends between
/// the listing and the question is left out, not an error.
pub(crate) fn cell_sessions(shared: &Shared) -> Result<Vec<CellSessionState>, ToolError> {
    let mut sessions = Vec::new();
    for record in live_sessions()?
        .into_iter()
        .filter(|r| r.kind == SessionKind::Cell)
    {
        let Ok(Response::CellStatus(status)) = ask(&record.name, Request::CellStatus, NO_SESSION)
        else {
            continue;
        };
        sessions.push(CellSessionState {
            started_here: shared.is_started_here(&record.name),
            session: record.name.to_string(),
            command: record.command,
            state: status.state,
            cell_id: status.cell_id,
        });
    }
    Ok(sessions)
}

/// The cell session a call means: the one named, else `K_SESSION`, else
/// the only live one.
fn cell_session(explicit: Option<&str>) -> Result<SessionName, ToolError> {
    if let Some(name) = explicit {
        return session_name(name);
    }
    if let Some(name) = std::env::var("K_SESSION").ok().filter(|s| !s.is_empty()) {
        return session_name(&name);
    }
    let mut cells: Vec<SessionName> = live_sessions()?
        .into_iter()
        .filter(|r| r.kind == SessionKind::Cell)
        .map(|r| r.name)
        .collect();
    match cells.len() {
        1 => Ok(cells.remove(0)),
        0 => Err(ToolError::new(
            "no cell session is live; cell_new starts one",
        )),
        n => Err(ToolError::new(format!(
            "{n} cell sessions are live; name one as `session` (cell_list shows them)"
        ))),
    }
}

fn cell_reply(session: &SessionName, request: Request) -> Result<CellResult, ToolError> {
    match ask(session, request, NO_SESSION)? {
        Response::Cell(reply) => Ok(CellResult::new(session, reply)),
        other => Err(unexpected(other)),
    }
}

#[tool_router(router = cell_tools, vis = "pub(crate)")]
impl Server {
    /// Start a persistent REPL session for cells (default: bash). Nothing
    /// happens when it already runs.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<NewResult>(),
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn cell_new(&self, Parameters(args): Parameters<NewArgs>) -> ToolResult<NewResult> {
        let shared = self.shared.clone();
        blocking(move || {
            let name = session_name(&args.session)?;
            let command_line = args.command.unwrap_or_else(|| "bash".to_owned());
            let frame = match args.prompt.as_deref().map(str::trim) {
                Some("") => {
                    return Err(ToolError::new(
                        "prompt is empty; leave it out for a known REPL",
                    ))
                }
                Some(p) => Some(FrameMode::Prompt(p.to_owned())),
                None => None,
            };
            let root = ensure_runtime_root().map_err(|e| ToolError::new(e.to_string()))?;
            let registry = Registry::new(root, is_dialable);
            if let Some(Liveness::Live(record)) = registry.check(&name) {
                if record.kind != SessionKind::Cell {
                    return Err(ToolError::new(format!(
                        "session '{name}' exists but runs no cells (it is a {}); pick another name",
                        record.kind.as_str()
                    )));
                }
                let text = format!("{name} is already running ({})", record.command);
                let result = NewResult {
                    session: name.to_string(),
                    command: record.command,
                    started: false,
                };
                return Ok(Reply::new(result, text));
            }
            if let Some(program) = missing_program(&command_line) {
                return Err(ToolError::new(format!(
                    "command not found: {program}; give `command` a program on PATH"
                )));
            }
            let adapters = agent_comms_adapters::registry();
            agent_comms_adapters::say_untrusted(&adapters);
            let config = CellSession {
                name: name.clone(),
                profile: adapters.for_command(&command_line).map(|e| &e.profile),
                command_line: command_line.clone(),
                cwd: std::env::current_dir().unwrap_or_else(|_| "/".into()),
                frame,
                record: None,
                files_dir: registry.root().join(format!("{name}.cells")),
            }
            .config();
            let log = registry.paths(&name).log;
            spawn_detached(&shared.supervisor, &config, &log)
                .map_err(|e| ToolError::new(format!("cannot start session '{name}': {e}")))?;
            shared.started_here(&name);
            let text = format!("started {name} ({command_line})");
            let result = NewResult {
                session: name.to_string(),
                command: command_line,
                started: true,
            };
            Ok(Reply::new(result, text))
        })
        .await
    }

    /// Run code in a cell session's REPL and wait for its output (variables
    /// persist between calls). Progress notifications carry the output as
    /// it comes; cancelling the call interrupts the cell.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<CellResult>(),
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    async fn cell_run(
        &self,
        Parameters(args): Parameters<RunArgs>,
        context: RequestContext<RoleServer>,
    ) -> ToolResult<CellResult> {
        let wait = timeout(args.timeout, 30.0)?;
        // Finding the session and subscribing are supervisor round trips:
        // off the event loop, like the run itself.
        let (token, peer, named) = (
            context.meta.get_progress_token(),
            context.peer.clone(),
            args.session,
        );
        let (session, progress) = blocking(move || {
            let session = cell_session(named.as_deref())?;
            let progress = token.and_then(|token| Progress::start(&session, token, peer));
            Ok((session, progress))
        })
        .await?;
        let run = {
            let session = session.clone();
            let request = Request::CellRun {
                code: args.code,
                timeout_ms: wait.as_millis() as u64,
                wait: true,
            };
            tokio::task::spawn_blocking(move || cell_reply(&session, request))
        };
        tokio::pin!(run);
        let result = tokio::select! {
            done = &mut run => done,
            () = context.ct.cancelled() => {
                // The caller gave up: so does the cell. Its answer still
                // comes, and settles the run. A cancel can come before the
                // supervisor started the cell, when an interrupt finds none
                // to stop: it is sent again until the run has answered.
                loop {
                    let session = session.clone();
                    let _ = blocking(move || ask(&session, Request::CellInterrupt, NO_SESSION).map(drop)).await;
                    if let Ok(done) = tokio::time::timeout(CANCEL_CHECK, &mut run).await {
                        break done;
                    }
                }
            }
        };
        let result = result.map_err(|e| ToolError::new(format!("the run failed: {e}")))?;
        if let Some(progress) = progress {
            progress
                .finish(result.as_ref().is_ok_and(|r| r.cell_id.is_some()))
                .await;
        }
        let result = result?;
        if result.status == "error" && result.cell_id.is_none() {
            // A refusal (a cell already runs, the REPL is not ready) comes
            // back as an error cell: say it as an error.
            return Err(ToolError::new(result.output.unwrap_or_default()));
        }
        Ok(result.reply())
    }

    /// Send code to a cell session and return at once with the cell's id;
    /// cell_wait or cell_poll picks up its result.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<CellResult>(),
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    async fn cell_fire(&self, Parameters(args): Parameters<RunArgs>) -> ToolResult<CellResult> {
        let wait = timeout(args.timeout, 300.0)?;
        blocking(move || {
            let session = cell_session(args.session.as_deref())?;
            let request = Request::CellRun {
                code: args.code,
                timeout_ms: wait.as_millis() as u64,
                wait: false,
            };
            let result = cell_reply(&session, request)?;
            if result.status == "error" {
                return Err(ToolError::new(result.output.unwrap_or_default()));
            }
            Ok(result.reply())
        })
        .await
    }

    /// A cell's state now, with its output once it ended. Does not wait:
    /// cell_wait does.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<CellResult>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn cell_poll(&self, Parameters(args): Parameters<CellArgs>) -> ToolResult<CellResult> {
        let keep = self.shared.keeps_results();
        blocking(move || {
            let session = cell_session(args.session.as_deref())?;
            Ok(cell_reply(
                &session,
                Request::CellPoll {
                    cell_id: args.cell_id,
                    keep,
                },
            )?
            .reply())
        })
        .await
    }

    /// Wait until a cell ends (or the timeout passes) and return its result.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<CellResult>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn cell_wait(
        &self,
        Parameters(args): Parameters<WaitArgs>,
        context: RequestContext<RoleServer>,
    ) -> ToolResult<CellResult> {
        let wait = timeout(args.timeout, 30.0)?;
        let keep = self.shared.keeps_results();
        let result = until_cancelled(context.ct, move |gave_up| {
            let session = cell_session(args.session.as_deref())?;
            wait_for_cell(&session, args.cell_id, Instant::now() + wait, keep, gave_up)
        })
        .await?;
        Ok(result.reply())
    }

    /// Interrupt the running cell (Ctrl-C); it ends as interrupted. In the
    /// default tool set, only sessions this server started.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<Done>(),
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn cell_interrupt(&self, Parameters(args): Parameters<SessionArgs>) -> ToolResult<Done> {
        let shared = self.shared.clone();
        blocking(move || {
            let session = cell_session(args.session.as_deref())?;
            shared.may_stop(&session, "interrupt")?;
            match ask(&session, Request::CellInterrupt, NO_SESSION)? {
                Response::Ok => Ok(Done::reply(&session, "interrupted")),
                other => Err(unexpected(other)),
            }
        })
        .await
    }

    /// End a cell session and its REPL. In the default tool set, only
    /// sessions this server started; never the session the server runs in.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<Done>(),
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn cell_kill(&self, Parameters(args): Parameters<KillArgs>) -> ToolResult<Done> {
        let shared = self.shared.clone();
        blocking(move || {
            let session = session_name(&args.session)?;
            shared.may_stop(&session, "kill")?;
            let (mut client, record) = connect_with_record(&session, NO_SESSION)?;
            let reply = client
                .kill(record.supervisor_pid, DEFAULT_KILL_GRACE)
                .map_err(|e| ToolError::new(e.to_string()))?;
            match reply {
                Response::Exited(_) | Response::Ok => Ok(Done::reply(&session, "killed")),
                other => Err(unexpected(other)),
            }
        })
        .await
    }

    /// The live cell sessions and what each is doing.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<CellSessions>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn cell_list(&self) -> ToolResult<CellSessions> {
        let shared = self.shared.clone();
        blocking(move || {
            let sessions = cell_sessions(&shared)?;
            let text = if sessions.is_empty() {
                "no cell sessions; cell_new starts one".to_owned()
            } else {
                sessions
                    .iter()
                    .map(|s| format!("{} {} {}", s.session, s.state, s.command))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            Ok(Reply::new(CellSessions { sessions }, text))
        })
        .await
    }

    /// The last lines of a cell session's filtered view: the code sent and
    /// what it printed, as `k history` shows them.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<History>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn cell_history(&self, Parameters(args): Parameters<HistoryArgs>) -> ToolResult<History> {
        blocking(move || {
            let session = cell_session(args.session.as_deref())?;
            let lines = args.lines.unwrap_or(25).clamp(1, 10_000);
            match ask(&session, Request::History { lines }, NO_SESSION)? {
                Response::Lines { lines } => {
                    let text = lines.join("\n");
                    Ok(Reply::new(
                        History {
                            session: session.to_string(),
                            lines,
                        },
                        text,
                    ))
                }
                other => Err(unexpected(other)),
            }
        })
        .await
    }
}
