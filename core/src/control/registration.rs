//! Runtime records: registering one for a serve, checking an existing one,
//! configuring, and reading a record's effective status.
//!
//! A serve never guesses. A missing runtime is registered; an existing one
//! must belong to the acting agent, be interactive, and live on this host —
//! otherwise the serve stops *before* the provider starts and prints the one
//! command that repairs the record. A record that says ONLINE while its
//! endpoint is dead is stale: it is replaced, and the user is told.

use serde::Serialize;

use super::ControlError;
use crate::session::{Liveness, Registry, SessionName};
use crate::store::{RuntimeRecord, RuntimeStatus, Store};
use crate::takeover::{ConversationDiscovery, Discovery, ProcessInfo, ProviderEnv, TakeoverError};
use crate::time::iso_from_unix_millis;

pub const INTERACTIVE: &str = "INTERACTIVE";
pub const ACP: &str = "ACP";

/// What serves a runtime: a provider in a PTY, or an agent over ACP. A
/// runtime's kind and connector are both this kind's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeKind {
    Interactive,
    Acp,
}

impl RuntimeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interactive => INTERACTIVE,
            Self::Acp => ACP,
        }
    }

    /// The kind a record is served as, when its kind and connector agree
    /// on one.
    pub fn of(r: &RuntimeRecord) -> Option<Self> {
        [Self::Interactive, Self::Acp]
            .into_iter()
            .find(|k| r.kind == k.as_str() && r.connector == k.as_str())
    }
}
/// Heartbeats missed before a runtime counts as offline.
pub const STALE_AFTER_BEATS: u64 = 3;

/// The command that makes runtime `id` a runtime of `agent` of `kind` on
/// this host.
pub fn repair_command(agent: &str, id: &str, kind: RuntimeKind) -> String {
    let kind = kind.as_str();
    format!(
        "agent-comms --actor {agent} runtime configure {id} --kind {kind} --connector {kind} --max-concurrent 1"
    )
}

/// Removes runtime `id`'s record, which must not be ONLINE: a served
/// runtime would only be written back by its next heartbeat, and its
/// messages would lose their runtime. What stops it: ending its session
/// (the provider's PTY or the ACP supervisor), on the host that serves it.
pub fn remove(
    store: &dyn Store,
    host: &str,
    id: &str,
    now: u64,
) -> Result<RuntimeRecord, ControlError> {
    loop {
        let r = store
            .runtime(id)?
            .ok_or_else(|| ControlError::UnknownRuntime(id.to_owned()))?;
        if effective_status(&r, now).0 == RuntimeStatus::Online {
            return Err(still_online(&r, host));
        }
        // Changed between the read and the delete (a serve started, or a
        // supervisor went offline): judged again as it is now.
        if store.remove_runtime(&r)? {
            return Ok(r);
        }
    }
}

/// Why a runtime served right now keeps its record, and what stops it:
/// ending its session, on the host that serves it.
fn still_online(r: &RuntimeRecord, host: &str) -> ControlError {
    let kill = format!("agent-comms session kill {}", r.id);
    let stop = match r.host.as_deref() {
        Some(other) if other != host => format!("{kill} (on host {other})"),
        _ => kill,
    };
    ControlError::StillOnline {
        id: r.id.clone(),
        stop,
    }
}

/// The status a reader should believe: ONLINE only while heartbeats are
/// fresh. (Nothing is written: reading commands change nothing.)
pub fn effective_status(r: &RuntimeRecord, now: u64) -> (RuntimeStatus, Option<String>) {
    if r.status == RuntimeStatus::Online && heartbeat_stale(r, now) {
        let since = r
            .last_heartbeat
            .map_or_else(|| "never".to_owned(), iso_from_unix_millis);
        let reason = format!("heartbeat stale (last {since}): the supervisor is gone");
        return (RuntimeStatus::Offline, Some(reason));
    }
    (r.status, r.status_reason.clone())
}

pub fn heartbeat_stale(r: &RuntimeRecord, now: u64) -> bool {
    let limit = r.heartbeat_ms.max(1) * STALE_AFTER_BEATS;
    r.last_heartbeat
        .is_none_or(|t| now.saturating_sub(t) > limit)
}

