//! [`PgStore`]: the [`Store`] in a PostgreSQL database, which several hosts
//! share as one control plane.
//!
//! The same semantics as [`super::SqliteStore`], transaction for
//! transaction: every method is one transaction (most are one statement).
//! Where SQLite serialises writers with `BEGIN IMMEDIATE`, this store locks
//! what it changes: a lease takes its agent's queue with a
//! transaction-scoped advisory lock tried without waiting — the equivalent
//! of `SKIP LOCKED` for a queue that must stay in order — so two hosts never
//! lease one message, and a host that finds the queue taken gets nothing
//! now and is woken when the batch ends.
//!
//! Hosts learn of changes through `LISTEN/NOTIFY` ([`follow`]): every
//! committed change to a message notifies the channel `agent_comms` with
//! the recipient's id, so an inbox on another host delivers at once and
//! `message list --follow` anywhere sees it.
//!
//! Clocks: leases and heartbeats are compared on one clock, the database's.
//! [`Store::now`] is this host's clock corrected by the offset measured
//! against the server when the store was opened, so a host whose clock is
//! off neither expires another's lease early nor keeps a dead runtime
//! ONLINE; `doctor` reports an offset large enough to matter.

mod conn;
mod copy;
mod follow;
mod inspect;
mod schema;
mod target;

use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use postgres::{GenericClient, Row};

use self::conn::Conn;
pub use self::inspect::Peek;
pub use self::target::{is_postgres_url, without_password, Target};
use super::{new_invocation_id, ATTEMPT_COLS, INVOCATION_COLS, RUNTIME_COLS};
use super::{
    Agent, Attempt, AttemptResult, Evidence, Follow, Invocation, InvocationFilter,
    InvocationStatus, NewInvocation, RuntimeRecord, Store, StoreError, MAX_FAILED_ATTEMPTS,
};
use crate::time::unix_millis;

/// The channel every change to a message is announced on; the payload is
/// the recipient's id.
const CHANNEL: &str = "agent_comms";

/// This build's schema version for PostgreSQL databases.
pub fn latest_schema_version() -> i64 {
    schema::latest()
}

/// A host that used the database: what doctor compares.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HostSeen {
    pub id: String,
    pub name: String,
    /// The agent-comms version it ran.
    pub version: String,
    /// The schema version that build knows.
    pub schema: i64,
    /// Its clock minus the database's, when it last opened the store.
    pub skew_ms: i64,
    /// When, on the database's clock.
    pub seen: u64,
}

/// Who opens the store: recorded in `agent_comms.hosts` for doctor.
#[derive(Debug, Clone)]
pub struct Opener {
    pub host: String,
    pub name: String,
    pub version: String,
}

/// The [`Store`] in a PostgreSQL database.
pub struct PgStore {
    conn: Conn,
    /// The database's clock minus this host's, in ms.
    offset_ms: i64,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &self.conn.target().shown())
            .finish_non_exhaustive()
    }
}

/// Databases this process has already checked, migrated and recorded its
/// host in, with the clock offset measured then.
static READY: OnceLock<Mutex<HashMap<String, i64>>> = OnceLock::new();

