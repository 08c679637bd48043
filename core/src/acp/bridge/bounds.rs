//! What a client can make the bridge spend, bounded: connections, time to
//! finish a line or `initialize`, and the transcript notes a refusal costs.
//!
//! Every limit here is in `docs/security.md`, with the error a client gets
//! when it hits it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connections any one uid may hold on a runtime's bridge (the owner's own
/// too: an observer's flood cannot take the owner's share).
pub const MAX_PER_UID: usize = 32;
/// Connections all uids but the owner's may hold together.
pub const MAX_OTHERS: usize = 128;
/// New connections one uid may open at once, and how many a second after
/// that: each costs a handshake and two transcript notes, so a client that
/// connects, is let go and connects again cannot make that a flood.
pub const CONNECTIONS_BURST: u32 = 32;
pub const CONNECTIONS_PER_SECOND: u32 = 8;
/// How long a new connection may take to send `initialize`.
pub const INITIALIZE_DEADLINE: Duration = Duration::from_secs(10);
/// How long a line may take to arrive once its first byte has.
pub const LINE_DEADLINE: Duration = Duration::from_secs(30);
/// The longest line taken from a client (a prompt with a pasted file; the
/// web page's limit too).
pub const MAX_CLIENT_LINE: usize = 8 << 20;
/// Lines a client may send at once, and how many a second after that: its
/// lines are read no faster (the rest wait in the socket, and the client's
/// writes block), so that one connection cannot keep the runtime's one
/// thread parsing. A person's editor sends a few a turn.
pub const LINES_BURST: u32 = 64;
pub const LINES_PER_SECOND: u32 = 64;
/// Refused calls one connection may make; at the next it is let go (a
/// client that asks for what it may not do this often is not a mistake).
pub const MAX_REFUSED_PER_CONNECTION: u64 = 32;
/// Joins whose past is read from disk at once: each parses the transcript
/// on a thread of its own, and a flood of joins must leave a core to the
/// runtime's one thread.
pub const CONCURRENT_REPLAYS: usize = 1;
/// Bytes of the past that joins read a second at most (after a burst):
/// parsing the transcript and sending its updates is the runtime's work
/// too, and a flood of joins must leave its thread to the clients already
/// there. A 20 MB transcript: about 1 s of pace alone (16 MB past the
/// burst).
pub const REPLAY_BURST_BYTES: u32 = 4 << 20;
pub const REPLAY_BYTES_PER_SECOND: u32 = 16 << 20;
/// Connections refused at once, and how many a second after that: past
/// them the bridge accepts no faster, so a flood of connections it would
/// refuse waits in the kernel's queue (its `connect`s block) instead of
/// keeping the runtime's thread and a core busy. A new client meanwhile
/// waits its turn in that queue.
pub const REFUSED_BURST: u32 = 64;
pub const REFUSED_PER_SECOND: u32 = 64;
/// How often refusals are noted in the transcript at most: the first at
/// once, then one note for all that came in between.
pub const REFUSALS_NOTED_EVERY: Duration = Duration::from_secs(60);

/// The connections held, by uid.
pub struct Connections {
    owner: u32,
    held: Mutex<BTreeMap<u32, usize>>,
    opened: Mutex<BTreeMap<u32, Pace>>,
    /// Refused connections ([`REFUSED_BURST`], [`REFUSED_PER_SECOND`]).
    refused: Mutex<Pace>,
}

/// One held connection; dropping it lets it go.
pub struct Ticket {
    connections: Arc<Connections>,
    uid: u32,
}

impl Connections {
    pub fn new(owner: u32) -> Arc<Self> {
        Arc::new(Self {
            owner,
            held: Mutex::default(),
            opened: Mutex::default(),
            refused: Mutex::new(Pace::new(REFUSED_BURST, REFUSED_PER_SECOND)),
        })
    }

    /// Counts a connection that was refused.
    pub fn refused(&self) {
        let mut pace = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        pace.take(Instant::now());
    }

    /// How long the next `accept` waits: until the refusals past the pace
    /// are paid back.
    pub fn accept_delay(&self) -> Duration {
        let mut pace = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        pace.owed(Instant::now())
    }

