//! The agent's stdio as the ACP crate's line transport, with the tap in it.
//!
//! The crate parses lines and answers what is malformed; this layer bounds
//! what reaches it. A line from the agent longer than [`MAX_LINE`] is
//! dropped (noted in the transcript) instead of growing without limit, and
//! the session goes on with the next line. A write to the agent that does not
//! finish within the write deadline means the agent stopped reading its
//! input: the transport then fails and sets its `stalled` flag, so the
//! supervisor reports it ([`STALLED`]) and ends the agent instead of hanging
//! behind a full pipe.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::{Sink, Stream, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use super::transcript::{Direction, Tap};

/// The longest line taken from an agent (a session's replay or an image
/// can be large; a runaway line is not).
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// How long one write to the agent may take before it counts as not
/// reading. `AGENT_COMMS_ACP_WRITE_DEADLINE_MS` changes it (tests).
pub const WRITE_DEADLINE: Duration = Duration::from_secs(10);
/// What a stalled transport is reported as.
pub const STALLED: &str = "the agent stopped reading its input";

pub fn write_deadline() -> Duration {
    std::env::var("AGENT_COMMS_ACP_WRITE_DEADLINE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(WRITE_DEADLINE, Duration::from_millis)
}

/// The agent's output as lines, each tapped before the crate sees it.
pub fn incoming<R: AsyncRead + Unpin + Send + 'static>(
    output: R,
    tap: Arc<Tap>,
) -> impl Stream<Item = io::Result<String>> + Send + 'static {
    let dropped = tap.clone();
    bounded(output, MAX_LINE, None, move |len| {
        dropped.note(format!(
            "dropped a line of {len} bytes or more from the agent: over the {MAX_LINE}-byte limit"
        ))
    })
    .inspect(move |line| {
        if let Ok(line) = line {
            tap.line(Direction::FromAgent, line);
        }
    })
}

/// The non-blank lines of `input`, each at most `max` bytes: a longer one
/// is dropped (`too_long` is told its length) and the next one read. With
/// a `deadline`, a line begun must end within it, or the stream fails
/// (a peer that trickles a line holds no memory for long).
pub fn bounded<R: AsyncRead + Unpin + Send + 'static>(
    input: R,
    max: usize,
    deadline: Option<Duration>,
    too_long: impl Fn(usize) + Send + 'static,
) -> impl Stream<Item = io::Result<String>> + Send + 'static {
    let reader = BufReader::with_capacity(64 * 1024, input);
    futures::stream::unfold(
        (reader, too_long),
        move |(mut reader, too_long)| async move {
            loop {
                match next_line(&mut reader, max, deadline).await {
                    Ok(Line::Eof) => return None,
                    Ok(Line::Text(line)) if line.trim().is_empty() => continue,
                    Ok(Line::Text(line)) => return Some((Ok(line), (reader, too_long))),
                    Ok(Line::TooLong(len)) => too_long(len),
                    Err(e) => return Some((Err(e), (reader, too_long))),
                }
            }
        },
    )
}

enum Line {
    Text(String),
    /// Dropped; at least this many bytes.
    TooLong(usize),
    Eof,
}

/// One line, read without holding more than `max` of it, and within
/// `deadline` of its first byte.
async fn next_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    max: usize,
    deadline: Option<Duration>,
) -> io::Result<Line> {
    let mut line = Vec::new();
    let mut dropped = 0usize;
    let mut ends_by = None;
    loop {
        let buf = match ends_by {
            Some(at) => tokio::time::timeout_at(at, reader.fill_buf())
                .await
                .map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "a line took over {:?} to arrive",
                            deadline.unwrap_or_default()
                        ),
                    )
                })??,
            None => reader.fill_buf().await?,
        };
        if buf.is_empty() {
            return Ok(match (line.is_empty(), dropped) {
                (true, 0) => Line::Eof,
                (_, 0) => Line::Text(String::from_utf8_lossy(&line).into_owned()),
                _ => Line::TooLong(dropped),
            });
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (&buf[..at], at + 1),
            None => (buf, buf.len()),
        };
        let ends = done > chunk.len();
        if ends_by.is_none() && !buf.is_empty() {
            ends_by = deadline.map(|d| tokio::time::Instant::now() + d);
        }
        if dropped == 0 && line.len() + chunk.len() <= max {
            line.extend_from_slice(chunk);
        } else {
            dropped += line.len() + chunk.len();
            line = Vec::new();
        }
        reader.consume(done);
        if ends {
            return Ok(if dropped > 0 {
                Line::TooLong(dropped)
            } else {
                Line::Text(String::from_utf8_lossy(&line).into_owned())
            });
        }
    }
}

