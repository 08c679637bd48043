//! The server's own accept loop, for what `axum::serve` cannot bound: how
//! many connections it holds at once, and how long a request may take to
//! send its headers. Without them, anyone who can reach the port — no token
//! needed — holds the server's file descriptors for as long as they like.
//!
//! hyper serves each connection (with upgrades, for the WebSocket); a
//! connection past [`MAX_CONNECTIONS`] is closed as soon as it is accepted.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// HTTP connections the server holds at once. A WebSocket leaves hyper
/// once upgraded, and is bounded on its own ([`crate::routes`]).
pub const MAX_CONNECTIONS: usize = 64;
/// How long a request may take to send its headers (an idle keep-alive
/// connection is closed after it too).
pub const HEADER_DEADLINE: Duration = Duration::from_secs(10);

/// Accepts and serves connections until the task is dropped.
pub async fn serve(listener: TcpListener, app: Router) -> std::io::Result<()> {
    let places = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut refused = Refused::default();
    loop {
        let (stream, from) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of descriptors, or a connection reset before it was
            // taken: the listener itself is fine.
            Err(e) if is_transient(&e) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        let Ok(place) = places.clone().try_acquire_owned() else {
            refused.count(from);
            drop(stream);
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let served = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_DEADLINE)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
            if let Err(e) = served {
                tracing::debug!("a web connection from {from} ended: {e}");
            }
            drop(place);
        });
    }
}

/// How often connections closed for want of a place are logged at most:
/// the first at once, then one line for all that came in between, so that
/// a flood of them does not fill the log.
const REFUSALS_LOGGED_EVERY: Duration = Duration::from_secs(60);

/// Connections closed for want of a place, counted; logged seldom.
#[derive(Default)]
struct Refused {
    unlogged: u64,
    logged_at: Option<std::time::Instant>,
}

impl Refused {
    fn count(&mut self, from: std::net::SocketAddr) {
        self.unlogged += 1;
        let now = std::time::Instant::now();
        if self
            .logged_at
            .is_some_and(|at| now.duration_since(at) < REFUSALS_LOGGED_EVERY)
        {
            return;
        }
        tracing::warn!(
            "the web server closed {} connection(s) in the last {} s, the last from {from}: it holds {MAX_CONNECTIONS}, the most it may",
            self.unlogged,
            REFUSALS_LOGGED_EVERY.as_secs()
        );
        self.unlogged = 0;
        self.logged_at = Some(now);
    }
}

fn is_transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionAborted | ConnectionReset | Interrupted)
        || e.raw_os_error() == Some(24) // EMFILE
        || e.raw_os_error() == Some(23) // ENFILE
}
