//! Messages between agents: stored first, then announced.
//!
//! `send` writes the invocation to the store before anything else, so a
//! crash at any later moment loses nothing; then it nudges the recipient's
//! runtime, whose inbox types a short fixed notification — the id and the
//! command that shows the body, never the body itself (a body may be long,
//! multi-line, or hostile; the notification is none of these).
//!
//! What a sender learns is exact about one thing above all: whether the
//! message was stored, since a script that resends a stored message has it
//! delivered twice. Every error [`send`] returns means nothing was stored,
//! but [`ControlError::PerhapsStored`]; once stored, a `send` never fails:
//! a store that goes away during the wait leaves [`Sent::unknown`] saying
//! what could not be learned, and the message is delivered once the store
//! and its runtime are back.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::registration::effective_status;
use super::ControlError;
use crate::client::{Client, ClientError};
use crate::ids::{Id, IdError};
use crate::socket::protocol::{InvocationOutcome, Request, Response, Waiting};
use crate::store::{
    Attempt, Invocation, InvocationFilter, InvocationStatus, NewInvocation, RuntimeRecord,
    RuntimeStatus, Store, StoreError,
};
use crate::time::iso_from_unix_millis;

/// Largest body accepted: it lives in the store, not in a terminal.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// A message as its notification names it: by validated ids only. A store
/// row an older build wrote unchecked (a sender holding a line break or an
/// instruction) is refused here, so it is never typed.
#[derive(Debug, Clone, PartialEq)]
pub struct Named {
    id: Id,
    from: Id,
}

impl Named {
    pub fn new(inv: &Invocation) -> Result<Self, IdError> {
        Ok(Self {
            id: Id::message(&inv.id)?,
            from: Id::agent(&inv.from)?,
        })
    }
}

/// Senders named in a batch's notification; more are counted.
const SENDERS_NAMED: usize = 3;

/// The line typed into the recipient's prompt: one line naming the messages
/// (oldest first) and the one command that shows them all. One message:
/// `[agent-comms] message inv_… from alice; read it with: agent-comms
/// message show inv_…`; several: `[agent-comms] 3 messages from alice,
/// carol; read them with: agent-comms message show inv_… inv_… inv_…`.
pub fn notification(batch: &[Named]) -> String {
    let ids: Vec<&str> = batch.iter().map(|m| m.id.as_str()).collect();
    let ids = ids.join(" ");
    match batch {
        [one] => format!(
            "[agent-comms] message {} from {}; read it with: agent-comms message show {ids}",
            one.id, one.from
        ),
        _ => {
            let mut senders: Vec<&str> = Vec::new();
            for m in batch {
                if !senders.contains(&m.from.as_str()) {
                    senders.push(m.from.as_str());
                }
            }
            let from = match senders.len() {
                n if n > SENDERS_NAMED => format!(
                    "{} and {} others",
                    senders[..SENDERS_NAMED].join(", "),
                    n - SENDERS_NAMED
                ),
                _ => senders.join(", "),
            };
            format!(
                "[agent-comms] {} messages from {from}; read them with: agent-comms message show {ids}",
                batch.len()
            )
        }
    }
}

/// The message ids a [`notification`] names, oldest first; `None` when
/// `line` is not one. For readers of what a provider received (the
/// benchmarks, the tests).
pub fn named_ids(line: &str) -> Option<Vec<&str>> {
    let rest = line.strip_prefix("[agent-comms] ")?;
    let (_, ids) = ["; read it with: ", "; read them with: "]
        .iter()
        .find_map(|how| rest.split_once(&format!("{how}agent-comms message show ")))?;
    Some(ids.split_whitespace().collect())
}

/// How long [`send`] keeps reading a message's state after its wait when
/// the store does not answer: the store's connect timeout, so a store
/// that is gone costs at most that beyond the wait.
const REREAD_FOR: Duration = Duration::from_secs(4);
/// The pause between two such reads.
const REREAD_PAUSE: Duration = Duration::from_millis(250);

