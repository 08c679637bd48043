//! Turn state, kept by the supervisor itself: one turn at a time.
//!
//! A prompt's response is not always the end of a turn when prompts
//! overlap (one agent holds a queued prompt's response back until the next
//! turn ends; another ends the running turn when prompted). So prompts never
//! overlap here: a prompt is sent only while no turn runs, writers queue
//! first come, first served (a fair lock), and the turn that a prompt
//! started ends with that prompt's response. Nothing is ever sent to find out
//! whether the agent is busy.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;

use crate::time::unix_millis;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Running {
    /// When the turn began, its prompt going out (Unix ms).
    pub sent: u64,
    /// When the agent's first update of the turn came.
    pub first_update: Option<u64>,
}

pub struct Turns {
    /// Held by the one writer whose prompt runs; waiters queue in order.
    writer: tokio::sync::Mutex<()>,
    running: Mutex<Option<Running>>,
    /// Turns ended so far, and how the last one ended; `cancel` waits on it.
    ended: watch::Sender<(u64, Option<String>)>,
}

impl Default for Turns {
    fn default() -> Self {
        Self {
            writer: tokio::sync::Mutex::new(()),
            running: Mutex::new(None),
            ended: watch::channel((0, None)).0,
        }
    }
}

/// Why a turn could not start.
#[derive(Debug, PartialEq, Eq)]
pub enum NoTurn {
    /// `--try`, and a turn runs or another writer waits.
    Busy,
    /// The wait for the running turn's end ran out.
    Timeout,
}

/// The right to run one turn; the turn ends when it drops.
pub struct TurnGuard<'a> {
    turns: &'a Turns,
    _writer: tokio::sync::MutexGuard<'a, ()>,
    stop_reason: Option<String>,
}

impl Turns {
    /// Waits until no turn runs and it is this writer's turn, at most
    /// `wait`; with `try_only`, not at all. The turn runs from here: the
    /// caller sends its prompt at once.
    pub async fn begin(&self, try_only: bool, wait: Duration) -> Result<TurnGuard<'_>, NoTurn> {
        let writer = self.writer(try_only, wait).await?;
        *self.lock() = Some(Running {
            sent: unix_millis(),
            first_update: None,
        });
        Ok(TurnGuard {
            turns: self,
            _writer: writer,
            stop_reason: None,
        })
    }

    /// Waits, as [`Turns::begin`] does, until a turn could begin, and
    /// begins none: the caller decides then what to prompt.
    pub async fn ready(&self, try_only: bool, wait: Duration) -> Result<(), NoTurn> {
        self.writer(try_only, wait).await.map(drop)
    }

    async fn writer(
        &self,
        try_only: bool,
        wait: Duration,
    ) -> Result<tokio::sync::MutexGuard<'_, ()>, NoTurn> {
        if try_only {
            self.writer.try_lock().map_err(|_| NoTurn::Busy)
        } else {
            tokio::time::timeout(wait, self.writer.lock())
                .await
                .map_err(|_| NoTurn::Timeout)
        }
    }

    /// An update of the session came: the first one of a turn shows the
    /// agent took the prompt.
    pub fn saw_update(&self) {
        if let Some(running) = self.lock().as_mut() {
            running.first_update.get_or_insert_with(unix_millis);
        }
    }

    /// The turn running now, if any.
    pub fn running(&self) -> Option<Running> {
        *self.lock()
    }

    /// Resolves when the turn running now has ended, with its stop
    /// reason (none: it ended without one, or no turn ran). Watching starts
    /// here, before the future is first polled, so an end that comes
    /// between cannot be missed.
    pub fn turn_end(&self) -> impl std::future::Future<Output = Option<String>> + Send + 'static {
        let mut ended = self.ended.subscribe();
        let running = self.running().is_some();
        async move {
            if !running || ended.changed().await.is_err() {
                return None;
            }
            let reason = ended.borrow().1.clone();
            reason
        }
    }

    /// Changes each time a turn ends.
    pub fn watch_ended(&self) -> watch::Receiver<(u64, Option<String>)> {
        self.ended.subscribe()
    }

    /// Turns ended since start.
    pub fn ended_count(&self) -> u64 {
        self.ended.borrow().0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl TurnGuard<'_> {
    /// The turn as it stands.
    pub fn running(&self) -> Running {
        self.turns.running().expect("a guarded turn runs")
    }

    /// The turn ended with `stop_reason`.
    pub fn finish(mut self, stop_reason: Option<String>) {
        self.stop_reason = stop_reason;
    }
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        *self.turns.lock() = None;
        let reason = self.stop_reason.take();
        self.turns.ended.send_modify(|(n, last)| {
            *n += 1;
            *last = reason;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_turn_at_a_time_and_try_fails_at_once() {
        let turns = Turns::default();
        let first = turns.begin(false, Duration::from_secs(1)).await.unwrap();
        assert!(turns.running().is_some());
        assert_eq!(
            turns.begin(true, Duration::ZERO).await.err(),
            Some(NoTurn::Busy)
        );
        assert_eq!(
            turns.begin(false, Duration::from_millis(20)).await.err(),
            Some(NoTurn::Timeout)
        );
        turns.saw_update();
        assert!(first.running().first_update.is_some());
        let end = turns.turn_end();
        first.finish(Some("end_turn".into()));
        assert_eq!(end.await.as_deref(), Some("end_turn"));
        assert!(turns.running().is_none());
        assert_eq!(turns.ended_count(), 1);
        assert!(turns.begin(true, Duration::ZERO).await.is_ok());
    }

    #[tokio::test]
    async fn waiters_run_in_arrival_order() {
        let turns = std::sync::Arc::new(Turns::default());
        let order = std::sync::Arc::new(Mutex::new(Vec::new()));
        let held = turns.begin(false, Duration::from_secs(1)).await.unwrap();
        let mut tasks = Vec::new();
        for i in 0..5 {
            let (turns, order) = (turns.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _turn = turns.begin(false, Duration::from_secs(5)).await.unwrap();
                order.lock().unwrap().push(i);
            }));
            // Each waiter queues before the next one starts.
            tokio::task::yield_now().await;
        }
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 4]);
    }
}
