//! The control-plane store: the durable record of agents, runtimes, messages
//! (invocations) and every attempt to deliver them.
//!
//! Why a database and not memory: a supervisor can be killed with SIGKILL, a
//! host can reboot, and several short-lived CLI processes act on the same
//! project at once. The record of which runtime serves which agent, which
//! messages are waiting and which delivery was under way must survive any of
//! that, so nothing here lives only in memory: every state change is one SQLite
//! transaction in `<project>/.agent-comms/state.db` (WAL, so readers never
//! block the writer and a crash loses at most the transaction in flight).
//!
//! Delivery is leased, not owned: [`Store::lease_batch`] hands the oldest
//! waiting invocations of an agent (one, or a batch one notification names)
//! to a runtime's endpoint, each with an attempt whose lease the endpoint's
//! heartbeat keeps extending. If the process dies, the lease runs out and
//! [`Store::release_attempts`] puts the invocation back in the queue, so a
//! crash delays a message but never loses it or delivers it twice
//! concurrently.
//!
//! Each committed change to a message wakes the commands following the
//! store (`message list --follow`, see [`watchers`]), so they never poll.
//!
//! Everything goes through the [`Store`] trait: [`SqliteStore`] is the
//! local one, the zero-set-up default; [`PgStore`] is a PostgreSQL database
//! that several hosts share as one control plane ([`location`] says which a
//! project uses). Times are Unix milliseconds (`u64`) throughout, on the
//! store's clock ([`Store::now`]); see [`crate::time`].

mod check;
pub mod copy;
pub mod location;
mod migrations;
pub mod postgres;
mod private;
mod sqlite;
pub mod status;
#[cfg(test)]
mod suite;
mod tally;
pub mod watchers;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use check::{check, StoreCheck};
pub use location::{Location, STORE_ENV};
pub use postgres::PgStore;
pub use private::{store_problems, PrivacyProblem};
pub use sqlite::{state_db_path, SqliteStore};
pub use tally::Tally;

/// What went wrong with the state database, and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create {}: {source}; check that the project directory exists and is writable", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not an agent-comms state database ({detail}); move it aside and agent-comms will create a new one", .path.display())]
    NotAStore { path: PathBuf, detail: String },
    #[error("{0}")]
    NotPrivate(PrivacyProblem),
    #[error("{} is damaged ({detail}); see what is wrong with: agent-comms store check; to start over, move it aside (mv {} {}.damaged, and its -wal and -shm files) and agent-comms creates a new, empty one", .path.display(), .path.display(), .path.display())]
    Damaged { path: PathBuf, detail: String },
    #[error("{}: state.db has schema {found}, this agent-comms knows up to {known}; upgrade agent-comms", .path.display())]
    SchemaTooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("{}: applying schema migration {version} failed: {source}; the database was left at version {}; report this as a bug", .path.display(), .version - 1)]
    Migration {
        path: PathBuf,
        version: i64,
        source: rusqlite::Error,
    },
    #[error("the state database stayed locked by another agent-comms process for more than 5 s ({source}); retry, and if it persists look for a stuck agent-comms process")]
    Busy { source: rusqlite::Error },
    #[error("{}", sqlite_message(.0))]
    Sqlite(rusqlite::Error),
    #[error("{path}: {detail}")]
    Config { path: PathBuf, detail: String },
    #[error("the store URL {url} cannot be used: {detail}")]
    BadUrl { url: String, detail: String },
    #[error("the database at {url} is unreachable ({detail}); check that its server runs and that this host can reach it, and the URL in {env} or .agent-comms/config.toml", env = location::STORE_ENV)]
    Unreachable { url: String, detail: String },
    #[error("the database at {url} presented a TLS certificate no root it trusts signed ({detail}); name the CA that signed it with sslrootcert=FILE in the URL")]
    Untrusted { url: String, detail: String },
    #[error("the database at {url} refused the login ({detail}); check the user in the URL and the password ({env}, or password_file in .agent-comms/config.toml)", env = location::PASSWORD_ENV)]
    Refused { url: String, detail: String },
    #[error("the database at {url} was too busy to answer ({detail}); retry, and if it persists look for a stuck agent-comms process or a long transaction on the server")]
    Contended { url: String, detail: String },
    #[error("the database at {url} refused a statement ({detail})")]
    Postgres { url: String, detail: String },
    #[error("the database at {url} has schema {found}, this agent-comms knows up to {known}; upgrade agent-comms on this host")]
    DatabaseTooNew { url: String, found: i64, known: i64 },
    #[error("the database at {url} is not yours alone: {detail}")]
    NotOurs { url: String, detail: String },
    #[error("the database holds a row this build cannot read ({0})")]
    BadRow(String),
    /// A driver error not yet told with its database (inside a store
    /// call); the store replaces it before it reaches a caller.
    #[error("database error: {0}")]
    Driver(#[source] ::postgres::Error),
}