/// A runtime as `runtime list --json` shows it (the contract's keys first).
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeView {
    pub id: String,
    pub agent: String,
    pub kind: String,
    pub connector: String,
    pub status: RuntimeStatus,
    pub host: Option<String>,
    pub pid: Option<u32>,
    pub endpoint: Option<String>,
    pub last_heartbeat: Option<String>,
    pub max_concurrent: u32,
    /// The host is this one.
    pub local: bool,
    pub provider: Option<String>,
    /// The conversation (the provider's own session or thread) the runtime
    /// is bound to.
    pub conversation_id: Option<String>,
    /// `conversation_id` under its old name, the same value, kept in
    /// `--json` for one release so scripts reading it keep working; it goes
    /// in the release after.
    pub session_id: Option<String>,
    pub reason: Option<String>,
    pub heartbeat_ms: u64,
}

impl RuntimeView {
    pub fn new(r: &RuntimeRecord, host: &str, now: u64) -> Self {
        let (status, reason) = effective_status(r, now);
        Self {
            id: r.id.clone(),
            agent: r.agent.clone(),
            kind: r.kind.clone(),
            connector: r.connector.clone(),
            status,
            host: r.host.clone(),
            pid: r.pid.filter(|_| status == RuntimeStatus::Online),
            endpoint: r
                .endpoint
                .clone()
                .filter(|_| status == RuntimeStatus::Online),
            last_heartbeat: r.last_heartbeat.map(iso_from_unix_millis),
            max_concurrent: r.max_concurrent,
            local: r.host.as_deref().is_none_or(|h| h == host),
            provider: r.provider.clone(),
            conversation_id: r.conversation_id.clone(),
            session_id: r.conversation_id.clone(),
            reason,
            heartbeat_ms: r.heartbeat_ms,
        }
    }
}

/// What a serve may go ahead with.
pub struct Admission {
    pub record: RuntimeRecord,
    /// Said to the user before the provider starts (a replaced stale record).
    pub notes: Vec<String>,
}

/// Who asks to serve which runtime, as what, where.
pub struct Serving<'a> {
    pub host: &'a str,
    pub agent: &'a str,
    pub id: &'a SessionName,
    pub kind: RuntimeKind,
}

/// Registers runtime `id` for `agent` or checks the existing record; refuses
/// a mismatched, revoked or already served runtime.
pub fn admit(
    store: &dyn Store,
    registry: &Registry,
    serving: &Serving<'_>,
    now: u64,
) -> Result<Admission, ControlError> {
    let Serving {
        host,
        agent,
        id,
        kind,
    } = *serving;
    let mut notes = Vec::new();
    let record = match store.runtime(id.as_str())? {
        None => {
            notes.push(format!("registered runtime {id} for agent {agent}"));
            new_record(id, agent, kind, now)
        }
        Some(r) => {
            let mismatch = mismatch(&r, agent, host, kind);
            if let Some(what) = mismatch {
                return Err(ControlError::Mismatch {
                    id: id.to_string(),
                    what,
                    repair: repair_command(agent, id.as_str(), kind),
                });
            }
            if r.status == RuntimeStatus::Revoked {
                return Err(ControlError::Revoked {
                    id: id.to_string(),
                    repair: repair_command(agent, id.as_str(), kind),
                });
            }
            r
        }
    };
    match registry.check(id) {
        Some(Liveness::Live(session)) => {
            return Err(ControlError::AlreadyServed {
                id: id.to_string(),
                pid: session.supervisor_pid,
            })
        }
        Some(Liveness::Stale(_)) | None if record.status == RuntimeStatus::Online => {
            let since = record
                .last_heartbeat
                .map_or_else(|| "never".to_owned(), iso_from_unix_millis);
            let pid = record.pid.map_or_else(|| "?".to_owned(), |p| p.to_string());
            notes.push(format!(
                "replacing the stale record of runtime {id} (pid {pid}, last heartbeat {since}): its supervisor is gone"
            ));
        }
        _ => {}
    }
    Ok(Admission { record, notes })
}

/// Why the record cannot be served as `agent`'s runtime of `kind` here.
fn mismatch(r: &RuntimeRecord, agent: &str, host: &str, kind: RuntimeKind) -> Option<String> {
    let kind = kind.as_str();
    if r.agent != agent {
        return Some(format!("it belongs to agent {}, not {agent}", r.agent));
    }
    if r.kind != kind {
        return Some(format!("its kind is {}, not {kind}", r.kind));
    }
    if r.connector != kind {
        return Some(format!("its connector is {}, not {kind}", r.connector));
    }
    match &r.host {
        Some(h) if h != host => Some(format!("it is registered on another host ({h})")),
        _ => None,
    }
}