/// What became of a `send`: the message is stored.
pub struct Sent {
    /// The message as last read from the store after the nudge and the
    /// wait; when the store could not be read then, as its runtime said the
    /// attempt ended, or else as it was stored.
    pub invocation: Invocation,
    /// The runtime online here that was nudged, and what came of it.
    pub nudge: Option<(String, Nudged)>,
    /// With a wait: why what became of the message is not known — the
    /// store could not be read at the wait's end (it went out of reach),
    /// and the runtime told no outcome. `invocation` is then the message
    /// as stored. Never set without a wait.
    pub unknown: Option<String>,
}

/// What came of nudging a runtime.
#[derive(Debug, Clone, PartialEq)]
pub enum Nudged {
    /// Its inbox was woken; with a wait, this is how the attempt ended.
    Woken(Option<InvocationOutcome>),
    /// Its inbox was woken, but the wait ended before the attempt did (the
    /// supervisor says why).
    NoOutcome(String),
    /// Its endpoint did not answer: the message waits in the store until
    /// the runtime is back.
    Unreachable(String),
    /// It runs on another host, which learns of the message through the
    /// shared store; with a wait, how the attempt ended.
    ByItsHost(Option<InvocationOutcome>),
}

/// What a `send --wait` hears of the runtime's wait, as it changes (see
/// [`Client::request_telling_waits`]).
pub type OnWait<'a> = &'a mut dyn FnMut(Option<&Waiting>);

/// Stores a message from `from` to agent `to` and nudges `to`'s runtime.
/// With `wait`, returns once its delivery attempt ended (or after it);
/// meanwhile `on_wait`, if given, hears what the runtime waits for.
///
/// An error means the message was not stored (a [`ControlError::Store`]:
/// the store could not be reached or refused it), except
/// [`ControlError::PerhapsStored`]; once it is stored, `send` returns
/// [`Sent`] whatever the store does afterwards.
pub fn send(
    store: &dyn Store,
    host: &str,
    from: &Id,
    to: &Id,
    body: &str,
    wait: Option<Duration>,
    on_wait: Option<OnWait<'_>>,
) -> Result<Sent, ControlError> {
    let (from, to) = (from.as_str(), to.as_str());
    check_body(body)?;
    let now = store.now();
    let runtimes: Vec<RuntimeRecord> = store
        .runtimes()?
        .into_iter()
        .filter(|r| r.agent == to && r.status != RuntimeStatus::Revoked)
        .collect();
    if runtimes.is_empty() {
        return Err(ControlError::UnknownAgent(to.to_owned()));
    }
    store.ensure_agent(from, now)?;
    let (local, remote): (Vec<&RuntimeRecord>, Vec<&RuntimeRecord>) = runtimes
        .iter()
        .partition(|r| r.host.as_deref().is_none_or(|h| h == host));
    // A file on this host is read by no other: a runtime elsewhere could
    // never deliver from it. A shared store is how the other host hears.
    let (status, reason) = if local.is_empty() && !store.spans_hosts() {
        let r = &runtimes[0];
        let there = r.host.as_deref().unwrap_or("?");
        let reason = format!(
            "agent {to}'s runtime {} is on another host ({there}); a terminal can only be reached from its own host",
            r.id
        );
        (InvocationStatus::Unavailable, Some(reason))
    } else {
        (InvocationStatus::Pending, None)
    };
    let new = NewInvocation {
        from,
        to,
        body,
        status,
        reason: reason.as_deref(),
        now,
    };
    let invocation = match store.insert_invocation(&new) {
        Ok(invocation) => invocation,
        Err(e @ StoreError::Unreachable { .. }) => stored_after_all(store, &new, e)?,
        Err(e) => return Err(e.into()),
    };
    // Stored: from here on nothing fails, whatever the store does.
    if status != InvocationStatus::Pending {
        return Ok(Sent {
            invocation,
            nudge: None,
            unknown: None,
        });
    }
    let nudge = if let Some(r) = online(&local, now) {
        Some((r.id.clone(), nudge(r, Some(&invocation.id), wait, on_wait)))
    } else {
        online(&remote, now).map(|r| {
            let outcome = wait.and_then(|wait| wait_in_store(store, &invocation, wait));
            (r.id.clone(), Nudged::ByItsHost(outcome))
        })
    };
    let (invocation, unknown) = where_it_stands(store, invocation, wait, nudge.as_ref());
    Ok(Sent {
        invocation,
        nudge,
        unknown,
    })
}

