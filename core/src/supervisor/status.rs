//! `status`: a session's live state pushed to a dashboard (`agent-comms
//! top`), so that it never re-asks.
//!
//! The state is read again when the program printed, a person typed, the
//! inbox was woken or ended a delivery, and at least every
//! [`RECHECK`]: busy turns idle and typing stops with nothing happening,
//! by time alone (the adapter's debounce, the keyboard-quiet period). Only
//! a state that differs from the last one sent goes out, so the recheck
//! costs the peer nothing; bursts of output are read at most every
//! [`COALESCE`]. An ACP runtime answers the same request from its turns
//! (`acp::endpoint`).

use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::framed::{Closed, Framed};
use super::{exited, Shared};
use crate::socket::codec::Message;
use crate::socket::protocol::{Event, Response, SessionStatus};

/// The longest a time-only change waits to be seen.
pub(crate) const RECHECK: Duration = Duration::from_millis(250);
/// The shortest time between two reads of the state.
const COALESCE: Duration = Duration::from_millis(30);

/// The state as of now.
fn read(shared: &Shared) -> SessionStatus {
    let quiet = shared.delivery.style().keyboard_quiet;
    let mut state = shared.lock();
    let report = state.activity().ok();
    SessionStatus {
        activity: report.as_ref().map(|r| r.activity),
        adapter: report.map(|r| r.adapter),
        clients: state.info.clients,
        person_attached: state.interactive_clients > 0 || state.foreground_terminal,
        typing: state
            .keyboard
            .last_key()
            .is_some_and(|t| t.elapsed() < quiet),
        inbox_changes: *shared.inbox.changes.borrow(),
        last_delivery: shared.inbox.last(),
    }
}

/// Answers `Ok`, then pushes each new state until the peer leaves or the
/// program exits (with the `exited` event).
pub(super) async fn stream(framed: &mut Framed, id: u32, shared: &Shared) -> Result<(), Closed> {
    framed.reply(id, Response::Ok).await?;
    let mut exit = shared.exit.clone();
    let mut inbox = shared.inbox.changes.subscribe();
    let mut last: Option<SessionStatus> = None;
    let mut buf = [0u8; 1024];
    loop {
        let now = read(shared);
        if last.as_ref() != Some(&now) {
            framed
                .send(id, Message::Event(Event::Status(now.clone())))
                .await
                .map_err(|_| Closed::Peer)?;
            last = Some(now);
        }
        tokio::select! {
            _ = shared.changed.notified() => tokio::time::sleep(COALESCE).await,
            _ = inbox.changed() => {}
            _ = tokio::time::sleep(RECHECK) => {}
            read = framed.read.read(&mut buf) => if matches!(read, Ok(0) | Err(_)) { return Err(Closed::Peer) },
            info = exited(&mut exit) => {
                let _ = framed.send(id, Message::Event(Event::Exited(info))).await;
                return Ok(());
            }
        }
    }
}
