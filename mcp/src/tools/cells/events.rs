//! Waits on a session's cell events: a cell's end (`cell_wait`, the cell
//! resources) and its output as it comes (`cell_run`'s progress).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agent_comms_core::client::Client;
use agent_comms_core::session::SessionName;
use agent_comms_core::socket::codec::Message;
use agent_comms_core::socket::protocol::{CellEvent, CellState, Event, Request};
use agent_comms_core::socket::ClientStream;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};

use super::{cell_reply, CellResult, NO_SESSION};
use crate::reply::ToolError;
use crate::tools::connect;
use crate::wait::CANCEL_CHECK;

fn is_over(status: CellState) -> bool {
    matches!(
        status,
        CellState::Done | CellState::Interrupted | CellState::Error
    )
}

/// Blocks until a cell of `session` ends (or the session does), then
/// calls `ended`; again for every cell, until the caller gives up.
pub(crate) fn on_cell_ends(
    session: &SessionName,
    gave_up: &AtomicBool,
    ended: impl Fn(),
) -> Result<(), ToolError> {
    let mut events = subscribe(session, false)?;
    while !gave_up.load(Ordering::Relaxed) {
        match events.read_frame_until(Instant::now() + CANCEL_CHECK) {
            Ok(Some(frame)) => match frame.message {
                Message::Event(Event::Cell(CellEvent::Cell { status, .. })) if is_over(status) => {
                    ended()
                }
                Message::Event(Event::Cell(CellEvent::Closed { .. })) => {
                    ended();
                    return Ok(());
                }
                _ => {}
            },
            Ok(None) => {}
            Err(_) => {
                ended();
                return Ok(());
            }
        }
    }
    Ok(())
}

/// A connection that the session's cell events (with `lines`, also its
/// filtered view's lines) are pushed on, from the supervisor's `ok` on:
/// what happens after this returns is seen.
fn subscribe(session: &SessionName, lines: bool) -> Result<Client, ToolError> {
    let mut events = connect(session, NO_SESSION)?;
    events
        .request(Request::Subscribe {
            history: false,
            lines,
        })
        .map_err(|e| ToolError::new(e.to_string()))?;
    Ok(events)
}

/// Waits on the session's cell events until the cell ends, the deadline
/// passes or the caller gives up, then asks for its state.
pub(super) fn wait_for_cell(
    session: &SessionName,
    cell_id: Option<String>,
    deadline: Instant,
    keep: bool,
    gave_up: &AtomicBool,
) -> Result<CellResult, ToolError> {
    // Subscribed before the first look: an end between the two is seen.
    let mut events = subscribe(session, false)?;
    let now = cell_reply(
        session,
        Request::CellPoll {
            cell_id: cell_id.clone(),
            keep,
        },
    )?;
    let Some(id) = now.cell_id.clone() else {
        return Ok(now);
    };
    if !matches!(now.status.as_str(), "fired" | "running" | "timeout") {
        return Ok(now);
    }
    while !gave_up.load(Ordering::Relaxed) {
        let slice = deadline.min(Instant::now() + CANCEL_CHECK);
        match events.read_frame_until(slice) {
            Ok(Some(frame)) => match frame.message {
                Message::Event(Event::Cell(CellEvent::Cell {
                    cell_id, status, ..
                })) if cell_id == id && is_over(status) => break,
                Message::Event(Event::Cell(CellEvent::Closed { .. })) => break,
                _ => {}
            },
            Ok(None) if Instant::now() >= deadline => break,
            Ok(None) => {}
            // The session ended: its last state says how.
            Err(_) => break,
        }
    }
    cell_reply(
        session,
        Request::CellPoll {
            cell_id: Some(id),
            keep,
        },
    )
}

/// The cell's output as progress notifications, one per line, read from
/// a subscription made before the cell is sent (so no line is missed).
pub(super) struct Progress {
    reader: tokio::task::JoinHandle<()>,
    sender: tokio::task::JoinHandle<()>,
    /// The subscription, to end it from here.
    closer: ClientStream,
}

/// How long the last lines may take to follow the run's answer.
const LAST_LINES: Duration = Duration::from_secs(1);

impl Progress {
    /// None where the subscription cannot be made or ended from another
    /// thread (Windows): the run goes on without progress.
    pub(super) fn start(
        session: &SessionName,
        token: ProgressToken,
        peer: Peer<RoleServer>,
    ) -> Option<Self> {
        let client = subscribe(session, true).ok()?;
        let closer = client.try_clone_stream().ok()?;
        let (lines, rx) = tokio::sync::mpsc::unbounded_channel();
        Some(Self {
            reader: tokio::task::spawn_blocking(move || follow_lines(client, &lines)),
            sender: tokio::spawn(forward_progress(peer, token, rx)),
            closer,
        })
    }

    /// Once the run answered: a cell that ran has its end right after its
    /// last line on the subscription, so the reader stops there by itself;
    /// a run that started no cell (refused) has none, and is cut off.
    pub(super) async fn finish(mut self, ran: bool) {
        let ended = ran
            && tokio::time::timeout(LAST_LINES, &mut self.reader)
                .await
                .is_ok();
        if !ended {
            let _ = self.closer.shutdown(std::net::Shutdown::Both);
            let _ = self.reader.await;
        }
        let _ = self.sender.await;
    }
}

/// Forwards the filtered view's lines until a cell's end (or the
/// subscription's).
fn follow_lines(mut events: Client, lines: &tokio::sync::mpsc::UnboundedSender<String>) {
    while let Ok(frame) = events.read_frame() {
        let done = match frame.message {
            Message::Event(Event::Cell(CellEvent::Line { text })) => lines.send(text).is_err(),
            Message::Event(Event::Cell(CellEvent::Cell { status, .. })) => {
                !matches!(status, CellState::Fired | CellState::Running)
            }
            Message::Event(Event::Cell(CellEvent::Closed { .. })) => true,
            _ => false,
        };
        if done {
            return;
        }
    }
}

/// Each line of output becomes a progress notification; the progress
/// count is the number of lines so far.
async fn forward_progress(
    peer: Peer<RoleServer>,
    token: ProgressToken,
    mut lines: tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    let mut count = 0u32;
    while let Some(line) = lines.recv().await {
        count += 1;
        let note =
            ProgressNotificationParam::new(token.clone(), f64::from(count)).with_message(line);
        if peer.notify_progress(note).await.is_err() {
            return;
        }
    }
}
