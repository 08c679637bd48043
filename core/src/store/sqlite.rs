//! [`SqliteStore`]: the [`Store`] in `<project>/.agent-comms/state.db`.
//!
//! Several processes use the file at once (a supervisor heartbeating while CLI
//! commands insert and read), each with its own connection. WAL lets readers
//! run beside the one writer; every read-modify-write takes the write lock up
//! front with `BEGIN IMMEDIATE` (in WAL a deferred transaction that reads and
//! then writes fails at once with SQLITE_BUSY instead of waiting), and the
//! busy timeout makes a locked database wait rather than fail.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use rusqlite::{params, Connection, OptionalExtension, Row, Transaction, TransactionBehavior};

use super::{migrations, new_invocation_id, private};
use super::{
    Agent, Attempt, AttemptOutcome, AttemptResult, Evidence, Follow, Invocation, InvocationFilter,
    InvocationStatus, NewInvocation, RuntimeRecord, RuntimeStatus, Store, StoreError,
    MAX_FAILED_ATTEMPTS,
};
use super::{AGENT_COLS, ATTEMPT_COLS, INVOCATION_COLS, RUNTIME_COLS};
use crate::os::OpenOptionsExt;

mod whole;

/// How long a statement waits for another process's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// `<project_root>/.agent-comms/state.db`.
pub fn state_db_path(project_root: &Path) -> PathBuf {
    project_root.join(".agent-comms").join("state.db")
}

/// The [`Store`] backed by one SQLite file.
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// `state.db` of the project at `project_root`.
    pub fn open_in(project_root: &Path) -> Result<SqliteStore, StoreError> {
        Self::open(&state_db_path(project_root))
    }

    /// Opens (creating it, and its directory, if missing) and migrates the
    /// database, once its directory and files are known to be the user's
    /// alone (`private`).
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        Self::open_private(path).map_err(|e| e.at(path))
    }

    fn open_private(path: &Path) -> Result<SqliteStore, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            private::ensure_state_dir(dir)?;
        }
        // Create the file ourselves so it is 0600; SQLite gives -wal and -shm the same mode.
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(source) => {
                return Err(StoreError::Io {
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
        private::check_db_files(path)?;

        let not_a_store = |e: rusqlite::Error| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase) => StoreError::NotAStore {
                path: path.to_path_buf(),
                detail: e.to_string(),
            },
            _ => StoreError::from(e),
        };
        let conn = Connection::open(path).map_err(not_a_store)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // Refuse a foreign or newer database before changing anything in it.
        let header = migrations::read_header(&conn).map_err(not_a_store)?;
        migrations::check_header(header, path)?;
        enable_wal(&conn, path)?;
        conn.pragma_update(None, "foreign_keys", true)?;
        // WAL is durable across an application crash at NORMAL; FULL adds power-loss safety.
        conn.pragma_update(None, "synchronous", "FULL")?;
        migrations::migrate(&conn, path)?;
        Ok(SqliteStore {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        Ok(migrations::read_header(&self.conn)?.user_version)
    }

    /// The schema version this build creates and understands.
    pub fn latest_schema_version() -> i64 {
        migrations::latest()
    }

    /// Wakes the commands following this store's messages
    /// ([`super::watchers`]); called after a change to a message committed.
    fn messages_changed(&self) {
        super::watchers::tell(&self.path);
    }

    fn write_tx(&self) -> Result<Transaction<'_>, StoreError> {
        Ok(Transaction::new_unchecked(
            &self.conn,
            TransactionBehavior::Immediate,
        )?)
    }
}

/// Switches the database to WAL, which persists in the file. Switching needs an
/// exclusive lock, and SQLite reports SQLITE_BUSY for it at once, without its
/// busy handler, when another connection is reading the new database at that
/// moment; so retry for up to the busy timeout.
fn enable_wal(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        let mode = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
            .and_then(|mode| {
                if mode.eq_ignore_ascii_case("wal") {
                    Ok(mode)
                } else {
                    conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
                }
            });
        match mode {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) => {
                return Err(StoreError::NotAStore {
                    path: path.to_path_buf(),
                    detail: format!("it cannot use WAL journaling (journal_mode is {mode})"),
                })
            }
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

// ---- enum <-> TEXT -------------------------------------------------------

macro_rules! sql_text {
    ($($t:ty),+) => {$(
        impl ToSql for $t {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::from(self.as_str()))
            }
        }
        impl FromSql for $t {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                value
                    .as_str()?
                    .parse()
                    .map_err(|e| FromSqlError::Other(Box::new(e)))
            }
        }
    )+};
}
sql_text!(RuntimeStatus, InvocationStatus, AttemptOutcome);

