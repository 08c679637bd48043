//! A client connection as frames: the peer check, the connection limits
//! and the partial-frame deadline every endpoint applies before it reads a
//! request. Both kinds of supervisor (a PTY's and an ACP agent's) answer
//! requests over it; what they answer is theirs.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::limits::{Inbound, Limits, Refusal, Slot};
use super::sleep_until;
use crate::socket::codec::{encode, Frame, Message};
use crate::socket::protocol::Response;
use crate::socket::{check_peer, split, ReadHalf, Stream, WriteHalf};

/// How long a refused client is given to take its one-line answer.
const REFUSAL_WRITE: Duration = Duration::from_secs(1);

pub(crate) struct Framed {
    pub read: ReadHalf,
    pub write: WriteHalf,
    pub inbound: Inbound,
}

/// Why a connection stopped; only ever logged.
pub(crate) enum Closed {
    Peer,
    Fatal,
}

impl Framed {
    /// The connection, once its peer is the session's owner and a place is
    /// free; otherwise the peer is told why and `None` returned.
    pub async fn admit(stream: Stream, limits: &Arc<Limits>) -> Option<(Self, Slot)> {
        // A stranger is refused before it can take a place.
        let admitted = check_peer(&stream)
            .and_then(|()| limits.admit().map_err(|refusal| refusal.to_string()));
        let (read, write) = split(stream);
        let mut framed = Self {
            read,
            write,
            inbound: Inbound::new(limits.clone()),
        };
        match admitted {
            Ok(slot) => Some((framed, slot)),
            Err(message) => {
                tracing::warn!("{message}");
                let _ = framed.refuse(0, message).await;
                None
            }
        }
    }

    pub async fn send(&mut self, id: u32, message: Message) -> std::io::Result<()> {
        self.write
            .write_all(&encode(&Frame::new(id, message)))
            .await
    }

    pub async fn reply(&mut self, id: u32, response: Response) -> Result<(), Closed> {
        self.send(id, Message::Response(response))
            .await
            .map_err(|_| Closed::Peer)
    }

    /// Answers `id` with `message` and gives up on the connection (bounded:
    /// a client that does not read is not waited for).
    pub async fn refuse(&mut self, id: u32, message: String) -> Closed {
        let answer = self.send(id, Message::Response(Response::Error { message }));
        let _ = tokio::time::timeout(REFUSAL_WRITE, answer).await;
        Closed::Fatal
    }

    /// The next frame from the peer. Frames over their limit, beyond the
    /// budget or unfinished past the deadline are answered once and the
    /// connection closed: past them the stream cannot be read in step.
    pub async fn next_frame(&mut self) -> Result<Frame, Closed> {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match self.inbound.next_frame() {
                Ok(Some(frame)) => return Ok(frame),
                Ok(None) => {}
                Err(refusal) => return Err(self.refused(0, refusal).await),
            }
            tokio::select! {
                read = self.read.read(&mut buf) => match read {
                    Ok(0) | Err(_) => return Err(Closed::Peer),
                    Ok(n) => self.inbound.push(&buf[..n]),
                },
                _ = sleep_until(self.inbound.deadline()) => {
                    let refusal = self.inbound.unfinished();
                    return Err(self.refused(0, refusal).await);
                }
            }
        }
    }

    /// [`Framed::refuse`] for a refusal of what the peer sent; logged, as a
    /// client that gets it is likely broken.
    pub async fn refused(&mut self, id: u32, refusal: Refusal) -> Closed {
        tracing::warn!("closing a connection: {refusal}");
        self.refuse(id, refusal.to_string()).await
    }
}

pub(crate) fn kind_of(message: &Message) -> &'static str {
    match message {
        Message::Request(_) => "request",
        Message::Response(_) => "response",
        Message::Event(_) => "event",
        Message::Input(_) => "input",
        Message::Output(_) => "output",
        Message::Invalid { .. } => "invalid",
    }
}