/// Refuses a body no reader could take: empty, holding a NUL, or over
/// [`MAX_BODY_BYTES`].
fn check_body(body: &str) -> Result<(), ControlError> {
    if body.trim().is_empty() {
        return Err(ControlError::Body("the message is empty".into()));
    }
    if let Some(at) = body.find('\0') {
        // Neither a reader's terminal nor PostgreSQL takes one: refused on
        // every back-end alike.
        return Err(ControlError::Body(format!(
            "the message holds a NUL byte (at byte {at}); send text"
        )));
    }
    if body.len() > MAX_BODY_BYTES {
        return Err(ControlError::Body(format!(
            "the message is {} bytes; the limit is {MAX_BODY_BYTES}",
            body.len()
        )));
    }
    Ok(())
}

/// The stored `invocation` as it stands after the nudge (and the wait),
/// and, with a wait, why that is not known if it is not.
fn where_it_stands(
    store: &dyn Store,
    invocation: Invocation,
    wait: Option<Duration>,
    nudge: Option<&(String, Nudged)>,
) -> (Invocation, Option<String>) {
    let told = match nudge {
        Some((_, Nudged::Woken(Some(outcome)) | Nudged::ByItsHost(Some(outcome)))) => Some(outcome),
        _ => None,
    };
    // Where it stands now, read through a connection the wait may have
    // seen the server end (a restart): a read that fails on it makes the
    // next one reconnect. A wait that ran out untold gives a store that is
    // coming back up to its connect timeout more; a runtime that told how
    // the attempt ended (it had recorded it) needs none.
    let waited_untold = wait.is_some()
        && told.is_none()
        && matches!(
            nudge,
            Some((
                _,
                Nudged::NoOutcome(_) | Nudged::Woken(None) | Nudged::ByItsHost(None)
            ))
        );
    let until = Instant::now()
        + if waited_untold {
            REREAD_FOR
        } else {
            Duration::ZERO
        };
    match reread(store, &invocation.id, until) {
        Ok(now_is) => (now_is, None),
        Err(why) => match told {
            Some(outcome) => (as_told(invocation, outcome), None),
            None => (invocation, wait.and(Some(why))),
        },
    }
}

/// `new`'s row, if the insert whose answer was lost (`lost`) committed
/// after all: a connection that broke during the commit leaves the sender
/// not knowing. Read back on a new connection for up to [`REREAD_FOR`];
/// not there: not stored ([`ControlError::Store`] with `lost`); not
/// readable: [`ControlError::PerhapsStored`].
fn stored_after_all(
    store: &dyn Store,
    new: &NewInvocation<'_>,
    lost: StoreError,
) -> Result<Invocation, ControlError> {
    let filter = InvocationFilter {
        status: None,
        to: Some(new.to),
        from: Some(new.from),
    };
    let until = Instant::now() + REREAD_FOR;
    let mut tries = 0;
    loop {
        tries += 1;
        match store.invocations(&filter) {
            Ok(rows) => {
                return match rows
                    .into_iter()
                    .find(|i| i.created == new.now && i.body == new.body)
                {
                    Some(invocation) => Ok(invocation),
                    None => Err(lost.into()),
                }
            }
            Err(e) if tries >= 2 && Instant::now() >= until => {
                return Err(ControlError::PerhapsStored {
                    from: new.from.to_owned(),
                    to: new.to.to_owned(),
                    detail: e.to_string(),
                })
            }
            Err(_) if tries >= 2 => std::thread::sleep(REREAD_PAUSE),
            Err(_) => {}
        }
    }
}

/// Message `id` as the store holds it, read until `until` while the store
/// does not answer (and twice at least: the first call after a restart
/// fails on the connection the server ended, the second reconnects); the
/// last error when it never answered.
fn reread(store: &dyn Store, id: &str, until: Instant) -> Result<Invocation, String> {
    let mut tries = 0;
    loop {
        tries += 1;
        let why = match store.invocation(id) {
            Ok(Some(now_is)) => return Ok(now_is),
            Ok(None) => return Err(format!("message {id} is no longer in the store")),
            Err(e) => e.to_string(),
        };
        if tries >= 2 {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(why);
            }
            std::thread::sleep(left.min(REREAD_PAUSE));
        }
    }
}

