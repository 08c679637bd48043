//! ACP runtimes (docs/acp.md): prompt a headless agent and read what it
//! did. A prompt is delivered like any message to the runtime (serialized
//! with its other turns) and the call returns when the turn ends, with the
//! turn's transcript as text.

use agent_comms_core::acp::transcript::{self, transcript_path, Entry};
use agent_comms_core::acp::view::LogView;
use agent_comms_core::client::{Client, ClientError};
use agent_comms_core::control::{open_store, state_dir};
use agent_comms_core::delivery::{validate, DeliveryOptions};
use agent_comms_core::display::one_line;
use agent_comms_core::session::{runtime_id, SessionKind, SessionName};
use agent_comms_core::socket::protocol::{Request, Response};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{timeout, unexpected};
use crate::reply::{blocking, Reply, ToolError, ToolResult};
use crate::Server;

const NO_RUNTIME: &str = "runtime_list shows the ACP runtimes (kind acp)";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptArgs {
    /// The ACP runtime's id.
    pub runtime: String,
    /// The prompt: one line of text.
    pub text: String,
    /// Seconds to wait for a running turn to end and this one to start
    /// (default 300).
    pub timeout: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogArgs {
    /// The ACP runtime's id.
    pub runtime: String,
    /// Only entries after this position (the `next` an earlier call gave).
    pub after: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Turn {
    pub runtime: String,
    /// How the agent ended the turn: end_turn, cancelled, max_tokens …
    pub stop_reason: Option<String>,
    /// The turn as `acp log` shows it: the prompt, replies, tool calls,
    /// permissions.
    pub transcript: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Log {
    pub runtime: String,
    /// The entries as `acp log` shows them.
    pub transcript: String,
    /// Pass as `after` to read only what comes next.
    pub next: Option<u64>,
}

fn runtime(raw: &str) -> Result<SessionName, ToolError> {
    runtime_id(raw).map_err(|e| ToolError::new(format!("{e}; {NO_RUNTIME}")))
}

/// The transcript's entries after `after`, rendered.
fn rendered(id: &SessionName, after: Option<u64>) -> Result<(String, Option<u64>), ToolError> {
    let path = transcript_path(&state_dir(), id.as_str());
    if !path.exists() {
        return Err(ToolError::new(format!(
            "runtime {id} has no transcript; {NO_RUNTIME}"
        )));
    }
    let entries: Vec<Entry> = transcript::read(&path)
        .map_err(|e| ToolError::new(format!("cannot read {id}'s transcript: {e}")))?
        .into_iter()
        .filter(|e| after.is_none_or(|a| e.seq > a))
        .collect();
    let mut view = LogView::new();
    let mut text: String = entries.iter().map(|e| view.push(e)).collect();
    text.push_str(&view.finish());
    Ok((text, entries.last().map(|e| e.seq)))
}

fn live(id: &SessionName) -> Result<Client, ToolError> {
    match Client::for_session(id) {
        Ok((client, record)) if record.kind == SessionKind::Acp => Ok(client),
        Ok(_) => Err(ToolError::new(format!(
            "session {id} is not an ACP runtime; {NO_RUNTIME}"
        ))),
        Err(ClientError::Server(m)) => Err(ToolError::new(m)),
        Err(_) => Err(ToolError::new(format!(
            "ACP runtime {id} is not running; {NO_RUNTIME}"
        ))),
    }
}

#[tool_router(router = acp_tools, vis = "pub(crate)")]
impl Server {
    /// Prompt an ACP runtime (a headless agent) and wait until its turn
    /// ends; returns what it did. Never the actor's own runtime.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<Turn>(),
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    async fn acp_prompt(&self, Parameters(args): Parameters<PromptArgs>) -> ToolResult<Turn> {
        let wait = timeout(args.timeout, 300.0)?;
        let me = self.shared.actor.clone();
        blocking(move || {
            let id = runtime(&args.runtime)?;
            validate(&args.text).map_err(|e| ToolError::new(format!("text: {e}")))?;
            let owner = open_store()
                .ok()
                .and_then(|s| s.runtime(id.as_str()).ok().flatten())
                .map(|r| r.agent);
            if me
                .as_ref()
                .is_some_and(|me| owner.as_deref() == Some(me.as_str()))
            {
                // Its turn is the one making this call: a prompt would wait
                // for it forever.
                return Err(ToolError::new(format!(
                    "runtime {id} is your own; prompt another agent's runtime"
                )));
            }
            let mut client = live(&id)?;
            // Read from the file's end: the transcript may be long.
            let before = transcript::last_seq(&transcript_path(&state_dir(), id.as_str()))
                .ok()
                .flatten();
            let options = DeliveryOptions {
                try_only: false,
                timeout_ms: wait.as_millis() as u64,
            };
            let evidence = match client.request(Request::Deliver {
                text: args.text,
                options,
            }) {
                Ok(Response::Delivered(e)) => e,
                Ok(other) => return Err(unexpected(other)),
                Err(e) => return Err(ToolError::new(e.to_string())),
            };
            let (transcript, _) = rendered(&id, before)?;
            let text = format!(
                "{transcript}\n[turn ended: {}]",
                evidence.stop_reason.as_deref().unwrap_or("?")
            );
            Ok(Reply::new(
                Turn {
                    runtime: id.to_string(),
                    stop_reason: evidence.stop_reason,
                    transcript,
                },
                text,
            ))
        })
        .await
    }

    /// An ACP runtime's transcript as `acp log` shows it, or only what came
    /// after an earlier call's `next`.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<Log>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn acp_log(&self, Parameters(args): Parameters<LogArgs>) -> ToolResult<Log> {
        blocking(move || {
            let id = runtime(&args.runtime)?;
            let (transcript, last) = rendered(&id, args.after)?;
            let text = if transcript.is_empty() {
                format!("nothing new in {}'s transcript", one_line(id.as_str()))
            } else {
                transcript.clone()
            };
            Ok(Reply::new(
                Log {
                    runtime: id.to_string(),
                    transcript,
                    next: last.or(args.after),
                },
                text,
            ))
        })
        .await
    }
}
