//! One client connection: requests answered in order, or a live stream.

use std::sync::Arc;

use tokio::io::AsyncReadExt;
use tokio::sync::broadcast::error::RecvError;

use super::framed::{kind_of, Closed, Framed};
use super::limits::Refusal;
use super::{exited, sleep_until, SessionHandle, Shared, MAX_KILL_GRACE};
use crate::delivery::DeliveryOptions;
use crate::pty::size::SizeError;
use crate::socket::codec::{Frame, Message};
use crate::socket::protocol::{
    CellEvent, Event, ExitInfo, OutputSince, Request, Response, StreamMode, Waiting,
};
use crate::socket::Stream;

pub(super) async fn serve(stream: Stream, shared: Shared) {
    let Some((framed, _slot)) = Framed::admit(stream, &shared.limits).await else {
        return;
    };
    let mut conn = Connection {
        framed,
        shared,
        report_waits: false,
    };
    let _ = conn.requests().await;
}

struct Connection {
    framed: Framed,
    shared: Shared,
    /// Push what a `deliver` or `nudge` waits for (`report_waits`).
    report_waits: bool,
}

impl Connection {
    async fn send(&mut self, id: u32, message: Message) -> std::io::Result<()> {
        self.framed.send(id, message).await
    }

    async fn reply(&mut self, id: u32, response: Response) -> Result<(), Closed> {
        self.framed.reply(id, response).await
    }

    async fn next_frame(&mut self) -> Result<Frame, Closed> {
        self.framed.next_frame().await
    }

    async fn refused(&mut self, id: u32, refusal: Refusal) -> Closed {
        self.framed.refused(id, refusal).await
    }

    async fn requests(&mut self) -> Result<(), Closed> {
        let mut exit = self.shared.exit.clone();
        loop {
            // Once the child is gone an idle connection has nothing left to
            // ask: close it so the supervisor can exit at once.
            let frame = tokio::select! {
                frame = self.next_frame() => frame?,
                _ = exited(&mut exit) => return Ok(()),
            };
            let id = frame.id;
            let request = match frame.message {
                Message::Request(r) => r,
                Message::Invalid { reason, .. } => {
                    self.reply(id, Response::Error { message: reason }).await?;
                    continue;
                }
                other => {
                    let message = format!(
                        "unexpected {} frame; send a request first (attach before input)",
                        kind_of(&other)
                    );
                    self.reply(id, Response::Error { message }).await?;
                    continue;
                }
            };
            match request {
                Request::Attach { mode, rows, cols } => match attach_size(mode, rows, cols) {
                    Ok(size) => return self.stream(id, mode, size).await,
                    Err(e) => {
                        let message = e.to_string();
                        self.reply(id, Response::Error { message }).await?;
                    }
                },
                Request::Kill { grace_ms } => {
                    let _ = self
                        .shared
                        .terminate
                        .send(std::time::Duration::from_millis(grace_ms).min(MAX_KILL_GRACE));
                    let info = self.wait_exit().await;
                    self.reply(id, Response::Exited(info)).await?;
                }
                Request::Subscribe { history, lines } => {
                    return self.subscribe(id, history, lines).await
                }
                Request::FollowOutput { cursor } => return self.follow_output(id, cursor).await,
                Request::ReportWaits => {
                    self.report_waits = true;
                    self.reply(id, Response::Ok).await?;
                }
                Request::Status => {
                    return super::status::stream(&mut self.framed, id, &self.shared).await
                }
                Request::Nudge {
                    wait_for,
                    timeout_ms,
                } => {
                    let response = self.nudge(id, wait_for, timeout_ms).await?;
                    self.reply(id, response).await?;
                }
                Request::Deliver { text, options } => {
                    let response = self.deliver(id, &text, options).await?;
                    self.reply(id, response).await?;
                }
                Request::CellRun {
                    wait: true,
                    code,
                    timeout_ms,
                } => {
                    let response = self.run_cell(code, timeout_ms).await;
                    self.reply(id, response).await?;
                }
                other => {
                    let response = self.answer(other);
                    self.reply(id, response).await?;
                }
            }
        }
    }

