//! What tells a supervisor to end its child and exit.

/// SIGTERM, SIGINT and SIGHUP to the supervisor all mean: end the child, then
/// exit. (In foreground mode the terminal is raw, so a person's Ctrl-C reaches
/// the child as a byte, not the supervisor as a signal.)
#[cfg(unix)]
pub(crate) struct TerminationSignals {
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

/// The console's counterparts: Ctrl-C, Ctrl-Break and closing the console
/// window. A detached supervisor has no console and ends by request only.
#[cfg(windows)]
pub(crate) struct TerminationSignals {
    c: Option<tokio::signal::windows::CtrlC>,
    brk: Option<tokio::signal::windows::CtrlBreak>,
    close: Option<tokio::signal::windows::CtrlClose>,
}

#[cfg(windows)]
impl TerminationSignals {
    pub fn new() -> Self {
        use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close};
        Self {
            c: ctrl_c().ok(),
            brk: ctrl_break().ok(),
            close: ctrl_close().ok(),
        }
    }

    pub async fn recv(&mut self) {
        let Self { c, brk, close } = self;
        tokio::select! {
            Some(()) = async { c.as_mut()?.recv().await } => {}
            Some(()) = async { brk.as_mut()?.recv().await } => {}
            Some(()) = async { close.as_mut()?.recv().await } => {}
            else => std::future::pending().await,
        }
    }
}
