//! What the line-framing targets share: a stream cut into reads
//! ([`split_input`]), a peer sending it in those reads ([`Peer`]), and the
//! bridge's framing (`acp::lines::bounded`) reading it, with what its
//! reader got and what its `too_long` was told, in order ([`read_lines`]).
//!
//! `bridge_lines` (fuzz/src/lib.rs) and `web_frames` (fuzz/src/web.rs)
//! both include this file: the second is apart because it needs the web
//! crate, which core's replay of the first cannot build.

// `fuzzing` is cargo fuzz's cfg, unknown to the packages that replay this.
#![allow(unexpected_cfgs)]

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use agent_comms_core::acp::lines::bounded;
use futures::{FutureExt, StreamExt};
use tokio::io::{AsyncRead, ReadBuf};

/// Reads `data` as `n | n chunk sizes | stream`: the stream is cut into
/// pieces whose sizes cycle through the given ones (each 1 to 256 bytes),
/// the way reads of a socket or a PTY cut it. With `n = 0` (or no room for
/// the sizes) the stream is one piece.
pub fn split_input(data: &[u8]) -> Vec<&[u8]> {
    let n = data.first().map_or(0, |b| usize::from(b % 8));
    let (sizes, stream) = match data.get(1..1 + n) {
        Some(sizes) => (sizes, &data[1 + n..]),
        None => (&[][..], data.get(1..).unwrap_or_default()),
    };
    if sizes.is_empty() {
        return vec![stream];
    }
    let mut pieces = Vec::new();
    let mut rest = stream;
    for size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (piece, tail) = rest.split_at((usize::from(*size) + 1).min(rest.len()));
        pieces.push(piece);
        rest = tail;
    }
    pieces
}

/// How the peer sends its pieces, and what it does after the last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// Each piece in one read as soon as asked, then the end of the stream.
    Closes,
    /// Before each piece a read that is not ready yet (and wakes its task
    /// at once), as a socket's is; then the end of the stream.
    Dawdles,
    /// Each piece in one read, then silence: still connected, sending
    /// nothing more (a client that trickles a line, or stops between two).
    GoesQuiet,
}

/// The deadline a quiet peer's unfinished line gets: short, since each
/// such input waits for it.
pub const QUIET_DEADLINE: Duration = Duration::from_millis(1);

/// The peer and the framing's deadline a target's `how` byte picks with
/// its two high bits: a peer that closes, or dawdles (with no deadline, or
/// one that never comes), or goes quiet (with [`QUIET_DEADLINE`]).
pub fn peer_of(how: u8) -> (Peer, Option<Duration>) {
    match how >> 6 {
        0 => (Peer::Closes, None),
        1 => (Peer::Dawdles, None),
        2 => (Peer::Dawdles, Some(Duration::from_secs(3600))),
        _ => (Peer::GoesQuiet, Some(QUIET_DEADLINE)),
    }
}

/// What the framing's reader got, and what `too_long` was told, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    Line(String),
    TooLong(usize),
    /// The stream failed, with an error of this kind.
    Failed(io::ErrorKind),
}

/// What the framing promises for one line of the stream (its bytes before
/// the `\n`) with lines of at most `max` bytes: a longer one reported with
/// its length (and dropped), a blank one left out, any other as text.
pub fn line_seen(line: &[u8], max: usize) -> Option<Seen> {
    if line.len() > max {
        return Some(Seen::TooLong(line.len()));
    }
    let text = String::from_utf8_lossy(line);
    (!text.trim().is_empty()).then(|| Seen::Line(text.into_owned()))
}

/// The peer's side of the connection.
struct Pieces {
    pieces: VecDeque<Vec<u8>>,
    peer: Peer,
    /// A dawdling peer's next read is ready.
    ready: bool,
}

impl AsyncRead for Pieces {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let Some(piece) = this.pieces.front_mut() else {
            return match this.peer {
                Peer::Closes | Peer::Dawdles => Poll::Ready(Ok(())),
                Peer::GoesQuiet => Poll::Pending,
            };
        };
        if this.peer == Peer::Dawdles && !std::mem::take(&mut this.ready) {
            this.ready = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let n = piece.len().min(buf.remaining());
        buf.put_slice(&piece[..n]);
        if n == piece.len() {
            this.pieces.pop_front();
        } else {
            piece.drain(..n);
        }
        Poll::Ready(Ok(()))
    }
}

thread_local! {
    /// One runtime per thread: building one per input would cost more than
    /// reading it.
    static RUNTIME: tokio::runtime::Runtime = runtime();
}

/// A runtime with a timer (the framing's deadline). Under cargo fuzz
/// (`--cfg fuzzing`, with tokio's `test-util`) its clock is paused: time
/// moves only when every task waits, straight to the next deadline, so a
/// quiet peer's deadline costs no real wait, and no deadline passes while
/// the framing works. The stable replay waits for it in real time.
fn runtime() -> tokio::runtime::Runtime {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_time();
    #[cfg(fuzzing)]
    builder.start_paused(true);
    builder.build().expect("a runtime")
}

/// `pieces` sent by `peer`, read through `bounded(_, max, deadline, _)`
/// until the stream ends, fails, or (the peer quiet) has nothing more to
/// give: then, if the peer stopped inside a line, the framing must fail
/// the stream at the deadline. Every error is one line.
pub fn read_lines(
    pieces: &[&[u8]],
    peer: Peer,
    max: usize,
    deadline: Option<Duration>,
) -> Vec<Seen> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let told = seen.clone();
    let input = Pieces {
        pieces: pieces.iter().map(|p| p.to_vec()).collect(),
        peer,
        ready: false,
    };
    let unfinished = pieces.concat().last().is_some_and(|&b| b != b'\n');
    let record = |item: io::Result<String>| {
        let mut seen = seen.lock().unwrap();
        match item {
            Ok(line) => seen.push(Seen::Line(line)),
            Err(e) => {
                let why = e.to_string();
                assert!(!why.is_empty() && !why.contains('\n'), "{why:?}");
                seen.push(Seen::Failed(e.kind()));
            }
        }
    };
    RUNTIME.with(|rt| {
        rt.block_on(async {
            let lines = bounded(input, max, deadline, move |len| {
                told.lock().unwrap().push(Seen::TooLong(len))
            });
            let mut lines = std::pin::pin!(lines);
            let read = async {
                if peer != Peer::GoesQuiet {
                    while let Some(item) = lines.next().await {
                        record(item);
                    }
                    return;
                }
                // A quiet peer: what it sent is all there at once, so what
                // is not ready now never will be but the deadline's error.
                while let Some(item) = lines.next().now_or_never().flatten() {
                    let failed = item.is_err();
                    record(item);
                    if failed {
                        return;
                    }
                }
                if unfinished {
                    if let Some(item) = lines.next().await {
                        record(item);
                    }
                    if let Some(Some(item)) = lines.next().now_or_never() {
                        record(item);
                    }
                }
            };
            tokio::time::timeout(Duration::from_secs(10), read)
                .await
                .expect("the framing neither ended nor failed the stream");
        })
    });
    let seen = seen.lock().unwrap().clone();
    seen
}