// ---- rows ----------------------------------------------------------------

fn agent_row(r: &Row<'_>) -> rusqlite::Result<Agent> {
    Ok(Agent {
        id: r.get("id")?,
        created: r.get("created")?,
    })
}

fn runtime_row(r: &Row<'_>) -> rusqlite::Result<RuntimeRecord> {
    Ok(RuntimeRecord {
        id: r.get("id")?,
        agent: r.get("agent")?,
        kind: r.get("kind")?,
        connector: r.get("connector")?,
        max_concurrent: r.get("max_concurrent")?,
        status: r.get("status")?,
        host: r.get("host")?,
        endpoint: r.get("endpoint")?,
        endpoint_id: r.get("endpoint_id")?,
        pid: r.get("pid")?,
        last_heartbeat: r.get("last_heartbeat")?,
        heartbeat_ms: r.get("heartbeat_ms")?,
        provider: r.get("provider")?,
        conversation_id: r.get("conversation_id")?,
        status_reason: r.get("status_reason")?,
        updated: r.get("updated")?,
    })
}

fn invocation_row(r: &Row<'_>) -> rusqlite::Result<Invocation> {
    Ok(Invocation {
        id: r.get("id")?,
        seq: r.get("seq")?,
        from: r.get("from_agent")?,
        to: r.get("to_agent")?,
        body: r.get("body")?,
        status: r.get("status")?,
        created: r.get("created")?,
        delivered: r.get("delivered")?,
        reason: r.get("reason")?,
        attempts: r.get("attempts")?,
    })
}

fn attempt_row(r: &Row<'_>) -> rusqlite::Result<Attempt> {
    let style: Option<String> = r.get("ev_style")?;
    let evidence = match style {
        Some(style) => Some(Evidence {
            echoed: r.get("ev_echoed")?,
            entered: r.get("ev_entered")?,
            submitted: r.get("ev_submitted")?,
            enter_presses: r.get("ev_enter_presses")?,
            style,
            stop_reason: r.get("ev_stop_reason")?,
        }),
        None => None,
    };
    Ok(Attempt {
        id: r.get("id")?,
        invocation: r.get("invocation")?,
        runtime: r.get("runtime")?,
        endpoint_id: r.get("endpoint_id")?,
        started: r.get("started")?,
        lease_until: r.get("lease_until")?,
        finished: r.get("finished")?,
        outcome: r.get("outcome")?,
        reason: r.get("reason")?,
        evidence,
        host: r.get("host")?,
    })
}

/// [`Store::finish_attempts`] for one attempt, inside its transaction;
/// false if the attempt is no longer IN_PROGRESS.
fn finish_one(
    tx: &Transaction<'_>,
    attempt: i64,
    result: &AttemptResult,
    now: u64,
) -> Result<bool, StoreError> {
    let late = matches!(result, AttemptResult::Delivered(_));
    let invocation: Option<String> = tx
        .query_row(
            "SELECT a.invocation FROM attempts a JOIN invocations i ON i.id = a.invocation \
             WHERE a.id = ?1 AND (a.outcome = 'IN_PROGRESS' \
               OR (?2 AND a.outcome = 'ABANDONED' AND i.status = 'PENDING'))",
            params![attempt, late],
            |r| r.get(0),
        )
        .optional()?;
    let Some(invocation) = invocation else {
        return Ok(false);
    };
    match result {
        AttemptResult::Delivered(ev) => {
            tx.execute(
                "UPDATE attempts SET outcome = 'DELIVERED', finished = ?2, reason = NULL, \
                   ev_echoed = ?3, ev_entered = ?4, ev_submitted = ?5, \
                   ev_enter_presses = ?6, ev_style = ?7, ev_stop_reason = ?8 \
                 WHERE id = ?1",
                params![
                    attempt,
                    now,
                    ev.echoed,
                    ev.entered,
                    ev.submitted,
                    ev.enter_presses,
                    ev.style,
                    ev.stop_reason
                ],
            )?;
            tx.execute(
                "UPDATE invocations SET status = 'DELIVERED', delivered = ?2, reason = NULL \
                 WHERE id = ?1",
                params![invocation, ev.submitted],
            )?;
        }
        AttemptResult::Failed(reason) | AttemptResult::Undeliverable(reason) => {
            tx.execute(
                "UPDATE attempts SET outcome = 'FAILED', finished = ?2, reason = ?3 \
                 WHERE id = ?1",
                params![attempt, now, reason],
            )?;
            let failed: u32 = tx.query_row(
                "SELECT count(*) FROM attempts WHERE invocation = ?1 AND outcome = 'FAILED'",
                [&invocation],
                |r| r.get(0),
            )?;
            let (status, reason) = match result {
                AttemptResult::Failed(_) if failed < MAX_FAILED_ATTEMPTS => {
                    (InvocationStatus::Pending, reason.clone())
                }
                AttemptResult::Failed(_) => (
                    InvocationStatus::Failed,
                    format!("gave up after {failed} failed attempts; the last: {reason}"),
                ),
                _ => (InvocationStatus::Failed, reason.clone()),
            };
            tx.execute(
                "UPDATE invocations SET status = ?2, reason = ?3 \
                 WHERE id = ?1 AND status = 'DELIVERING'",
                params![invocation, status, reason],
            )?;
        }
    }
    Ok(true)
}

