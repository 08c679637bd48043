//! A runtime's inbox: the task beside an interactive supervisor that takes
//! its agent's messages from the store, in order, and types a notification
//! naming them.
//!
//! It waits until a delivery could start (the program idle, nobody typing)
//! *before* it takes anything from the queue, so the messages that came in
//! while the agent worked are all there at that moment: it leases up to
//! [`Inbox::batch`] of them at once (the store refuses a second lease for
//! the same agent while one is out) and types **one** notification naming
//! them all — one agent turn for a burst of messages, not one each. Each
//! message keeps its own attempt; the outcome (and its evidence) is recorded
//! for all of them in one transaction, so a batch is DELIVERED together or
//! goes back to the queue together. A crash mid-batch leaves the attempts
//! in progress until their lease runs out or the runtime restarts, and then
//! they are delivered again: at least once, never twice at the same time.
//!
//! A nudge wakes it at once; a periodic look catches a message whose nudge
//! was missed (sent while the runtime was starting). A failed attempt puts
//! the messages back and the inbox waits a little before trying again, so a
//! program that never echoes is not typed into in a loop; after
//! [`crate::store::MAX_FAILED_ATTEMPTS`] failures the store gives a message
//! up (FAILED), so one message never holds its agent's queue for good. A
//! message whose notification cannot even be composed (an id an older build
//! stored unchecked) fails at once, and is named in no notification.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::messages::{notification, Named};
use crate::delivery::{DeliveryError, DeliveryOptions};
use crate::socket::protocol::InvocationOutcome;
use crate::store::{
    Attempt, AttemptResult, Evidence, Invocation, InvocationStatus, Store, StoreError,
};
use crate::supervisor::SessionHandle;

/// What an inbox delivers into: a PTY session (typed into its prompt) or
/// an ACP session (sent as a prompt).
pub trait Target: Send + Sync + 'static {
    /// Waits until a delivery could start now; takes nothing.
    fn ready(
        &self,
        options: DeliveryOptions,
    ) -> impl Future<Output = Result<(), DeliveryError>> + Send;
    fn deliver(
        &self,
        text: &str,
        options: DeliveryOptions,
    ) -> impl Future<Output = Result<Evidence, DeliveryError>> + Send;
    /// Notified when a client says new messages wait.
    fn nudges(&self) -> Arc<Notify>;
    /// Tells the clients waiting on a message how it ended.
    fn announce(&self, outcome: InvocationOutcome);
}

impl Target for SessionHandle {
    fn ready(
        &self,
        options: DeliveryOptions,
    ) -> impl Future<Output = Result<(), DeliveryError>> + Send {
        SessionHandle::ready(self, options)
    }

    fn deliver(
        &self,
        text: &str,
        options: DeliveryOptions,
    ) -> impl Future<Output = Result<Evidence, DeliveryError>> + Send {
        SessionHandle::deliver(self, text, options)
    }

    fn nudges(&self) -> Arc<Notify> {
        SessionHandle::nudges(self)
    }

    fn announce(&self, outcome: InvocationOutcome) {
        SessionHandle::announce(self, outcome)
    }
}

/// How long the inbox waits for the program to become idle before it
/// tries anyway (and the attempt fails, saying why, if it still is not).
const DELIVERY_WAIT: Duration = Duration::from_secs(600);
/// How often the store's follower thread looks whether its inbox is gone.
const FOLLOW_LOOK: Duration = Duration::from_secs(5);
/// Pause after a failed attempt, doubled up to the limit while failures go on.
const RETRY_FIRST: Duration = Duration::from_secs(2);
const RETRY_LIMIT: Duration = Duration::from_secs(60);
/// The longest pause between tries to record how an attempt ended.
const RECORD_RETRY_LIMIT: Duration = Duration::from_secs(5);
/// Messages one notification names unless the runtime says otherwise
/// (`--batch`): their ids fit one input line of a wide terminal, and a
/// longer burst takes a few turns, not one per message.
pub const DEFAULT_BATCH: usize = 20;
/// The most one notification may name: its line stays well within the
/// delivery limit ([`crate::delivery::MAX_TEXT_BYTES`]).
pub const MAX_BATCH: usize = 100;

