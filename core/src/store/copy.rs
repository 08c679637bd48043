//! `store migrate`: a project's SQLite state copied into a PostgreSQL
//! database, so that the project can move to a shared store without losing
//! a message or its history.
//!
//! Why rows and not a replay through [`Store`](super::Store): the trait
//! makes new ids, new sequence numbers and new attempts, while a move must
//! keep what people and scripts already hold — every message's id, its
//! place in its agent's queue (`seq`), its status, reason and attempt
//! count, and every attempt with its outcome, evidence, host and lease. A
//! message being delivered stays DELIVERING with its IN_PROGRESS attempt
//! and the same lease, so in the database that lease runs out, or the
//! delivery is finished, as it would have in the file.
//!
//! The file is read in one SQLite read transaction (a consistent snapshot,
//! while supervisors may be writing) and never written; the database is
//! written in one PostgreSQL transaction, so it holds all of the copy or
//! none of it. Running it again is safe: a database that already holds
//! exactly these rows is left alone, and one holding anything else is
//! refused unless `force` replaces it.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::postgres::Target;
use super::tally::Tally;
use super::{
    Agent, Attempt, Invocation, InvocationStatus, PgStore, RuntimeRecord, SqliteStore, StoreError,
};

/// Every row of a store: agents and runtimes by id, messages by seq,
/// attempts by id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub agents: Vec<Agent>,
    pub runtimes: Vec<RuntimeRecord>,
    pub invocations: Vec<Invocation>,
    pub attempts: Vec<Attempt>,
}

impl Snapshot {
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
            && self.runtimes.is_empty()
            && self.invocations.is_empty()
            && self.attempts.is_empty()
    }

    pub fn counts(&self) -> Counts {
        Counts {
            agents: self.agents.len(),
            runtimes: self.runtimes.len(),
            messages: self.invocations.len(),
            by_status: Tally::of(
                InvocationStatus::ALL,
                self.invocations.iter().map(|i| i.status),
            ),
            attempts: self.attempts.len(),
        }
    }

    /// In the order both stores list them, whatever order the rows came in
    /// (a database's text collation need not be SQLite's byte order).
    pub(crate) fn sort(&mut self) {
        self.agents.sort_by(|a, b| a.id.cmp(&b.id));
        self.runtimes.sort_by(|a, b| a.id.cmp(&b.id));
        self.invocations.sort_by_key(|i| i.seq);
        self.attempts.sort_by_key(|a| a.id);
    }
}

/// How many rows of each kind a store holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Counts {
    pub agents: usize,
    pub runtimes: usize,
    pub messages: usize,
    /// Messages by status.
    pub by_status: Tally<InvocationStatus>,
    pub attempts: usize,
}

/// "3 agents, 2 runtimes, 1000 messages (400 DELIVERED, …), 950 attempts".
impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = |count: usize, what: &str| {
            format!("{count} {what}{}", if count == 1 { "" } else { "s" })
        };
        write!(
            f,
            "{}, {}, {}",
            n(self.agents, "agent"),
            n(self.runtimes, "runtime"),
            n(self.messages, "message")
        )?;
        if self.messages > 0 {
            write!(f, " ({})", self.by_status)?;
        }
        write!(f, ", {}", n(self.attempts, "attempt"))
    }
}

/// What writing a snapshot into a database came to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CopyIn {
    /// Written; `replaced` is what the database held before, when `force`
    /// deleted it.
    Copied { replaced: Option<Counts> },
    /// The database already held exactly these rows: nothing was written.
    Same,
    /// The database holds other rows (counted), and `force` was not given:
    /// nothing was written.
    Occupied(Counts),
}

