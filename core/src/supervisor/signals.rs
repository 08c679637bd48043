//! What tells a supervisor to end its child and exit.

/// SIGTERM, SIGINT and SIGHUP to the supervisor all mean: end the child, then
/// exit. (In foreground mode the terminal is raw, so a person's Ctrl-C reaches
/// the child as a byte, not the supervisor as a signal.)
#[cfg(unix)]
pub(super) struct TerminationSignals {
    term: Option<tokio::signal::unix::Signal>,
    int: Option<tokio::signal::unix::Signal>,
    hup: Option<tokio::signal::unix::Signal>,
}

#[cfg(unix)]
impl TerminationSignals {
    pub fn new() -> Self {
        use tokio::signal::unix::{signal, SignalKind};
        Self {
            term: signal(SignalKind::terminate()).ok(),
            int: signal(SignalKind::interrupt()).ok(),
            hup: signal(SignalKind::hangup()).ok(),
        }
    }

    pub async fn recv(&mut self) {
        async fn one(s: &mut Option<tokio::signal::unix::Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            _ = one(&mut self.term) => {}
            _ = one(&mut self.int) => {}
            _ = one(&mut self.hup) => {}
        }
    }
}