pub type SharedStore = Arc<Mutex<Box<dyn Store>>>;

/// Runs `f` on the store off the event loop (SQLite may wait on a lock).
pub async fn with_store<T: Send + 'static>(
    store: &SharedStore,
    f: impl FnOnce(&dyn Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || {
        let guard = store.lock().unwrap_or_else(|p| p.into_inner());
        f(guard.as_ref())
    })
    .await
    .expect("store task panicked")
}

pub struct Inbox<T: Target> {
    pub store: SharedStore,
    pub session: T,
    pub agent: String,
    pub runtime: String,
    pub endpoint_id: String,
    /// Lease length: a few heartbeats, which extend it while we live.
    pub lease: Duration,
    pub scan_every: Duration,
    /// The most messages one notification names (1: one by one).
    pub batch: usize,
    /// A store call failed since the last drain began.
    pub answer_lost: std::sync::atomic::AtomicBool,
}

impl<T: Target> Inbox<T> {
    pub async fn run(self) {
        let nudges = self.session.nudges();
        if let Err(e) = self.follow_store(&nudges).await {
            tracing::error!("inbox: cannot follow the store: {e}");
        }
        let mut retry = RETRY_FIRST;
        loop {
            let pause = match self.drain().await {
                Ok(()) => {
                    retry = RETRY_FIRST;
                    self.scan_every
                }
                Err(Stop::Ended) => return,
                Err(Stop::Failed) => {
                    let pause = retry;
                    retry = (retry * 2).min(RETRY_LIMIT);
                    pause
                }
                Err(Stop::Store(e)) => {
                    tracing::error!("inbox: {e}");
                    self.scan_every
                }
            };
            let _ = tokio::time::timeout(pause, nudges.notified()).await;
        }
    }

    /// With a store other hosts write to, a message from another host
    /// wakes the inbox as a local `send`'s nudge does: a thread waits on
    /// the store's notifications for this agent until the inbox is gone.
    async fn follow_store(&self, nudges: &Arc<Notify>) -> Result<(), StoreError> {
        let agent = self.agent.clone();
        let follow = with_store(&self.store, move |s| {
            s.spans_hosts().then(|| s.follow(Some(&agent))).transpose()
        })
        .await?;
        let Some(follow) = follow else { return Ok(()) };
        let nudges = Arc::downgrade(nudges);
        std::thread::Builder::new()
            .name("agent-comms-inbox-follow".into())
            .spawn(move || loop {
                let woke = follow.wait(FOLLOW_LOOK);
                let Some(nudges) = nudges.upgrade() else {
                    return;
                };
                if woke {
                    nudges.notify_one();
                }
            })
            .map_err(|source| StoreError::Io {
                path: "inbox follower thread".into(),
                source,
            })?;
        Ok(())
    }

    /// Delivers every waiting message, oldest first, a batch at a time.
    async fn drain(&self) -> Result<(), Stop> {
        // Another runtime of this agent that died mid-delivery holds its
        // messages until the lease runs out; then they are ours to deliver.
        // And after a store call whose answer was lost (it may still have
        // committed a lease this inbox never saw, which its heartbeat would
        // keep alive for good), this runtime's own attempts go back too:
        // between batches it has none in flight.
        let own = self
            .answer_lost
            .swap(false, std::sync::atomic::Ordering::Relaxed)
            .then(|| self.runtime.clone());
        with_store(&self.store, move |s| {
            let now = s.now();
            let mut released = s.release_attempts(
                None,
                now,
                "its lease expired: the runtime stopped mid-delivery",
            )?;
            if let Some(own) = own {
                released.extend(s.release_attempts(
                    Some(&own),
                    now,
                    "the store's answer to its lease was lost",
                )?);
            }
            Ok(released)
        })
        .await
        .map_err(|e| self.lost(e))?;
        loop {
            // Idle first, lease after: what came in meanwhile joins the batch.
            let wait = DeliveryOptions {
                try_only: false,
                timeout_ms: DELIVERY_WAIT.as_millis() as u64,
            };
            let options = match self.session.ready(wait).await {
                Ok(()) => wait,
                Err(DeliveryError::Ended) => return Err(Stop::Ended),
                // Still not ready: the attempt says why, and counts.
                Err(_) => DeliveryOptions {
                    try_only: true,
                    timeout_ms: 0,
                },
            };
            let leased = self.lease().await?;
            if leased.is_empty() {
                return Ok(());
            }
            match self.attempt(&leased, options).await? {
                None | Some(Ok(_)) => {}
                Some(Err(DeliveryError::Ended)) => return Err(Stop::Ended),
                Some(Err(_)) => return Err(Stop::Failed),
            }
        }
    }