    /// A ticket for one more connection from `uid`, or why not.
    pub fn take(self: &Arc<Self>, uid: u32) -> Result<Ticket, String> {
        self.take_at(uid, Instant::now())
    }

    fn take_at(self: &Arc<Self>, uid: u32, now: Instant) -> Result<Ticket, String> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());

        let mine = held.get(&uid).copied().unwrap_or(0);
        if mine >= MAX_PER_UID {
            return Err(format!(
                "connection refused: uid {uid} holds {mine} connections to this runtime, the most one uid may; close some (agent-comms runtime show lists them)"
            ));
        }
        if uid != self.owner {
            let others: usize = held
                .iter()
                .filter(|(&u, _)| u != self.owner)
                .map(|(_, n)| n)
                .sum();
            if others >= MAX_OTHERS {
                return Err(format!(
                    "connection refused: other users hold {others} connections to this runtime, the most they may together; try again when some close"
                ));
            }
        }
        let pace = opened
            .entry(uid)
            .or_insert_with(|| Pace::new(CONNECTIONS_BURST, CONNECTIONS_PER_SECOND));
        if !pace.try_take(now) {
            return Err(format!(
                "connection refused: uid {uid} opened connections faster than {CONNECTIONS_PER_SECOND} a second; connect again in a moment"
            ));
        }
        *held.entry(uid).or_default() += 1;
        Ok(Ticket {
            connections: self.clone(),
            uid,
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut held = self
            .connections
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(n) = held.get_mut(&self.uid) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.uid);
            }
        }
    }
}

/// A token bucket: a burst, refilled at a rate.
pub struct Pace {
    burst: f64,
    per_second: f64,
    tokens: f64,
    at: Instant,
}

impl Pace {
    pub fn new(burst: u32, per_second: u32) -> Self {
        Self {
            burst: f64::from(burst),
            per_second: f64::from(per_second),
            tokens: f64::from(burst),
            at: Instant::now(),
        }
    }

    /// A client's lines: [`LINES_BURST`], then [`LINES_PER_SECOND`].
    pub fn of_lines() -> Self {
        Self::new(LINES_BURST, LINES_PER_SECOND)
    }

    fn refill(&mut self, now: Instant) {
        let refilled = now.saturating_duration_since(self.at).as_secs_f64() * self.per_second;
        self.tokens = (self.tokens + refilled).min(self.burst);
        self.at = now;
    }

    /// Takes one at `now`: how long to wait before using it.
    pub fn take(&mut self, now: Instant) -> Duration {
        self.take_many(1, now)
    }

    /// Takes `n` at `now`: how long to wait before using them.
    pub fn take_many(&mut self, n: usize, now: Instant) -> Duration {
        self.refill(now);
        self.tokens -= n as f64;
        self.owed(now)
    }

    /// How long until what was taken is paid back (zero when it is).
    pub fn owed(&mut self, now: Instant) -> Duration {
        self.refill(now);
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.per_second)
        }
    }

    /// Takes one at `now` if there is one.
    pub fn try_take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

/// Refused connections and calls, counted; noted seldom.
#[derive(Default)]
pub struct Refusals {
    state: Mutex<Counted>,
}

#[derive(Default)]
struct Counted {
    total: u64,
    unnoted: u64,
    noted_at: Option<Instant>,
}