/// Why a migration did not happen.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("there is no SQLite state to copy: {} does not exist", .0.display())]
    NoState(PathBuf),
    #[error("there is nothing to copy: {} holds no agents, runtimes or messages", .0.display())]
    Empty(PathBuf),
    #[error("the database at {url} already holds {holds}, which is not this project's state; nothing was copied; to delete what it holds and copy this project's in its place, run again with --force")]
    Occupied { url: String, holds: Counts },
    #[error("{what} holds a NUL character, which PostgreSQL cannot store in text (SQLite can); nothing was copied")]
    Unstorable { what: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a migration did.
#[derive(Debug, Clone, Serialize)]
pub struct Migrated {
    /// The SQLite file copied (left as it was).
    pub source: PathBuf,
    /// The database, its URL without the password.
    pub target: String,
    /// The database already held exactly these rows: nothing was written.
    pub already: bool,
    /// What the database held before `force` replaced it.
    pub replaced: Option<Counts>,
    /// What the database holds now, as the file does.
    pub copied: Counts,
}

/// Copies the SQLite store at `source` into the database at `target`, in
/// one transaction of the database; with `force`, whatever it holds is
/// deleted in the same transaction first. The file is only read (after the
/// schema migration any command opening it makes); the database is not
/// touched when the file holds nothing to copy, and otherwise gets
/// agent-comms' tables first if it has none, as any command would give it.
pub fn migrate(source: &Path, target: Target, force: bool) -> Result<Migrated, CopyError> {
    if !source.exists() {
        return Err(CopyError::NoState(source.to_path_buf()));
    }
    let snapshot = SqliteStore::open(source)?
        .snapshot()
        .map_err(|e| e.at(source))?;
    if snapshot.is_empty() {
        return Err(CopyError::Empty(source.to_path_buf()));
    }
    if let Some(what) = unstorable(&snapshot) {
        return Err(CopyError::Unstorable { what });
    }
    let url = target.shown().to_owned();
    let store = PgStore::open(target, None)?;
    let copied = snapshot.counts();
    let done = |already, replaced| Migrated {
        source: source.to_path_buf(),
        target: url.clone(),
        already,
        replaced,
        copied: copied.clone(),
    };
    match store.copy_in(snapshot, force)? {
        CopyIn::Copied { replaced } => Ok(done(false, replaced)),
        CopyIn::Same => Ok(done(true, None)),
        CopyIn::Occupied(holds) => Err(CopyError::Occupied {
            url: url.clone(),
            holds,
        }),
    }
}

/// The first text of `s` that PostgreSQL would refuse (it holds NUL,
/// which a body sent from a file or over MCP may), named for people; the
/// copy is refused up front instead of failing on a driver error.
fn unstorable(s: &Snapshot) -> Option<String> {
    let nul = |text: &str| text.contains('\0');
    let nul_opt = |text: &Option<String>| text.as_deref().is_some_and(nul);
    if let Some(a) = s.agents.iter().find(|a| nul(&a.id)) {
        return Some(format!("agent {:?}", a.id));
    }
    if let Some(r) = s.runtimes.iter().find(|r| {
        [&r.id, &r.agent, &r.kind, &r.connector]
            .into_iter()
            .any(|t| nul(t))
            || [
                &r.host,
                &r.endpoint,
                &r.endpoint_id,
                &r.provider,
                &r.conversation_id,
                &r.status_reason,
            ]
            .into_iter()
            .any(nul_opt)
    }) {
        return Some(format!("the record of runtime {:?}", r.id));
    }
    if let Some(i) = s.invocations.iter().find(|i| {
        [&i.id, &i.from, &i.to, &i.body].into_iter().any(|t| nul(t)) || nul_opt(&i.reason)
    }) {
        return Some(format!("message {:?}", i.id));
    }
    s.attempts
        .iter()
        .find(|a| {
            [&a.invocation, &a.runtime, &a.endpoint_id]
                .into_iter()
                .any(|t| nul(t))
                || [&a.reason, &a.host].into_iter().any(nul_opt)
                || a.evidence
                    .as_ref()
                    .is_some_and(|e| nul(&e.style) || nul_opt(&e.stop_reason))
        })
        .map(|a| format!("attempt {} of message {:?}", a.id, a.invocation))
}

/// Against a real server: the copy keeps every row as it was, sequences
/// go on past it, a second run changes nothing, and a different
/// database's rows are kept or replaced as asked.
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::delivery::Evidence;
    use crate::store::suite::runtime;
    use crate::store::{AttemptOutcome, AttemptResult, InvocationFilter, NewInvocation, Store};

    /// A fresh database, and the store to look at it.
    fn database() -> (agent_comms_testing::postgres::Database, Target) {
        let server = agent_comms_testing::postgres::server().unwrap_or_else(|e| panic!("{e}"));
        let db = server.fresh_database().unwrap_or_else(|e| panic!("{e}"));
        let target = Target::parse(&db.url("127.0.0.1"), None).unwrap();
        (db, target)
    }

    fn open(target: &Target) -> PgStore {
        PgStore::open(target.clone(), None).unwrap()
    }

    fn send(s: &dyn Store, to: &str, body: &str) -> Invocation {
        s.insert_invocation(&NewInvocation {
            from: "alice",
            to,
            body,
            status: InvocationStatus::Pending,
            reason: None,
            now: 1_000,
        })
        .unwrap()
    }

    /// A store with a delivered message (with evidence), one that failed
    /// once and waits again, and one being delivered.
    fn project() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = crate::store::state_db_path(dir.path());
        let s = SqliteStore::open(&path).unwrap();
        s.save_runtime(&runtime("rt-bob", "bob", "ep1")).unwrap();
        let delivered = send(&s, "bob", "one");
        let (_, a) = s
            .lease_next("bob", "rt-bob", "ep1", 2_000, 9_000)
            .unwrap()
            .unwrap();
        let ev = Evidence {
            echoed: 2_100,
            entered: 2_200,
            submitted: 2_300,
            enter_presses: 2,
            style: "paste".into(),
            stop_reason: None,
        };
        assert!(s
            .finish_attempt(a.id, &AttemptResult::Delivered(ev), 2_400)
            .unwrap());
        send(&s, "bob", "two");
        let (_, a) = s
            .lease_next("bob", "rt-bob", "ep1", 3_000, 9_000)
            .unwrap()
            .unwrap();
        s.finish_attempt(a.id, &AttemptResult::Failed("busy".into()), 3_100)
            .unwrap();
        s.lease_next("bob", "rt-bob", "ep1", 4_000, 60_000)
            .unwrap()
            .unwrap();
        assert_eq!(
            s.invocation(&delivered.id).unwrap().unwrap().status,
            InvocationStatus::Delivered
        );
        (dir, path)
    }

    #[test]
    fn the_copy_keeps_every_row_and_a_second_run_changes_nothing() {
        let (_dir, path) = project();
        let (_db, target) = database();
        let pg = open(&target);
        let done = migrate(&path, target.clone(), false).unwrap();
        assert!(!done.already);
        assert_eq!(done.copied.messages, 2);
        assert_eq!(done.copied.by_status.get(InvocationStatus::Delivering), 1);
        let file = SqliteStore::open(&path).unwrap().snapshot().unwrap();
        let held = pg.snapshot().unwrap();
        assert_eq!(held, file, "every row as it was");
        let in_flight = held
            .attempts
            .iter()
            .find(|a| a.outcome == AttemptOutcome::InProgress)
            .unwrap();
        assert_eq!(in_flight.lease_until, 60_000);

        let again = migrate(&path, target.clone(), false).unwrap();
        assert!(again.already && again.replaced.is_none());
        assert_eq!(pg.snapshot().unwrap(), held, "nothing changed");

        // New rows go on after the copied ones.
        let new = send(&pg, "carol", "three");
        let last = file.invocations.iter().map(|i| i.seq).max().unwrap();
        assert!(new.seq > last, "{} after {last}", new.seq);
        pg.save_runtime(&runtime("rt-carol", "carol", "ep1"))
            .unwrap();
        let (_, a) = pg
            .lease_next("carol", "rt-carol", "ep1", 5_000, 9_000)
            .unwrap()
            .unwrap();
        assert!(a.id > file.attempts.iter().map(|a| a.id).max().unwrap());
        assert_eq!(
            pg.invocations(&InvocationFilter::default()).unwrap().len(),
            3
        );
    }

    #[test]
    fn other_rows_are_refused_and_replaced_with_force() {
        let (_dir, path) = project();
        let (_db, target) = database();
        let pg = open(&target);
        send(&pg, "zed", "not this project's");
        let err = migrate(&path, target.clone(), false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("already holds 0 agents, 0 runtimes, 1 message (1 PENDING), 0 attempts"),
            "{err}"
        );
        assert!(err.contains("--force"), "{err}");
        assert_eq!(
            pg.invocations(&InvocationFilter::default()).unwrap().len(),
            1
        );

        let done = migrate(&path, target.clone(), true).unwrap();
        assert_eq!(done.replaced.unwrap().messages, 1);
        let file = SqliteStore::open(&path).unwrap().snapshot().unwrap();
        assert_eq!(pg.snapshot().unwrap(), file);
    }

    #[test]
    fn a_missing_or_empty_file_is_nothing_to_copy_and_leaves_the_database_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = crate::store::state_db_path(dir.path());
        let (_db, target) = database();
        assert!(matches!(
            migrate(&path, target.clone(), false),
            Err(CopyError::NoState(_))
        ));
        assert!(!path.exists(), "a missing file is not created");
        drop(SqliteStore::open(&path).unwrap());
        assert!(matches!(
            migrate(&path, target.clone(), false),
            Err(CopyError::Empty(_))
        ));
        assert_eq!(PgStore::peek(&target).unwrap().schema, 0, "no tables made");
    }

    #[test]
    fn a_body_postgresql_cannot_hold_is_named_before_anything_is_written() {
        let (_dir, path) = project();
        let odd = send(&SqliteStore::open(&path).unwrap(), "bob", "a\0b");
        let (_db, target) = database();
        let err = migrate(&path, target.clone(), false)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!("message {:?} holds a NUL character, which PostgreSQL cannot store in text (SQLite can); nothing was copied", odd.id)
        );
        assert_eq!(PgStore::peek(&target).unwrap().schema, 0, "no tables made");
    }
}