impl PgStore {
    /// Connects (or takes an idle connection of this process); the first
    /// time in a process, also migrates an empty database, refuses a newer
    /// or foreign one, measures the clock offset and, given an `opener`,
    /// records the host.
    pub fn open(target: Target, opener: Option<&Opener>) -> Result<PgStore, StoreError> {
        let key = target.key();
        let conn = Conn::new(target);
        let ready = READY.get_or_init(Default::default);
        let known = ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .copied();
        if let Some(offset_ms) = known {
            return Ok(PgStore { conn, offset_ms });
        }
        // First open of this database in this process: the rest of the
        // process's opens (a tool call each, in the MCP server) reuse it.
        let t = conn.target().clone();
        conn.run(move |c| schema::migrate(c, &t))?;
        let store = PgStore {
            offset_ms: measure_offset(&conn)?,
            conn,
        };
        if let Some(opener) = opener {
            store.record_host(opener)?;
        }
        ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, store.offset_ms);
        Ok(store)
    }

    pub fn target(&self) -> &Target {
        self.conn.target()
    }

    /// The schema version the database holds.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        let t = self.target().clone();
        self.conn.run(move |c| schema::version(c, &t))
    }

    /// This host's clock minus the database's, in ms, as measured on open.
    pub fn skew_ms(&self) -> i64 {
        -self.offset_ms
    }

    /// Times one round trip to the server.
    pub fn ping(&self) -> Result<std::time::Duration, StoreError> {
        let t = self.target().clone();
        let started = Instant::now();
        self.conn
            .run(move |c| c.simple_query("SELECT 1").map(drop).map_err(|e| t.error(e)))?;
        Ok(started.elapsed())
    }

    /// Every host that has used the database, by id.
    pub fn hosts(&self) -> Result<Vec<HostSeen>, StoreError> {
        self.query(
            "SELECT id, name, version, schema, skew_ms, seen FROM hosts ORDER BY id COLLATE \"C\"",
            vec![],
            |r| {
                Ok(HostSeen {
                    id: r.get("id"),
                    name: r.get("name"),
                    version: r.get("version"),
                    schema: r.get("schema"),
                    skew_ms: r.get("skew_ms"),
                    seen: r.get::<_, i64>("seen") as u64,
                })
            },
        )
    }

    fn record_host(&self, o: &Opener) -> Result<(), StoreError> {
        let (id, name, version) = (o.host.clone(), o.name.clone(), o.version.clone());
        let (schema, skew, seen) = (schema::latest(), self.skew_ms(), self.now() as i64);
        self.exec(move |c| {
            c.execute(
                "INSERT INTO hosts (id, name, version, schema, skew_ms, seen) \
                 VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (id) DO UPDATE SET name = excluded.name, \
                   version = excluded.version, schema = excluded.schema, \
                   skew_ms = excluded.skew_ms, seen = excluded.seen",
                &[&id, &name, &version, &schema, &skew, &seen],
            )
        })
        .map(drop)
    }

    /// Runs `f` on the connection, its driver errors told as store errors.
    fn exec<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut postgres::Client) -> Result<T, postgres::Error> + Send + 'static,
    ) -> Result<T, StoreError> {
        let t = self.target().clone();
        self.conn.run(move |c| f(c).map_err(|e| t.error(e)))
    }

    /// Rows of `sql` with `params`, each made by `row`.
    fn query<T: Send + 'static>(
        &self,
        sql: &'static str,
        params: Vec<Param>,
        row: fn(&Row) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let t = self.target().clone();
        self.conn.run(move |c| {
            let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                params.iter().map(|p| p.as_ref() as _).collect();
            let rows = c.query(sql, &refs).map_err(|e| t.error(e))?;
            rows.iter().map(row).collect()
        })
    }

    /// The one row of `sql`, if any.
    fn query_opt<T: Send + 'static>(
        &self,
        sql: &'static str,
        params: Vec<Param>,
        row: fn(&Row) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        Ok(self.query(sql, params, row)?.into_iter().next())
    }

    /// Runs `f` in one transaction, committed when it returns Ok.
    fn transaction<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut postgres::Transaction<'_>) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let t = self.target().clone();
        self.conn.run(move |c| {
            let mut tx = c.transaction().map_err(|e| t.error(e))?;
            let out = f(&mut tx).map_err(|e| match e {
                StoreError::Driver(e) => t.error(e),
                other => other,
            })?;
            tx.commit().map_err(|e| t.error(e))?;
            Ok(out)
        })
    }
}

/// The database's clock minus this host's, in ms, measured by one query.
fn measure_offset(conn: &Conn) -> Result<i64, StoreError> {
    let t = conn.target().clone();
    let (db_now, host_now) = conn.run(move |c| {
        let before = unix_millis();
        let started = Instant::now();
        let db: i64 = c
            .query_one(
                "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
                &[],
            )
            .map_err(|e| t.error(e))?
            .get(0);
        // The server read its clock about halfway through the round trip.
        let half = started.elapsed().as_millis() as u64 / 2;
        Ok((db, before + half))
    })?;
    Ok(db_now - host_now as i64)
}

type Param = Box<dyn postgres::types::ToSql + Send + Sync>;

fn p<T: postgres::types::ToSql + Send + Sync + 'static>(v: T) -> Param {
    Box::new(v)
}

