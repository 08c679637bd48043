//! The endpoint of an ACP runtime: the same socket, codec and limits as
//! every session's, answering what makes sense without a screen.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::sync::broadcast::error::RecvError;

use super::bridge::Bridge;
use super::handle::AcpHandle;
use crate::socket::codec::Message;
use crate::socket::protocol::{Event, Request, Response, SessionInfo};
use crate::socket::Stream;
use crate::supervisor::exited;
use crate::supervisor::framed::{kind_of, Closed, Framed};
use crate::supervisor::limits::Limits;
use crate::supervisor::MAX_KILL_GRACE;

pub(super) struct Endpoint {
    pub bridge: Arc<Bridge>,
    pub handle: AcpHandle,
    pub info: SessionInfo,
    pub limits: Arc<Limits>,
}

pub(super) async fn serve(stream: Stream, endpoint: Arc<Endpoint>) {
    let Some((framed, _slot)) = Framed::admit(stream, &endpoint.limits).await else {
        return;
    };
    let mut conn = Connection { framed, endpoint };
    let _ = conn.requests().await;
}

struct Connection {
    framed: Framed,
    endpoint: Arc<Endpoint>,
}

impl Connection {
    async fn requests(&mut self) -> Result<(), Closed> {
        let mut exit = self.endpoint.handle.exit();
        loop {
            let frame = tokio::select! {
                frame = self.framed.next_frame() => frame?,
                _ = exited(&mut exit) => return Ok(()),
            };
            let id = frame.id;
            let request = match frame.message {
                Message::Request(r) => r,
                Message::Invalid { reason, .. } => {
                    self.framed
                        .reply(id, Response::Error { message: reason })
                        .await?;
                    continue;
                }
                other => {
                    let message = format!("unexpected {} frame; send a request", kind_of(&other));
                    self.framed.reply(id, Response::Error { message }).await?;
                    continue;
                }
            };
            if let Request::Follow = request {
                return self.follow(id).await;
            }
            let response = self.answer(request).await;
            self.framed.reply(id, response).await?;
        }
    }

    async fn answer(&mut self, request: Request) -> Response {
        let handle = &self.endpoint.handle;
        match request {
            Request::Info => Response::Info(self.endpoint.info.clone()),
            Request::AcpStatus => {
                let mut status = handle.status();
                status.bridge = self.endpoint.bridge.socket();
                status.clients = self.endpoint.bridge.list();
                Response::Acp(status)
            }
            Request::Deliver { text, options } => match handle.prompt(&text, options).await {
                Ok(evidence) => Response::Delivered(evidence),
                Err(e) => Response::Error {
                    message: e.to_string(),
                },
            },
            Request::Cancel => match handle.cancel().await {
                Ok(stop_reason) => Response::TurnEnded { stop_reason },
                Err(message) => Response::Error { message },
            },
            Request::Nudge {
                wait_for,
                timeout_ms,
            } => {
                let mut exit = handle.exit();
                let ended = async move {
                    exited(&mut exit).await;
                };
                handle.inbox().nudge(wait_for, timeout_ms, ended).await
            }
            Request::Kill { grace_ms } => {
                handle.terminate(Duration::from_millis(grace_ms).min(MAX_KILL_GRACE));
                Response::Exited(exited(&mut handle.exit()).await)
            }
            other => Response::Error {
                message: format!(
                    "session '{}' is an ACP runtime: it has no screen, PTY or cells, so it does not answer {}; see what it does with: agent-comms acp log {}",
                    self.endpoint.info.record.name,
                    request_name(&other),
                    self.endpoint.info.record.name
                ),
            },
        }
    }

    /// The transcript as it grows: where the live part starts, then each
    /// new entry, until the peer leaves or the agent is gone.
    async fn follow(&mut self, id: u32) -> Result<(), Closed> {
        let (next_seq, mut live) = self.endpoint.handle.tap().follow();
        self.framed
            .reply(id, Response::Following { next_seq })
            .await?;
        let mut exit = self.endpoint.handle.exit();
        let mut buf = [0u8; 1024];
        loop {
            tokio::select! {
                entry = live.recv() => match entry {
                    Ok(entry) => self.framed.send(id, Message::Event(Event::Transcript((*entry).clone()))).await.map_err(|_| Closed::Peer)?,
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!("a follower fell {n} entries behind; they are in the transcript file");
                    }
                    Err(RecvError::Closed) => return Ok(()),
                },
                read = self.framed.read.read(&mut buf) => if matches!(read, Ok(0) | Err(_)) { return Err(Closed::Peer) },
                info = exited(&mut exit) => {
                    while let Ok(entry) = live.try_recv() {
                        self.framed.send(id, Message::Event(Event::Transcript((*entry).clone()))).await.map_err(|_| Closed::Peer)?;
                    }
                    let _ = self.framed.send(id, Message::Event(Event::Exited(info))).await;
                    return Ok(());
                }
            }
        }
    }
}

/// The wire name of a request, for the refusal.
fn request_name(request: &Request) -> String {
    serde_json::to_value(request)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
        .unwrap_or_else(|| "it".into())
}
