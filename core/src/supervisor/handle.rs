//! What code running beside a supervisor (an interactive runtime's heartbeat
//! and inbox) may do with its session: deliver into it, hear nudges, and
//! announce finished messages to the clients waiting for them.

use std::sync::Arc;

use tokio::sync::{broadcast, watch, Notify};

use super::Shared;
use crate::delivery::{DeliveryError, DeliveryOptions, Evidence};
use crate::socket::protocol::{InvocationOutcome, Response};
use crate::takeover::{ConversationDiscovery, ProcessInfo, ProviderEnv};
use tokio::sync::broadcast::error::RecvError;

/// Outcomes remembered for a client that asks after one already finished.
const RECENT_OUTCOMES: usize = 256;

#[derive(Clone)]
pub struct SessionHandle {
    pub(super) shared: Shared,
}

impl SessionHandle {
    /// Delivers `text` with the session's coordinator (see [`crate::delivery`]).
    pub async fn deliver(
        &self,
        text: &str,
        options: DeliveryOptions,
    ) -> Result<Evidence, DeliveryError> {
        if self.shared.lock().cells.is_some() {
            return Err(DeliveryError::RunsCells);
        }
        let coordinator = self.shared.delivery.clone();
        let mut exit = self.shared.exit.clone();
        tokio::select! {
            result = coordinator.deliver(&self.shared, text, options) => result,
            _ = exit.wait_for(Option::is_some) => Err(DeliveryError::Ended),
        }
    }

    /// Waits until a delivery could start now (see
    /// [`crate::delivery::DeliveryCoordinator::ready`]).
    pub async fn ready(&self, options: DeliveryOptions) -> Result<(), DeliveryError> {
        if self.shared.lock().cells.is_some() {
            return Err(DeliveryError::RunsCells);
        }
        let coordinator = self.shared.delivery.clone();
        let mut exit = self.shared.exit.clone();
        tokio::select! {
            result = coordinator.ready(&self.shared, options) => result,
            _ = exit.wait_for(Option::is_some) => Err(DeliveryError::Ended),
        }
    }

    /// Notified when a client says new messages wait (`send`, `redeliver`).
    pub fn nudges(&self) -> Arc<Notify> {
        self.shared.inbox.nudge.clone()
    }

    /// Tells clients waiting on this message how it ended.
    pub fn announce(&self, outcome: InvocationOutcome) {
        self.shared.inbox.announce(outcome);
    }

    /// From now on, `read` tells the adapter what the program reports it
    /// is doing: busy is taken as busy, and idle — with the screen not
    /// saying busy — at once, without the debounce.
    pub fn take_reports_from(&self, read: super::ReportedActivity) {
        self.shared.lock().reports = Some(read);
    }

    /// [`take_reports_from`](Self::take_reports_from) the files in which
    /// the program, as `discovery` knows it, reports its activity (Claude
    /// Code's `sessions/<pid>.json`), read with the program's environment.
    pub fn take_reports_of(&self, discovery: Arc<dyn ConversationDiscovery>) {
        let pid = self.child_pid();
        let env = ProcessInfo::read(pid)
            .map(|p| ProviderEnv::of(&p))
            .unwrap_or_else(|_| ProviderEnv::current());
        self.take_reports_from(Box::new(move || discovery.reported_activity(pid, &env)));
    }

    /// The program's pid.
    pub fn child_pid(&self) -> u32 {
        self.shared.lock().info.record.pid
    }

    /// Ends the program (as `session kill` does); the supervisor then exits.
    pub fn terminate(&self) {
        let _ = self.shared.terminate.send(self.shared.kill_grace);
    }
}

/// The inbox side of a runtime session, shared with connections.
pub(crate) struct InboxLink {
    pub nudge: Arc<Notify>,
    pub finished: broadcast::Sender<InvocationOutcome>,
    recent: std::sync::Mutex<std::collections::VecDeque<InvocationOutcome>>,
    /// Counts nudges and outcomes, for the status stream (which must not
    /// wait on `nudge`: that would take the inbox's wake-up).
    pub changes: watch::Sender<u64>,
}

impl Default for InboxLink {
    fn default() -> Self {
        Self {
            nudge: Arc::new(Notify::new()),
            finished: broadcast::channel(64).0,
            recent: Default::default(),
            changes: watch::channel(0).0,
        }
    }
}

impl InboxLink {
    /// How the last delivery ended, if one did.
    pub fn last(&self) -> Option<InvocationOutcome> {
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.back().cloned()
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    pub fn announce(&self, outcome: InvocationOutcome) {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() == RECENT_OUTCOMES {
            recent.pop_front();
        }
        recent.push_back(outcome.clone());
        drop(recent);
        let _ = self.finished.send(outcome);
        self.changed();
    }

    /// Wakes the inbox; with `wait_for`, answers once that message's
    /// delivery attempt ended, at most `timeout_ms`, or when `ended` (the
    /// session's end) resolves.
    pub async fn nudge(
        &self,
        wait_for: Option<String>,
        timeout_ms: u64,
        ended: impl std::future::Future<Output = ()>,
    ) -> Response {
        // The id is echoed in replies and compared with the store's.
        if let Some(Err(e)) = wait_for.as_deref().map(crate::ids::Id::message) {
            return Response::Error {
                message: e.to_string(),
            };
        }
        // Subscribe before waking the inbox, so the outcome cannot be missed.
        let mut finished = self.finished.subscribe();
        self.nudge.notify_one();
        self.changed();
        let Some(id) = wait_for else {
            return Response::Ok;
        };
        if let Some(outcome) = self.recent(&id) {
            return Response::Invocation(outcome);
        }
        let wait = async {
            loop {
                match finished.recv().await {
                    Ok(outcome) if outcome.id == id => return Some(outcome),
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => {
                        if let Some(outcome) = self.recent(&id) {
                            return Some(outcome);
                        }
                    }
                    Err(RecvError::Closed) => return None,
                }
            }
        };
        let ended_error = || Response::Error {
            message: DeliveryError::Ended.to_string(),
        };
        let timeout = std::time::Duration::from_millis(timeout_ms);
        tokio::select! {
            outcome = tokio::time::timeout(timeout, wait) => match outcome {
                Ok(Some(outcome)) => Response::Invocation(outcome),
                Ok(None) => ended_error(),
                Err(_) => Response::Error { message: format!("message {id} was not delivered within {} s; see: agent-comms message show {id}", timeout_ms.div_ceil(1000)) },
            },
            _ = ended => ended_error(),
        }
    }

    /// How `id` ended, if it already did.
    pub fn recent(&self, id: &str) -> Option<InvocationOutcome> {
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.iter().rev().find(|o| o.id == id).cloned()
    }
}
