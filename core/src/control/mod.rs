//! The control plane: interactive runtimes, messages between agents, and
//! the checks that keep them honest.
//!
//! - [`registration`]: admitting a runtime for a serve, `configure`, and the
//!   status a reader should believe (a stale heartbeat means offline).
//! - [`serve`]: `runtime interactive-serve` — the foreground supervisor with
//!   a heartbeat and an inbox beside it.
//! - `online`: a served runtime going ONLINE (heartbeat and inbox beside
//!   it) and OFFLINE, for both kinds of serve.
//! - [`start`]: what a serve starts — a takeover's plan, a pinned session,
//!   the collision guard.
//! - [`messages`]: `send`, `message list|show|redeliver|cancel`.
//! - [`doctor`]: findings with codes and exact repairs.
//! - [`readable`]: whether a live runtime's adapter can read its screen.
//! - [`host`]: this host's id.
//!
//! Every state change goes through [`crate::store`] first; what runs in a
//! supervisor only acts on what the store says.

pub mod acp_serve;
pub mod doctor;
pub mod host;
pub(crate) mod inbox;
pub mod messages;
mod online;
pub mod readable;
pub mod registration;
pub mod serve;
pub mod start;

pub use inbox::{DEFAULT_BATCH, MAX_BATCH};

use std::path::PathBuf;

use crate::store::location::{locate, Location};
use crate::store::postgres::Opener;
use crate::store::{Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Paths(#[from] crate::paths::PathError),
    #[error(transparent)]
    Supervisor(#[from] crate::supervisor::SupervisorError),
    #[error("cannot keep this host's id in {}: {source}", .path.display())]
    HostId {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("runtime {id} cannot be served as asked: {what}; repair it with: {repair}")]
    Mismatch {
        id: String,
        what: String,
        repair: String,
    },
    #[error("runtime {id} is revoked; to serve it again: {repair}")]
    Revoked { id: String, repair: String },
    #[error("runtime {id} is already served by a live supervisor (pid {pid}); use that terminal, or end it with: agent-comms session kill {id}")]
    AlreadyServed { id: String, pid: u32 },
    #[error("no actor to {what}; pass --actor ID or set AGENT_COMMS_ACTOR")]
    NoActor { what: String },
    #[error("runtime {id} is ONLINE, so its record stays; stop it first with: {stop}")]
    StillOnline { id: String, stop: String },
    #[error("no runtime '{0}'; see them with: agent-comms runtime list")]
    UnknownRuntime(String),
    #[error("no agent '{0}' has a runtime, so nothing could deliver to it; start one with: agent-comms --actor {0} runtime interactive-serve {0} -- <provider command>")]
    UnknownAgent(String),
    #[error("no message '{0}'; see them with: agent-comms message list")]
    UnknownInvocation(String),
    #[error("message {0} is being delivered right now; wait for the attempt to end (agent-comms message show {0})")]
    Delivering(String),
    #[error("message {0} was already delivered; there is nothing to cancel (agent-comms message show {0})")]
    AlreadyDelivered(String),
    #[error(transparent)]
    Id(#[from] crate::ids::IdError),
    #[error(transparent)]
    RuntimeId(#[from] crate::session::RuntimeIdError),
    #[error("agent {0} has no runtime on this host; messages to it cannot be delivered from here")]
    NoLocalRuntime(String),
    #[error("runtime {id} runs on another host ({host}): keystrokes never cross hosts, so it cannot be typed into from here; send through the store instead, and its host delivers it: agent-comms send --to {agent} TEXT")]
    ForeignHost {
        id: String,
        agent: String,
        host: String,
    },
    #[error("runtime {id} runs on another host ({host}): its provider's conversation can only be found there; run this on that host, or name the conversation: agent-comms runtime bind-conversation {id} CONVERSATION")]
    RemoteConversation { id: String, host: String },
    #[error("runtime {0} is offline; start it with: agent-comms runtime interactive-serve {0} -- <provider command>")]
    Offline(String),
    #[error("{0}")]
    Body(String),
    /// The store stopped answering while it stored a message, and could
    /// not be read back: it may hold the message or not.
    #[error("the store stopped answering while it stored the message ({detail}): it may be stored; before sending it again, look with: agent-comms message list --from {from} --to {to}")]
    PerhapsStored {
        from: String,
        to: String,
        detail: String,
    },
    #[error(transparent)]
    Takeover(#[from] crate::takeover::TakeoverError),
    #[error("--allow-agent-comms: {0}; drop the flag, or pick an adapter that has one with --provider (agent-comms adapters show NAME)")]
    NoGrant(String),
}

/// The project's store: `<project>/.agent-comms/state.db`, or the shared
/// database its settings name ([`crate::store::location`]).
pub fn open_store() -> Result<Box<dyn Store>, ControlError> {
    open_store_in(&state_dir())
}

/// The project's store if it has one already: readers that should not
/// create a SQLite file (a dashboard, completions) take None as empty.
pub fn open_existing_store() -> Result<Option<Box<dyn Store>>, ControlError> {
    match store_location()? {
        Location::Sqlite(path) if !path.exists() => Ok(None),
        _ => open_store().map(Some),
    }
}

/// The store of the project whose state directory is `state_dir`.
pub fn open_store_in(state_dir: &std::path::Path) -> Result<Box<dyn Store>, ControlError> {
    let location = locate(state_dir)?;
    let opener = match &location {
        Location::Sqlite(_) => None,
        Location::Postgres(_) => Some(Opener {
            host: host::host_id()?,
            name: crate::os::hostname(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        }),
    };
    Ok(location.open(opener.as_ref())?)
}

/// Where the project's store is.
pub fn store_location() -> Result<Location, ControlError> {
    Ok(locate(&state_dir())?)
}

/// Where the project's SQLite file is (whether or not it is the store).
pub fn store_path() -> PathBuf {
    crate::store::state_db_path(&crate::paths::project_root())
}

/// The project's state directory (`<project>/.agent-comms`): the store or
/// its settings, ACP transcripts.
pub fn state_dir() -> PathBuf {
    let db = store_path();
    db.parent().map_or(db.clone(), std::path::Path::to_path_buf)
}