fn query_all<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    f: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params, f)?;
    Ok(rows.collect::<rusqlite::Result<Vec<T>>>()?)
}

fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _)
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
    )
}

impl Store for SqliteStore {
    fn ensure_agent(&self, id: &str, now: u64) -> Result<Agent, StoreError> {
        // Agents are never deleted, so insert-then-read needs no transaction.
        self.conn
            .prepare_cached("INSERT OR IGNORE INTO agents (id, created) VALUES (?1, ?2)")?
            .execute(params![id, now])?;
        let sql = format!("SELECT {AGENT_COLS} FROM agents WHERE id = ?1");
        Ok(self.conn.query_row(&sql, [id], agent_row)?)
    }

    fn agent(&self, id: &str) -> Result<Option<Agent>, StoreError> {
        let sql = format!("SELECT {AGENT_COLS} FROM agents WHERE id = ?1");
        Ok(self.conn.query_row(&sql, [id], agent_row).optional()?)
    }

    fn agents(&self) -> Result<Vec<Agent>, StoreError> {
        let sql = format!("SELECT {AGENT_COLS} FROM agents ORDER BY id");
        query_all(&self.conn, &sql, [], agent_row)
    }

    fn runtime(&self, id: &str) -> Result<Option<RuntimeRecord>, StoreError> {
        let sql = format!("SELECT {RUNTIME_COLS} FROM runtimes WHERE id = ?1");
        Ok(self.conn.query_row(&sql, [id], runtime_row).optional()?)
    }

    fn runtimes(&self) -> Result<Vec<RuntimeRecord>, StoreError> {
        let sql = format!("SELECT {RUNTIME_COLS} FROM runtimes ORDER BY id");
        query_all(&self.conn, &sql, [], runtime_row)
    }