impl StoreError {
    /// This error as it should be told about the database at `path`: a
    /// damaged file is named, with the next step. (Queries do not know
    /// their file; whoever opened the store does.)
    pub fn at(self, path: &std::path::Path) -> StoreError {
        match self {
            StoreError::Sqlite(e) if is_damage(&e) => StoreError::Damaged {
                path: path.to_path_buf(),
                detail: e.to_string(),
            },
            other => other,
        }
    }

    /// Whether this is SQLite finding the file damaged, not yet told
    /// with its path ([`StoreError::at`]).
    pub fn is_damage(&self) -> bool {
        matches!(self, StoreError::Sqlite(e) if is_damage(e))
    }
}

/// SQLite's word for a file whose pages do not hold what they should.
fn is_damage(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseCorrupt)
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode::{DatabaseBusy, DatabaseLocked};
        match e.sqlite_error_code() {
            Some(DatabaseBusy | DatabaseLocked) => StoreError::Busy { source: e },
            _ => StoreError::Sqlite(e),
        }
    }
}

fn sqlite_message(e: &rusqlite::Error) -> String {
    if is_damage(e) {
        format!(
            "the state database is damaged ({e}); see what is wrong with: agent-comms store check"
        )
    } else {
        format!("state database error: {e}")
    }
}

/// A status text that names none of an enum's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} '{}'; expected one of {expected}", .value.escape_debug())]
pub struct ParseStatusError {
    pub kind: &'static str,
    pub value: String,
    pub expected: &'static str,
}

/// An enum stored and shown as SCREAMING_SNAKE_CASE text; parsed in any case.
macro_rules! text_enum {
    ($(#[$m:meta])* $name:ident, $kind:literal, $expected:literal { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = ParseStatusError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let norm = s.trim().replace('-', "_");
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str().eq_ignore_ascii_case(&norm))
                    .ok_or_else(|| ParseStatusError {
                        kind: $kind,
                        value: s.to_owned(),
                        expected: $expected,
                    })
            }
        }
    };
}

text_enum!(
    /// Whether a runtime takes deliveries.
    RuntimeStatus, "runtime status", "ONLINE, OFFLINE, DRAINING, REVOKED" {
        Online => "ONLINE",
        Offline => "OFFLINE",
        Draining => "DRAINING",
        Revoked => "REVOKED",
    }
);

text_enum!(
    /// Where an invocation is in its life.
    InvocationStatus, "invocation status", "PENDING, DELIVERING, DELIVERED, UNAVAILABLE, FAILED" {
        Pending => "PENDING",
        Delivering => "DELIVERING",
        Delivered => "DELIVERED",
        Unavailable => "UNAVAILABLE",
        Failed => "FAILED",
    }
);