fn ms(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

// ---- rows ----------------------------------------------------------------

/// A text column holding one of an enum's values.
fn text<T: FromStr>(r: &Row, col: &str) -> Result<T, StoreError>
where
    T::Err: std::fmt::Display,
{
    let s: String = r.get(col);
    s.parse()
        .map_err(|e: T::Err| StoreError::BadRow(format!("column {col}: {e}")))
}

fn opt_ms(r: &Row, col: &str) -> Option<u64> {
    r.get::<_, Option<i64>>(col).map(|v| v as u64)
}

fn agent_row(r: &Row) -> Result<Agent, StoreError> {
    Ok(Agent {
        id: r.get("id"),
        created: r.get::<_, i64>("created") as u64,
    })
}

fn runtime_row(r: &Row) -> Result<RuntimeRecord, StoreError> {
    Ok(RuntimeRecord {
        id: r.get("id"),
        agent: r.get("agent"),
        kind: r.get("kind"),
        connector: r.get("connector"),
        max_concurrent: r.get::<_, i64>("max_concurrent") as u32,
        status: text(r, "status")?,
        host: r.get("host"),
        endpoint: r.get("endpoint"),
        endpoint_id: r.get("endpoint_id"),
        pid: r.get::<_, Option<i64>>("pid").map(|v| v as u32),
        last_heartbeat: opt_ms(r, "last_heartbeat"),
        heartbeat_ms: r.get::<_, i64>("heartbeat_ms") as u64,
        provider: r.get("provider"),
        conversation_id: r.get("conversation_id"),
        status_reason: r.get("status_reason"),
        updated: r.get::<_, i64>("updated") as u64,
    })
}

fn invocation_row(r: &Row) -> Result<Invocation, StoreError> {
    Ok(Invocation {
        id: r.get("id"),
        seq: r.get("seq"),
        from: r.get("from_agent"),
        to: r.get("to_agent"),
        body: r.get("body"),
        status: text(r, "status")?,
        created: r.get::<_, i64>("created") as u64,
        delivered: opt_ms(r, "delivered"),
        reason: r.get("reason"),
        attempts: r.get::<_, i64>("attempts") as u32,
    })
}

fn attempt_row(r: &Row) -> Result<Attempt, StoreError> {
    let style: Option<String> = r.get("ev_style");
    let evidence = style.map(|style| Evidence {
        echoed: opt_ms(r, "ev_echoed").unwrap_or_default(),
        entered: opt_ms(r, "ev_entered").unwrap_or_default(),
        submitted: opt_ms(r, "ev_submitted").unwrap_or_default(),
        enter_presses: r
            .get::<_, Option<i64>>("ev_enter_presses")
            .unwrap_or_default() as u32,
        style,
        stop_reason: r.get("ev_stop_reason"),
    });
    Ok(Attempt {
        id: r.get("id"),
        invocation: r.get("invocation"),
        runtime: r.get("runtime"),
        endpoint_id: r.get("endpoint_id"),
        started: r.get::<_, i64>("started") as u64,
        lease_until: r.get::<_, i64>("lease_until") as u64,
        finished: opt_ms(r, "finished"),
        outcome: text(r, "outcome")?,
        reason: r.get("reason"),
        evidence,
        host: r.get("host"),
    })
}

/// Tells the followers that messages to `agents` changed; delivered when
/// the transaction commits, and not at all if it rolls back.
fn notify(
    tx: &mut impl GenericClient,
    agents: impl IntoIterator<Item = String>,
) -> Result<(), postgres::Error> {
    let agents: Vec<String> = agents
        .into_iter()
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    if !agents.is_empty() {
        tx.execute(
            "SELECT pg_notify($1, a) FROM unnest($2::text[]) AS a",
            &[&CHANNEL, &agents],
        )?;
    }
    Ok(())
}

/// [`Store::finish_attempts`] for one attempt, inside its transaction; the
/// recipient when it was still IN_PROGRESS.
fn finish_one(
    tx: &mut postgres::Transaction<'_>,
    attempt: i64,
    result: &AttemptResult,
    now: i64,
) -> Result<Option<String>, postgres::Error> {
    let late = matches!(result, AttemptResult::Delivered(_));
    let Some(row) = tx.query_opt(
        "SELECT a.invocation, i.to_agent FROM attempts a JOIN invocations i ON i.id = a.invocation \
         WHERE a.id = $1 AND (a.outcome = 'IN_PROGRESS' \
           OR ($2 AND a.outcome = 'ABANDONED' AND i.status = 'PENDING')) \
         FOR UPDATE",
        &[&attempt, &late],
    )?
    else {
        return Ok(None);
    };
    let (invocation, to): (String, String) = (row.get(0), row.get(1));
    match result {
        AttemptResult::Delivered(ev) => {
            tx.execute(
                "UPDATE attempts SET outcome = 'DELIVERED', finished = $2, reason = NULL, \
                   ev_echoed = $3, ev_entered = $4, ev_submitted = $5, \
                   ev_enter_presses = $6, ev_style = $7, ev_stop_reason = $8 \
                 WHERE id = $1",
                &[
                    &attempt,
                    &now,
                    &ms(ev.echoed),
                    &ms(ev.entered),
                    &ms(ev.submitted),
                    &i64::from(ev.enter_presses),
                    &ev.style,
                    &ev.stop_reason,
                ],
            )?;
            tx.execute(
                "UPDATE invocations SET status = 'DELIVERED', delivered = $2, reason = NULL \
                 WHERE id = $1",
                &[&invocation, &ms(ev.submitted)],
            )?;
        }
        AttemptResult::Failed(reason) | AttemptResult::Undeliverable(reason) => {
            tx.execute(
                "UPDATE attempts SET outcome = 'FAILED', finished = $2, reason = $3 WHERE id = $1",
                &[&attempt, &now, reason],
            )?;
            let failed: i64 = tx
                .query_one(
                    "SELECT count(*) FROM attempts WHERE invocation = $1 AND outcome = 'FAILED'",
                    &[&invocation],
                )?
                .get(0);
            let (status, reason) = match result {
                AttemptResult::Failed(_) if failed < i64::from(MAX_FAILED_ATTEMPTS) => {
                    (InvocationStatus::Pending, reason.clone())
                }
                AttemptResult::Failed(_) => (
                    InvocationStatus::Failed,
                    format!("gave up after {failed} failed attempts; the last: {reason}"),
                ),
                _ => (InvocationStatus::Failed, reason.clone()),
            };
            tx.execute(
                "UPDATE invocations SET status = $2, reason = $3 \
                 WHERE id = $1 AND status = 'DELIVERING'",
                &[&invocation, &status.as_str(), &reason],
            )?;
        }
    }
    Ok(Some(to))
}

impl Store for PgStore {
    fn ensure_agent(&self, id: &str, now: u64) -> Result<Agent, StoreError> {
        // DO UPDATE, not DO NOTHING: it waits for a concurrent insert of the
        // same agent and returns that row (DO NOTHING would return none, and
        // the statement's snapshot, taken before the wait, could not see it).
        let sql = "INSERT INTO agents (id, created) VALUES ($1, $2) \
                   ON CONFLICT (id) DO UPDATE SET id = agents.id RETURNING id, created";
        self.query_opt(sql, vec![p(id.to_owned()), p(ms(now))], agent_row)?
            .ok_or_else(|| StoreError::BadRow(format!("agent {id} was neither inserted nor found")))
    }

    fn agent(&self, id: &str) -> Result<Option<Agent>, StoreError> {
        self.query_opt(
            "SELECT id, created FROM agents WHERE id = $1",
            vec![p(id.to_owned())],
            agent_row,
        )
    }

    fn agents(&self) -> Result<Vec<Agent>, StoreError> {
        self.query(
            "SELECT id, created FROM agents ORDER BY id COLLATE \"C\"",
            vec![],
            agent_row,
        )
    }

    fn runtime(&self, id: &str) -> Result<Option<RuntimeRecord>, StoreError> {
        const SQL: &str =
            const_format::concatcp!("SELECT ", RUNTIME_COLS, " FROM runtimes WHERE id = $1");
        self.query_opt(SQL, vec![p(id.to_owned())], runtime_row)
    }

    fn runtimes(&self) -> Result<Vec<RuntimeRecord>, StoreError> {
        const SQL: &str = const_format::concatcp!(
            "SELECT ",
            RUNTIME_COLS,
            " FROM runtimes ORDER BY id COLLATE \"C\""
        );
        self.query(SQL, vec![], runtime_row)
    }

    fn save_runtime(&self, r: &RuntimeRecord) -> Result<(), StoreError> {
        const SQL: &str = const_format::concatcp!(
            "INSERT INTO runtimes (",
            RUNTIME_COLS,
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
             ON CONFLICT (id) DO UPDATE SET \
               agent = excluded.agent, kind = excluded.kind, connector = excluded.connector, \
               max_concurrent = excluded.max_concurrent, status = excluded.status, \
               host = excluded.host, endpoint = excluded.endpoint, \
               endpoint_id = excluded.endpoint_id, pid = excluded.pid, \
               last_heartbeat = excluded.last_heartbeat, heartbeat_ms = excluded.heartbeat_ms, \
               provider = excluded.provider, conversation_id = excluded.conversation_id, \
               status_reason = excluded.status_reason, updated = excluded.updated"
        );
        let r = r.clone();
        self.exec(move |c| {
            let mut tx = c.transaction()?;
            tx.execute(
                "INSERT INTO agents (id, created) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
                &[&r.agent, &ms(r.updated)],
            )?;
            tx.execute(
                SQL,
                &[
                    &r.id,
                    &r.agent,
                    &r.kind,
                    &r.connector,
                    &i64::from(r.max_concurrent),
                    &r.status.as_str(),
                    &r.host,
                    &r.endpoint,
                    &r.endpoint_id,
                    &r.pid.map(i64::from),
                    &r.last_heartbeat.map(ms),
                    &ms(r.heartbeat_ms),
                    &r.provider,
                    &r.conversation_id,
                    &r.status_reason,
                    &ms(r.updated),
                ],
            )?;
            tx.commit()
        })
    }

    fn remove_runtime(&self, seen: &RuntimeRecord) -> Result<bool, StoreError> {
        let (id, status, endpoint, beat) = (
            seen.id.clone(),
            seen.status.as_str(),
            seen.endpoint_id.clone(),
            seen.last_heartbeat.map(ms),
        );
        self.exec(move |c| {
            c.execute(
                "DELETE FROM runtimes WHERE id = $1 AND status = $2 \
                   AND endpoint_id IS NOT DISTINCT FROM $3 \
                   AND last_heartbeat IS NOT DISTINCT FROM $4",
                &[&id, &status, &endpoint, &beat],
            )
        })
        .map(|n| n > 0)
    }

    fn heartbeat(
        &self,
        runtime: &str,
        endpoint_id: &str,
        now: u64,
        lease_until: u64,
    ) -> Result<bool, StoreError> {
        let (runtime, endpoint) = (runtime.to_owned(), endpoint_id.to_owned());
        self.exec(move |c| {
            let row = c.query_one(
                "WITH beat AS (UPDATE runtimes SET last_heartbeat = $3 \
                   WHERE id = $1 AND endpoint_id = $2 RETURNING id), \
                 leases AS (UPDATE attempts SET lease_until = GREATEST(lease_until, $4) \
                   WHERE runtime = $1 AND endpoint_id = $2 AND outcome = 'IN_PROGRESS' \
                     AND EXISTS (SELECT 1 FROM beat)) \
                 SELECT count(*) FROM beat",
                &[&runtime, &endpoint, &ms(now), &ms(lease_until)],
            )?;
            Ok(row.get::<_, i64>(0) > 0)
        })
    }

    fn bind_conversation(
        &self,
        runtime: &str,
        conversation: Option<&str>,
        now: u64,
    ) -> Result<bool, StoreError> {
        let (runtime, conversation) = (runtime.to_owned(), conversation.map(str::to_owned));
        self.exec(move |c| {
            c.execute(
                "UPDATE runtimes SET conversation_id = $2, updated = $3 WHERE id = $1",
                &[&runtime, &conversation, &ms(now)],
            )
        })
        .map(|n| n > 0)
    }

    fn set_offline(
        &self,
        runtime: &str,
        endpoint_id: &str,
        reason: &str,
        now: u64,
    ) -> Result<bool, StoreError> {
        let (runtime, endpoint, reason) = (
            runtime.to_owned(),
            endpoint_id.to_owned(),
            reason.to_owned(),
        );
        self.exec(move |c| {
            c.execute(
                "UPDATE runtimes SET status = 'OFFLINE', status_reason = $3, endpoint = NULL, \
                   endpoint_id = NULL, pid = NULL, updated = $4 \
                 WHERE id = $1 AND endpoint_id = $2",
                &[&runtime, &endpoint, &reason, &ms(now)],
            )
        })
        .map(|n| n > 0)
    }

    fn insert_invocation(&self, new: &NewInvocation<'_>) -> Result<Invocation, StoreError> {
        const SQL: &str = const_format::concatcp!(
            "INSERT INTO invocations (id, from_agent, to_agent, body, status, created, reason) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING RETURNING ",
            INVOCATION_COLS
        );
        let (from, to, body, status, reason, now) = (
            new.from.to_owned(),
            new.to.to_owned(),
            new.body.to_owned(),
            new.status.as_str(),
            new.reason.map(str::to_owned),
            ms(new.now),
        );
        self.transaction(move |tx| {
            for _ in 0..5 {
                let id = new_invocation_id();
                let row = tx
                    .query_opt(SQL, &[&id, &from, &to, &body, &status, &now, &reason])
                    .map_err(pg)?;
                if let Some(row) = row {
                    notify(tx, [to.clone()]).map_err(pg)?;
                    return invocation_row(&row);
                }
            }
            Err(StoreError::BadRow(
                "five fresh message ids were all taken; report this as a bug".into(),
            ))
        })
    }

    fn invocation(&self, id: &str) -> Result<Option<Invocation>, StoreError> {
        const SQL: &str = const_format::concatcp!(
            "SELECT ",
            INVOCATION_COLS,
            " FROM invocations WHERE id = $1"
        );
        self.query_opt(SQL, vec![p(id.to_owned())], invocation_row)
    }

    fn invocations(&self, filter: &InvocationFilter<'_>) -> Result<Vec<Invocation>, StoreError> {
        const SQL: &str = const_format::concatcp!(
            "SELECT ",
            INVOCATION_COLS,
            " FROM invocations \
             WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR to_agent = $2) \
               AND ($3::text IS NULL OR from_agent = $3) ORDER BY seq"
        );
        let params = vec![
            p(filter.status.map(|s| s.as_str().to_owned())),
            p(filter.to.map(str::to_owned)),
            p(filter.from.map(str::to_owned)),
        ];
        self.query(SQL, params, invocation_row)
    }

    fn set_invocation_status(
        &self,
        id: &str,
        status: InvocationStatus,
        reason: Option<&str>,
        now: u64,
    ) -> Result<bool, StoreError> {
        let (id, reason) = (id.to_owned(), reason.map(str::to_owned));
        self.transaction(move |tx| {
            let to = tx
                .query_opt(
                    "UPDATE invocations SET status = $2, reason = $3, \
                       delivered = CASE WHEN $2 = 'DELIVERED' THEN coalesce(delivered, $4) \
                                        ELSE delivered END \
                     WHERE id = $1 RETURNING to_agent",
                    &[&id, &status.as_str(), &reason, &ms(now)],
                )
                .map_err(pg)?;
            let Some(to) = to else { return Ok(false) };
            notify(tx, [to.get(0)]).map_err(pg)?;
            Ok(true)
        })
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
        const PICK: &str = const_format::concatcp!(
            "UPDATE invocations SET status = 'DELIVERING', attempts = attempts + 1 \
             WHERE seq IN (SELECT seq FROM invocations WHERE to_agent = $1 AND status = 'PENDING' \
                           ORDER BY seq LIMIT $2 FOR UPDATE) \
             RETURNING ",
            INVOCATION_COLS
        );
        const ATTEMPTS: &str = const_format::concatcp!(
            "INSERT INTO attempts (invocation, runtime, endpoint_id, started, lease_until, outcome, host) \
             SELECT inv, $2, $3, $4, $5, 'IN_PROGRESS', (SELECT host FROM runtimes WHERE id = $2) \
             FROM unnest($1::text[]) WITH ORDINALITY AS t(inv, n) ORDER BY n \
             RETURNING ",
            ATTEMPT_COLS
        );
        let (agent, runtime, endpoint) =
            (agent.to_owned(), runtime.to_owned(), endpoint_id.to_owned());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.transaction(move |tx| {
            // The agent's queue, for this transaction; held elsewhere means
            // another runtime is leasing from it right now.
            let ours: bool = tx
                .query_one(
                    "SELECT pg_try_advisory_xact_lock(hashtextextended('agent-comms queue ' || $1, 0))",
                    &[&agent],
                )
                .map_err(pg)?
                .get(0);
            let busy = tx
                .query_opt(
                    "SELECT 1 FROM invocations WHERE to_agent = $1 AND status = 'DELIVERING' LIMIT 1",
                    &[&agent],
                )
                .map_err(pg)?
                .is_some();
            if !ours || busy {
                return Ok(Vec::new());
            }
            let mut invocations = tx
                .query(PICK, &[&agent, &limit])
                .map_err(pg)?
                .iter()
                .map(invocation_row)
                .collect::<Result<Vec<_>, _>>()?;
            if invocations.is_empty() {
                return Ok(Vec::new());
            }
            invocations.sort_by_key(|i| i.seq);
            let ids: Vec<String> = invocations.iter().map(|i| i.id.clone()).collect();
            let mut attempts = tx
                .query(
                    ATTEMPTS,
                    &[&ids, &runtime, &endpoint, &ms(now), &ms(lease_until)],
                )
                .map_err(pg)?
                .iter()
                .map(attempt_row)
                .collect::<Result<Vec<_>, _>>()?;
            notify(tx, [agent.clone()]).map_err(pg)?;
            let leased = invocations
                .into_iter()
                .filter_map(|inv| {
                    let at = attempts.iter().position(|a| a.invocation == inv.id)?;
                    Some((inv, attempts.swap_remove(at)))
                })
                .collect();
            Ok(leased)
        })
    }

    fn finish_attempts(
        &self,
        attempts: &[i64],
        result: &AttemptResult,
        now: u64,
    ) -> Result<usize, StoreError> {
        let (attempts, result) = (attempts.to_vec(), result.clone());
        self.transaction(move |tx| {
            let mut recipients = Vec::new();
            for attempt in attempts {
                if let Some(to) = finish_one(tx, attempt, &result, ms(now)).map_err(pg)? {
                    recipients.push(to);
                }
            }
            let finished = recipients.len();
            notify(tx, recipients).map_err(pg)?;
            Ok(finished)
        })
    }

    fn release_attempts(
        &self,
        runtime: Option<&str>,
        now: u64,
        reason: &str,
    ) -> Result<Vec<Attempt>, StoreError> {
        const SQL: &str = const_format::concatcp!(
            "WITH released AS (UPDATE attempts SET outcome = 'ABANDONED', finished = $1, reason = $3 \
               WHERE outcome = 'IN_PROGRESS' AND (lease_until < $1 OR runtime = $2) \
               RETURNING *), \
             requeued AS (UPDATE invocations SET status = 'PENDING', reason = $3 \
               WHERE id IN (SELECT invocation FROM released) AND status = 'DELIVERING' \
               RETURNING to_agent) \
             SELECT ",
            ATTEMPT_COLS,
            ", (SELECT array_agg(DISTINCT to_agent) FROM requeued) AS agents \
             FROM released ORDER BY id"
        );
        let (runtime, reason) = (runtime.map(str::to_owned), reason.to_owned());
        self.transaction(move |tx| {
            let rows = tx.query(SQL, &[&ms(now), &runtime, &reason]).map_err(pg)?;
            let agents: Vec<String> = rows
                .first()
                .and_then(|r| r.get::<_, Option<Vec<String>>>("agents"))
                .unwrap_or_default();
            notify(tx, agents).map_err(pg)?;
            rows.iter().map(attempt_row).collect()
        })
    }

    fn fail_waiting(&self, id: &str, reason: &str) -> Result<bool, StoreError> {
        let (id, reason) = (id.to_owned(), reason.to_owned());
        self.transaction(move |tx| {
            let to = tx
                .query_opt(
                    "UPDATE invocations SET status = 'FAILED', reason = $2 \
                     WHERE id = $1 AND status IN ('PENDING', 'UNAVAILABLE', 'FAILED') \
                     RETURNING to_agent",
                    &[&id, &reason],
                )
                .map_err(pg)?;
            let Some(to) = to else { return Ok(false) };
            notify(tx, [to.get(0)]).map_err(pg)?;
            Ok(true)
        })
    }

    fn attempts(&self, invocation: &str) -> Result<Vec<Attempt>, StoreError> {
        const SQL: &str = const_format::concatcp!(
            "SELECT ",
            ATTEMPT_COLS,
            " FROM attempts WHERE invocation = $1 ORDER BY id"
        );
        self.query(SQL, vec![p(invocation.to_owned())], attempt_row)
    }

    fn stale_attempts(&self, now: u64) -> Result<Vec<Attempt>, StoreError> {
        const SQL: &str = const_format::concatcp!(
            "SELECT ",
            ATTEMPT_COLS,
            " FROM attempts WHERE outcome = 'IN_PROGRESS' AND lease_until < $1 ORDER BY id"
        );
        self.query(SQL, vec![p(ms(now))], attempt_row)
    }

    fn now(&self) -> u64 {
        (unix_millis() as i64 + self.offset_ms).max(0) as u64
    }

    fn follow(&self, to: Option<&str>) -> Result<Box<dyn Follow>, StoreError> {
        Ok(Box::new(follow::PgFollower::start(
            self.target().clone(),
            CHANNEL,
            to.map(str::to_owned),
        )))
    }

    fn backend(&self) -> super::Backend<'_> {
        super::Backend::Postgres(self)
    }
}

