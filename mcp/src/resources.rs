//! Push: the actor's inbox and each cell session as resources, and
//! `notifications/resources/updated` when they change, for clients that
//! subscribe (`resources/subscribe`). An agent's client is then woken
//! when a message arrives or a cell ends, instead of calling a wait tool.
//!
//! A subscription is a watcher of its own: a blocking wait on what the
//! resource shows (the store for the inbox, the supervisor's cell events for
//! a cell), cancelled by `resources/unsubscribe` or when the connection
//! ends. Reading a resource changes nothing: a cell resource shows the
//! session's state, not its result (a result is handed out once, to
//! `cell_poll` or `cell_wait`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_comms_core::ids::Id;
use agent_comms_core::session::SessionName;
use rmcp::model::{ResourceContents, ResourceUpdatedNotificationParam};
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::reply::ToolError;
use crate::server::Shared;
use crate::tools::cells::{cell_sessions, on_cell_ends};
use crate::tools::messages::{inbox, inbox_state, STORE_CHECK};
use crate::tools::{connect, session_name};
use crate::wait::{until_cancelled, CANCEL_CHECK};

pub const INBOX_URI: &str = "agent-comms://inbox";
const CELLS_PREFIX: &str = "agent-comms://cells/";

/// What a resource URI names.
pub enum Named {
    Inbox,
    Cell(SessionName),
}

impl Named {
    pub fn parse(uri: &str) -> Result<Self, ToolError> {
        if uri == INBOX_URI {
            return Ok(Self::Inbox);
        }
        match uri.strip_prefix(CELLS_PREFIX) {
            Some(name) => session_name(name).map(Self::Cell),
            None => Err(ToolError::new(format!(
                "no resource '{}'; resources/list shows them",
                agent_comms_core::display::one_line(uri)
            ))),
        }
    }
}

pub fn cell_uri(session: &str) -> String {
    format!("{CELLS_PREFIX}{session}")
}

/// The resource's contents now, as JSON text.
pub fn read(shared: &Shared, uri: &str) -> Result<ResourceContents, ToolError> {
    let value = match Named::parse(uri)? {
        Named::Inbox => {
            let me = shared.actor("read an inbox")?;
            serde_json::to_value(inbox(&me, usize::MAX)?)
        }
        Named::Cell(session) => {
            let state = cell_sessions(shared)?
                .into_iter()
                .find(|s| s.session == session.as_str())
                .ok_or_else(|| {
                    ToolError::new(format!("no cell session '{session}'; cell_list shows them"))
                })?;
            serde_json::to_value(state)
        }
    }
    .map_err(|e| ToolError::new(e.to_string()))?;
    Ok(ResourceContents::TextResourceContents {
        uri: uri.to_owned(),
        mime_type: Some("application/json".into()),
        text: value.to_string(),
        meta: None,
    })
}

/// The subscriptions of one connection, by URI.
#[derive(Default)]
pub struct Subscriptions(Mutex<HashMap<String, CancellationToken>>);

impl Subscriptions {
    /// Starts watching `uri` for `peer` (again subscribing is a no-op).
    pub fn subscribe(
        &self,
        shared: Arc<Shared>,
        uri: String,
        peer: Peer<RoleServer>,
    ) -> Result<(), ToolError> {
        let named = Named::parse(&uri)?;
        let me = match &named {
            Named::Inbox => Some(shared.actor("watch an inbox")?),
            Named::Cell(session) => {
                // Said now, not found out by a watcher nobody hears from.
                connect(session, "cell_list shows the live ones")?;
                None
            }
        };
        let mut watching = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if watching.contains_key(&uri) {
            return Ok(());
        }
        let stop = CancellationToken::new();
        watching.insert(uri.clone(), stop.clone());
        let (changed, mut changes) = tokio::sync::mpsc::unbounded_channel::<()>();
        let watched = uri.clone();
        tokio::spawn(async move {
            while changes.recv().await.is_some() {
                let note = ResourceUpdatedNotificationParam::new(watched.clone());
                if peer.notify_resource_updated(note).await.is_err() {
                    return;
                }
            }
        });
        tokio::spawn(until_cancelled(stop, move |gave_up| {
            let changed = || {
                let _ = changed.send(());
            };
            match (named, me) {
                (Named::Inbox, Some(me)) => watch_inbox(&me, gave_up, changed),
                (Named::Cell(session), _) => on_cell_ends(&session, gave_up, changed),
                (Named::Inbox, None) => unreachable!("an inbox has an actor"),
            }
        }));
        Ok(())
    }

    pub fn unsubscribe(&self, uri: &str) {
        if let Some(stop) = self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(uri) {
            stop.cancel();
        }
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        for stop in self.0.lock().unwrap_or_else(|e| e.into_inner()).values() {
            stop.cancel();
        }
    }
}

/// Calls `changed` each time a message to `me` arrives or moves on.
fn watch_inbox(
    me: &Id,
    gave_up: &std::sync::atomic::AtomicBool,
    changed: impl Fn(),
) -> Result<(), ToolError> {
    let mut seen = inbox_state(me)?;
    let tick: Duration = STORE_CHECK.min(CANCEL_CHECK);
    while !gave_up.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(tick);
        let now = inbox_state(me)?;
        if now != seen {
            seen = now;
            changed();
        }
    }
    Ok(())
}