text_enum!(
    /// How one delivery attempt ended (or that it has not yet).
    AttemptOutcome, "attempt outcome", "IN_PROGRESS, DELIVERED, FAILED, ABANDONED" {
        InProgress => "IN_PROGRESS",
        Delivered => "DELIVERED",
        Failed => "FAILED",
        Abandoned => "ABANDONED",
    }
);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    pub id: String,
    pub created: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeRecord {
    pub id: String,
    pub agent: String,
    /// "INTERACTIVE"
    pub kind: String,
    /// "INTERACTIVE"
    pub connector: String,
    pub max_concurrent: u32,
    pub status: RuntimeStatus,
    /// Host id that serves it.
    pub host: Option<String>,
    pub endpoint: Option<String>,
    pub endpoint_id: Option<String>,
    pub pid: Option<u32>,
    pub last_heartbeat: Option<u64>,
    pub heartbeat_ms: u64,
    /// Adapter name.
    pub provider: Option<String>,
    /// The bound conversation's id (the provider's own session or thread).
    pub conversation_id: Option<String>,
    /// Why OFFLINE etc.
    pub status_reason: Option<String>,
    pub updated: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invocation {
    /// `inv_` and 12 random lowercase hex characters.
    pub id: String,
    /// Insertion order.
    pub seq: i64,
    pub from: String,
    pub to: String,
    pub body: String,
    pub status: InvocationStatus,
    pub created: u64,
    pub delivered: Option<u64>,
    /// Last failure or unavailability reason.
    pub reason: Option<String>,
    pub attempts: u32,
}

/// What the endpoint saw while delivering (the delivery layer's proof,
/// stored as is).
pub use crate::delivery::Evidence;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub id: i64,
    pub invocation: String,
    pub runtime: String,
    pub endpoint_id: String,
    pub started: u64,
    pub lease_until: u64,
    pub finished: Option<u64>,
    pub outcome: AttemptOutcome,
    pub reason: Option<String>,
    pub evidence: Option<Evidence>,
    /// The host whose runtime made it (as its record said when leased).
    pub host: Option<String>,
}

/// Failed attempts after which a message is given up on: it goes FAILED
/// with its last reason, and the messages behind it in its agent's queue
/// move up (docs/interactive.md#when-a-message-cannot-be-delivered).
pub const MAX_FAILED_ATTEMPTS: u32 = 5;

/// How an attempt ended, for [`Store::finish_attempt`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AttemptResult {
    Delivered(Evidence),
    /// It may work another time: back to PENDING, until it is the
    /// [`MAX_FAILED_ATTEMPTS`]th failure.
    Failed(String),
    /// It can never work (its notification cannot be composed): FAILED at
    /// once.
    Undeliverable(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewInvocation<'a> {
    pub from: &'a str,
    pub to: &'a str,
    pub body: &'a str,
    pub status: InvocationStatus,
    pub reason: Option<&'a str>,
    pub now: u64,
}

/// Which invocations [`Store::invocations`] lists; `Default` lists all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InvocationFilter<'a> {
    pub status: Option<InvocationStatus>,
    pub to: Option<&'a str>,
    pub from: Option<&'a str>,
}

// The columns of each table, in the order both back-ends read and write
// them (their schemas name them alike: migrations.rs, postgres/schema.rs).
const AGENT_COLS: &str = "id, created";
const RUNTIME_COLS: &str = "id, agent, kind, connector, max_concurrent, status, host, endpoint, \
     endpoint_id, pid, last_heartbeat, heartbeat_ms, provider, conversation_id, status_reason, updated";
const INVOCATION_COLS: &str =
    "id, seq, from_agent, to_agent, body, status, created, delivered, reason, attempts";
const ATTEMPT_COLS: &str = "id, invocation, runtime, endpoint_id, started, lease_until, finished, \
     outcome, reason, ev_echoed, ev_entered, ev_submitted, ev_enter_presses, ev_style, ev_stop_reason, \
     host";

/// A new message's id: `inv_` and 12 random lowercase hex characters.
fn new_invocation_id() -> String {
    format!("inv_{}", crate::ids::random_hex(6))
}

/// Blocks until the store says a message changed (see [`Store::follow`]).
pub trait Follow: Send {
    /// Until a change, or `at_most`; true when woken by a change.
    fn wait(&self, at_most: std::time::Duration) -> bool;
}

