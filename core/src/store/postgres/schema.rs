//! The schema in PostgreSQL, as an ordered list of migrations, applied by
//! whichever command first touches an empty database.
//!
//! Everything lives in the schema `agent_comms`, which the connecting role
//! owns and nobody else may use: the database may hold other things, and
//! other roles may share the server. `agent_comms.meta` holds the version
//! (how many of [`MIGRATIONS`] were applied). Migrations take an advisory
//! lock first, so hosts starting at once apply each migration once; a
//! database of a newer version is refused before anything is changed, as
//! SQLite's is.
//!
//! The tables mirror SQLite's (`migrations.rs`) column for column, so both
//! back-ends keep one meaning; times are Unix milliseconds (`BIGINT`).
//! Append only: never edit a migration that has shipped, add a new one.

use postgres::{Client, GenericClient};

use super::target::Target;
use crate::store::StoreError;

/// The advisory lock key migrations hold ("ACMS").
const MIGRATION_LOCK: i64 = 0x4143_4d53;

/// Migration `i` takes a database from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: the same tables as SQLite's version 4, and the hosts that use the
    // database (for doctor: which build each runs, how far its clock is).
    r#"
CREATE TABLE agent_comms.agents (
    id      TEXT PRIMARY KEY,
    created BIGINT NOT NULL
);

CREATE TABLE agent_comms.runtimes (
    id              TEXT PRIMARY KEY,
    agent           TEXT NOT NULL REFERENCES agent_comms.agents(id),
    kind            TEXT NOT NULL,
    connector       TEXT NOT NULL,
    max_concurrent  BIGINT NOT NULL,
    status          TEXT NOT NULL
                    CHECK (status IN ('ONLINE', 'OFFLINE', 'DRAINING', 'REVOKED')),
    host            TEXT,
    endpoint        TEXT,
    endpoint_id     TEXT,
    pid             BIGINT,
    last_heartbeat  BIGINT,
    heartbeat_ms    BIGINT NOT NULL,
    provider        TEXT,
    conversation_id TEXT,
    status_reason   TEXT,
    updated         BIGINT NOT NULL
);
CREATE INDEX runtimes_agent ON agent_comms.runtimes(agent);

CREATE TABLE agent_comms.invocations (
    seq        BIGSERIAL PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    from_agent TEXT NOT NULL,
    to_agent   TEXT NOT NULL,
    body       TEXT NOT NULL,
    status     TEXT NOT NULL
               CHECK (status IN ('PENDING', 'DELIVERING', 'DELIVERED', 'UNAVAILABLE', 'FAILED')),
    created    BIGINT NOT NULL,
    delivered  BIGINT,
    reason     TEXT,
    attempts   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX invocations_to_status ON agent_comms.invocations(to_agent, status, seq);
CREATE INDEX invocations_status ON agent_comms.invocations(status, seq);

CREATE TABLE agent_comms.attempts (
    id               BIGSERIAL PRIMARY KEY,
    invocation       TEXT NOT NULL REFERENCES agent_comms.invocations(id),
    runtime          TEXT NOT NULL,
    endpoint_id      TEXT NOT NULL,
    started          BIGINT NOT NULL,
    lease_until      BIGINT NOT NULL,
    finished         BIGINT,
    outcome          TEXT NOT NULL
                     CHECK (outcome IN ('IN_PROGRESS', 'DELIVERED', 'FAILED', 'ABANDONED')),
    reason           TEXT,
    ev_echoed        BIGINT,
    ev_entered       BIGINT,
    ev_submitted     BIGINT,
    ev_enter_presses BIGINT,
    ev_style         TEXT,
    ev_stop_reason   TEXT,
    host             TEXT
);
CREATE INDEX attempts_invocation ON agent_comms.attempts(invocation, id);
CREATE INDEX attempts_open ON agent_comms.attempts(outcome, lease_until);
CREATE INDEX attempts_runtime ON agent_comms.attempts(runtime, outcome);

CREATE TABLE agent_comms.hosts (
    id        TEXT PRIMARY KEY,
    name      TEXT NOT NULL,
    version   TEXT NOT NULL,
    schema    BIGINT NOT NULL,
    skew_ms   BIGINT NOT NULL,
    seen      BIGINT NOT NULL
);
"#,
];

