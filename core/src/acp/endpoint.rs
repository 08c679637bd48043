//! The endpoint of an ACP runtime: the same socket, codec and limits as
//! every session's, answering what makes sense without a screen.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::sync::broadcast::error::RecvError;

use super::bridge::Bridge;
use super::handle::AcpHandle;
use crate::adapter::Activity;
use crate::socket::codec::Message;
use crate::socket::protocol::{Event, Request, Response, SessionInfo, SessionStatus};
use crate::socket::Stream;
use crate::supervisor::exited;
use crate::supervisor::framed::{kind_of, Closed, Framed};
use crate::supervisor::limits::Limits;
use crate::supervisor::status::RECHECK;
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
            match request {
                Request::Follow => return self.follow(id).await,
                Request::Status => return self.status(id).await,
                _ => {}
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

impl Connection {
    /// The runtime's state as a session's (`agent-comms top`): busy while
    /// a turn runs, its ACP clients as attached people, its inbox. Read
    /// again when a transcript entry comes (a prompt starts a turn), a turn
    /// ends, the inbox changed, and every [`RECHECK`] (clients come and go
    /// on the bridge with no signal here); sent when it changed.
    async fn status(&mut self, id: u32) -> Result<(), Closed> {
        self.framed.reply(id, Response::Ok).await?;
        let endpoint = self.endpoint.clone();
        let handle = &endpoint.handle;
        let (_, mut entries) = handle.tap().follow();
        let mut ended = handle.turns_ended();
        let mut inbox = handle.inbox().changes.subscribe();
        let mut exit = handle.exit();
        let mut last: Option<SessionStatus> = None;
        let mut buf = [0u8; 1024];
        loop {
            let clients = endpoint.bridge.list();
            let now = SessionStatus {
                activity: Some(if handle.status().turn_started.is_some() {
                    Activity::Busy
                } else {
                    Activity::Idle
                }),
                adapter: None,
                clients: clients.len() as u32,
                person_attached: !clients.is_empty(),
                typing: false,
                inbox_changes: *handle.inbox().changes.borrow(),
                last_delivery: handle.inbox().last(),
            };
            if last.as_ref() != Some(&now) {
                self.framed
                    .send(id, Message::Event(Event::Status(now.clone())))
                    .await
                    .map_err(|_| Closed::Peer)?;
                last = Some(now);
            }
            tokio::select! {
                entry = entries.recv() => if let Err(RecvError::Closed) = entry { return Ok(()) },
                _ = ended.changed() => {}
                _ = inbox.changed() => {}
                _ = tokio::time::sleep(RECHECK) => {}
                read = self.framed.read.read(&mut buf) => if matches!(read, Ok(0) | Err(_)) { return Err(Closed::Peer) },
                info = exited(&mut exit) => {
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