    /// `k run` (waiting): starts the cell and answers with its result.
    async fn run_cell(&mut self, code: String, timeout_ms: u64) -> Response {
        let started = self
            .shared
            .lock()
            .cells_mut()
            .map(|c| c.run(code, timeout_ms, true));
        match started {
            Err(message) => Response::Error { message },
            Ok(Err(reply)) => Response::Cell(reply),
            Ok(Ok(done)) => {
                let mut exit = self.shared.exit.clone();
                // The engine answers a cell the REPL took down with it
                // before the exit is announced: its reply (with the cell and
                // the exit) must win over the bare one.
                tokio::select! {
                    biased;
                    reply = done => reply.map(Response::Cell).unwrap_or_else(|_| Response::Error { message: "result missing".into() }),
                    _ = exited(&mut exit) => Response::Error { message: "session exited".into() },
                }
            }
        }
    }

    /// Types `text` into the program with the delivery discipline; the
    /// reply carries the evidence or the reason.
    async fn deliver(
        &mut self,
        id: u32,
        text: &str,
        options: DeliveryOptions,
    ) -> Result<Response, Closed> {
        let handle = SessionHandle {
            shared: self.shared.clone(),
        };
        // Behind another delivery, this one first waits for its turn.
        let behind = self.shared.delivery.turn_taken();
        let delivered = self
            .telling_waits(id, behind, handle.deliver(text, options))
            .await?;
        Ok(match delivered {
            Ok(evidence) => Response::Delivered(evidence),
            Err(e) => Response::Error {
                message: e.to_string(),
            },
        })
    }

    /// Runs `work`; meanwhile, when the client asked for it
    /// ([`Request::ReportWaits`]), pushes what the session's deliveries
    /// wait for each time it changes (`behind`: another delivery holds
    /// the turn, said first).
    async fn telling_waits<T>(
        &mut self,
        id: u32,
        behind: bool,
        work: impl std::future::Future<Output = T>,
    ) -> Result<T, Closed> {
        if !self.report_waits {
            return Ok(work.await);
        }
        let mut waits = self.shared.delivery.waiting();
        waits.mark_changed();
        if behind {
            let ahead = Waiting {
                why: "another delivery is ahead of this one".into(),
                since: crate::time::unix_millis(),
            };
            self.send(id, Message::Event(Event::Waiting { wait: Some(ahead) }))
                .await
                .map_err(|_| Closed::Peer)?;
        }
        tokio::pin!(work);
        loop {
            tokio::select! {
                // The work first: a delivery takes its turn (if free) on
                // its first poll, before anything is said of its wait.
                biased;
                done = &mut work => return Ok(done),
                Ok(()) = waits.changed() => {
                    let wait = waits.borrow_and_update().clone();
                    self.send(id, Message::Event(Event::Waiting { wait }))
                        .await
                        .map_err(|_| Closed::Peer)?;
                }
            }
        }
    }

    /// Wakes the runtime's inbox; with `wait_for`, answers once that
    /// message's delivery attempt ended.
    async fn nudge(
        &mut self,
        id: u32,
        wait_for: Option<String>,
        timeout_ms: u64,
    ) -> Result<Response, Closed> {
        if self.shared.lock().info.record.kind != crate::session::SessionKind::Interactive {
            let message = "this session is not an interactive runtime; it has no inbox".into();
            return Ok(Response::Error { message });
        }
        let mut exit = self.shared.exit.clone();
        let ended = async move {
            exited(&mut exit).await;
        };
        let inbox = self.shared.inbox.clone();
        let waiting = inbox.nudge(wait_for.clone(), timeout_ms, ended);
        match wait_for {
            Some(_) => self.telling_waits(id, false, waiting).await,
            None => Ok(waiting.await),
        }
    }