/// The schema version this build creates and understands.
pub fn latest() -> i64 {
    MIGRATIONS.len() as i64
}

/// The database's schema version: 0 when agent-comms never used it.
pub fn version(client: &mut impl GenericClient, target: &Target) -> Result<i64, StoreError> {
    let exists: bool = client
        .query_one("SELECT to_regclass('agent_comms.meta') IS NOT NULL", &[])
        .map_err(|e| target.error(e))?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let row = client
        .query_one("SELECT version FROM agent_comms.meta", &[])
        .map_err(|e| target.error(e))?;
    Ok(row.get(0))
}

/// Refuses a database that is newer than this build, or whose schema
/// another role owns; applies the migrations it lacks.
pub fn migrate(client: &mut Client, target: &Target) -> Result<(), StoreError> {
    let found = version(client, target)?;
    check_version(found, target)?;
    if found == latest() {
        return check_owner(client, target);
    }
    // A session lock taken before the transaction starts: a transaction
    // that began before another host's migration committed may still look
    // its catalog up from before it (and find no tables it then creates).
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .map_err(|e| target.error(e))?;
    let migrated = migrate_locked(client, target);
    let unlocked = client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]);
    migrated?;
    unlocked.map_err(|e| target.error(e))?;
    check_owner(client, target)
}

/// [`migrate`] under the migration lock, in one transaction.
fn migrate_locked(client: &mut Client, target: &Target) -> Result<(), StoreError> {
    let mut tx = client.transaction().map_err(|e| target.error(e))?;
    // Under the lock: another host may have migrated meanwhile.
    let found = version(&mut tx, target)?;
    check_version(found, target)?;
    if found == 0 {
        tx.batch_execute(
            "CREATE SCHEMA IF NOT EXISTS agent_comms; \
             REVOKE ALL ON SCHEMA agent_comms FROM PUBLIC; \
             CREATE TABLE agent_comms.meta (version BIGINT NOT NULL); \
             INSERT INTO agent_comms.meta VALUES (0);",
        )
        .map_err(|e| target.error(e))?;
    }
    for (index, script) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let next = index as i64 + 1;
        tx.batch_execute(script)
            .and_then(|()| {
                tx.execute("UPDATE agent_comms.meta SET version = $1", &[&next])
                    .map(drop)
            })
            .map_err(|e| StoreError::Postgres {
                url: target.shown().to_owned(),
                detail: format!(
                    "applying schema migration {next} failed ({e}); nothing was changed; report this as a bug"
                ),
            })?;
    }
    tx.commit().map_err(|e| target.error(e))
}

fn check_version(found: i64, target: &Target) -> Result<(), StoreError> {
    if found > latest() {
        return Err(StoreError::DatabaseTooNew {
            url: target.shown().to_owned(),
            found,
            known: latest(),
        });
    }
    Ok(())
}

/// The schema must be the connecting role's: whoever owns it can read
/// every message and rewrite every delivery.
fn check_owner(client: &mut Client, target: &Target) -> Result<(), StoreError> {
    let row = client
        .query_one(
            "SELECT pg_get_userbyid(n.nspowner)::text, current_user::text, \
                    has_schema_privilege('public', n.oid, 'USAGE') \
             FROM pg_namespace n WHERE n.nspname = 'agent_comms'",
            &[],
        )
        .map_err(|e| target.error(e))?;
    let (owner, me, public): (String, String, bool) = (row.get(0), row.get(1), row.get(2));
    if owner != me {
        return Err(StoreError::NotOurs {
            url: target.shown().to_owned(),
            detail: format!(
                "its schema agent_comms belongs to role {owner}, not to {me}; connect as {owner}, or give each user a database of their own"
            ),
        });
    }
    if public {
        return Err(StoreError::NotOurs {
            url: target.shown().to_owned(),
            detail: format!(
                "every role may use its schema agent_comms; run: REVOKE ALL ON SCHEMA agent_comms FROM PUBLIC (as {owner})"
            ),
        });
    }
    Ok(())
}
