//! Every row of the database at once: [`PgStore::snapshot`], and
//! [`PgStore::copy_in`], which writes a [`Snapshot`] as it is — ids, seq
//! and attempt ids included — for `store migrate` (see
//! [`crate::store::copy`] for why).
//!
//! The copy is one transaction that first locks the four tables against
//! writers, so what it compares the snapshot with is what it replaces.
//! Rows go in as one `INSERT … SELECT FROM unnest(arrays)` per table and
//! [`CHUNK`] rows: a few statements, not one per row. The sequences then
//! continue after the highest copied `seq` and attempt id, so rows made
//! later sort after the copied ones.

use std::time::{Duration, Instant};

use postgres::{GenericClient, Row};

use super::conn::CALL_TIMEOUT;
use super::{
    agent_row, attempt_row, invocation_row, ms, notify, pg, runtime_row, PgStore, ATTEMPT_COLS,
    INVOCATION_COLS, RUNTIME_COLS,
};
use crate::store::copy::{CopyIn, Snapshot};
use crate::store::StoreError;

/// Rows per INSERT statement.
const CHUNK: usize = 2_000;
/// What the copy leaves of the store's bound on one call for the commit:
/// a copy that took longer is rolled back rather than committed after its
/// caller stopped waiting (and reported it unreachable).
const COMMIT_MARGIN: Duration = Duration::from_secs(2);

impl PgStore {
    /// Every row, in one transaction: agents and runtimes by id, messages
    /// by seq, attempts by id.
    pub fn snapshot(&self) -> Result<Snapshot, StoreError> {
        self.transaction(|tx| read(tx))
    }

    /// Writes `snapshot` in one transaction, unless the database already
    /// holds exactly it, or holds other rows and `force` is not given
    /// (then nothing is written). With `force`, the rows it holds are
    /// deleted first; the hosts that use it are kept.
    pub(crate) fn copy_in(&self, snapshot: Snapshot, force: bool) -> Result<CopyIn, StoreError> {
        let url = self.target().shown().to_owned();
        self.transaction(move |tx| {
            let started = Instant::now();
            tx.batch_execute(
                "LOCK TABLE agents, runtimes, invocations, attempts IN SHARE ROW EXCLUSIVE MODE",
            )
            .map_err(pg)?;
            let held = read(tx)?;
            if held == snapshot {
                return Ok(CopyIn::Same);
            }
            let replaced = match (held.is_empty(), force) {
                (true, _) => None,
                (false, false) => return Ok(CopyIn::Occupied(held.counts())),
                (false, true) => {
                    tx.batch_execute(
                        "DELETE FROM attempts; DELETE FROM invocations; \
                         DELETE FROM runtimes; DELETE FROM agents;",
                    )
                    .map_err(pg)?;
                    Some(held.counts())
                }
            };
            write(tx, &snapshot).map_err(pg)?;
            // Whoever follows the messages of an agent, in the old rows or
            // the new, reads them again.
            let recipients = held.invocations.iter().chain(&snapshot.invocations);
            notify(tx, recipients.map(|i| i.to.clone())).map_err(pg)?;
            let bound = CALL_TIMEOUT - COMMIT_MARGIN;
            if started.elapsed() > bound {
                return Err(StoreError::Postgres {
                    url,
                    detail: format!(
                        "the copy took longer than {} s, too close to the {} s a call to the store may take; nothing was copied",
                        bound.as_secs(),
                        CALL_TIMEOUT.as_secs()
                    ),
                });
            }
            Ok(CopyIn::Copied { replaced })
        })
    }
}