    /// Requests answered from state at once.
    fn answer(&mut self, request: Request) -> Response {
        let mut state = self.shared.lock();
        match request {
            Request::Info => Response::Info(state.info.clone()),
            Request::Snapshot => Response::Snapshot(state.model.snapshot()),
            Request::Activity => match state.activity() {
                Ok(report) => Response::Activity(report),
                Err(message) => Response::Error { message },
            },
            Request::Write { data } => {
                state.pty.write(data.into_bytes());
                Response::Ok
            }
            Request::Resize { rows, cols } => match state.resize(rows, cols) {
                Ok(()) => Response::Ok,
                Err(e) => Response::Error {
                    message: e.to_string(),
                },
            },
            Request::CellRun {
                code, timeout_ms, ..
            } => match state.cells_mut() {
                Ok(c) => match c.run(code, timeout_ms, false) {
                    Ok(_) => unreachable!("run without wait answers at once"),
                    Err(reply) => Response::Cell(reply),
                },
                Err(message) => Response::Error { message },
            },
            Request::CellPoll { cell_id, keep } => match state.cells_mut() {
                Ok(c) => Response::Cell(c.poll(cell_id.as_deref(), keep)),
                Err(message) => Response::Error { message },
            },
            Request::CellInterrupt => {
                let foreground = state.pty.foreground_group();
                match state.cells_mut() {
                    Ok(c) => {
                        c.interrupt(foreground);
                        Response::Ok
                    }
                    Err(message) => Response::Error { message },
                }
            }
            Request::CellStatus => match state.cells_mut() {
                Ok(c) => Response::CellStatus(c.status()),
                Err(message) => Response::Error { message },
            },
            Request::Notify { from, message } => match state.cells_mut() {
                Ok(c) => {
                    c.notify(from, message);
                    Response::Ok
                }
                Err(message) => Response::Error { message },
            },
            Request::History { lines } => match state.cells_mut() {
                Ok(c) => Response::Lines {
                    lines: c.history(lines),
                },
                Err(message) => Response::Error { message },
            },
            Request::OutputSince { cursor } => Response::Output(output_since(&state, cursor)),
            Request::AcpStatus | Request::Cancel | Request::Follow => Response::Error {
                message: format!(
                    "session '{}' is not an ACP runtime; it has no ACP session to report, cancel or follow",
                    state.info.record.name
                ),
            },
            Request::Attach { .. }
            | Request::Kill { .. }
            | Request::Subscribe { .. }
            | Request::FollowOutput { .. }
            | Request::ReportWaits
            | Request::Status
            | Request::Deliver { .. }
            | Request::Nudge { .. } => {
                unreachable!("handled by the caller")
            }
        }
    }

    async fn wait_exit(&mut self) -> ExitInfo {
        exited(&mut self.shared.exit.clone()).await
    }

    /// Attach or watch: redraw, then relay output until the peer leaves or
    /// the child exits.
    async fn stream(
        &mut self,
        id: u32,
        mode: StreamMode,
        size: Option<(u16, u16)>,
    ) -> Result<(), Closed> {
        let interactive = mode == StreamMode::Interactive;
        let (mut output, redraw) = {
            let mut state = self.shared.lock();
            if let Some((rows, cols)) = size {
                // Checked by attach_size: cannot fail.
                let _ = state.resize(rows, cols);
            }
            state.client_joined(interactive);
            // Subscribe and take the redraw under one lock: no byte is lost
            // or shown twice between them.
            (self.shared.output.subscribe(), state.model.redraw())
        };
        let result = self.relay(id, interactive, &mut output, redraw).await;
        self.shared.lock().client_left(interactive);
        result
    }

    async fn relay(
        &mut self,
        id: u32,
        interactive: bool,
        output: &mut tokio::sync::broadcast::Receiver<Arc<Vec<u8>>>,
        redraw: Vec<u8>,
    ) -> Result<(), Closed> {
        self.reply(id, Response::Ok).await?;
        self.send(id, Message::Output(redraw))
            .await
            .map_err(|_| Closed::Peer)?;
        let mut exit = self.shared.exit.clone();
        let mut buf = [0u8; 16 * 1024];
        loop {
            tokio::select! {
                chunk = output.recv() => match chunk {
                    Ok(bytes) => self.send(id, Message::Output(bytes.to_vec())).await.map_err(|_| Closed::Peer)?,
                    Err(RecvError::Lagged(_)) => {
                        // Too slow to follow byte by byte: show the screen as it is now.
                        let redraw = self.shared.lock().model.redraw();
                        self.send(id, Message::Output(redraw)).await.map_err(|_| Closed::Peer)?;
                    }
                    Err(RecvError::Closed) => return Ok(()),
                },
                read = self.framed.read.read(&mut buf) => match read {
                    Ok(0) | Err(_) => return Err(Closed::Peer),
                    Ok(n) => {
                        self.framed.inbound.push(&buf[..n]);
                        self.stream_input(id, interactive).await?;
                    }
                },
                _ = sleep_until(self.framed.inbound.deadline()) => {
                    let refusal = self.framed.inbound.unfinished();
                    return Err(self.refused(id, refusal).await);
                }
                info = exited(&mut exit) => {
                    // Flush what is left, then say goodbye.
                    while let Ok(bytes) = output.try_recv() {
                        self.send(id, Message::Output(bytes.to_vec())).await.map_err(|_| Closed::Peer)?;
                    }
                    let _ = self.send(id, Message::Event(Event::Exited(info))).await;
                    return Ok(());
                }
            }
        }
    }

