//! Foreground mode: the supervisor runs in the user's terminal.
//!
//! The terminal is put in raw mode and passed through both ways, so the
//! person keeps the program's native UI while the endpoint socket lets other
//! programs snapshot, send and attach. The real terminal answers the
//! program's queries, so the screen model stays silent. Raw mode is restored
//! on every way out: normal exit, error, and panic (the guard's Drop).

use std::io::{Read, Write};

use super::{runtime, SessionHandle, Shared, Supervisor, SupervisorConfig, SupervisorError};
use crate::pty::size::clamped;
use crate::socket::protocol::ExitInfo;
// Raw mode is termios on Unix and console modes on Windows.
pub use crate::os::{terminal_size, RawModeGuard};

/// Runs `config` in the foreground until the child exits; returns its exit.
/// `banner` is printed once before raw mode (e.g. which runtime this is).
/// `beside` runs once the session is up, inside its event loop, to start
/// tasks that live as long as the session (a runtime's heartbeat, inbox).
pub fn run_foreground(
    mut config: SupervisorConfig,
    banner: Option<&str>,
    beside: impl FnOnce(SessionHandle),
) -> Result<ExitInfo, SupervisorError> {
    if let Some((rows, cols)) = terminal_size() {
        (config.spawn.rows, config.spawn.cols) = clamped(rows, cols);
    }
    if let Some(banner) = banner {
        eprintln!("{banner}");
    }
    let rt = runtime()?;
    rt.block_on(async move {
        let supervisor = Supervisor::start(config)?;
        beside(supervisor.handle());
        let guard = RawModeGuard::enable();
        let shared = supervisor.shared().clone();
        // Before the person counts as a client, so that a resize after
        // `session ls` shows them is followed.
        follow_resizes(shared.clone());
        {
            let mut state = shared.lock();
            state.foreground_terminal = guard.is_terminal();
            // The person at that terminal is a client too (`session ls`).
            if state.foreground_terminal {
                state.info.clients += 1;
            }
            state.update_responder();
        }
        // Keystrokes: a blocking thread, since stdin cannot be made async
        // without changing the caller's file description flags.
        let input = shared.clone();
        std::thread::Builder::new()
            .name("stdin-relay".into())
            .spawn(move || {
                let mut buf = [0u8; 4096];
                let mut stdin = std::io::stdin().lock();
                while let Ok(n) = stdin.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    input.lock().keys_from_person(&buf[..n]);
                    input.changed.notify_waiters();
                }
            })
            .map_err(SupervisorError::Runtime)?;
        let mut stdout = std::io::stdout();
        let info = supervisor
            .run(
                |bytes| {
                    let _ = stdout.write_all(bytes);
                    let _ = stdout.flush();
                },
                || {},
            )
            .await;
        drop(guard);
        Ok(info)
    })
}

/// The session takes the person's terminal size whenever it changes: on
/// SIGWINCH, in a task of the session's event loop. The handler is in place
/// when this returns; a SIGWINCH before it would be ignored.
#[cfg(unix)]
fn follow_resizes(shared: Shared) {
    let Ok(mut winch) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
    else {
        return;
    };
    tokio::spawn(async move {
        while winch.recv().await.is_some() {
            if let Some((rows, cols)) = terminal_size() {
                let (rows, cols) = clamped(rows, cols);
                let _ = shared.lock().resize(rows, cols);
            }
        }
    });
}

/// Windows sends no resize signal: the console's size is polled (see
/// os::watch_resizes), on a thread that ends with the process, as the
/// keystrokes' does.
#[cfg(windows)]
fn follow_resizes(shared: Shared) {
    crate::os::watch_resizes(move |rows, cols| {
        let (rows, cols) = clamped(rows, cols);
        let _ = shared.lock().resize(rows, cols);
        true
    });
}
