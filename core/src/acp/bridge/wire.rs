//! A client's connection as the ACP crate's line transport.
//!
//! Lines in are bounded in size ([`MAX_CLIENT_LINE`]), in time
//! ([`LINE_DEADLINE`]: a line begun must end) and in rate ([`Pace`]);
//! lines out are
//! counted as they are written, so that the bridge can tell a client that
//! reads nothing from one that is merely busy: the crate queues what the
//! bridge sends, and the count of lines the socket took is the only sign
//! of a reader at the other end.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use futures::{Sink, Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::bounds::{Pace, LINE_DEADLINE, MAX_CLIENT_LINE};
use crate::acp::lines::bounded;

/// A client's lines, in: bounded in size and time, and read at most at
/// the pace [`Pace`] allows.
pub fn incoming<R: AsyncRead + Unpin + Send + 'static>(
    read: R,
) -> impl Stream<Item = io::Result<String>> + Send + 'static {
    let lines = bounded(read, MAX_CLIENT_LINE, Some(LINE_DEADLINE), |len| {
        tracing::warn!(
            "dropped a line of {len} bytes from a client: over the {MAX_CLIENT_LINE}-byte limit"
        );
    });
    let mut pace = Pace::of_lines();
    lines.then(move |line| {
        let wait = pace.take(std::time::Instant::now());
        async move {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            line
        }
    })
}

/// How many lines a client's connection has taken, and a wake-up for each.
#[derive(Default)]
pub struct Written {
    lines: AtomicU64,
    more: Notify,
}

impl Written {
    /// One more line went out (the transport calls this).
    pub fn one_more(&self) {
        self.lines.fetch_add(1, Ordering::Release);
        self.more.notify_waiters();
    }

    pub fn count(&self) -> u64 {
        self.lines.load(Ordering::Acquire)
    }

    /// Waits until the count is at least `at_least`; false when it did not
    /// move for `stalled` (the client reads nothing).
    pub async fn reach(&self, at_least: u64, stalled: Duration) -> bool {
        loop {
            // Registered before the count is read: no wake-up is missed.
            let more = self.more.notified();
            let before = self.count();
            if before >= at_least {
                return true;
            }
            if tokio::time::timeout(stalled, more).await.is_err() && self.count() == before {
                return false;
            }
        }
    }
}

/// Lines for a client, each counted in `written` once the socket took it.
pub fn outgoing<W: AsyncWrite + Unpin + Send + 'static>(
    write: W,
    written: Arc<Written>,
) -> impl Sink<String, Error = io::Error> + Send + 'static {
    futures::sink::unfold(
        (write, written),
        |(mut write, written), line: String| async move {
            let mut bytes = line.into_bytes();
            bytes.push(b'\n');
            write.write_all(&bytes).await?;
            write.flush().await?;
            written.one_more();
            Ok((write, written))
        },
    )
}