    async fn stream_input(&mut self, id: u32, interactive: bool) -> Result<(), Closed> {
        loop {
            let frame = match self.framed.inbound.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => return Ok(()),
                Err(refusal) => return Err(self.refused(id, refusal).await),
            };
            // The lock is released before the refusal (if any) is sent.
            let refusal = {
                let mut state = self.shared.lock();
                match frame.message {
                    Message::Input(bytes) if interactive => {
                        state.keys_from_person(&bytes);
                        self.shared.changed.notify_waiters();
                        None
                    }
                    Message::Request(Request::Resize { rows, cols }) if interactive => {
                        state.resize(rows, cols).err().map(|e| e.to_string())
                    }
                    other => Some(format!(
                        "{} frames are not accepted on this stream",
                        kind_of(&other)
                    )),
                }
            };
            if let Some(message) = refusal {
                self.reply(frame.id, Response::Error { message }).await?;
            }
        }
    }

    /// `session logs --follow`: the text after `cursor`, then each new
    /// piece as the program prints it. Every output chunk wakes it; the
    /// text itself comes from the output log, so a chunk missed by a slow
    /// reader is still read (or reported skipped), never lost silently.
    async fn follow_output(&mut self, id: u32, cursor: u64) -> Result<(), Closed> {
        // Subscribed under the lock the first read takes: text pushed
        // after that read wakes the loop.
        let (mut output, first) = {
            let state = self.shared.lock();
            (self.shared.output.subscribe(), output_since(&state, cursor))
        };
        let mut cursor = first.cursor;
        self.reply(id, Response::Output(first)).await?;
        let mut exit = self.shared.exit.clone();
        let mut buf = [0u8; 1024];
        loop {
            let ended = tokio::select! {
                chunk = output.recv() => match chunk {
                    Ok(_) | Err(RecvError::Lagged(_)) => None,
                    Err(RecvError::Closed) => return Ok(()),
                },
                read = self.framed.read.read(&mut buf) => match read {
                    Ok(0) | Err(_) => return Err(Closed::Peer),
                    Ok(_) => None,
                },
                info = exited(&mut exit) => Some(info),
            };
            let since = output_since(&self.shared.lock(), cursor);
            if !since.text.is_empty() || since.skipped > 0 {
                cursor = since.cursor;
                self.send(id, Message::Event(Event::Printed(since)))
                    .await
                    .map_err(|_| Closed::Peer)?;
            }
            if let Some(info) = ended {
                let _ = self.send(id, Message::Event(Event::Exited(info))).await;
                return Ok(());
            }
        }
    }

    /// `km`: cell events pushed as they happen.
    async fn subscribe(&mut self, id: u32, history: bool, lines: bool) -> Result<(), Closed> {
        let subscription = self.shared.lock().cells_mut().map(|c| c.subscribe(history));
        let (past, mut events) = match subscription {
            Ok(s) => s,
            Err(message) => return self.reply(id, Response::Error { message }).await,
        };
        // History first, then the acknowledgement, which marks where the
        // replay ends and live events begin.
        for event in past {
            self.send(id, Message::Event(Event::Cell(event)))
                .await
                .map_err(|_| Closed::Peer)?;
        }
        self.reply(id, Response::Ok).await?;
        let mut buf = [0u8; 1024];
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Ok(CellEvent::Line { .. }) if !lines => continue,
                    Ok(event) => self.send(id, Message::Event(Event::Cell(event))).await.map_err(|_| Closed::Peer)?,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return Ok(()),
                },
                read = self.framed.read.read(&mut buf) => if matches!(read, Ok(0) | Err(_)) { return Err(Closed::Peer) },
            }
        }
    }
}

/// What the program printed after `cursor`, for the wire.
fn output_since(state: &super::State, cursor: u64) -> OutputSince {
    let since = state.output_log.since(cursor);
    OutputSince {
        text: since.text,
        cursor: since.cursor,
        skipped: since.skipped,
    }
}

/// The size an attach asks for, checked: only an interactive client's
/// terminal sets the session's size.
fn attach_size(
    mode: StreamMode,
    rows: Option<u16>,
    cols: Option<u16>,
) -> Result<Option<(u16, u16)>, SizeError> {
    match (mode, rows, cols) {
        (StreamMode::Interactive, Some(rows), Some(cols)) => {
            crate::pty::size::checked(rows, cols).map(Some)
        }
        _ => Ok(None),
    }
}