fn read(c: &mut impl GenericClient) -> Result<Snapshot, StoreError> {
    const RUNTIMES: &str = const_format::concatcp!("SELECT ", RUNTIME_COLS, " FROM runtimes");
    const INVOCATIONS: &str =
        const_format::concatcp!("SELECT ", INVOCATION_COLS, " FROM invocations");
    const ATTEMPTS: &str = const_format::concatcp!("SELECT ", ATTEMPT_COLS, " FROM attempts");
    let mut snapshot = Snapshot {
        agents: rows(c, "SELECT id, created FROM agents", agent_row)?,
        runtimes: rows(c, RUNTIMES, runtime_row)?,
        invocations: rows(c, INVOCATIONS, invocation_row)?,
        attempts: rows(c, ATTEMPTS, attempt_row)?,
    };
    // In Rust, not in SQL: the database's collation may order text ids
    // otherwise than SQLite's bytes.
    snapshot.sort();
    Ok(snapshot)
}

fn rows<T>(
    c: &mut impl GenericClient,
    sql: &str,
    row: fn(&Row) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    c.query(sql, &[]).map_err(pg)?.iter().map(row).collect()
}

/// Inserts every row of `s` as it is, then moves the sequences past them.
fn write(c: &mut impl GenericClient, s: &Snapshot) -> Result<(), postgres::Error> {
    write_agents(c, &s.agents)?;
    write_runtimes(c, &s.runtimes)?;
    write_invocations(c, &s.invocations)?;
    write_attempts(c, &s.attempts)?;
    c.batch_execute(
        "SELECT setval(pg_get_serial_sequence('agent_comms.invocations', 'seq'), \
                       coalesce(max(seq), 1), max(seq) IS NOT NULL) FROM invocations; \
         SELECT setval(pg_get_serial_sequence('agent_comms.attempts', 'id'), \
                       coalesce(max(id), 1), max(id) IS NOT NULL) FROM attempts;",
    )
}

fn write_agents(
    c: &mut impl GenericClient,
    agents: &[crate::store::Agent],
) -> Result<(), postgres::Error> {
    for rows in agents.chunks(CHUNK) {
        let id: Vec<&str> = rows.iter().map(|a| a.id.as_str()).collect();
        let created: Vec<i64> = rows.iter().map(|a| ms(a.created)).collect();
        c.execute(
            "INSERT INTO agents (id, created) SELECT * FROM unnest($1::text[], $2::bigint[])",
            &[&id, &created],
        )?;
    }
    Ok(())
}

fn write_runtimes(
    c: &mut impl GenericClient,
    runtimes: &[crate::store::RuntimeRecord],
) -> Result<(), postgres::Error> {
    for rows in runtimes.chunks(CHUNK) {
        let text = |f: fn(&crate::store::RuntimeRecord) -> &str| -> Vec<&str> {
            rows.iter().map(f).collect()
        };
        let opt = |f: fn(&crate::store::RuntimeRecord) -> Option<&str>| -> Vec<Option<&str>> {
            rows.iter().map(f).collect()
        };
        let max_concurrent: Vec<i64> = rows.iter().map(|r| i64::from(r.max_concurrent)).collect();
        let pid: Vec<Option<i64>> = rows.iter().map(|r| r.pid.map(i64::from)).collect();
        let beat: Vec<Option<i64>> = rows.iter().map(|r| r.last_heartbeat.map(ms)).collect();
        let every: Vec<i64> = rows.iter().map(|r| ms(r.heartbeat_ms)).collect();
        let updated: Vec<i64> = rows.iter().map(|r| ms(r.updated)).collect();
        c.execute(
            const_format::concatcp!(
                "INSERT INTO runtimes (",
                RUNTIME_COLS,
                ") SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], \
                 $5::bigint[], $6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[], \
                 $11::bigint[], $12::bigint[], $13::text[], $14::text[], $15::text[], $16::bigint[])"
            ),
            &[
                &text(|r| &r.id),
                &text(|r| &r.agent),
                &text(|r| &r.kind),
                &text(|r| &r.connector),
                &max_concurrent,
                &text(|r| r.status.as_str()),
                &opt(|r| r.host.as_deref()),
                &opt(|r| r.endpoint.as_deref()),
                &opt(|r| r.endpoint_id.as_deref()),
                &pid,
                &beat,
                &every,
                &opt(|r| r.provider.as_deref()),
                &opt(|r| r.conversation_id.as_deref()),
                &opt(|r| r.status_reason.as_deref()),
                &updated,
            ],
        )?;
    }
    Ok(())
}

