//! The schema of `state.db`, as an ordered list of migrations.
//!
//! `PRAGMA user_version` holds how many of [`MIGRATIONS`] a database has
//! applied; `PRAGMA application_id` marks the file as ours, so a stray SQLite
//! file at the same path is refused instead of being "migrated". Each
//! migration runs once, in its own `BEGIN IMMEDIATE` transaction together
//! with the `user_version` bump, so a crash mid-migration leaves the previous
//! version intact and two processes opening a fresh database at the same time
//! cannot both apply it.
//!
//! Append only: never edit a migration that has shipped, add a new one.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use super::StoreError;

/// `PRAGMA application_id` of every agent-comms state database ("ACMS").
pub(crate) const APPLICATION_ID: i32 = 0x4143_4d53;

/// Migration `i` takes a database from version `i` to `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: agents, runtimes, invocations and their delivery attempts.
    r#"
CREATE TABLE agents (
    id      TEXT PRIMARY KEY NOT NULL,
    created INTEGER NOT NULL
);

CREATE TABLE runtimes (
    id             TEXT PRIMARY KEY NOT NULL,
    agent          TEXT NOT NULL REFERENCES agents(id),
    kind           TEXT NOT NULL,
    connector      TEXT NOT NULL,
    max_concurrent INTEGER NOT NULL,
    status         TEXT NOT NULL
                   CHECK (status IN ('ONLINE', 'OFFLINE', 'DRAINING', 'REVOKED')),
    host           TEXT,
    endpoint       TEXT,
    endpoint_id    TEXT,
    pid            INTEGER,
    last_heartbeat INTEGER,
    heartbeat_ms   INTEGER NOT NULL,
    provider       TEXT,
    session_id     TEXT,
    status_reason  TEXT,
    updated        INTEGER NOT NULL
);
CREATE INDEX runtimes_agent ON runtimes(agent);

CREATE TABLE invocations (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    from_agent TEXT NOT NULL,
    to_agent   TEXT NOT NULL,
    body       TEXT NOT NULL,
    status     TEXT NOT NULL
               CHECK (status IN ('PENDING', 'DELIVERING', 'DELIVERED', 'UNAVAILABLE', 'FAILED')),
    created    INTEGER NOT NULL,
    delivered  INTEGER,
    reason     TEXT,
    attempts   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX invocations_to_status ON invocations(to_agent, status, seq);
CREATE INDEX invocations_status ON invocations(status, seq);

CREATE TABLE attempts (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    invocation          TEXT NOT NULL REFERENCES invocations(id),
    runtime             TEXT NOT NULL,
    endpoint_id         TEXT NOT NULL,
    started             INTEGER NOT NULL,
    lease_until         INTEGER NOT NULL,
    finished            INTEGER,
    outcome             TEXT NOT NULL
                        CHECK (outcome IN ('IN_PROGRESS', 'DELIVERED', 'FAILED', 'ABANDONED')),
    reason              TEXT,
    -- Evidence of a delivery: all NULL, or all set (ev_style NOT NULL decides).
    ev_echoed           INTEGER,
    ev_entered          INTEGER,
    ev_submitted        INTEGER,
    ev_enter_presses    INTEGER,
    ev_style            TEXT
);
CREATE INDEX attempts_invocation ON attempts(invocation, id);
CREATE INDEX attempts_open ON attempts(outcome, lease_until);
CREATE INDEX attempts_runtime ON attempts(runtime, outcome);
"#,
    // 2: a runtime is bound to a *conversation* (the provider's own session
    // or thread); "session" names our supervised PTYs only.
    r#"
ALTER TABLE runtimes RENAME COLUMN session_id TO conversation_id;
"#,
    // 3: a delivery into an ACP runtime is a prompt; its evidence ends with
    // the agent's stop reason.
    r#"
ALTER TABLE attempts ADD COLUMN ev_stop_reason TEXT;
"#,
    // 4: the host whose runtime made an attempt, for `message show`: in a
    // store several hosts share, which one delivered the message.
    r#"
ALTER TABLE attempts ADD COLUMN host TEXT;
"#,
];

/// The schema version this build creates and understands.
pub(crate) fn latest() -> i64 {
    MIGRATIONS.len() as i64
}

/// What identifies a database: its marker, its version and how many schema
/// objects it holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header {
    pub application_id: i32,
    pub user_version: i64,
    pub objects: i64,
}

/// Reads the [`Header`] in one statement, so that a migration committed by
/// another process in between cannot tear it.
pub(crate) fn read_header(conn: &Connection) -> rusqlite::Result<Header> {
    conn.query_row(
        "SELECT a.application_id, v.user_version, (SELECT count(*) FROM sqlite_master) \
         FROM pragma_application_id() AS a, pragma_user_version() AS v",
        [],
        |r| {
            Ok(Header {
                application_id: r.get(0)?,
                user_version: r.get(1)?,
                objects: r.get(2)?,
            })
        },
    )
}

/// Refuses a database that is not ours or is newer than this build.
pub(crate) fn check_header(h: Header, path: &Path) -> Result<(), StoreError> {
    let Header {
        application_id: app,
        user_version: version,
        objects,
    } = h;
    if app != APPLICATION_ID {
        if app != 0 || version != 0 {
            return Err(StoreError::NotAStore {
                path: path.to_path_buf(),
                detail: format!("application_id {app:#x}, user_version {version}"),
            });
        }
        // A blank header: fine for an empty file, not for someone else's tables.
        if objects > 0 {
            return Err(StoreError::NotAStore {
                path: path.to_path_buf(),
                detail: format!("it holds {objects} tables or indexes but no agent-comms marker"),
            });
        }
    }
    if version > latest() {
        return Err(StoreError::SchemaTooNew {
            path: path.to_path_buf(),
            found: version,
            known: latest(),
        });
    }
    Ok(())
}

/// Applies every migration the database lacks, each once, in its own transaction.
pub(crate) fn migrate(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let header = read_header(conn)?;
    check_header(header, path)?;
    if header.user_version == latest() {
        return Ok(());
    }
    loop {
        let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
        // Re-read under the write lock: another process may have migrated meanwhile.
        let header = read_header(&tx)?;
        check_header(header, path)?;
        let version = header.user_version;
        if version == latest() {
            return Ok(());
        }
        let script = MIGRATIONS[version as usize];
        let next = version + 1;
        let applied = tx
            .execute_batch(script)
            .and_then(|()| tx.pragma_update(None, "user_version", next))
            .and_then(|()| tx.pragma_update(None, "application_id", APPLICATION_ID));
        if let Err(source) = applied {
            return Err(StoreError::Migration {
                path: path.to_path_buf(),
                version: next,
                source,
            });
        }
        tx.commit()?;
    }
}
