//! Blocking waits that end when their caller gives up.
//!
//! A wait runs on a blocking thread (it reads a supervisor's events or the
//! store), so a cancelled call cannot simply drop it: it is handed a flag,
//! set when the call's cancellation token fires, and looks at it at least
//! every [`CANCEL_CHECK`] between the events it waits for.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::reply::ToolError;

/// How often a blocked wait looks whether its caller gave up.
pub const CANCEL_CHECK: Duration = Duration::from_millis(200);

/// Runs `wait` on a blocking thread with a flag that `cancelled` sets.
pub async fn until_cancelled<T: Send + 'static>(
    cancelled: CancellationToken,
    wait: impl FnOnce(&AtomicBool) -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    let gave_up = Arc::new(AtomicBool::new(false));
    let watcher = {
        let gave_up = gave_up.clone();
        tokio::spawn(async move {
            cancelled.cancelled().await;
            gave_up.store(true, Ordering::Relaxed);
        })
    };
    let result = tokio::task::spawn_blocking(move || wait(&gave_up)).await;
    watcher.abort();
    result.map_err(|e| ToolError::new(format!("the wait failed: {e}")))?
}