/// A driver error inside a transaction closure, which does not hold the
/// target: [`PgStore::transaction`] tells it with the URL.
fn pg(e: postgres::Error) -> StoreError {
    StoreError::Driver(e)
}

/// The store suite against a real server: a private PostgreSQL per test
/// process, a fresh database and role per test.
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn fresh() -> (
        agent_comms_testing::postgres::Database,
        impl Fn() -> Box<dyn Store> + Sync,
    ) {
        let server = agent_comms_testing::postgres::server().unwrap_or_else(|e| panic!("{e}"));
        let db = server.fresh_database().unwrap_or_else(|e| panic!("{e}"));
        let url = db.url("127.0.0.1");
        let open = move || -> Box<dyn Store> {
            Box::new(PgStore::open(Target::parse(&url, None).unwrap(), None).unwrap())
        };
        (db, open)
    }

    crate::store::suite::store_suite!(fresh());

    #[test]
    fn an_empty_database_is_migrated_once_and_a_newer_one_refused() {
        let (db, _open) = fresh();
        let store =
            PgStore::open(Target::parse(&db.url("127.0.0.1"), None).unwrap(), None).unwrap();
        assert_eq!(store.schema_version().unwrap(), schema::latest());
        store
            .conn
            .run(|c| {
                c.batch_execute("UPDATE agent_comms.meta SET version = version + 1")
                    .map_err(StoreError::Driver)
            })
            .unwrap();
        READY.get().unwrap().lock().unwrap().clear();
        let err = PgStore::open(Target::parse(&db.url("127.0.0.1"), None).unwrap(), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("upgrade agent-comms on this host"), "{err}");
        assert!(!err.contains(db.password()), "{err}");
    }

    #[test]
    fn hosts_opening_an_empty_database_at_once_migrate_it_once() {
        let (db, _open) = fresh();
        let url = db.url("127.0.0.1");
        // Each as its own process would: a connection, and a first look, of
        // its own (the process-wide note that it is migrated is skipped).
        std::thread::scope(|scope| {
            let opens: Vec<_> = (0..6)
                .map(|_| {
                    scope.spawn(|| {
                        let target = Target::parse(&url, None).unwrap();
                        let conn = Conn::new(target.clone());
                        conn.run(move |c| schema::migrate(c, &target))
                    })
                })
                .collect();
            for open in opens {
                open.join().unwrap().unwrap();
            }
        });
        let store = PgStore::open(Target::parse(&url, None).unwrap(), None).unwrap();
        assert_eq!(store.schema_version().unwrap(), schema::latest());
    }

    #[test]
    fn a_wrong_password_and_a_dead_server_are_one_clear_line_each() {
        let (db, _open) = fresh();
        let wrong = db
            .url("127.0.0.1")
            .replace(db.password(), "not-the-password");
        let err = PgStore::open(Target::parse(&wrong, None).unwrap(), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("refused the login"), "{err}");
        assert!(!err.contains("not-the-password"), "{err}");
        // Nothing listens on port 1.
        let nowhere = format!("postgres://{}:x@127.0.0.1:1/{}", db.user(), db.name());
        let started = Instant::now();
        let err = PgStore::open(Target::parse(&nowhere, None).unwrap(), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is unreachable"), "{err}");
        assert!(!err.contains('\n'), "{err}");
        assert!(started.elapsed() < conn::CALL_TIMEOUT);
    }

    #[test]
    fn tls_when_the_url_asks_verified_against_its_root() {
        let server = agent_comms_testing::postgres::server().unwrap();
        let (db, _open) = fresh();
        let ca = server.ca_cert();
        let tls = format!(
            "{}?sslmode=require&sslrootcert={}",
            db.url("127.0.0.1"),
            ca.display()
        );
        let store = PgStore::open(Target::parse(&tls, None).unwrap(), None).unwrap();
        assert!(encrypted(&store), "sslmode=require made a plain connection");
        // Without the URL asking, no TLS.
        let plain =
            PgStore::open(Target::parse(&db.url("127.0.0.1"), None).unwrap(), None).unwrap();
        assert!(!encrypted(&plain));
        // A server whose certificate no trusted root signed is refused:
        // here the system's roots, which never signed the test CA's.
        let unverified = format!("{}?sslmode=require", db.url("127.0.0.1"));
        let err = PgStore::open(Target::parse(&unverified, None).unwrap(), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no root it trusts signed"), "{err}");
        assert!(err.contains("sslrootcert=FILE"), "{err}");
        assert!(!err.contains(db.password()), "{err}");
    }

    /// Whether the store's connection is TLS, as the server sees it.
    fn encrypted(store: &PgStore) -> bool {
        store
            .conn
            .run(|c| {
                c.query_one(
                    "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                    &[],
                )
                .map(|r| r.get(0))
                .map_err(StoreError::Driver)
            })
            .unwrap()
    }

    #[test]
    fn another_roles_schema_is_not_ours() {
        let (db, open) = fresh();
        drop(open());
        let (other, _) = fresh();
        // The first role's schema, reached by a second role made its owner's
        // peer: refused, naming the owner.
        let server = agent_comms_testing::postgres::server().unwrap();
        let psql = server.bin("psql");
        let grant = std::process::Command::new(psql)
            .args([&server.admin_url().replace("/postgres", &format!("/{}", db.name())), "-c"])
            .arg(format!(
                "GRANT CONNECT ON DATABASE {} TO {}; GRANT USAGE, CREATE ON SCHEMA agent_comms TO {}; GRANT ALL ON ALL TABLES IN SCHEMA agent_comms TO {}",
                db.name(), other.user(), other.user(), other.user()
            ))
            .output()
            .unwrap();
        assert!(grant.status.success(), "{grant:?}");
        READY.get().unwrap().lock().unwrap().clear();
        let as_other = format!(
            "postgres://{}:{}@127.0.0.1:{}/{}",
            other.user(),
            other.password(),
            db.port(),
            db.name()
        );
        let err = PgStore::open(Target::parse(&as_other, None).unwrap(), None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("belongs to role {}", db.user())),
            "{err}"
        );
    }
}
