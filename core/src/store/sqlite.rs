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

use super::{migrations, private};
use super::{
    Agent, Attempt, AttemptOutcome, AttemptResult, Evidence, Invocation, InvocationFilter,
    InvocationStatus, NewInvocation, RuntimeRecord, RuntimeStatus, Store, StoreError,
    MAX_FAILED_ATTEMPTS,
};
use crate::os::OpenOptionsExt;

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

const AGENT_COLS: &str = "id, created";
const RUNTIME_COLS: &str = "id, agent, kind, connector, max_concurrent, status, host, endpoint, \
     endpoint_id, pid, last_heartbeat, heartbeat_ms, provider, conversation_id, status_reason, updated";
const INVOCATION_COLS: &str =
    "id, seq, from_agent, to_agent, body, status, created, delivered, reason, attempts";
const ATTEMPT_COLS: &str = "id, invocation, runtime, endpoint_id, started, lease_until, finished, \
     outcome, reason, ev_echoed, ev_entered, ev_submitted, ev_enter_presses, ev_style, ev_stop_reason";

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
    let invocation: Option<String> = tx
        .query_row(
            "SELECT invocation FROM attempts WHERE id = ?1 AND outcome = 'IN_PROGRESS'",
            [attempt],
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

/// `inv_` and 12 random lowercase hex characters.
fn new_invocation_id() -> String {
    format!("inv_{}", crate::ids::random_hex(6))
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
            "INSERT INTO attempts (invocation, runtime, endpoint_id, started, lease_until, outcome) \
             VALUES (?1, ?2, ?3, ?4, ?5, 'IN_PROGRESS') RETURNING {ATTEMPT_COLS}"
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
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::{Arc, Mutex};

    use super::*;

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open_in(dir.path()).unwrap();
        (dir, s)
    }

    fn runtime(id: &str, agent: &str, endpoint_id: &str) -> RuntimeRecord {
        RuntimeRecord {
            id: id.into(),
            agent: agent.into(),
            kind: "INTERACTIVE".into(),
            connector: "INTERACTIVE".into(),
            max_concurrent: 1,
            status: RuntimeStatus::Online,
            host: Some("host1".into()),
            endpoint: Some("/run/x.sock".into()),
            endpoint_id: Some(endpoint_id.into()),
            pid: Some(4242),
            last_heartbeat: Some(1_000),
            heartbeat_ms: 2_000,
            provider: Some("claude".into()),
            conversation_id: Some("sess-1".into()),
            status_reason: None,
            updated: 1_000,
        }
    }

    fn send(s: &SqliteStore, to: &str, body: &str, now: u64) -> Invocation {
        s.insert_invocation(&NewInvocation {
            from: "user",
            to,
            body,
            status: InvocationStatus::Pending,
            reason: None,
            now,
        })
        .unwrap()
    }

    fn evidence(submitted: u64) -> Evidence {
        Evidence {
            echoed: submitted - 20,
            entered: submitted - 10,
            submitted,
            enter_presses: 1,
            style: "enter".into(),
            stop_reason: None,
        }
    }

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

    #[test]
    fn agents_and_runtimes_round_trip() {
        let (_d, s) = store();
        let a = s.ensure_agent("alice", 10).unwrap();
        assert_eq!(
            a,
            Agent {
                id: "alice".into(),
                created: 10
            }
        );
        assert_eq!(s.ensure_agent("alice", 99).unwrap().created, 10);
        assert_eq!(s.agent("alice").unwrap(), Some(a));
        assert_eq!(s.agent("nobody").unwrap(), None);

        let mut r = runtime("rt-b", "bob", "ep1");
        s.save_runtime(&r).unwrap();
        assert_eq!(s.runtime("rt-b").unwrap(), Some(r.clone()));
        assert_eq!(s.agent("bob").unwrap().unwrap().created, 1_000);
        let ids: Vec<_> = s.agents().unwrap().into_iter().map(|a| a.id).collect();
        assert_eq!(ids, ["alice", "bob"]);

        // Upsert replaces the whole row, NULLs included.
        r.status = RuntimeStatus::Draining;
        r.pid = None;
        r.conversation_id = None;
        r.status_reason = Some("draining for upgrade".into());
        r.last_heartbeat = Some(u64::from(u32::MAX) + 7);
        s.save_runtime(&r).unwrap();
        s.save_runtime(&runtime("rt-a", "alice", "ep9")).unwrap();
        assert_eq!(s.runtime("rt-b").unwrap(), Some(r));
        let ids: Vec<_> = s.runtimes().unwrap().into_iter().map(|r| r.id).collect();
        assert_eq!(ids, ["rt-a", "rt-b"]);
        assert_eq!(s.runtime("rt-zzz").unwrap(), None);
    }

    #[test]
    fn remove_runtime_deletes_only_the_record_it_was_shown() {
        let (_d, s) = store();
        s.save_runtime(&runtime("rt", "bob", "ep1")).unwrap();
        let seen = s.runtime("rt").unwrap().unwrap();
        // A heartbeat since: the record read is not the record any more.
        assert!(s.heartbeat("rt", "ep1", 5_000, 9_000).unwrap());
        assert!(!s.remove_runtime(&seen).unwrap());
        assert!(s.runtime("rt").unwrap().is_some());
        let seen = s.runtime("rt").unwrap().unwrap();
        assert!(s.remove_runtime(&seen).unwrap());
        assert_eq!(s.runtime("rt").unwrap(), None);
        assert!(!s.remove_runtime(&seen).unwrap());
    }

    #[test]
    fn heartbeat_and_set_offline_refuse_a_replaced_endpoint() {
        let (_d, s) = store();
        s.save_runtime(&runtime("rt", "bob", "ep1")).unwrap();
        send(&s, "bob", "hi", 1);
        let (_, att) = s
            .lease_next("bob", "rt", "ep1", 100, 1_100)
            .unwrap()
            .unwrap();

        assert!(s.heartbeat("rt", "ep1", 500, 5_000).unwrap());
        assert_eq!(s.runtime("rt").unwrap().unwrap().last_heartbeat, Some(500));
        assert_eq!(s.attempts(&att.invocation).unwrap()[0].lease_until, 5_000);
        // Never shortens a lease.
        assert!(s.heartbeat("rt", "ep1", 600, 4_000).unwrap());
        assert_eq!(s.attempts(&att.invocation).unwrap()[0].lease_until, 5_000);

        // A new start replaces the endpoint: the old one's heartbeat and offline are refused.
        s.save_runtime(&runtime("rt", "bob", "ep2")).unwrap();
        let before = s.runtime("rt").unwrap();
        assert!(!s.heartbeat("rt", "ep1", 700, 9_000).unwrap());
        assert!(!s
            .set_offline("rt", "ep1", "old supervisor exited", 700)
            .unwrap());
        assert_eq!(s.runtime("rt").unwrap(), before);
        assert_eq!(s.attempts(&att.invocation).unwrap()[0].lease_until, 5_000);
        assert!(!s.heartbeat("nope", "ep2", 700, 9_000).unwrap());

        assert!(s.set_offline("rt", "ep2", "child exited", 800).unwrap());
        let r = s.runtime("rt").unwrap().unwrap();
        assert_eq!(r.status, RuntimeStatus::Offline);
        assert_eq!(r.status_reason.as_deref(), Some("child exited"));
        assert_eq!((r.endpoint, r.endpoint_id, r.pid), (None, None, None));
        assert_eq!(r.host.as_deref(), Some("host1"));
        assert_eq!(r.updated, 800);
        // Once offline, the endpoint id is gone too.
        assert!(!s.heartbeat("rt", "ep2", 900, 9_000).unwrap());
    }

    #[test]
    fn invocations_insert_filter_and_status() {
        let (_d, s) = store();
        let a = send(&s, "bob", "one", 10);
        assert!(a.id.starts_with("inv_") && a.id.len() == 16, "{}", a.id);
        assert!(a.id[4..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert_eq!(
            (a.status, a.attempts, a.delivered, a.created),
            (InvocationStatus::Pending, 0, None, 10)
        );
        let b = s
            .insert_invocation(&NewInvocation {
                from: "user",
                to: "carol",
                body: "two",
                status: InvocationStatus::Unavailable,
                reason: Some("no runtime serves carol"),
                now: 11,
            })
            .unwrap();
        let c = send(&s, "bob", "three", 12);
        assert!(a.seq < b.seq && b.seq < c.seq);
        assert_eq!(s.invocation(&b.id).unwrap(), Some(b.clone()));
        assert_eq!(s.invocation("inv_000000000000").unwrap(), None);

        let all = s.invocations(&InvocationFilter::default()).unwrap();
        assert_eq!(all, [a.clone(), b.clone(), c.clone()]);
        let bobs = s
            .invocations(&InvocationFilter {
                to: Some("bob"),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(bobs, [a.clone(), c.clone()]);
        let unavailable = s
            .invocations(&InvocationFilter {
                status: Some(InvocationStatus::Unavailable),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(unavailable, vec![b.clone()]);

        assert!(s
            .set_invocation_status(&b.id, InvocationStatus::Pending, None, 20)
            .unwrap());
        let b2 = s.invocation(&b.id).unwrap().unwrap();
        assert_eq!((b2.status, b2.reason), (InvocationStatus::Pending, None));
        assert!(s
            .set_invocation_status(&a.id, InvocationStatus::Delivered, None, 30)
            .unwrap());
        assert_eq!(s.invocation(&a.id).unwrap().unwrap().delivered, Some(30));
        assert!(!s
            .set_invocation_status("inv_nope", InvocationStatus::Failed, Some("x"), 30)
            .unwrap());
    }

    #[test]
    fn lease_next_is_fifo_and_one_at_a_time_per_agent() {
        let (_d, s) = store();
        let first = send(&s, "bob", "1", 1);
        let second = send(&s, "bob", "2", 2);
        let other = send(&s, "carol", "x", 3);

        let (inv, att) = s.lease_next("bob", "rt", "ep", 100, 200).unwrap().unwrap();
        assert_eq!(inv.id, first.id);
        assert_eq!(
            (inv.status, inv.attempts),
            (InvocationStatus::Delivering, 1)
        );
        assert_eq!(s.invocation(&first.id).unwrap(), Some(inv.clone()));
        assert_eq!(
            att,
            Attempt {
                id: att.id,
                invocation: first.id.clone(),
                runtime: "rt".into(),
                endpoint_id: "ep".into(),
                started: 100,
                lease_until: 200,
                finished: None,
                outcome: AttemptOutcome::InProgress,
                reason: None,
                evidence: None,
            }
        );
        // bob has one DELIVERING: nothing more for bob, but carol is independent.
        assert_eq!(s.lease_next("bob", "rt", "ep", 101, 200).unwrap(), None);
        let (c, _) = s
            .lease_next("carol", "rt2", "ep2", 101, 200)
            .unwrap()
            .unwrap();
        assert_eq!(c.id, other.id);
        assert_eq!(s.lease_next("dave", "rt3", "ep3", 101, 200).unwrap(), None);

        assert!(s
            .finish_attempt(att.id, &AttemptResult::Delivered(evidence(150)), 160)
            .unwrap());
        let (next, _) = s.lease_next("bob", "rt", "ep", 170, 300).unwrap().unwrap();
        assert_eq!(next.id, second.id);
    }

    #[test]
    fn finish_delivered_and_failed() {
        let (_d, s) = store();
        let inv = send(&s, "bob", "hello", 1);

        // Failed: back to PENDING with the reason, attempt FAILED.
        let (_, a1) = s.lease_next("bob", "rt", "ep", 10, 100).unwrap().unwrap();
        let failed = AttemptResult::Failed("prompt never echoed".into());
        assert!(s.finish_attempt(a1.id, &failed, 20).unwrap());
        let now = s.invocation(&inv.id).unwrap().unwrap();
        assert_eq!(now.status, InvocationStatus::Pending);
        assert_eq!(now.reason.as_deref(), Some("prompt never echoed"));
        // A finished attempt cannot be finished again, and nothing changes.
        assert!(!s
            .finish_attempt(a1.id, &AttemptResult::Delivered(evidence(30)), 30)
            .unwrap());
        assert_eq!(s.invocation(&inv.id).unwrap().unwrap(), now);
        assert!(!s.finish_attempt(9_999, &failed, 30).unwrap());

        // Retry, delivered: evidence stored, delivered = submitted, reason cleared.
        let (again, a2) = s.lease_next("bob", "rt", "ep", 40, 100).unwrap().unwrap();
        assert_eq!(again.attempts, 2);
        let ev = evidence(55);
        assert!(s
            .finish_attempt(a2.id, &AttemptResult::Delivered(ev.clone()), 60)
            .unwrap());
        let done = s.invocation(&inv.id).unwrap().unwrap();
        assert_eq!(done.status, InvocationStatus::Delivered);
        assert_eq!(done.delivered, Some(55));
        assert_eq!(done.reason, None);
        assert_eq!(done.attempts, 2);

        let atts = s.attempts(&inv.id).unwrap();
        assert_eq!(atts.len(), 2);
        assert_eq!(atts[0].outcome, AttemptOutcome::Failed);
        assert_eq!(atts[0].finished, Some(20));
        assert_eq!(atts[0].reason.as_deref(), Some("prompt never echoed"));
        assert_eq!(atts[0].evidence, None);
        assert_eq!(atts[1].outcome, AttemptOutcome::Delivered);
        assert_eq!(atts[1].finished, Some(60));
        assert_eq!(atts[1].evidence, Some(ev));
        assert_eq!(s.lease_next("bob", "rt", "ep", 70, 100).unwrap(), None);
    }

    #[test]
    fn a_message_that_keeps_failing_is_given_up_and_the_queue_moves_on() {
        let (_d, s) = store();
        let stuck = send(&s, "bob", "never echoes", 1);
        let next = send(&s, "bob", "fine", 2);
        for n in 1..=MAX_FAILED_ATTEMPTS {
            let (inv, a) = s.lease_next("bob", "rt", "ep", 10, 100).unwrap().unwrap();
            assert_eq!(inv.id, stuck.id, "attempt {n} takes the oldest");
            let failed = AttemptResult::Failed("did not echo".into());
            assert!(s.finish_attempt(a.id, &failed, 20).unwrap());
        }
        let given_up = s.invocation(&stuck.id).unwrap().unwrap();
        assert_eq!(given_up.status, InvocationStatus::Failed);
        assert_eq!(
            given_up.reason.as_deref(),
            Some("gave up after 5 failed attempts; the last: did not echo")
        );
        let (inv, _) = s.lease_next("bob", "rt", "ep", 30, 100).unwrap().unwrap();
        assert_eq!(inv.id, next.id);
    }

    #[test]
    fn an_undeliverable_message_fails_at_once_and_cancel_takes_only_waiting_ones() {
        let (_d, s) = store();
        let bad = send(&s, "bob", "x", 1);
        let (_, a) = s.lease_next("bob", "rt", "ep", 10, 100).unwrap().unwrap();
        // Leased: not cancellable while it is being delivered.
        assert!(!s.fail_waiting(&bad.id, "cancelled").unwrap());
        let why = AttemptResult::Undeliverable("its sender is invalid".into());
        assert!(s.finish_attempt(a.id, &why, 20).unwrap());
        let failed = s.invocation(&bad.id).unwrap().unwrap();
        assert_eq!(failed.status, InvocationStatus::Failed);
        assert_eq!(failed.reason.as_deref(), Some("its sender is invalid"));

        let waiting = send(&s, "bob", "y", 2);
        assert!(s.fail_waiting(&waiting.id, "cancelled by carol").unwrap());
        let cancelled = s.invocation(&waiting.id).unwrap().unwrap();
        assert_eq!(cancelled.status, InvocationStatus::Failed);
        assert_eq!(cancelled.reason.as_deref(), Some("cancelled by carol"));
        assert!(!s.fail_waiting("inv_000000000000", "cancelled").unwrap());
        assert_eq!(s.lease_next("bob", "rt", "ep", 30, 100).unwrap(), None);
    }

    /// A batch: the oldest `limit` pending, each with its own attempt; no
    /// second lease while any is out; finished together; released together.
    #[test]
    fn a_batch_is_leased_finished_and_released_together() {
        let (_d, s) = store();
        let sent: Vec<Invocation> = (0..5).map(|i| send(&s, "bob", "m", i)).collect();
        let batch = s.lease_batch("bob", "rt", "ep", 10, 100, 3).unwrap();
        let ids: Vec<&str> = batch.iter().map(|(inv, _)| inv.id.as_str()).collect();
        let oldest: Vec<&str> = sent[..3].iter().map(|inv| inv.id.as_str()).collect();
        assert_eq!(ids, oldest);
        let attempts: Vec<i64> = batch.iter().map(|(_, a)| a.id).collect();
        let mut distinct = attempts.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 3);
        assert!(s
            .lease_batch("bob", "rt", "ep", 11, 100, 3)
            .unwrap()
            .is_empty());

        // Two of them finished: the third (already gone) is left alone.
        assert!(s
            .finish_attempt(attempts[2], &AttemptResult::Failed("x".into()), 15)
            .unwrap());
        let done = s
            .finish_attempts(&attempts, &AttemptResult::Delivered(evidence(50)), 60)
            .unwrap();
        assert_eq!(done, 2);
        for inv in &sent[..2] {
            let now = s.invocation(&inv.id).unwrap().unwrap();
            assert_eq!(
                (now.status, now.delivered),
                (InvocationStatus::Delivered, Some(50))
            );
        }

        // The next batch holds what is left, oldest first; a restart puts
        // all of it back.
        let again = s.lease_batch("bob", "rt", "ep", 70, 100, 10).unwrap();
        let ids: Vec<&str> = again.iter().map(|(inv, _)| inv.id.as_str()).collect();
        assert_eq!(ids, [&sent[2].id, &sent[3].id, &sent[4].id]);
        let released = s.release_attempts(Some("rt"), 80, "restarted").unwrap();
        assert_eq!(released.len(), 3);
        for inv in &sent[2..] {
            let now = s.invocation(&inv.id).unwrap().unwrap();
            assert_eq!(now.status, InvocationStatus::Pending);
        }
    }

    #[test]
    fn release_by_lease_expiry_and_by_runtime() {
        let (_d, s) = store();
        let b = send(&s, "bob", "b", 1);
        let c = send(&s, "carol", "c", 2);
        let d = send(&s, "dave", "d", 3);
        let (_, ab) = s.lease_next("bob", "rt-b", "e1", 10, 100).unwrap().unwrap();
        let (_, ac) = s
            .lease_next("carol", "rt-c", "e2", 10, 500)
            .unwrap()
            .unwrap();
        let (_, ad) = s
            .lease_next("dave", "rt-d", "e3", 10, 500)
            .unwrap()
            .unwrap();

        // Only bob's lease has run out at 200.
        let stale = s.stale_attempts(200).unwrap();
        assert_eq!(stale, vec![ab.clone()], "stale_attempts changes nothing");
        assert_eq!(s.stale_attempts(200).unwrap().len(), 1);
        assert_eq!(
            s.stale_attempts(100).unwrap(),
            [],
            "lease_until is inclusive"
        );

        let released = s.release_attempts(None, 200, "lease expired").unwrap();
        assert_eq!(released.len(), 1);
        assert_eq!(released[0].id, ab.id);
        assert_eq!(released[0].outcome, AttemptOutcome::Abandoned);
        assert_eq!(released[0].finished, Some(200));
        assert_eq!(released[0].reason.as_deref(), Some("lease expired"));
        assert_eq!(s.attempts(&b.id).unwrap(), released);
        let b_now = s.invocation(&b.id).unwrap().unwrap();
        assert_eq!(b_now.status, InvocationStatus::Pending);
        assert_eq!(b_now.reason.as_deref(), Some("lease expired"));
        assert_eq!(s.stale_attempts(200).unwrap(), []);

        // By runtime: carol's attempt goes regardless of its lease; dave's stays.
        let released = s
            .release_attempts(Some("rt-c"), 300, "runtime restarted")
            .unwrap();
        assert_eq!(released.iter().map(|a| a.id).collect::<Vec<_>>(), [ac.id]);
        assert_eq!(
            s.invocation(&c.id).unwrap().unwrap().status,
            InvocationStatus::Pending
        );
        assert_eq!(
            s.invocation(&d.id).unwrap().unwrap().status,
            InvocationStatus::Delivering
        );
        assert_eq!(s.attempts(&d.id).unwrap(), vec![ad.clone()]);
        // A released attempt cannot be finished afterwards.
        assert!(!s
            .finish_attempt(ac.id, &AttemptResult::Delivered(evidence(400)), 400)
            .unwrap());
        assert_eq!(
            s.invocation(&c.id).unwrap().unwrap().status,
            InvocationStatus::Pending
        );
        // Released invocations are leased again.
        let (again, _) = s
            .lease_next("bob", "rt-b", "e4", 600, 900)
            .unwrap()
            .unwrap();
        assert_eq!((again.id, again.attempts), (b.id, 2));
    }

    #[test]
    fn two_processes_leasing_concurrently_deliver_each_invocation_once() {
        const N: usize = 200;
        let dir = tempfile::tempdir().unwrap();
        let path = state_db_path(dir.path());
        {
            let s = SqliteStore::open(&path).unwrap();
            for i in 0..N {
                send(&s, "bob", &format!("msg {i}"), i as u64);
            }
        }
        let leased = Arc::new(Mutex::new(Vec::new()));
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let path = path.clone();
                let leased = Arc::clone(&leased);
                std::thread::spawn(move || {
                    let s = SqliteStore::open(&path).unwrap();
                    let (rt, ep) = (format!("rt{w}"), format!("ep{w}"));
                    let mut mine = 0;
                    loop {
                        let now = crate::time::unix_millis();
                        match s.lease_next("bob", &rt, &ep, now, now + 60_000).unwrap() {
                            Some((inv, att)) => {
                                leased.lock().unwrap().push(inv.id.clone());
                                let ev = evidence(now + 30);
                                assert!(s
                                    .finish_attempt(att.id, &AttemptResult::Delivered(ev), now)
                                    .unwrap());
                                mine += 1;
                            }
                            None => {
                                let left = s
                                    .invocations(&InvocationFilter {
                                        to: Some("bob"),
                                        ..Default::default()
                                    })
                                    .unwrap()
                                    .into_iter()
                                    .filter(|i| i.status != InvocationStatus::Delivered)
                                    .count();
                                if left == 0 {
                                    return mine;
                                }
                                std::thread::yield_now();
                            }
                        }
                    }
                })
            })
            .collect();
        let per_worker: Vec<usize> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        assert_eq!(per_worker.iter().sum::<usize>(), N, "{per_worker:?}");

        let leased = leased.lock().unwrap();
        let unique: HashSet<_> = leased.iter().collect();
        assert_eq!((leased.len(), unique.len()), (N, N));

        let s = SqliteStore::open(&path).unwrap();
        let all = s.invocations(&InvocationFilter::default()).unwrap();
        assert_eq!(all.len(), N);
        // One at a time, so the lease order is the queue order.
        let in_order: Vec<_> = all.iter().map(|i| &i.id).collect();
        assert_eq!(leased.iter().collect::<Vec<_>>(), in_order);
        for inv in &all {
            assert_eq!(inv.status, InvocationStatus::Delivered, "{inv:?}");
            assert_eq!(inv.attempts, 1, "{inv:?}");
            let atts = s.attempts(&inv.id).unwrap();
            assert_eq!(atts.len(), 1);
            assert_eq!(atts[0].outcome, AttemptOutcome::Delivered);
        }
    }
}
