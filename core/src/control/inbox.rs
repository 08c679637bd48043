//! A runtime's inbox: the task beside an interactive supervisor that takes
//! its agent's messages from the store, in order, and delivers the
//! notification for each.
//!
//! It leases one message at a time (the store refuses a second lease for the
//! same agent while one is out), delivers, and records the outcome with its
//! evidence. A nudge wakes it at once; a periodic look catches a message
//! whose nudge was missed (sent while the runtime was starting). A failed
//! attempt puts the message back and the inbox waits a little before trying
//! again, so a program that never echoes is not typed into in a loop; after
//! [`crate::store::MAX_FAILED_ATTEMPTS`] failures the store gives the
//! message up (FAILED), so one message never holds its agent's queue for
//! good. A message whose notification cannot even be composed (an id an
//! older build stored unchecked) fails at once, with nothing typed.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::messages::notification;
use crate::delivery::{DeliveryError, DeliveryOptions};
use crate::socket::protocol::InvocationOutcome;
use crate::store::{AttemptResult, Evidence, Invocation, InvocationStatus, Store, StoreError};
use crate::supervisor::SessionHandle;
use crate::time::unix_millis;

/// What an inbox delivers into: a PTY session (typed into its prompt) or
/// an ACP session (sent as a prompt).
pub trait Target: Send + Sync + 'static {
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

/// How long one delivery may wait for the program to become idle before the
/// attempt is released and taken again.
const DELIVERY_WAIT: Duration = Duration::from_secs(600);
/// Pause after a failed attempt, doubled up to the limit while failures go on.
const RETRY_FIRST: Duration = Duration::from_secs(2);
const RETRY_LIMIT: Duration = Duration::from_secs(60);

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
}

impl<T: Target> Inbox<T> {
    pub async fn run(self) {
        let nudges = self.session.nudges();
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

    /// Delivers every waiting message, oldest first.
    async fn drain(&self) -> Result<(), Stop> {
        // Another runtime of this agent that died mid-delivery holds its
        // message until the lease runs out; then it is ours to deliver.
        with_store(&self.store, |s| {
            s.release_attempts(
                None,
                unix_millis(),
                "its lease expired: the runtime stopped mid-delivery",
            )
        })
        .await
        .map_err(Stop::Store)?;
        loop {
            let now = unix_millis();
            let lease_until = now + self.lease.as_millis() as u64;
            let (agent, runtime, endpoint) = (
                self.agent.clone(),
                self.runtime.clone(),
                self.endpoint_id.clone(),
            );
            let leased = with_store(&self.store, move |s| {
                s.lease_next(&agent, &runtime, &endpoint, now, lease_until)
            })
            .await
            .map_err(Stop::Store)?;
            let Some((inv, attempt)) = leased else {
                return Ok(());
            };
            let id = attempt.id;
            let (result, delivered) = self.attempt(&inv).await;
            let inv_id = inv.id.clone();
            let now_is = with_store(&self.store, move |s| {
                s.finish_attempt(id, &result, unix_millis())?;
                s.invocation(&inv_id)
            })
            .await
            .map_err(Stop::Store)?;
            let (status, reason) = match now_is {
                Some(i) => (i.status, i.reason),
                None => (InvocationStatus::Pending, None),
            };
            self.session.announce(InvocationOutcome {
                id: inv.id.clone(),
                status: status.to_string(),
                reason,
            });
            match delivered {
                Some(Ok(_)) | None => {}
                Some(Err(DeliveryError::Ended)) => return Err(Stop::Ended),
                Some(Err(_)) => return Err(Stop::Failed),
            }
        }
    }

    /// Types `inv`'s notification. A notification that cannot be composed
    /// (an id an older build stored unchecked) is never typed: the message
    /// is undeliverable, and no delivery was tried (`None`).
    async fn attempt(
        &self,
        inv: &Invocation,
    ) -> (AttemptResult, Option<Result<Evidence, DeliveryError>>) {
        let text = match notification(inv) {
            Ok(text) => text,
            Err(e) => {
                let reason = format!("not typed, and it never can be: {e}");
                return (AttemptResult::Undeliverable(reason), None);
            }
        };
        let options = DeliveryOptions {
            try_only: false,
            timeout_ms: DELIVERY_WAIT.as_millis() as u64,
        };
        let delivered = self.session.deliver(&text, options).await;
        let result = match &delivered {
            Ok(evidence) => AttemptResult::Delivered(evidence.clone()),
            Err(e) => AttemptResult::Failed(e.to_string()),
        };
        (result, Some(delivered))
    }
}

enum Stop {
    Ended,
    Failed,
    Store(StoreError),
}