    fn save_runtime(&self, r: &RuntimeRecord) -> Result<(), StoreError> {
        let tx = self.write_tx()?;
        tx.execute(
            "INSERT OR IGNORE INTO agents (id, created) VALUES (?1, ?2)",
            params![r.agent, r.updated],
        )?;
        let sql = format!(
            "INSERT INTO runtimes ({RUNTIME_COLS}) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16) \
             ON CONFLICT (id) DO UPDATE SET \
               agent = excluded.agent, kind = excluded.kind, connector = excluded.connector, \
               max_concurrent = excluded.max_concurrent, status = excluded.status, \
               host = excluded.host, endpoint = excluded.endpoint, \
               endpoint_id = excluded.endpoint_id, pid = excluded.pid, \
               last_heartbeat = excluded.last_heartbeat, heartbeat_ms = excluded.heartbeat_ms, \
               provider = excluded.provider, conversation_id = excluded.conversation_id, \
               status_reason = excluded.status_reason, updated = excluded.updated"
        );
        tx.execute(
            &sql,
            params![
                r.id,
                r.agent,
                r.kind,
                r.connector,
                r.max_concurrent,
                r.status,
                r.host,
                r.endpoint,
                r.endpoint_id,
                r.pid,
                r.last_heartbeat,
                r.heartbeat_ms,
                r.provider,
                r.conversation_id,
                r.status_reason,
                r.updated,
            ],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn heartbeat(
        &self,
        runtime: &str,
        endpoint_id: &str,
        now: u64,
        lease_until: u64,
    ) -> Result<bool, StoreError> {
        let tx = self.write_tx()?;
        let ours = tx.execute(
            "UPDATE runtimes SET last_heartbeat = ?3 WHERE id = ?1 AND endpoint_id = ?2",
            params![runtime, endpoint_id, now],
        )?;
        if ours == 0 {
            return Ok(false); // dropped: rolls back
        }
        tx.execute(
            "UPDATE attempts SET lease_until = max(lease_until, ?3) \
             WHERE runtime = ?1 AND endpoint_id = ?2 AND outcome = 'IN_PROGRESS'",
            params![runtime, endpoint_id, lease_until],
        )?;
        tx.commit()?;
        Ok(true)
    }

    fn bind_conversation(
        &self,
        runtime: &str,
        conversation: Option<&str>,
        now: u64,
    ) -> Result<bool, StoreError> {
        let changed = self.conn.execute(
            "UPDATE runtimes SET conversation_id = ?2, updated = ?3 WHERE id = ?1",
            params![runtime, conversation, now],
        )?;
        Ok(changed > 0)
    }

    fn remove_runtime(&self, seen: &RuntimeRecord) -> Result<bool, StoreError> {
        let removed = self.conn.execute(
            "DELETE FROM runtimes WHERE id = ?1 AND status = ?2 \
               AND endpoint_id IS ?3 AND last_heartbeat IS ?4",
            params![seen.id, seen.status, seen.endpoint_id, seen.last_heartbeat],
        )?;
        Ok(removed > 0)
    }

    fn set_offline(
        &self,
        runtime: &str,
        endpoint_id: &str,
        reason: &str,
        now: u64,
    ) -> Result<bool, StoreError> {
        let changed = self.conn.execute(
            "UPDATE runtimes SET status = 'OFFLINE', status_reason = ?3, endpoint = NULL, \
               endpoint_id = NULL, pid = NULL, updated = ?4 \
             WHERE id = ?1 AND endpoint_id = ?2",
            params![runtime, endpoint_id, reason, now],
        )?;
        Ok(changed > 0)
    }

    fn insert_invocation(&self, new: &NewInvocation<'_>) -> Result<Invocation, StoreError> {
        let sql = format!(
            "INSERT INTO invocations (id, from_agent, to_agent, body, status, created, reason) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING {INVOCATION_COLS}"
        );
        let mut tries = 0;
        loop {
            let id = new_invocation_id();
            let inserted = self.conn.query_row(
                &sql,
                params![id, new.from, new.to, new.body, new.status, new.now, new.reason],
                invocation_row,
            );
            match inserted {
                Err(e) if is_unique_violation(&e) && tries < 5 => tries += 1,
                other => {
                    let inserted = other?;
                    self.messages_changed();
                    return Ok(inserted);
                }
            }
        }
    }

    fn invocation(&self, id: &str) -> Result<Option<Invocation>, StoreError> {
        let sql = format!("SELECT {INVOCATION_COLS} FROM invocations WHERE id = ?1");
        Ok(self.conn.query_row(&sql, [id], invocation_row).optional()?)
    }

    fn invocations(&self, filter: &InvocationFilter<'_>) -> Result<Vec<Invocation>, StoreError> {
        let sql = format!(
            "SELECT {INVOCATION_COLS} FROM invocations \
             WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR to_agent = ?2) \
               AND (?3 IS NULL OR from_agent = ?3) \
             ORDER BY seq"
        );
        query_all(
            &self.conn,
            &sql,
            params![filter.status, filter.to, filter.from],
            invocation_row,
        )
    }

    fn set_invocation_status(
        &self,
        id: &str,
        status: InvocationStatus,
        reason: Option<&str>,
        now: u64,
    ) -> Result<bool, StoreError> {
        let changed = self.conn.execute(
            "UPDATE invocations SET status = ?2, reason = ?3, \
               delivered = CASE WHEN ?2 = 'DELIVERED' THEN coalesce(delivered, ?4) \
                                ELSE delivered END \
             WHERE id = ?1",
            params![id, status, reason, now],
        )?;
        if changed > 0 {
            self.messages_changed();
        }
        Ok(changed > 0)
    }

    fn lease_batch(
        &self,
        agent: &str,
        runtime: &str,
        endpoint_id: &str,
        now: u64,
        lease_until: u64,
        limit: usize,
    ) -> Result<Vec<(Invocation, Attempt)>, StoreError> {
        let tx = self.write_tx()?;
        let busy = tx
            .query_row(
                "SELECT 1 FROM invocations WHERE to_agent = ?1 AND status = 'DELIVERING' LIMIT 1",
                [agent],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        if busy {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {INVOCATION_COLS} FROM invocations \
             WHERE to_agent = ?1 AND status = 'PENDING' ORDER BY seq LIMIT ?2"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let pending = query_all(&tx, &sql, params![agent, limit], invocation_row)?;
        let insert = format!(
            "INSERT INTO attempts (invocation, runtime, endpoint_id, started, lease_until, outcome, host) \
             VALUES (?1, ?2, ?3, ?4, ?5, 'IN_PROGRESS', (SELECT host FROM runtimes WHERE id = ?2)) \
             RETURNING {ATTEMPT_COLS}"
        );
        let mut leased = Vec::with_capacity(pending.len());
        for mut inv in pending {
            tx.execute(
                "UPDATE invocations SET status = 'DELIVERING', attempts = attempts + 1 WHERE seq = ?1",
                [inv.seq],
            )?;
            inv.status = InvocationStatus::Delivering;
            inv.attempts += 1;
            let attempt = tx.query_row(
                &insert,
                params![inv.id, runtime, endpoint_id, now, lease_until],
                attempt_row,
            )?;
            leased.push((inv, attempt));
        }
        tx.commit()?;
        if !leased.is_empty() {
            self.messages_changed();
        }
        Ok(leased)
    }

    fn finish_attempts(
        &self,
        attempts: &[i64],
        result: &AttemptResult,
        now: u64,
    ) -> Result<usize, StoreError> {
        let tx = self.write_tx()?;
        let mut finished = 0;
        for &attempt in attempts {
            if finish_one(&tx, attempt, result, now)? {
                finished += 1;
            }
        }
        tx.commit()?;
        if finished > 0 {
            self.messages_changed();
        }
        Ok(finished)
    }

    fn release_attempts(
        &self,
        runtime: Option<&str>,
        now: u64,
        reason: &str,
    ) -> Result<Vec<Attempt>, StoreError> {
        let tx = self.write_tx()?;
        let sql = format!(
            "SELECT {ATTEMPT_COLS} FROM attempts \
             WHERE outcome = 'IN_PROGRESS' AND (lease_until < ?1 OR runtime = ?2) ORDER BY id"
        );
        let mut released = query_all(&tx, &sql, params![now, runtime], attempt_row)?;
        for a in &mut released {
            tx.execute(
                "UPDATE attempts SET outcome = 'ABANDONED', finished = ?2, reason = ?3 \
                 WHERE id = ?1",
                params![a.id, now, reason],
            )?;
            tx.execute(
                "UPDATE invocations SET status = 'PENDING', reason = ?2 \
                 WHERE id = ?1 AND status = 'DELIVERING'",
                params![a.invocation, reason],
            )?;
            a.outcome = AttemptOutcome::Abandoned;
            a.finished = Some(now);
            a.reason = Some(reason.to_owned());
        }
        tx.commit()?;
        if !released.is_empty() {
            self.messages_changed();
        }
        Ok(released)
    }

    fn fail_waiting(&self, id: &str, reason: &str) -> Result<bool, StoreError> {
        let changed = self.conn.execute(
            "UPDATE invocations SET status = 'FAILED', reason = ?2 \
             WHERE id = ?1 AND status IN ('PENDING', 'UNAVAILABLE', 'FAILED')",
            params![id, reason],
        )?;
        if changed > 0 {
            self.messages_changed();
        }
        Ok(changed > 0)
    }

    fn attempts(&self, invocation: &str) -> Result<Vec<Attempt>, StoreError> {
        let sql = format!("SELECT {ATTEMPT_COLS} FROM attempts WHERE invocation = ?1 ORDER BY id");
        query_all(&self.conn, &sql, [invocation], attempt_row)
    }

    fn stale_attempts(&self, now: u64) -> Result<Vec<Attempt>, StoreError> {
        let sql = format!(
            "SELECT {ATTEMPT_COLS} FROM attempts \
             WHERE outcome = 'IN_PROGRESS' AND lease_until < ?1 ORDER BY id"
        );
        query_all(&self.conn, &sql, [now], attempt_row)
    }

    fn follow(&self, _to: Option<&str>) -> Result<Box<dyn Follow>, StoreError> {
        let follower =
            super::watchers::Follower::listen(&self.path).map_err(|source| StoreError::Io {
                path: self.path.clone(),
                source,
            })?;
        Ok(Box::new(follower))
    }

    fn backend(&self) -> super::Backend<'_> {
        super::Backend::Sqlite(self)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn opens_with_private_modes_and_migrations_are_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let path = state_db_path(dir.path());
        assert!(path.ends_with(".agent-comms/state.db"));
        {
            let s = SqliteStore::open(&path).unwrap();
            assert_eq!(s.schema_version().unwrap(), migrations::latest());
            s.ensure_agent("a", 5).unwrap();
        }
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(mode(&path), 0o600);

        let s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), migrations::latest());
        assert_eq!(s.agents().unwrap().len(), 1, "reopening kept the data");
        let mode: String = s
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let fk: i64 = s
            .conn
            .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
            .unwrap();
        assert_eq!(fk, 1);
    }

    #[test]
    fn concurrent_first_opens_migrate_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = state_db_path(dir.path());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || SqliteStore::open(&path).map(|_| ()))
            })
            .collect();
        for t in threads {
            t.join().unwrap().unwrap();
        }
        let s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), migrations::latest());
    }

    /// A database from before migration 2 keeps its runtime's bound id,
    /// now read as `conversation_id`.
    #[test]
    fn a_bound_session_id_survives_as_the_conversation_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = state_db_path(dir.path());
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        {
            let old = Connection::open(&path).unwrap();
            old.execute_batch(migrations::MIGRATIONS[0]).unwrap();
            old.pragma_update(None, "user_version", 1).unwrap();
            old.pragma_update(None, "application_id", migrations::APPLICATION_ID)
                .unwrap();
            old.execute_batch(
                "INSERT INTO agents (id, created) VALUES ('bob', 1); \
                 INSERT INTO runtimes (id, agent, kind, connector, max_concurrent, status, \
                     heartbeat_ms, provider, session_id, updated) \
                 VALUES ('rt-b', 'bob', 'INTERACTIVE', 'INTERACTIVE', 1, 'OFFLINE', \
                     2000, 'claude-code', 'sess-old', 1);",
            )
            .unwrap();
        }
        // As agent-comms itself created it: the owner's alone.
        crate::os::make_owner_only(&path).unwrap();
        let s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), migrations::latest());
        let r = s.runtime("rt-b").unwrap().expect("the runtime survived");
        assert_eq!(r.conversation_id.as_deref(), Some("sess-old"));
    }

    #[test]
    fn newer_schema_is_refused_with_upgrade_advice() {
        let dir = tempfile::tempdir().unwrap();
        let path = state_db_path(dir.path());
        drop(SqliteStore::open(&path).unwrap());
        let newer = migrations::latest() + 3;
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", newer)
            .unwrap();
        let err = SqliteStore::open(&path).unwrap_err();
        assert!(matches!(err, StoreError::SchemaTooNew { .. }), "{err:?}");
        let msg = err.to_string();
        let want = format!(
            "state.db has schema {newer}, this agent-comms knows up to {}; upgrade agent-comms",
            migrations::latest()
        );
        assert!(msg.contains(&want), "{msg}");
    }

    #[test]
    fn foreign_files_are_refused() {
        // Made private, so that what is judged is what they hold.
        let open = |path: &Path| {
            crate::os::make_owner_only(path).unwrap();
            SqliteStore::open(path).unwrap_err()
        };
        let dir = tempfile::tempdir().unwrap();
        // Not SQLite at all.
        let junk = dir.path().join("junk.db");
        fs::write(&junk, b"this is not a database, just some text that is long enough ....................................................................").unwrap();
        let err = open(&junk);
        assert!(matches!(err, StoreError::NotAStore { .. }), "{err:?}");
        assert!(err.to_string().contains("move it aside"), "{err}");
        // Somebody else's SQLite database.
        let other = dir.path().join("other.db");
        Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE t (x)")
            .unwrap();
        let err = open(&other);
        assert!(matches!(err, StoreError::NotAStore { .. }), "{err:?}");
        // ... and one with its own application id.
        let tagged = dir.path().join("tagged.db");
        Connection::open(&tagged)
            .unwrap()
            .pragma_update(None, "application_id", 7)
            .unwrap();
        let err = open(&tagged);
        assert!(matches!(err, StoreError::NotAStore { .. }), "{err:?}");
    }

    crate::store::suite::store_suite!({
        let dir = tempfile::tempdir().unwrap();
        let path = state_db_path(dir.path());
        let open = move || -> Box<dyn Store> { Box::new(SqliteStore::open(&path).unwrap()) };
        (dir, open)
    });
}