impl Refusals {
    /// Counts one refusal (`why`); the note to write, when one is due.
    pub fn count(&self, why: &str, now: Instant) -> Option<String> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.total += 1;
        state.unnoted += 1;
        if state
            .noted_at
            .is_some_and(|at| now.duration_since(at) < REFUSALS_NOTED_EVERY)
        {
            return None;
        }
        let note = match state.unnoted {
            1 => format!("refused: {why}"),
            n => format!(
                "refused {n} connections or calls in the last {} s ({} since the start); the last: {why}",
                REFUSALS_NOTED_EVERY.as_secs(),
                state.total
            ),
        };
        state.unnoted = 0;
        state.noted_at = Some(now);
        Some(note)
    }

    /// How many were refused since the start.
    pub fn total(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_of_refusals_is_one_note_a_minute() {
        let refusals = Refusals::default();
        let t0 = Instant::now();
        assert_eq!(
            refusals.count("a cancel from client-2", t0).as_deref(),
            Some("refused: a cancel from client-2")
        );
        for i in 1..10_000 {
            let at = t0 + Duration::from_millis(i * 5);
            assert_eq!(refusals.count("a cancel from client-2", at), None);
        }
        let note = refusals
            .count("a cancel from client-3", t0 + REFUSALS_NOTED_EVERY)
            .expect("a minute on, one note");
        assert!(
            note.starts_with("refused 10000 connections or calls in the last 60 s (10001 since the start); the last: a cancel from client-3"),
            "{note}"
        );
        assert_eq!(refusals.total(), 10_001);
    }

    #[test]
    fn a_client_sends_a_burst_then_at_the_pace() {
        let mut pace = Pace::of_lines();
        let t0 = pace.at;
        for _ in 0..LINES_BURST {
            assert_eq!(pace.take(t0), Duration::ZERO);
        }
        let one = Duration::from_secs(1) / LINES_PER_SECOND;
        let waited = pace.take(t0);
        assert!(
            waited.abs_diff(one) < Duration::from_micros(10),
            "{waited:?}"
        );
        // A quiet second refills the bucket by the rate, not past the burst.
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..LINES_BURST {
            assert_eq!(pace.take(later), Duration::ZERO);
        }
        assert!(pace.take(later) > Duration::ZERO);
    }

    #[test]
    fn refusals_past_the_burst_hold_the_next_accept_back() {
        let connections = Connections::new(1000);
        for _ in 0..REFUSED_BURST {
            connections.refused();
        }
        assert_eq!(connections.accept_delay(), Duration::ZERO);
        for _ in 0..REFUSED_PER_SECOND {
            connections.refused();
        }
        // A second's worth past the burst: about a second's wait.
        let delay = connections.accept_delay();
        assert!(
            delay > Duration::from_millis(900) && delay <= Duration::from_secs(1),
            "{delay:?}"
        );
    }

    #[test]
    fn a_pace_of_bytes_owes_what_was_taken_past_the_burst() {
        let mut pace = Pace::new(REPLAY_BURST_BYTES, REPLAY_BYTES_PER_SECOND);
        let t0 = pace.at;
        assert_eq!(
            pace.take_many(REPLAY_BURST_BYTES as usize, t0),
            Duration::ZERO
        );
        let waited = pace.take_many(REPLAY_BYTES_PER_SECOND as usize / 2, t0);
        assert!(
            waited.abs_diff(Duration::from_millis(500)) < Duration::from_micros(10),
            "{waited:?}"
        );
        assert_eq!(pace.owed(t0 + Duration::from_millis(500)), Duration::ZERO);
    }

    #[test]
    fn each_uid_holds_its_share_and_others_cannot_take_the_owners() {
        let connections = Connections::new(1000);
        let t0 = Instant::now();
        let mine: Vec<Ticket> = (0..MAX_PER_UID)
            .map(|_| connections.take_at(1000, t0).unwrap())
            .collect();
        let refused = connections.take_at(1000, t0).err().unwrap();
        assert!(
            refused.contains("uid 1000 holds 32 connections"),
            "{refused}"
        );
        drop(mine);
        // Its places are free again, but it opened them all at once.
        let refused = connections.take_at(1000, t0).err().unwrap();
        assert!(refused.contains("faster than 8 a second"), "{refused}");
        let later = t0 + Duration::from_secs(1);
        let mut others = Vec::new();
        for uid in 2000.. {
            match connections.take_at(uid, later) {
                Ok(ticket) => others.push(ticket),
                Err(why) => {
                    assert!(why.contains("other users hold 128"), "{why}");
                    break;
                }
            }
        }
        assert_eq!(others.len(), MAX_OTHERS);
        assert!(
            connections.take_at(1000, later).is_ok(),
            "the owner still gets in"
        );
        others.pop();
        assert!(
            connections.take_at(4242, later).is_ok(),
            "a freed place is taken again"
        );
    }
}
