//! `store status`: which store a project uses, whether it answers, and what
//! it holds — without changing it.
//!
//! Why not simply open it: opening migrates (an empty PostgreSQL database
//! gets agent-comms' tables, an older file the newer schema) and records
//! the host in a shared database. A status must report a schema that is
//! not this build's, not fix it behind the user's back; so the schema is
//! read first, and the store is opened for its counts only when it already
//! has this build's schema. A SQLite file is examined read-only, as
//! `store check` does; a database is reached within the store's bounds
//! (a few seconds), so an unreachable one is an answer, not a hang.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::location::Location;
use super::postgres::{self, HostSeen, Target};
use super::tally::Tally;
use super::{
    check, InvocationStatus, PgStore, RuntimeRecord, RuntimeStatus, SqliteStore, Store, StoreError,
};

/// What `store status` found.
#[derive(Debug, Clone, Serialize)]
pub struct StoreStatus {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// The file, or the URL without its password.
    pub location: String,
    /// Whether the store was made yet (the file; agent-comms' tables in
    /// the database); unknown when it could not be reached.
    pub exists: Option<bool>,
    pub reachable: bool,
    /// Why it could not be reached, on one line.
    pub error: Option<String>,
    /// The schema version it holds.
    pub schema: Option<i64>,
    /// The schema version this build uses for that back-end.
    pub schema_expected: i64,
    /// One trivial read, once connected.
    pub latency_ms: Option<f64>,
    pub runtimes: Option<Tally<RuntimeStatus>>,
    pub messages: Option<Tally<InvocationStatus>>,
    /// The hosts that used the database (PostgreSQL only).
    pub hosts: Option<Vec<HostSeen>>,
    /// Reachable, and the schema is this build's (or there is no store
    /// yet).
    pub ok: bool,
    pub problems: Vec<String>,
}

impl StoreStatus {
    fn new(backend: &'static str, location: String, schema_expected: i64) -> Self {
        StoreStatus {
            backend,
            location,
            exists: None,
            reachable: false,
            error: None,
            schema: None,
            schema_expected,
            latency_ms: None,
            runtimes: None,
            messages: None,
            hosts: None,
            ok: false,
            problems: Vec::new(),
        }
    }

    fn unreachable(&mut self, error: String) {
        self.reachable = false;
        self.problems.push(error.clone());
        self.error = Some(error);
    }

    /// A schema other than this build's: what happens next.
    fn mismatch(&mut self, found: i64) {
        let expected = self.schema_expected;
        self.problems.push(if found < expected {
            format!(
                "the store has schema {found}, this build uses {expected}: the next agent-comms command that opens it migrates it{}",
                if self.backend == "postgres" {
                    " (and hosts running an older agent-comms then refuse it until they are upgraded)"
                } else {
                    ""
                }
            )
        } else {
            format!(
                "the store has schema {found}, newer than this build's {expected}: upgrade agent-comms on this host"
            )
        });
    }

    /// The counts of an open store of this build's schema.
    fn count(
        &mut self,
        store: &dyn Store,
        messages: Tally<InvocationStatus>,
        believe: &dyn Fn(&RuntimeRecord, u64) -> RuntimeStatus,
    ) -> Result<(), StoreError> {
        let now = store.now();
        let runtimes = store.runtimes()?;
        self.runtimes = Some(Tally::of(
            RuntimeStatus::ALL,
            runtimes.iter().map(|r| believe(r, now)),
        ));
        self.messages = Some(messages);
        Ok(())
    }

    fn done(mut self) -> Self {
        self.ok = self.problems.is_empty();
        self
    }
}

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The status of the store at `location`; `believe` is the status a
/// reader should give a runtime record at a time on the store's clock (a
/// stale heartbeat is not ONLINE).
pub fn status(
    location: &Location,
    believe: &dyn Fn(&RuntimeRecord, u64) -> RuntimeStatus,
) -> StoreStatus {
    match location {
        Location::Sqlite(path) => sqlite(path, believe),
        Location::Postgres(target) => postgres(target, believe),
    }
    .done()
}

