//! The dashboard's model: the rows as the feed last described them, the
//! filter, and what is selected. Drawing it is `draw`'s.

use std::collections::BTreeMap;

use agent_comms_core::adapter::Activity;
use agent_comms_core::control::registration::effective_status;
use agent_comms_core::session::SessionRecord;
use agent_comms_core::socket::protocol::SessionStatus;
use agent_comms_core::store::{Invocation, InvocationStatus, RuntimeRecord};

use super::feed::{Stored, Update};

/// One session or runtime row.
pub struct Row {
    pub name: String,
    /// `session`, `cell`, `interactive`, `acp`, or `runtime` for a
    /// runtime with no live session.
    pub kind: String,
    pub provider: String,
    /// busy, idle, unknown, `-` without an adapter.
    pub state: String,
    /// `typing`, `attached`, or empty.
    pub person: String,
    pub pending: usize,
    pub in_flight: usize,
    /// How long the last message delivered to its agent took, from sent
    /// to delivered (ms).
    pub last_latency: Option<u64>,
    /// Milliseconds since its runtime's last heartbeat.
    pub heartbeat_age: Option<u64>,
    /// Live: it can be attached to.
    pub live: bool,
}

impl Row {
    /// A row with no messages or heartbeat yet.
    fn new(
        name: String,
        kind: &str,
        provider: Option<String>,
        state: &str,
        person: &str,
        live: bool,
    ) -> Self {
        Self {
            name,
            kind: kind.to_owned(),
            provider: provider.unwrap_or_else(|| "-".into()),
            state: state.to_owned(),
            person: person.to_owned(),
            pending: 0,
            in_flight: 0,
            last_latency: None,
            heartbeat_age: None,
            live,
        }
    }
}

/// Which list the keys act on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Sessions,
    Messages,
}

#[derive(Default)]
pub struct Board {
    sessions: BTreeMap<String, SessionRecord>,
    statuses: BTreeMap<String, SessionStatus>,
    stored: Stored,
    pub filter: String,
    pub selected_session: usize,
    pub selected_message: usize,
    pub focus_messages: bool,
}

impl Board {
    pub fn focus(&self) -> Focus {
        if self.focus_messages {
            Focus::Messages
        } else {
            Focus::Sessions
        }
    }

    pub fn set_sessions(&mut self, live: Vec<SessionRecord>) {
        self.sessions = live.into_iter().map(|r| (r.name.to_string(), r)).collect();
        self.statuses.retain(|n, _| self.sessions.contains_key(n));
    }

    pub fn set_stored(&mut self, stored: Stored) {
        self.stored = stored;
    }

    pub fn apply(&mut self, update: Update) {
        match update {
            Update::Status(name, status) => {
                self.statuses.insert(name, status);
            }
            Update::Gone(name) => {
                self.statuses.remove(&name);
            }
            Update::StoreChanged => {}
        }
    }

    fn matches(&self, text: &str) -> bool {
        self.filter.is_empty() || text.contains(&self.filter)
    }

    /// Live sessions, then runtimes with none, filtered by name, kind or
    /// provider.
    pub fn rows(&self, now: u64) -> Vec<Row> {
        let runtime = |name: &str| self.stored.runtimes.iter().find(|r| r.id == name);
        let mut rows: Vec<Row> = self
            .sessions
            .values()
            .map(|record| {
                let name = record.name.to_string();
                let status = self.statuses.get(&name);
                let state = match status {
                    Some(s) => s.activity.map_or("-", Activity::as_str),
                    None => "?",
                };
                let person = match status {
                    Some(s) if s.typing => "typing",
                    Some(s) if s.person_attached => "attached",
                    Some(s) if s.clients > 0 => "watched",
                    _ => "",
                };
                let rt = runtime(&name);
                let provider = status
                    .and_then(|s| s.adapter.clone())
                    .or_else(|| rt.and_then(|r| r.provider.clone()));
                let row = Row::new(name, record.kind.as_str(), provider, state, person, true);
                self.with_messages(row, rt, now)
            })
            .collect();
        for r in &self.stored.runtimes {
            if !self.sessions.contains_key(&r.id) {
                let (status, _) = effective_status(r, now);
                let state = status.as_str().to_lowercase();
                let row = Row::new(
                    r.id.clone(),
                    "runtime",
                    r.provider.clone(),
                    &state,
                    "",
                    false,
                );
                rows.push(self.with_messages(row, Some(r), now));
            }
        }
        rows.retain(|r| {
            self.matches(&r.name) || self.matches(&r.kind) || self.matches(&r.provider)
        });
        rows
    }

    /// `row` with its agent's messages and its runtime's heartbeat.
    fn with_messages(&self, row: Row, runtime: Option<&RuntimeRecord>, now: u64) -> Row {
        let agent = runtime.map_or(row.name.as_str(), |r| r.agent.as_str());
        let to_agent = || self.stored.messages.iter().filter(|m| m.to == agent);
        let count = |status| to_agent().filter(|m| m.status == status).count();
        let last_latency = to_agent()
            .filter_map(|m| Some((m.created, m.delivered?)))
            .max_by_key(|(_, at)| *at)
            .map(|(sent, at)| at.saturating_sub(sent));
        Row {
            pending: count(InvocationStatus::Pending),
            in_flight: count(InvocationStatus::Delivering),
            last_latency,
            heartbeat_age: runtime
                .and_then(|r| r.last_heartbeat)
                .map(|t| now.saturating_sub(t)),
            ..row
        }
    }

    /// The latest messages first, filtered by id, sender, recipient or
    /// status.
    pub fn messages(&self) -> Vec<&Invocation> {
        self.stored
            .messages
            .iter()
            .rev()
            .filter(|m| {
                self.matches(&m.id)
                    || self.matches(&m.from)
                    || self.matches(&m.to)
                    || self.matches(m.status.as_str())
            })
            .collect()
    }

    /// Moves the selection of the focused list by `by`, within `len`.
    pub fn move_selection(&mut self, by: isize, len: usize) {
        let selected = match self.focus() {
            Focus::Sessions => &mut self.selected_session,
            Focus::Messages => &mut self.selected_message,
        };
        let max = len.saturating_sub(1) as isize;
        *selected = (*selected as isize + by).clamp(0, max) as usize;
    }
}
