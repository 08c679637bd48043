//! Looking at a database for `store status` without changing it:
//! [`PgStore::peek`] reads the schema version and times a round trip
//! before anything could migrate it ([`PgStore::open`] would: an empty
//! database gets agent-comms' tables, an older one the newer schema), and
//! [`PgStore::message_counts`] counts messages by state in the database
//! instead of reading every body.

use std::time::{Duration, Instant};

use super::conn::Conn;
use super::{schema, text, PgStore, Target};
use crate::store::tally::Tally;
use crate::store::{InvocationStatus, StoreError};

/// What a first look at a database found.
#[derive(Debug, Clone, Copy)]
pub struct Peek {
    /// The schema version it holds: 0 when agent-comms never used it.
    pub schema: i64,
    /// One `SELECT 1`, once connected.
    pub round_trip: Duration,
}

impl PgStore {
    /// Connects (within the store's bounds) and reads the schema version;
    /// changes nothing.
    pub fn peek(target: &Target) -> Result<Peek, StoreError> {
        let conn = Conn::new(target.clone());
        let t = target.clone();
        conn.run(move |c| {
            let schema = schema::version(c, &t)?;
            let started = Instant::now();
            c.simple_query("SELECT 1").map_err(|e| t.error(e))?;
            Ok(Peek {
                schema,
                round_trip: started.elapsed(),
            })
        })
    }

    /// How many messages are in each state.
    pub fn message_counts(&self) -> Result<Tally<InvocationStatus>, StoreError> {
        let counts = self.query(
            "SELECT status, count(*) AS n FROM invocations GROUP BY status",
            vec![],
            |r| Ok((text(r, "status")?, r.get::<_, i64>("n") as usize)),
        )?;
        Ok(Tally::from_counts(InvocationStatus::ALL, counts))
    }
}