fn sqlite(path: &Path, believe: &dyn Fn(&RuntimeRecord, u64) -> RuntimeStatus) -> StoreStatus {
    let mut s = StoreStatus::new(
        "sqlite",
        path.display().to_string(),
        SqliteStore::latest_schema_version(),
    );
    let found = check(path);
    s.exists = Some(found.exists);
    s.schema = found.schema;
    if !found.exists {
        s.reachable = true;
        return s;
    }
    if !found.ok {
        let mut problems = found.problems;
        problems.extend(found.repair.map(|r| format!("repair: {r}")));
        s.unreachable(problems.first().cloned().unwrap_or_default());
        s.problems = problems;
        return s;
    }
    s.reachable = true;
    let schema = found.schema.unwrap_or_default();
    if schema != s.schema_expected {
        s.mismatch(schema);
        return s;
    }
    let counted = SqliteStore::open(path).and_then(|store| {
        let started = Instant::now();
        store.schema_version()?;
        s.latency_ms = Some(millis(started.elapsed()));
        let messages = store.message_counts()?;
        s.count(&store, messages, believe)
    });
    if let Err(e) = counted {
        s.unreachable(e.at(path).to_string());
    }
    s
}

fn postgres(
    target: &Target,
    believe: &dyn Fn(&RuntimeRecord, u64) -> RuntimeStatus,
) -> StoreStatus {
    let mut s = StoreStatus::new(
        "postgres",
        target.shown().to_owned(),
        postgres::latest_schema_version(),
    );
    let peek = match PgStore::peek(target) {
        Ok(peek) => peek,
        Err(e) => {
            s.unreachable(e.to_string());
            return s;
        }
    };
    s.reachable = true;
    s.latency_ms = Some(millis(peek.round_trip));
    s.schema = Some(peek.schema);
    s.exists = Some(peek.schema > 0);
    if peek.schema == 0 {
        return s;
    }
    if peek.schema != s.schema_expected {
        s.mismatch(peek.schema);
        return s;
    }
    // At this build's schema, opening changes nothing: it checks that the
    // schema is this role's alone, and records no host.
    let counted = PgStore::open(target.clone(), None).and_then(|store| {
        s.hosts = Some(store.hosts()?);
        let messages = store.message_counts()?;
        s.count(&store, messages, believe)
    });
    if let Err(e) = counted {
        s.problems.push(e.to_string());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(r: &RuntimeRecord, _now: u64) -> RuntimeStatus {
        r.status
    }

    #[test]
    fn a_missing_file_is_no_store_yet_and_is_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = crate::store::state_db_path(dir.path());
        let s = status(&Location::Sqlite(path.clone()), &recorded);
        assert!(s.ok && s.reachable, "{s:?}");
        assert_eq!(s.exists, Some(false));
        assert!(!path.exists());
    }

    #[test]
    fn a_sqlite_store_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = crate::store::state_db_path(dir.path());
        let store = SqliteStore::open(&path).unwrap();
        store
            .insert_invocation(&crate::store::NewInvocation {
                from: "a",
                to: "b",
                body: "x",
                status: InvocationStatus::Unavailable,
                reason: Some("no runtime"),
                now: 1,
            })
            .unwrap();
        let s = status(&Location::Sqlite(path), &recorded);
        assert!(s.ok, "{s:?}");
        assert_eq!(s.schema, Some(s.schema_expected));
        assert_eq!(s.messages.unwrap().get(InvocationStatus::Unavailable), 1);
        assert_eq!(s.runtimes.unwrap().total(), 0);
        assert!(s.latency_ms.is_some() && s.hosts.is_none());
    }

    #[test]
    fn an_older_sqlite_schema_is_reported_and_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = crate::store::state_db_path(dir.path());
        drop(SqliteStore::open(&path).unwrap());
        let older = SqliteStore::latest_schema_version() - 1;
        rusqlite::Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", older)
            .unwrap();
        let s = status(&Location::Sqlite(path.clone()), &recorded);
        assert!(!s.ok && s.reachable, "{s:?}");
        assert!(s.problems[0].contains("migrates it"), "{s:?}");
        assert_eq!(check(&path).schema, Some(older), "not migrated");
    }
}