/// `inv` as its runtime told how its attempt ended.
fn as_told(mut inv: Invocation, outcome: &InvocationOutcome) -> Invocation {
    if let Ok(status) = outcome.status.parse() {
        inv.status = status;
        inv.reason = outcome.reason.clone();
    }
    inv
}

/// The first of `runtimes` that is ONLINE at `now`.
fn online<'r>(runtimes: &[&'r RuntimeRecord], now: u64) -> Option<&'r RuntimeRecord> {
    runtimes
        .iter()
        .copied()
        .find(|r| effective_status(r, now).0 == RuntimeStatus::Online)
}

/// Waits up to `wait` for `inv`'s delivery to end, through the store (its
/// runtime is on another host): the outcome, or None when time ran out.
/// A store out of reach meanwhile is read again until the wait's end.
fn wait_in_store(store: &dyn Store, inv: &Invocation, wait: Duration) -> Option<InvocationOutcome> {
    let deadline = Instant::now() + wait;
    // Without a follower (it could not start), the bound below is the
    // pace of the reads.
    let follow = store.follow(Some(&inv.to)).ok();
    loop {
        // A read that fails (the store out of reach) is tried again.
        if let Ok(Some(now_is)) = store.invocation(&inv.id) {
            if matches!(
                now_is.status,
                InvocationStatus::Delivered | InvocationStatus::Failed
            ) {
                return Some(InvocationOutcome {
                    id: now_is.id,
                    status: now_is.status.to_string(),
                    reason: now_is.reason,
                });
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        // Woken by a change to the recipient's messages, and when the
        // follower reconnects; the bound only covers a notification lost
        // while the link was down.
        let at_most = left.min(Duration::from_secs(2));
        match &follow {
            Some(follow) => {
                follow.wait(at_most);
            }
            None => std::thread::sleep(at_most.min(REREAD_PAUSE)),
        }
    }
}

/// Puts a message back in its recipient's queue and nudges the runtime.
pub fn redeliver(store: &dyn Store, host: &str, id: &Id) -> Result<Invocation, ControlError> {
    let id = id.as_str();
    let now = store.now();
    // An attempt whose runtime died mid-delivery holds the message until
    // its lease runs out; that one may be taken back now.
    store.release_attempts(
        None,
        now,
        "its lease expired: the runtime stopped mid-delivery",
    )?;
    let inv = store
        .invocation(id)?
        .ok_or_else(|| ControlError::UnknownInvocation(id.to_owned()))?;
    if inv.status == InvocationStatus::Delivering {
        return Err(ControlError::Delivering(id.to_owned()));
    }
    let runtimes = store.runtimes()?;
    let mine = runtimes.iter().filter(|r| r.agent == inv.to);
    let local: Vec<&RuntimeRecord> = mine
        .filter(|r| r.host.as_deref().is_none_or(|h| h == host))
        .collect();
    if local.is_empty() {
        return Err(ControlError::NoLocalRuntime(inv.to.clone()));
    }
    store.set_invocation_status(
        id,
        InvocationStatus::Pending,
        Some("redelivery requested"),
        now,
    )?;
    if let Some(r) = online(&local, now) {
        // Unreachable is no error: the message waits in the store.
        nudge(r, None, None, None);
    }
    Ok(store.invocation(id)?.unwrap_or(inv))
}

/// Takes a waiting message (PENDING, UNAVAILABLE or FAILED) out of the
/// queue for good: it becomes FAILED with "cancelled by ACTOR" (or
/// "cancelled" without an actor), and the messages behind it move up.
pub fn cancel(store: &dyn Store, id: &Id, by: Option<&Id>) -> Result<Invocation, ControlError> {
    let id = id.as_str();
    let reason = match by {
        Some(actor) => format!("cancelled by {actor}"),
        None => "cancelled".to_owned(),
    };
    if !store.fail_waiting(id, &reason)? {
        let inv = store
            .invocation(id)?
            .ok_or_else(|| ControlError::UnknownInvocation(id.to_owned()))?;
        return Err(match inv.status {
            InvocationStatus::Delivering => ControlError::Delivering(id.to_owned()),
            _ => ControlError::AlreadyDelivered(id.to_owned()),
        });
    }
    store
        .invocation(id)?
        .ok_or_else(|| ControlError::UnknownInvocation(id.to_owned()))
}

/// Wakes runtime `r`'s inbox, and with `wait` waits for the attempt on
/// `wait_for` to end, telling `on_wait` what the runtime waits for.
fn nudge(
    r: &RuntimeRecord,
    wait_for: Option<&str>,
    wait: Option<Duration>,
    on_wait: Option<OnWait<'_>>,
) -> Nudged {
    let Some(endpoint) = &r.endpoint else {
        return Nudged::Unreachable("it has no endpoint".into());
    };
    let mut client = match Client::connect(std::path::Path::new(endpoint)) {
        Ok(client) => client,
        Err(e) => return Nudged::Unreachable(e.to_string()),
    };
    let request = Request::Nudge {
        wait_for: wait.and(wait_for.map(str::to_owned)),
        timeout_ms: wait.map_or(0, |w| w.as_millis() as u64),
    };
    let replied = match on_wait.filter(|_| wait.is_some()) {
        Some(on_wait) => client.request_telling_waits(request, on_wait),
        None => client.request(request),
    };
    match replied {
        Ok(Response::Invocation(outcome)) => Nudged::Woken(Some(outcome)),
        Ok(Response::Ok) => Nudged::Woken(None),
        Err(ClientError::Server(message)) if wait.is_some() => Nudged::NoOutcome(message),
        Ok(other) => Nudged::Unreachable(format!("unexpected reply {other:?}")),
        Err(e) => Nudged::Unreachable(e.to_string()),
    }
}

/// An invocation as `invocation list --json` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct InvocationView {
    pub id: String,
    pub from: String,
    pub to: String,
    pub status: InvocationStatus,
    pub created: String,
    pub delivered: Option<String>,
    pub reason: Option<String>,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_attempts: Option<Vec<AttemptView>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AttemptView {
    pub id: i64,
    pub runtime: String,
    /// The host whose runtime made the attempt.
    pub host: Option<String>,
    pub outcome: crate::store::AttemptOutcome,
    pub started: String,
    pub finished: Option<String>,
    pub reason: Option<String>,
    pub evidence: Option<EvidenceView>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EvidenceView {
    pub echoed: String,
    pub entered: String,
    pub submitted: String,
    pub enter_presses: u32,
    pub style: String,
    /// How an ACP agent ended the turn the prompt started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
}

impl InvocationView {
    pub fn new(inv: &Invocation) -> Self {
        Self {
            id: inv.id.clone(),
            from: inv.from.clone(),
            to: inv.to.clone(),
            status: inv.status,
            created: iso_from_unix_millis(inv.created),
            delivered: inv.delivered.map(iso_from_unix_millis),
            reason: inv.reason.clone(),
            attempts: inv.attempts,
            body: None,
            delivery_attempts: None,
        }
    }

    /// With the body and every attempt (`invocation show`).
    pub fn full(inv: &Invocation, attempts: &[Attempt]) -> Self {
        let mut view = Self::new(inv);
        view.body = Some(inv.body.clone());
        view.delivery_attempts = Some(attempts.iter().map(AttemptView::new).collect());
        view
    }
}

impl AttemptView {
    fn new(a: &Attempt) -> Self {
        Self {
            id: a.id,
            runtime: a.runtime.clone(),
            host: a.host.clone(),
            outcome: a.outcome,
            started: iso_from_unix_millis(a.started),
            finished: a.finished.map(iso_from_unix_millis),
            reason: a.reason.clone(),
            evidence: a.evidence.as_ref().map(|e| EvidenceView {
                echoed: iso_from_unix_millis(e.echoed),
                entered: iso_from_unix_millis(e.entered),
                submitted: iso_from_unix_millis(e.submitted),
                enter_presses: e.enter_presses,
                style: e.style.clone(),
                stop_reason: e.stop_reason.clone(),
            }),
        }
    }
}

/// Invocations matching `filter`, oldest first.
pub fn list(
    store: &dyn Store,
    filter: &InvocationFilter<'_>,
) -> Result<Vec<InvocationView>, ControlError> {
    Ok(store
        .invocations(filter)?
        .iter()
        .map(InvocationView::new)
        .collect())
}

/// One invocation with its body and attempts.
pub fn show(store: &dyn Store, id: &Id) -> Result<InvocationView, ControlError> {
    let id = id.as_str();
    let inv = store
        .invocation(id)?
        .ok_or_else(|| ControlError::UnknownInvocation(id.to_owned()))?;
    Ok(InvocationView::full(&inv, &store.attempts(id)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(id: &str, from: &str) -> Named {
        Named {
            id: Id::message(id).unwrap(),
            from: Id::agent(from).unwrap(),
        }
    }

    /// An insert whose answer was lost is looked up: found, it is the
    /// message (stored after all); not there, the insert's error stands
    /// (not stored), never a guess.
    #[test]
    fn an_insert_whose_answer_was_lost_is_found_or_said_not_stored() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::SqliteStore::open_in(dir.path()).unwrap();
        let now = store.now();
        let new = NewInvocation {
            from: "alice",
            to: "bob",
            body: "hello?",
            status: InvocationStatus::Pending,
            reason: None,
            now,
        };
        let stored = store.insert_invocation(&new).unwrap();
        let lost = || StoreError::Unreachable {
            url: "postgres://u@db/ac".into(),
            detail: "connection closed".into(),
        };
        let found = stored_after_all(&store, &new, lost()).unwrap();
        assert_eq!(found.id, stored.id);
        for other in [
            NewInvocation {
                body: "hello again?",
                ..new
            },
            NewInvocation {
                now: now + 1,
                ..new
            },
            NewInvocation {
                from: "carol",
                ..new
            },
        ] {
            match stored_after_all(&store, &other, lost()) {
                Err(ControlError::Store(StoreError::Unreachable { .. })) => {}
                Err(e) => panic!("{e}"),
                Ok(inv) => panic!("found {inv:?}"),
            }
        }
    }

    #[test]
    fn one_message_is_named_as_before() {
        assert_eq!(
            notification(&[named("inv_0123456789ab", "alice")]),
            "[agent-comms] message inv_0123456789ab from alice; read it with: agent-comms message show inv_0123456789ab"
        );
    }

    #[test]
    fn a_batch_names_every_message_in_order_and_its_senders_once() {
        let batch = [
            named("inv_000000000001", "alice"),
            named("inv_000000000002", "carol"),
            named("inv_000000000003", "alice"),
        ];
        assert_eq!(
            notification(&batch),
            "[agent-comms] 3 messages from alice, carol; read them with: agent-comms message show inv_000000000001 inv_000000000002 inv_000000000003"
        );
        assert_eq!(
            named_ids(&notification(&batch)),
            Some(vec![
                "inv_000000000001",
                "inv_000000000002",
                "inv_000000000003"
            ])
        );
        assert_eq!(
            named_ids(&notification(&batch[..1])),
            Some(vec!["inv_000000000001"])
        );
        assert_eq!(named_ids("message show inv_000000000001"), None);
    }

    #[test]
    fn many_senders_are_counted_past_the_first_three() {
        let batch: Vec<Named> = ["a", "b", "c", "d", "e"]
            .iter()
            .enumerate()
            .map(|(i, from)| named(&format!("inv_00000000000{i}"), from))
            .collect();
        let text = notification(&batch);
        assert!(
            text.starts_with("[agent-comms] 5 messages from a, b, c and 2 others;"),
            "{text}"
        );
        crate::delivery::validate(&text).unwrap();
    }

    #[test]
    fn the_largest_batch_is_a_valid_delivery() {
        let batch: Vec<Named> = (0..crate::control::MAX_BATCH)
            .map(|i| named(&format!("inv_{i:012x}"), &format!("agent-{i}")))
            .collect();
        crate::delivery::validate(&notification(&batch)).unwrap();
    }
}