/// Lines for the agent's input, each tapped before it is written; a write
/// past `deadline` sets `stalled` and fails the transport.
pub fn outgoing<W: AsyncWrite + Unpin + Send + 'static>(
    input: W,
    tap: Arc<Tap>,
    deadline: Duration,
    stalled: Arc<AtomicBool>,
) -> impl Sink<String, Error = io::Error> + Send + 'static {
    futures::sink::unfold(
        (input, tap, stalled),
        move |(mut input, tap, stalled), line: String| async move {
            tap.line(Direction::ToAgent, &line);
            let mut bytes = line.into_bytes();
            bytes.push(b'\n');
            let write = async {
                input.write_all(&bytes).await?;
                input.flush().await
            };
            match tokio::time::timeout(deadline, write).await {
                Ok(Ok(())) => Ok((input, tap, stalled)),
                Ok(Err(e)) => Err(e),
                Err(_) => {
                    stalled.store(true, Ordering::Release);
                    let why = format!("{STALLED} (a write waited {deadline:?})");
                    tap.note(why.clone());
                    Err(io::Error::new(io::ErrorKind::TimedOut, why))
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines_of(input: &[u8]) -> Vec<String> {
        let mut reader = BufReader::with_capacity(8, input);
        let mut out = Vec::new();
        loop {
            match next_line(&mut reader, MAX_LINE, None).await.unwrap() {
                Line::Eof => return out,
                Line::Text(t) => out.push(t),
                Line::TooLong(n) => out.push(format!("<{n}>")),
            }
        }
    }

    #[tokio::test]
    async fn lines_split_across_reads_and_a_last_line_without_newline() {
        assert_eq!(
            lines_of(b"{\"a\":1}\n{\"b\":22222}\nlast").await,
            ["{\"a\":1}", "{\"b\":22222}", "last"]
        );
    }

    #[tokio::test]
    async fn an_overlong_line_is_dropped_and_the_next_one_read() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.extend_from_slice(b"\n{}\n");
        let got = lines_of(&input).await;
        assert_eq!(got.len(), 2);
        assert!(got[0].starts_with('<'), "{}", &got[0][..10]);
        assert_eq!(got[1], "{}");
    }

    #[tokio::test]
    async fn a_line_begun_and_not_ended_fails_at_its_deadline() {
        let (mut peer, ours) = tokio::io::duplex(64);
        let mut reader = BufReader::new(ours);
        let deadline = Some(Duration::from_millis(300));
        peer.write_all(b"{}\n").await.unwrap();
        // A whole line, and then a quiet peer, is no fault: no deadline
        // runs before a line's first byte.
        assert!(matches!(
            next_line(&mut reader, MAX_LINE, deadline).await.unwrap(),
            Line::Text(t) if t == "{}"
        ));
        let quiet = tokio::time::timeout(
            Duration::from_millis(900),
            next_line(&mut reader, MAX_LINE, deadline),
        );
        assert!(quiet.await.is_err(), "waited for a line that never began");
        peer.write_all(b"{\"half").await.unwrap();
        let e = match next_line(&mut reader, MAX_LINE, deadline).await {
            Err(e) => e,
            Ok(_) => panic!("a trickled line must fail"),
        };
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(e.to_string(), "a line took over 300ms to arrive");
    }
}