fn write_invocations(
    c: &mut impl GenericClient,
    invocations: &[crate::store::Invocation],
) -> Result<(), postgres::Error> {
    for rows in invocations.chunks(CHUNK) {
        let text = |f: fn(&crate::store::Invocation) -> &str| -> Vec<&str> {
            rows.iter().map(f).collect()
        };
        let seq: Vec<i64> = rows.iter().map(|i| i.seq).collect();
        let created: Vec<i64> = rows.iter().map(|i| ms(i.created)).collect();
        let delivered: Vec<Option<i64>> = rows.iter().map(|i| i.delivered.map(ms)).collect();
        let reason: Vec<Option<&str>> = rows.iter().map(|i| i.reason.as_deref()).collect();
        let attempts: Vec<i64> = rows.iter().map(|i| i64::from(i.attempts)).collect();
        c.execute(
            const_format::concatcp!(
                "INSERT INTO invocations (",
                INVOCATION_COLS,
                ") SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], \
                 $5::text[], $6::text[], $7::bigint[], $8::bigint[], $9::text[], $10::bigint[])"
            ),
            &[
                &text(|i| &i.id),
                &seq,
                &text(|i| &i.from),
                &text(|i| &i.to),
                &text(|i| &i.body),
                &text(|i| i.status.as_str()),
                &created,
                &delivered,
                &reason,
                &attempts,
            ],
        )?;
    }
    Ok(())
}

fn write_attempts(
    c: &mut impl GenericClient,
    attempts: &[crate::store::Attempt],
) -> Result<(), postgres::Error> {
    for rows in attempts.chunks(CHUNK) {
        let text =
            |f: fn(&crate::store::Attempt) -> &str| -> Vec<&str> { rows.iter().map(f).collect() };
        let evidence = |f: fn(&crate::delivery::Evidence) -> i64| -> Vec<Option<i64>> {
            rows.iter().map(|a| a.evidence.as_ref().map(f)).collect()
        };
        let id: Vec<i64> = rows.iter().map(|a| a.id).collect();
        let started: Vec<i64> = rows.iter().map(|a| ms(a.started)).collect();
        let lease: Vec<i64> = rows.iter().map(|a| ms(a.lease_until)).collect();
        let finished: Vec<Option<i64>> = rows.iter().map(|a| a.finished.map(ms)).collect();
        let reason: Vec<Option<&str>> = rows.iter().map(|a| a.reason.as_deref()).collect();
        let style: Vec<Option<&str>> = rows
            .iter()
            .map(|a| a.evidence.as_ref().map(|e| e.style.as_str()))
            .collect();
        let stop: Vec<Option<&str>> = rows
            .iter()
            .map(|a| a.evidence.as_ref().and_then(|e| e.stop_reason.as_deref()))
            .collect();
        let host: Vec<Option<&str>> = rows.iter().map(|a| a.host.as_deref()).collect();
        c.execute(
            const_format::concatcp!(
                "INSERT INTO attempts (",
                ATTEMPT_COLS,
                ") SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], \
                 $5::bigint[], $6::bigint[], $7::bigint[], $8::text[], $9::text[], $10::bigint[], \
                 $11::bigint[], $12::bigint[], $13::bigint[], $14::text[], $15::text[], $16::text[])"
            ),
            &[
                &id,
                &text(|a| &a.invocation),
                &text(|a| &a.runtime),
                &text(|a| &a.endpoint_id),
                &started,
                &lease,
                &finished,
                &text(|a| a.outcome.as_str()),
                &reason,
                &evidence(|e| ms(e.echoed)),
                &evidence(|e| ms(e.entered)),
                &evidence(|e| ms(e.submitted)),
                &evidence(|e| i64::from(e.enter_presses)),
                &style,
                &stop,
                &host,
            ],
        )?;
    }
    Ok(())
}
