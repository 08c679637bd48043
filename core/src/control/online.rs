//! A served runtime going ONLINE and OFFLINE: the same for a provider in
//! a PTY (`interactive-serve`) and an agent over ACP (`acp-serve`).
//!
//! Going online, the record is published with its endpoint and the pid
//! that serves it, and the attempts a killed serve of it left behind go
//! back to the queue before the inbox starts, so they are delivered first,
//! in order. Then a heartbeat (which also extends the lease of the delivery
//! in flight) and the inbox run beside the session until it ends.

use std::time::Duration;

use super::inbox::{with_store, Inbox, SharedStore, Target};
use super::registration::STALE_AFTER_BEATS;
use super::ControlError;
use crate::store::{RuntimeRecord, RuntimeStatus};

/// What a runtime is published with.
pub(super) struct Online {
    pub store: SharedStore,
    pub host: String,
    pub endpoint: String,
    pub endpoint_id: String,
    pub agent: String,
    /// The adapter's name.
    pub provider: Option<String>,
    pub heartbeat: Duration,
    /// The most messages one notification names.
    pub batch: usize,
}

impl Online {
    /// Publishes `record` ONLINE, served by process `pid`, and returns the
    /// attempts an earlier serve of it held to the queue.
    pub fn publish(&self, record: &mut RuntimeRecord, pid: u32) -> Result<(), ControlError> {
        let guard = self.store.lock().unwrap_or_else(|p| p.into_inner());
        let now = guard.now();
        record.status = RuntimeStatus::Online;
        record.status_reason = None;
        record.host = Some(self.host.clone());
        record.endpoint = Some(self.endpoint.clone());
        record.endpoint_id = Some(self.endpoint_id.clone());
        record.pid = Some(pid);
        record.heartbeat_ms = self.heartbeat.as_millis() as u64;
        record.last_heartbeat = Some(now);
        record.provider = self.provider.clone();
        record.updated = now;
        guard.save_runtime(record)?;
        guard.release_attempts(
            Some(&record.id),
            now,
            "the runtime restarted during this delivery",
        )?;
        Ok(())
    }

    /// Starts the heartbeat and the inbox delivering into `target`, in the
    /// current runtime; they end with it.
    pub fn start_tasks<T: Target>(self, runtime: String, target: T) {
        // A few heartbeats: they extend it while the runtime lives.
        let lease = self.heartbeat * STALE_AFTER_BEATS as u32;
        tokio::spawn(beat(
            self.store.clone(),
            runtime.clone(),
            self.endpoint_id.clone(),
            self.heartbeat,
            lease,
        ));
        tokio::spawn(
            Inbox {
                store: self.store,
                session: target,
                agent: self.agent,
                runtime,
                endpoint_id: self.endpoint_id,
                lease,
                scan_every: self.heartbeat,
                batch: self.batch,
                answer_lost: Default::default(),
            }
            .run(),
        );
    }
}

/// Marks the runtime OFFLINE with `reason` and returns the attempt it held
/// to the queue.
pub(super) fn go_offline(
    store: &SharedStore,
    id: &str,
    endpoint_id: &str,
    reason: &str,
) -> Result<(), ControlError> {
    let guard = store.lock().unwrap_or_else(|p| p.into_inner());
    let now = guard.now();
    guard.set_offline(id, endpoint_id, reason, now)?;
    guard.release_attempts(
        Some(id),
        now,
        "the runtime went offline during this delivery",
    )?;
    Ok(())
}

/// Heartbeats until the process ends; each beat also extends the lease of
/// the delivery in flight, so only a dead runtime's attempts expire.
async fn beat(
    store: SharedStore,
    runtime: String,
    endpoint_id: String,
    every: Duration,
    lease: Duration,
) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let (runtime, endpoint_id) = (runtime.clone(), endpoint_id.clone());
        let lease = lease.as_millis() as u64;
        match with_store(&store, move |s| {
            let now = s.now();
            s.heartbeat(&runtime, &endpoint_id, now, now + lease)
        })
        .await
        {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!("another start replaced this runtime's record; heartbeat stopped");
                return;
            }
            Err(e) => tracing::error!("heartbeat: {e}"),
        }
    }
}
