//! Messages between agents, as the actor (`--actor` / `AGENT_COMMS_ACTOR`):
//! send one, read the inbox with bodies, wait for the next one. The same
//! store and delivery as `agent-comms send`: a message to an agent with a
//! runtime is also announced in its prompt when it is idle.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agent_comms_core::control::messages;
use agent_comms_core::control::registration::RuntimeView;
use agent_comms_core::control::{host::host_id, open_store, ControlError};
use agent_comms_core::display::one_line;
use agent_comms_core::ids::Id;
use agent_comms_core::store::{Invocation, InvocationFilter, InvocationStatus, Store};
use agent_comms_core::time::iso_from_unix_millis;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::timeout;
use crate::reply::{blocking, Reply, ToolError, ToolResult};
use crate::wait::{until_cancelled, CANCEL_CHECK};
use crate::Server;

/// How often the inbox resource looks at the store: a local SQLite read
/// costs microseconds, and a change waits at most this long to be seen.
/// (`message_wait` is woken by the store itself.)
pub(crate) const STORE_CHECK: Duration = Duration::from_millis(100);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendArgs {
    /// The agent to send to (it must have a runtime: runtime_list).
    pub to: String,
    /// The message; it may be long and span lines.
    pub text: String,
    /// Seconds to wait for the message to reach the agent's prompt
    /// (default: do not wait).
    pub wait: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InboxArgs {
    /// At most this many messages (default 20).
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowArgs {
    /// The message id (`inv_…`).
    pub id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitArgs {
    /// Seconds to wait at most (default 60).
    pub timeout: Option<f64>,
    /// Return the first message after this one (an id from the inbox);
    /// default: the first that arrives after the call.
    pub after: Option<String>,
}

/// A message, with its body.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MessageEntry {
    pub id: String,
    pub from: String,
    pub to: String,
    /// PENDING, DELIVERING, DELIVERED, UNAVAILABLE or FAILED.
    pub status: String,
    pub created: String,
    /// When it reached the recipient's prompt.
    pub delivered: Option<String>,
    pub reason: Option<String>,
    pub body: String,
}

impl MessageEntry {
    fn new(inv: &Invocation) -> Self {
        Self {
            id: inv.id.clone(),
            from: inv.from.clone(),
            to: inv.to.clone(),
            status: inv.status.as_str().to_owned(),
            created: iso_from_unix_millis(inv.created),
            delivered: inv.delivered.map(iso_from_unix_millis),
            reason: inv.reason.clone(),
            body: inv.body.clone(),
        }
    }

    /// Someone else's text: shown on one line per field, control
    /// characters escaped.
    fn summary(&self) -> String {
        format!(
            "{} from {} ({}): {}",
            self.id,
            one_line(&self.from),
            self.status,
            one_line(&self.body)
        )
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Inbox {
    pub agent: String,
    /// Not yet announced in the agent's prompt (PENDING, DELIVERING,
    /// UNAVAILABLE): these come first, oldest first; then the rest, newest
    /// first.
    pub unread: usize,
    pub messages: Vec<MessageEntry>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Waited {
    /// None when the timeout passed first.
    pub message: Option<MessageEntry>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Runtimes {
    pub runtimes: Vec<RuntimeEntry>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RuntimeEntry {
    pub id: String,
    pub agent: String,
    /// interactive or acp.
    pub kind: String,
    /// ONLINE, OFFLINE, STALE or REVOKED.
    pub status: String,
    pub provider: Option<String>,
    /// On this host (only those can be typed into from here).
    pub local: bool,
    pub last_heartbeat: Option<String>,
}

impl From<RuntimeView> for RuntimeEntry {
    fn from(v: RuntimeView) -> Self {
        Self {
            id: v.id,
            agent: v.agent,
            kind: v.kind,
            status: v.status.as_str().to_owned(),
            provider: v.provider,
            local: v.local,
            last_heartbeat: v.last_heartbeat,
        }
    }
}

fn store() -> Result<Box<dyn Store>, ToolError> {
    open_store().map_err(control)
}

/// A control-plane error, with the tool to call where the command line's
/// text names a command.
fn control(e: ControlError) -> ToolError {
    ToolError::new(match e {
        ControlError::UnknownAgent(agent) => format!(
            "no agent '{}' has a runtime, so nothing could deliver to it; runtime_list shows who can be messaged",
            one_line(&agent)
        ),
        ControlError::UnknownInvocation(id) => {
            format!("no message '{}'; message_inbox lists yours", one_line(&id))
        }
        other => other.to_string(),
    })
}

fn is_unread(status: InvocationStatus) -> bool {
    matches!(
        status,
        InvocationStatus::Pending | InvocationStatus::Delivering | InvocationStatus::Unavailable
    )
}

fn to_me(store: &dyn Store, me: &Id) -> Result<Vec<Invocation>, ToolError> {
    let filter = InvocationFilter {
        to: Some(me.as_str()),
        ..Default::default()
    };
    store.invocations(&filter).map_err(|e| control(e.into()))
}

/// The messages to `me`, unread first (oldest first), then the rest
/// (newest first); at most `limit`.
pub(crate) fn inbox(me: &Id, limit: usize) -> Result<Inbox, ToolError> {
    let all = to_me(store()?.as_ref(), me)?;
    let (mut unread, mut read): (Vec<_>, Vec<_>) =
        all.into_iter().partition(|i| is_unread(i.status));
    read.reverse();
    let count = unread.len();
    unread.append(&mut read);
    unread.truncate(limit);
    Ok(Inbox {
        agent: me.to_string(),
        unread: count,
        messages: unread.iter().map(MessageEntry::new).collect(),
    })
}

/// What changes when a message to `me` arrives or its delivery moves on.
pub(crate) fn inbox_state(me: &Id) -> Result<Vec<(String, InvocationStatus)>, ToolError> {
    Ok(to_me(store()?.as_ref(), me)?
        .into_iter()
        .map(|i| (i.id, i.status))
        .collect())
}

/// Blocks until a message to `me` with a higher sequence than `after`
/// is in the store.
fn next_message(
    store: &dyn Store,
    me: &Id,
    after: i64,
    deadline: Instant,
    gave_up: &AtomicBool,
) -> Result<Option<Invocation>, ToolError> {
    // Woken by the store when a message to `me` changes (from any host,
    // with a shared store); the bound is for the call being cancelled.
    let follow = store
        .follow(Some(me.as_str()))
        .map_err(|e| control(e.into()))?;
    loop {
        if let Some(inv) = to_me(store, me)?.into_iter().find(|i| i.seq > after) {
            return Ok(Some(inv));
        }
        if gave_up.load(Ordering::Relaxed) || Instant::now() >= deadline {
            return Ok(None);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        follow.wait(left.min(CANCEL_CHECK));
    }
}

#[tool_router(router = message_tools, vis = "pub(crate)")]
impl Server {
    /// Send a message to another agent; only a short notification naming
    /// it is typed into the agent's prompt, when it is idle.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<MessageEntry>(),
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn message_send(
        &self,
        Parameters(args): Parameters<SendArgs>,
    ) -> ToolResult<MessageEntry> {
        let me = self.shared.actor("send a message")?;
        let wait = args.wait.map(|w| timeout(Some(w), 0.0)).transpose()?;
        blocking(move || {
            let to = Id::agent(&args.to).map_err(|e| ToolError::new(e.to_string()))?;
            let store = store()?;
            let host = host_id().map_err(control)?;
            let sent = messages::send(store.as_ref(), &host, &me, &to, &args.text, wait, None)
                .map_err(control)?;
            // `send` read it again after the wait; stored, it is never an
            // error (resending a stored message delivers it twice).
            let entry = MessageEntry::new(&sent.invocation);
            let mut text = format!("{} to {}: {}", entry.id, entry.to, entry.status);
            if let Some(why) = &sent.unknown {
                text.push_str(&format!(
                    "; stored, outcome not known yet: the store did not answer at the end of the wait ({}); do not send it again",
                    one_line(why)
                ));
            }
            Ok(Reply::new(entry, text))
        })
        .await
    }

    /// The messages to me (the actor), with their bodies: unread first.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<Inbox>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn message_inbox(&self, Parameters(args): Parameters<InboxArgs>) -> ToolResult<Inbox> {
        let me = self.shared.actor("read an inbox")?;
        blocking(move || {
            let inbox = inbox(&me, args.limit.unwrap_or(20))?;
            let text = if inbox.messages.is_empty() {
                format!("no messages to {me}")
            } else {
                inbox
                    .messages
                    .iter()
                    .map(MessageEntry::summary)
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            Ok(Reply::new(inbox, text))
        })
        .await
    }

    /// One message with its body and where its delivery stands.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<MessageEntry>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn message_show(
        &self,
        Parameters(args): Parameters<ShowArgs>,
    ) -> ToolResult<MessageEntry> {
        blocking(move || {
            let id = Id::message(&args.id).map_err(|e| ToolError::new(e.to_string()))?;
            let inv = store()?
                .invocation(id.as_str())
                .map_err(|e| control(e.into()))?
                .ok_or_else(|| control(ControlError::UnknownInvocation(args.id.clone())))?;
            let entry = MessageEntry::new(&inv);
            let text = format!("{}\n{}", entry.summary(), one_line(&entry.body));
            Ok(Reply::new(entry, text))
        })
        .await
    }

    /// Wait until a message to me arrives (or the timeout passes) and
    /// return it with its body.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<Waited>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn message_wait(
        &self,
        Parameters(args): Parameters<WaitArgs>,
        context: RequestContext<RoleServer>,
    ) -> ToolResult<Waited> {
        let me = self.shared.actor("wait for a message")?;
        let wait = timeout(args.timeout, 60.0)?;
        let deadline = Instant::now() + wait;
        let message = until_cancelled(context.ct, move |gave_up| {
            let store = store()?;
            let known = to_me(store.as_ref(), &me)?;
            let after = match &args.after {
                Some(id) => known
                    .iter()
                    .find(|i| &i.id == id)
                    .map(|i| i.seq)
                    .ok_or_else(|| control(ControlError::UnknownInvocation(id.clone())))?,
                None => known.last().map_or(0, |i| i.seq),
            };
            next_message(store.as_ref(), &me, after, deadline, gave_up)
        })
        .await?
        .map(|inv| MessageEntry::new(&inv));
        let text = match &message {
            Some(m) => m.summary(),
            None => format!("no message within {}s", wait.as_secs_f64()),
        };
        Ok(Reply::new(Waited { message }, text))
    }

    /// The agents' runtimes: who can be messaged, and whether they are online.
    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<Runtimes>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn runtime_list(&self) -> ToolResult<Runtimes> {
        blocking(|| {
            let store = store()?;
            let host = host_id().map_err(control)?;
            let now = store.now();
            let runtimes: Vec<RuntimeEntry> = store
                .runtimes()
                .map_err(|e| control(e.into()))?
                .iter()
                .map(|r| RuntimeView::new(r, &host, now).into())
                .collect();
            let text = if runtimes.is_empty() {
                "no runtimes".to_owned()
            } else {
                runtimes
                    .iter()
                    .map(|r| format!("{} ({}, {}) {}", r.id, r.agent, r.kind, r.status))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            Ok(Reply::new(Runtimes { runtimes }, text))
        })
        .await
    }
}
