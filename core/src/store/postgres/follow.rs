//! Following the store from any host: `LISTEN agent_comms` on a connection
//! of its own, on a thread of its own.
//!
//! Notifications sent while the connection was down are lost (PostgreSQL
//! keeps none for a listener that is not there), so every (re)connection
//! counts as a wake-up: whoever follows re-reads the store then — the
//! bounded re-check that covers a partition or a database restart. The
//! thread reconnects by itself, waiting a little longer after each failure
//! up to [`RECONNECT_LIMIT`], and ends when its follower is dropped. A
//! server that went away closes the socket; a link that went dead is found
//! by the TCP keepalives the target sets, within seconds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;

use super::target::Target;
use crate::store::Follow;

/// How often the thread looks whether its follower is gone.
const LOOK_EVERY: Duration = Duration::from_millis(500);
const RECONNECT_FIRST: Duration = Duration::from_millis(100);
const RECONNECT_LIMIT: Duration = Duration::from_secs(2);

/// Wake-ups from notifications on one channel (for one recipient, or all).
pub(crate) struct PgFollower {
    woke: mpsc::Receiver<()>,
    stop: Arc<AtomicBool>,
}

impl PgFollower {
    pub fn start(target: Target, channel: &'static str, to: Option<String>) -> PgFollower {
        let (wake, woke) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        thread::Builder::new()
            .name("agent-comms-listen".into())
            .spawn(move || listen(&target, channel, to.as_deref(), &wake, &stopped))
            .expect("spawn the store's listening thread");
        PgFollower { woke, stop }
    }
}

impl Follow for PgFollower {
    fn wait(&self, at_most: Duration) -> bool {
        let woke = self.woke.recv_timeout(at_most).is_ok();
        // One read covers every notification that came meanwhile.
        while self.woke.try_recv().is_ok() {}
        woke
    }
}

impl Drop for PgFollower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn listen(
    target: &Target,
    channel: &str,
    to: Option<&str>,
    wake: &mpsc::Sender<()>,
    stop: &AtomicBool,
) {
    let mut pause = RECONNECT_FIRST;
    while !stop.load(Ordering::Relaxed) {
        let mut client = match target.connect() {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!("listen: {e}");
                thread::sleep(pause);
                pause = (pause * 2).min(RECONNECT_LIMIT);
                continue;
            }
        };
        if let Err(e) = client.batch_execute(&format!("LISTEN {channel}")) {
            tracing::debug!("listen: {e}");
            continue;
        }
        pause = RECONNECT_FIRST;
        // Connected: what was missed while away is read now.
        if wake.send(()).is_err() {
            return;
        }
        while !stop.load(Ordering::Relaxed) && !client.is_closed() {
            let mut notifications = client.notifications();
            let mut batch = notifications.timeout_iter(LOOK_EVERY);
            loop {
                match batch.next() {
                    Ok(Some(n)) => {
                        if to.is_none_or(|to| n.payload() == to) && wake.send(()).is_err() {
                            return;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!("listen: {e}");
                        break;
                    }
                }
            }
        }
    }
}
