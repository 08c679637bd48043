//! `attach` and `watch`: a real terminal wired to a session.
//!
//! The terminal goes raw; keystrokes travel as input frames and output
//! frames are written as they come. The detach key is recognised here, on
//! the client side, so a supervisor never has to guess which byte means
//! "leave": the session keeps running, untouched, after a detach.

use std::io::{Read, Write};

use super::{Client, ClientError};
use crate::pty::size::clamped;
use crate::socket::codec::{encode, Frame, Message};
use crate::socket::protocol::{Event, ExitInfo, Request, Response, StreamMode};
use crate::socket::ClientStream;
use crate::supervisor::foreground::{terminal_size, RawModeGuard};

/// Ctrl-\ — what `attach` leaves with unless told otherwise.
pub const DEFAULT_DETACH_KEY: u8 = 0x1c;

/// How an attach or watch ended.
#[derive(Debug)]
pub enum StreamEnd {
    Detached,
    Exited(ExitInfo),
    /// The supervisor went away without saying why.
    Lost,
}

/// Modes a full-screen program may have left on; undone after a detach so
/// the user's shell is usable again.
const RESET_TERMINAL: &[u8] =
    b"\x1b[?1049l\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1004l\x1b[?25h\x1b[0m\r\n";

/// Streams session output to stdout (and, when `mode` is interactive,
/// stdin to the session) until detach, exit or loss. `banner` (where and
/// how to leave) is drawn on the terminal's last row right after the
/// first redraw, which would have wiped anything printed before it; it
/// stays until the program draws on that row.
pub fn stream(
    mut client: Client,
    mode: StreamMode,
    detach_key: u8,
    mut banner: Option<String>,
) -> Result<StreamEnd, ClientError> {
    // First, so that a connection that cannot be shared fails before the
    // terminal or the session is touched.
    let writer = client.try_clone_stream()?;
    let size = terminal_size().map(|(rows, cols)| clamped(rows, cols));
    client.send(Message::Request(Request::Attach {
        mode,
        rows: size.map(|s| s.0),
        cols: size.map(|s| s.1),
    }))?;
    let guard = RawModeGuard::enable();
    // The resize watcher blocks SIGWINCH first, so that every thread
    // spawned after it inherits the mask and only its sigwait sees it.
    if mode == StreamMode::Interactive {
        spawn_resize_watch(writer.try_clone()?);
    }
    spawn_keyboard(writer, mode, detach_key);
    let mut stdout = std::io::stdout().lock();
    let end = loop {
        let frame = match client.read_frame() {
            Ok(f) => f,
            // The keyboard thread shut the socket down: a detach.
            Err(ClientError::Closed) | Err(ClientError::Io(_))
                if DETACHED.load(std::sync::atomic::Ordering::SeqCst) =>
            {
                break StreamEnd::Detached
            }
            Err(ClientError::Closed) | Err(ClientError::Io(_)) => break StreamEnd::Lost,
            Err(e) => return Err(e),
        };
        match frame.message {
            Message::Output(bytes) => {
                let _ = stdout.write_all(&bytes);
                if let Some(text) = banner.take() {
                    let _ = stdout.write_all(&banner_bytes(&text, terminal_size()));
                }
                let _ = stdout.flush();
            }
            Message::Event(Event::Exited(info)) => break StreamEnd::Exited(info),
            Message::Response(Response::Error { message }) => {
                return Err(ClientError::Server(message))
            }
            _ => {}
        }
    };
    let _ = stdout.write_all(RESET_TERMINAL);
    let _ = stdout.flush();
    drop(guard);
    Ok(end)
}

/// `text` on the last row, in reverse video, the cursor put back where the
/// program had it; without a terminal size, a line of its own.
fn banner_bytes(text: &str, size: Option<(u16, u16)>) -> Vec<u8> {
    match size {
        Some((rows, cols)) => {
            let text: String = text.chars().take(usize::from(cols)).collect();
            format!("\x1b7\x1b[{rows};1H\x1b[7m{text}\x1b[0m\x1b[K\x1b8").into_bytes()
        }
        None => format!("{text}\r\n").into_bytes(),
    }
}

static DETACHED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Reads the keyboard: forwards keys (interactive) until the detach key;
/// a watcher also leaves on Ctrl-C or `q`.
fn spawn_keyboard(mut socket: ClientStream, mode: StreamMode, detach_key: u8) {
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin();
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdin.read(&mut buf) {
            if n == 0 {
                break;
            }
            let keys = &buf[..n];
            let quit_at = keys.iter().position(|&b| {
                b == detach_key || (mode == StreamMode::Watch && (b == 0x03 || b == b'q'))
            });
            let forward = &keys[..quit_at.unwrap_or(n)];
            if mode == StreamMode::Interactive && !forward.is_empty() {
                let frame = encode(&Frame::new(0, Message::Input(forward.to_vec())));
                if socket.write_all(&frame).is_err() {
                    return;
                }
            }
            if quit_at.is_some() {
                break;
            }
        }
        DETACHED.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = socket.shutdown(std::net::Shutdown::Both);
    });
}

/// Follows the terminal's size (SIGWINCH) and tells the session.
fn spawn_resize_watch(mut socket: ClientStream) {
    crate::os::watch_resizes(move |rows, cols| {
        let (rows, cols) = clamped(rows, cols);
        let frame = encode(&Frame::new(
            0,
            Message::Request(Request::Resize { rows, cols }),
        ));
        socket.write_all(&frame).is_ok()
    });
}
