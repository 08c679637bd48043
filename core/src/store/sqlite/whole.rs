//! The whole file at once: [`SqliteStore::snapshot`], every row for
//! `store migrate`, read in one transaction so that a supervisor writing
//! meanwhile cannot leave it half before and half after a change (in WAL a
//! read transaction sees the database as of its first read); and
//! [`SqliteStore::message_counts`] for `store status`, counted in SQL
//! rather than by reading every body.

use super::{
    agent_row, attempt_row, invocation_row, query_all, runtime_row, SqliteStore, AGENT_COLS,
    ATTEMPT_COLS, INVOCATION_COLS, RUNTIME_COLS,
};
use crate::store::copy::Snapshot;
use crate::store::tally::Tally;
use crate::store::{InvocationStatus, StoreError};

impl SqliteStore {
    /// Every row: agents and runtimes by id, messages by seq, attempts by
    /// id. Changes nothing.
    pub fn snapshot(&self) -> Result<Snapshot, StoreError> {
        let tx = self.conn.unchecked_transaction()?;
        let all = |table: &str, cols: &str, order: &str| {
            format!("SELECT {cols} FROM {table} ORDER BY {order}")
        };
        let snapshot = Snapshot {
            agents: query_all(&tx, &all("agents", AGENT_COLS, "id"), [], agent_row)?,
            runtimes: query_all(&tx, &all("runtimes", RUNTIME_COLS, "id"), [], runtime_row)?,
            invocations: query_all(
                &tx,
                &all("invocations", INVOCATION_COLS, "seq"),
                [],
                invocation_row,
            )?,
            attempts: query_all(&tx, &all("attempts", ATTEMPT_COLS, "id"), [], attempt_row)?,
        };
        tx.finish()?;
        Ok(snapshot)
    }

    /// How many messages are in each state.
    pub fn message_counts(&self) -> Result<Tally<InvocationStatus>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT status, count(*) FROM invocations GROUP BY status")?;
        let counts = stmt
            .query_map([], |r| Ok((r.get::<_, InvocationStatus>(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<Vec<(InvocationStatus, usize)>>>()?;
        Ok(Tally::from_counts(InvocationStatus::ALL, counts))
    }
}
