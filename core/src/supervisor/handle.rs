//! What code running beside a supervisor (an interactive runtime's heartbeat
//! and inbox) may do with its session: deliver into it, hear nudges, and
//! announce finished messages to the clients waiting for them.

use std::sync::Arc;

use tokio::sync::{broadcast, Notify};

use super::Shared;
use crate::delivery::{DeliveryError, DeliveryOptions, Evidence};
use crate::socket::protocol::InvocationOutcome;

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

    /// Notified when a client says new messages wait (`send`, `redeliver`).
    pub fn nudges(&self) -> Arc<Notify> {
        self.shared.inbox.nudge.clone()
    }

    /// Tells clients waiting on this message how it ended.
    pub fn announce(&self, outcome: InvocationOutcome) {
        self.shared.inbox.announce(outcome);
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
}

impl Default for InboxLink {
    fn default() -> Self {
        Self {
            nudge: Arc::new(Notify::new()),
            finished: broadcast::channel(64).0,
            recent: Default::default(),
        }
    }
}

impl InboxLink {
    fn announce(&self, outcome: InvocationOutcome) {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() == RECENT_OUTCOMES {
            recent.pop_front();
        }
        recent.push_back(outcome.clone());
        drop(recent);
        let _ = self.finished.send(outcome);
    }

    /// How `id` ended, if it already did.
    pub fn recent(&self, id: &str) -> Option<InvocationOutcome> {
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.iter().rev().find(|o| o.id == id).cloned()
    }
}
