//! Accepting connections without spinning when accepting fails.
//!
//! When `accept` fails (out of file descriptors, EMFILE or ENFILE, is the
//! common case) the connection stays queued and the listener stays
//! readable, so retrying at once spins a core and starves the session. The
//! listener instead waits before it retries, twice as long each time up to
//! [`MAX_BACKOFF`], and logs a burst of failures once, at its start, and
//! once more when accepting works again. Connections already accepted run
//! in their own tasks and are served meanwhile.

use std::time::Duration;

use tokio::time::Instant;

use super::{RawListener, Stream};

/// The first wait after a failed accept.
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
/// The longest wait: how late a connection is taken once descriptors are
/// free again.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

pub struct Listener {
    raw: RawListener,
    /// Failed accepts since the last one that worked.
    failures: u32,
    retry_at: Option<Instant>,
}

impl Listener {
    pub(super) fn new(raw: RawListener) -> Self {
        Self {
            raw,
            failures: 0,
            retry_at: None,
        }
    }

    /// The next connection. Cancel-safe: a wait in progress is kept, so
    /// polling this again resumes it rather than retrying at once.
    pub async fn accept(&mut self) -> Stream {
        loop {
            if let Some(at) = self.retry_at {
                tokio::time::sleep_until(at).await;
                self.retry_at = None;
            }
            match self.raw.accept().await {
                Ok(stream) => {
                    if self.failures > 0 {
                        tracing::info!(
                            "accepting connections again after {} failed attempts",
                            self.failures
                        );
                        self.failures = 0;
                    }
                    return stream;
                }
                Err(e) => {
                    if self.failures == 0 {
                        tracing::warn!(
                            "cannot accept a connection: {e}; retrying at most every {MAX_BACKOFF:?} while the open connections are served"
                        );
                    }
                    self.failures = self.failures.saturating_add(1);
                    self.retry_at = Some(Instant::now() + backoff(self.failures));
                }
            }
        }
    }
}

/// The wait after the `failures`-th failure in a row.
fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    (FIRST_BACKOFF * 2u32.pow(doublings)).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_up_to_its_bound() {
        assert_eq!(backoff(1), FIRST_BACKOFF);
        assert_eq!(backoff(2), FIRST_BACKOFF * 2);
        assert_eq!(backoff(100), MAX_BACKOFF);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }
}