/// The store behind the trait, for what only one back-end has (`store
/// status`, doctor's checks of the hosts sharing a database).
pub enum Backend<'a> {
    Sqlite(&'a SqliteStore),
    Postgres(&'a PgStore),
}

/// The control-plane record. Every method is one transaction of its own.
pub trait Store: Send {
    /// The agent, inserted with `created = now` if missing.
    fn ensure_agent(&self, id: &str, now: u64) -> Result<Agent, StoreError>;
    fn agent(&self, id: &str) -> Result<Option<Agent>, StoreError>;
    /// All agents, ordered by id.
    fn agents(&self) -> Result<Vec<Agent>, StoreError>;

    fn runtime(&self, id: &str) -> Result<Option<RuntimeRecord>, StoreError>;
    /// All runtimes, ordered by id.
    fn runtimes(&self) -> Result<Vec<RuntimeRecord>, StoreError>;
    /// Upserts the whole row; inserts the agent (`created = r.updated`) if missing.
    fn save_runtime(&self, r: &RuntimeRecord) -> Result<(), StoreError>;
    /// Deletes runtime `seen.id` only while its status, endpoint and last
    /// heartbeat are still those of `seen` (a serve that started since
    /// keeps its record); false when nothing was deleted. Its past
    /// attempts keep naming it: they are history.
    fn remove_runtime(&self, seen: &RuntimeRecord) -> Result<bool, StoreError>;
    /// Only while `endpoint_id` is still the runtime's: sets last_heartbeat = now and extends
    /// the lease of every IN_PROGRESS attempt of that endpoint to `lease_until` (never
    /// shortens one). Returns false when another start has replaced the endpoint (the
    /// caller must stop).
    fn heartbeat(
        &self,
        runtime: &str,
        endpoint_id: &str,
        now: u64,
        lease_until: u64,
    ) -> Result<bool, StoreError>;
    /// Binds runtime `runtime` to conversation `conversation` (None
    /// unbinds); false when there is no such runtime.
    fn bind_conversation(
        &self,
        runtime: &str,
        conversation: Option<&str>,
        now: u64,
    ) -> Result<bool, StoreError>;
    /// Only while `endpoint_id` is still the runtime's: status OFFLINE, reason, endpoint,
    /// endpoint_id and pid cleared (host kept), updated = now. Leaves its attempts alone:
    /// follow with [`Store::release_attempts`].
    fn set_offline(
        &self,
        runtime: &str,
        endpoint_id: &str,
        reason: &str,
        now: u64,
    ) -> Result<bool, StoreError>;

    /// Inserts with a fresh random id, `attempts = 0` and no `delivered` time.
    fn insert_invocation(&self, new: &NewInvocation<'_>) -> Result<Invocation, StoreError>;
    fn invocation(&self, id: &str) -> Result<Option<Invocation>, StoreError>;
    /// Matching invocations in insertion order (by seq).
    fn invocations(&self, filter: &InvocationFilter<'_>) -> Result<Vec<Invocation>, StoreError>;
    /// Sets status and reason (`None` clears it). Moving to DELIVERED sets `delivered = now`
    /// unless already set. Returns false if there is no such invocation.
    fn set_invocation_status(
        &self,
        id: &str,
        status: InvocationStatus,
        reason: Option<&str>,
        now: u64,
    ) -> Result<bool, StoreError>;
    /// One transaction (BEGIN IMMEDIATE): if no invocation addressed to `agent` is DELIVERING,
    /// take the oldest `limit` PENDING ones (lowest seq first), mark each DELIVERING
    /// (attempts += 1) and insert an IN_PROGRESS attempt for each (runtime, endpoint_id,
    /// started=now, lease_until). FIFO, and one batch per agent at a time: a second lease gets
    /// nothing until every message of the first is finished or released.
    fn lease_batch(
        &self,
        agent: &str,
        runtime: &str,
        endpoint_id: &str,
        now: u64,
        lease_until: u64,
        limit: usize,
    ) -> Result<Vec<(Invocation, Attempt)>, StoreError>;
    /// [`Store::lease_batch`] of one.
    fn lease_next(
        &self,
        agent: &str,
        runtime: &str,
        endpoint_id: &str,
        now: u64,
        lease_until: u64,
    ) -> Result<Option<(Invocation, Attempt)>, StoreError> {
        let mut one = self.lease_batch(agent, runtime, endpoint_id, now, lease_until, 1)?;
        Ok(one.pop())
    }
    /// Ends IN_PROGRESS attempts, all in one transaction, so a batch delivered by one
    /// notification is DELIVERED together or not at all. For each: Delivered(evidence): attempt
    /// DELIVERED with evidence, invocation DELIVERED, delivered = evidence.submitted, reason
    /// cleared. Failed(reason): attempt FAILED, invocation back to PENDING with reason — or, when
    /// the invocation now has [`MAX_FAILED_ATTEMPTS`] FAILED attempts, FAILED with "gave up after
    /// N failed attempts; the last: reason" (either only if it is still DELIVERING).
    /// Undeliverable(reason): attempt FAILED, invocation FAILED with reason (only if still
    /// DELIVERING). An attempt no longer IN_PROGRESS is left as it is — except that a
    /// Delivered report of an attempt released meanwhile (ABANDONED: its lease ran out while
    /// the host was cut off from the store) still counts while its message waits PENDING and
    /// nobody has leased it again: it was typed, and typing it again would deliver it twice.
    /// Returns how many were finished.
    fn finish_attempts(
        &self,
        attempts: &[i64],
        result: &AttemptResult,
        now: u64,
    ) -> Result<usize, StoreError>;
    /// [`Store::finish_attempts`] of one: false (and nothing changed) if it is no longer
    /// IN_PROGRESS.
    fn finish_attempt(
        &self,
        attempt: i64,
        result: &AttemptResult,
        now: u64,
    ) -> Result<bool, StoreError> {
        Ok(self.finish_attempts(&[attempt], result, now)? == 1)
    }
    /// Every IN_PROGRESS attempt whose lease_until < now and, if `runtime` is Some, also every
    /// IN_PROGRESS attempt of that runtime regardless of lease: attempt ABANDONED with `reason`
    /// and finished = now, its invocation back to PENDING with reason (if still DELIVERING).
    /// Returns the attempts released, as they are now, by id.
    fn release_attempts(
        &self,
        runtime: Option<&str>,
        now: u64,
        reason: &str,
    ) -> Result<Vec<Attempt>, StoreError>;
    /// In one statement: if the invocation is PENDING, UNAVAILABLE or FAILED, it becomes FAILED with
    /// `reason`; true if it did (false when it is missing, DELIVERING or DELIVERED).
    fn fail_waiting(&self, id: &str, reason: &str) -> Result<bool, StoreError>;
    /// The invocation's attempts, by id.
    fn attempts(&self, invocation: &str) -> Result<Vec<Attempt>, StoreError>;
    /// IN_PROGRESS attempts whose lease_until < now (for `doctor`; changes nothing), by id.
    fn stale_attempts(&self, now: u64) -> Result<Vec<Attempt>, StoreError>;

    /// Now on the store's clock, which every host sharing it compares
    /// heartbeats and leases on: this host's clock for a local file, the
    /// database server's for a shared one.
    fn now(&self) -> u64 {
        crate::time::unix_millis()
    }
    /// Starts listening for changes to messages (to agent `to`, or to
    /// anyone); a change committed after this returns wakes [`Follow::wait`].
    fn follow(&self, to: Option<&str>) -> Result<Box<dyn Follow>, StoreError>;
    /// Whether processes that cannot reach this host's runtimes (other
    /// hosts) write to it: an inbox then follows the store itself instead
    /// of waiting for a local nudge.
    fn spans_hosts(&self) -> bool {
        matches!(self.backend(), Backend::Postgres(_))
    }
    fn backend(&self) -> Backend<'_>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_text_round_trips_in_any_case() {
        for s in RuntimeStatus::ALL {
            assert_eq!(
                s.to_string().to_lowercase().parse::<RuntimeStatus>(),
                Ok(*s)
            );
            assert_eq!(serde_json::to_string(s).unwrap(), format!("\"{s}\""));
        }
        for s in InvocationStatus::ALL {
            assert_eq!(s.to_string().parse::<InvocationStatus>(), Ok(*s));
        }
        assert_eq!(
            "in-progress".parse::<AttemptOutcome>(),
            Ok(AttemptOutcome::InProgress)
        );
        assert_eq!(
            serde_json::to_string(&AttemptOutcome::InProgress).unwrap(),
            "\"IN_PROGRESS\""
        );
        let err = "gone".parse::<RuntimeStatus>().unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown runtime status 'gone'; expected one of ONLINE, OFFLINE, DRAINING, REVOKED"
        );
    }

    #[test]
    fn store_is_object_safe_and_send() {
        fn takes(_: Box<dyn Store>) {}
        let dir = tempfile::tempdir().unwrap();
        takes(Box::new(SqliteStore::open_in(dir.path()).unwrap()));
    }
}