    async fn lease(&self) -> Result<Vec<(Invocation, Attempt)>, Stop> {
        let lease = self.lease.as_millis() as u64;
        let (agent, runtime, endpoint, limit) = (
            self.agent.clone(),
            self.runtime.clone(),
            self.endpoint_id.clone(),
            self.batch,
        );
        with_store(&self.store, move |s| {
            let now = s.now();
            s.lease_batch(&agent, &runtime, &endpoint, now, now + lease, limit)
        })
        .await
        .map_err(|e| self.lost(e))
    }

    /// Types one notification naming the `leased` messages, records how it
    /// went for each and announces it. A message whose notification cannot
    /// be composed (an id an older build stored unchecked) is never named:
    /// it is undeliverable. `None`: nothing was typed.
    async fn attempt(
        &self,
        leased: &[(Invocation, Attempt)],
        options: DeliveryOptions,
    ) -> Result<Option<Result<Evidence, DeliveryError>>, Stop> {
        let mut named = Vec::new();
        let mut attempts = Vec::new();
        for (inv, attempt) in leased {
            match Named::new(inv) {
                Ok(n) => {
                    named.push(n);
                    attempts.push((attempt.id, inv.id.clone()));
                }
                Err(e) => {
                    let reason = format!("not typed, and it never can be: {e}");
                    let never = AttemptResult::Undeliverable(reason);
                    self.finish(vec![(attempt.id, inv.id.clone())], never)
                        .await?;
                }
            }
        }
        if named.is_empty() {
            return Ok(None);
        }
        let delivered = self.session.deliver(&notification(&named), options).await;
        let result = match &delivered {
            Ok(evidence) => AttemptResult::Delivered(evidence.clone()),
            Err(e) => AttemptResult::Failed(e.to_string()),
        };
        self.finish(attempts, result).await?;
        Ok(Some(delivered))
    }

    /// Ends the `attempts` (each with its message's id) with `result`, and
    /// tells the clients waiting on those messages how they stand now: one
    /// store call for the whole batch.
    async fn finish(
        &self,
        attempts: Vec<(i64, String)>,
        result: AttemptResult,
    ) -> Result<(), Stop> {
        let mut pause = RETRY_FIRST;
        let now_are = loop {
            let (attempts, result) = (attempts.clone(), result.clone());
            let finished = with_store(&self.store, move |s| {
                let ids: Vec<i64> = attempts.iter().map(|(attempt, _)| *attempt).collect();
                s.finish_attempts(&ids, &result, s.now())?;
                attempts
                    .into_iter()
                    .map(|(_, id)| Ok((s.invocation(&id)?, id)))
                    .collect::<Result<Vec<_>, StoreError>>()
            })
            .await;
            match finished {
                Ok(now_are) => break now_are,
                // What was typed must be recorded, or it is typed again:
                // keep trying while the store is out of reach (the store
                // takes a late report of a delivery nobody leased again).
                Err(e) => {
                    tracing::warn!("inbox: recording a delivery: {e}; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(RECORD_RETRY_LIMIT);
                }
            }
        };
        for (now_is, id) in now_are {
            let (status, reason) = match now_is {
                Some(i) => (i.status, i.reason),
                None => (InvocationStatus::Pending, None),
            };
            self.session.announce(InvocationOutcome {
                id,
                status: status.to_string(),
                reason,
            });
        }
        Ok(())
    }
}

impl<T: Target> Inbox<T> {
    /// A store call failed: whatever it did may still commit (a shared
    /// database cut off mid-answer), so the next drain starts clean.
    fn lost(&self, e: StoreError) -> Stop {
        self.answer_lost
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Stop::Store(e)
    }
}

enum Stop {
    Ended,
    Failed,
    Store(StoreError),
}