/// A new runtime of `agent`, not yet served.
fn new_record(id: &SessionName, agent: &str, kind: RuntimeKind, now: u64) -> RuntimeRecord {
    RuntimeRecord {
        id: id.to_string(),
        agent: agent.to_owned(),
        kind: kind.as_str().into(),
        connector: kind.as_str().into(),
        max_concurrent: 1,
        status: RuntimeStatus::Offline,
        host: None,
        endpoint: None,
        endpoint_id: None,
        pid: None,
        last_heartbeat: None,
        heartbeat_ms: 0,
        provider: None,
        conversation_id: None,
        status_reason: None,
        updated: now,
    }
}

/// What `runtime configure` sets.
pub struct Configure<'a> {
    pub id: &'a SessionName,
    /// The owner; required when the runtime is new.
    pub agent: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub connector: Option<&'a str>,
    pub max_concurrent: Option<u32>,
}

/// Creates or updates a runtime record and claims it for this host; one
/// another host serves right now is refused.
pub fn configure(
    store: &dyn Store,
    host: &str,
    c: &Configure<'_>,
    now: u64,
) -> Result<RuntimeRecord, ControlError> {
    let mut r = match store.runtime(c.id.as_str())? {
        // Claiming it for this host while another serves it would leave
        // two hosts taking its agent's messages.
        Some(r)
            if r.host.as_deref().is_some_and(|h| h != host)
                && effective_status(&r, now).0 == RuntimeStatus::Online =>
        {
            return Err(still_online(&r, host));
        }
        Some(r) => r,
        None => {
            let agent = c.agent.ok_or_else(|| ControlError::NoActor {
                what: format!("create runtime {}", c.id),
            })?;
            new_record(c.id, agent, RuntimeKind::Interactive, now)
        }
    };
    if let Some(agent) = c.agent {
        r.agent = agent.to_owned();
    }
    if let Some(kind) = c.kind {
        r.kind = kind.to_ascii_uppercase();
    }
    if let Some(connector) = c.connector {
        r.connector = connector.to_ascii_uppercase();
    }
    if let Some(n) = c.max_concurrent {
        r.max_concurrent = n;
    }
    if r.status == RuntimeStatus::Revoked {
        r.status = RuntimeStatus::Offline;
        r.status_reason = Some("reconfigured".into());
    }
    r.host = Some(host.to_owned());
    r.updated = now;
    store.save_runtime(&r)?;
    Ok(r)
}

/// `runtime bind-conversation`: binds runtime `id` to `conversation`, or,
/// without one, to the conversation its running provider is on (found
/// through the adapter named by the record). Returns the bound conversation.
pub fn bind_conversation(
    store: &dyn Store,
    host: &str,
    id: &str,
    conversation: Option<&str>,
    discovery_for: impl Fn(&str) -> Option<Box<dyn ConversationDiscovery>>,
) -> Result<String, ControlError> {
    let now = store.now();
    let r = store
        .runtime(id)?
        .ok_or_else(|| ControlError::UnknownRuntime(id.to_owned()))?;
    let conversation = match conversation {
        Some(s) => s.to_owned(),
        None => {
            let view = RuntimeView::new(&r, host, now);
            if !view.local {
                let host = view.host.unwrap_or_default();
                return Err(ControlError::RemoteConversation {
                    id: id.to_owned(),
                    host,
                });
            }
            let pid = r
                .pid
                .filter(|_| view.status == RuntimeStatus::Online)
                .ok_or_else(|| ControlError::Offline(id.to_owned()))?;
            let provider = r.provider.clone().unwrap_or_default();
            let discovery = discovery_for(&provider)
                .ok_or_else(|| TakeoverError::NoDiscovery(provider.clone()))?;
            let proc = ProcessInfo::read(pid)?;
            match discovery.discover(&proc, &ProviderEnv::of(&proc)) {
                Discovery::Found(found) => found.id,
                Discovery::Ambiguous(candidates) => {
                    return Err(TakeoverError::Ambiguous { pid, candidates }.into())
                }
                Discovery::Nothing(reason) => {
                    return Err(TakeoverError::NotFound {
                        pid,
                        provider,
                        reason,
                    }
                    .into())
                }
            }
        }
    };
    store.bind_conversation(id, Some(&conversation), now)?;
    Ok(conversation)
}
