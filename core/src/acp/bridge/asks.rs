//! Permission requests that the policy leaves to the people attached
//! (rule `ask`): put to every controller at once; the first valid answer
//! wins, the others are told it was resolved. A request is never left
//! hanging: when no controller is attached, when the last one leaves, or
//! when nobody answers in time, the caller answers with the policy's
//! fallback — never with "cancelled" as a stand-in, which agents read as
//! the user aborting the turn.
//!
//! A controller that joins while requests wait is asked them too, so one
//! who attaches late (or reconnects) can still answer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, RequestCancellationHandle, UntypedMessage};
use serde_json::json;
use tokio::sync::oneshot;

use super::seat_name;
use crate::acp::transcript::Tap;

/// The notification the other controllers get once a request is answered.
pub const RESOLVED: &str = "_agent_comms/permission_resolved";

/// How an asked request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// A controller chose one of the offered options.
    Chosen { option_id: String, seat: u64 },
    /// Nobody answered; the policy's fallback is to answer, for this
    /// reason.
    Unanswered(String),
}

pub struct Asks {
    state: Mutex<State>,
    tap: Arc<Tap>,
}

#[derive(Default)]
struct State {
    /// Each controller's connection, and the session it follows.
    controllers: BTreeMap<u64, (ConnectionTo<Client>, String)>,
    pending: BTreeMap<u64, Pending>,
    next: u64,
}

impl State {
    fn has_controller_of(&self, session: &str) -> bool {
        self.controllers.values().any(|(_, s)| s == session)
    }
}

struct Pending {
    request: RequestPermissionRequest,
    done: oneshot::Sender<Resolution>,
    /// Who was asked, to withdraw the question from the others.
    asked: Vec<(u64, ConnectionTo<Client>, RequestCancellationHandle)>,
}

impl Asks {
    pub fn new(tap: Arc<Tap>) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::default(),
            tap,
        })
    }

    /// Puts `request` to the controllers of its session and waits, at most
    /// `timeout`, for the first valid answer.
    pub async fn ask(
        self: &Arc<Self>,
        request: RequestPermissionRequest,
        timeout: Duration,
    ) -> Resolution {
        let (done, answered) = oneshot::channel();
        let session = request.session_id.to_string();
        let id = {
            let mut state = self.lock();
            if !state.has_controller_of(&session) {
                return Resolution::Unanswered("no controller is attached".into());
            }
            let id = state.next;
            state.next += 1;
            let mut pending = Pending {
                request,
                done,
                asked: Vec::new(),
            };
            for (&seat, (cx, followed)) in &state.controllers {
                if *followed == session {
                    self.put(id, &mut pending, seat, cx);
                }
            }
            state.pending.insert(id, pending);
            id
        };
        match tokio::time::timeout(timeout, answered).await {
            Ok(Ok(resolution)) => resolution,
            Ok(Err(_)) => Resolution::Unanswered("the question was dropped".into()),
            Err(_) => {
                let why = format!("nobody answered within {} s", timeout.as_secs());
                self.withdraw(id, "policy");
                Resolution::Unanswered(why)
            }
        }
    }

    /// A controller joined `session`: it is asked what waits there, and
    /// what comes.
    pub fn controller_joined(self: &Arc<Self>, seat: u64, cx: ConnectionTo<Client>, session: &str) {
        let mut state = self.lock();
        let followed = (cx.clone(), session.to_owned());
        if let Some((_, before)) = state.controllers.insert(seat, followed) {
            if before == session {
                return;
            }
            self.unanswered_without_controller(&mut state, &before);
        }
        for (&id, question) in state.pending.iter_mut() {
            if question.request.session_id.to_string() == session {
                self.put(id, question, seat, &cx);
            }
        }
    }

    /// A controller left; with it the last one of its session, what waits
    /// there is unanswered.
    pub fn controller_left(&self, seat: u64) {
        let mut state = self.lock();
        if let Some((_, session)) = state.controllers.remove(&seat) {
            self.unanswered_without_controller(&mut state, &session);
        }
    }

    fn unanswered_without_controller(&self, state: &mut State, session: &str) {
        if state.has_controller_of(session) {
            return;
        }
        let orphans: Vec<u64> = state
            .pending
            .iter()
            .filter(|(_, q)| q.request.session_id.to_string() == session)
            .map(|(&id, _)| id)
            .collect();
        for id in orphans {
            if let Some(question) = state.pending.remove(&id) {
                let _ = question
                    .done
                    .send(Resolution::Unanswered("the last controller left".into()));
            }
        }
    }

    /// Asks one controller, its answer coming back to [`Asks::answered`].
    fn put(self: &Arc<Self>, id: u64, pending: &mut Pending, seat: u64, cx: &ConnectionTo<Client>) {
        let sent = cx.send_request(pending.request.clone());
        let cancel = sent.cancellation_handle();
        let asks = self.clone();
        let taken = sent.on_receiving_result(async move |result| {
            asks.answered(id, seat, result);
            Ok(())
        });
        if taken.is_ok() {
            pending.asked.push((seat, cx.clone(), cancel));
        }
    }

    fn answered(
        &self,
        id: u64,
        seat: u64,
        result: Result<RequestPermissionResponse, agent_client_protocol::Error>,
    ) {
        let who = seat_name(seat);
        let mut state = self.lock();
        let Some(pending) = state.pending.get(&id) else {
            return; // resolved already: this answer came second
        };
        if !state.controllers.contains_key(&seat) {
            // It was asked as a controller, and observes now: a seat that
            // narrowed itself answers nothing.
            return self.tap.note(format!(
                "{who} answered a permission request after it stopped controlling: ignored"
            ));
        }
        let chosen = match &result {
            Ok(RequestPermissionResponse {
                outcome: RequestPermissionOutcome::Selected(selected),
                ..
            }) => selected.option_id.to_string(),
            Ok(_) => {
                return self
                    .tap
                    .note(format!("{who} dismissed a permission request"))
            }
            Err(e) => {
                return self
                    .tap
                    .note(format!("{who} did not answer a permission request: {e}"))
            }
        };
        if !pending
            .request
            .options
            .iter()
            .any(|o| o.option_id.to_string() == chosen)
        {
            return self.tap.note(format!(
                "{who} answered a permission request with {chosen:?}, which the agent did not offer: ignored"
            ));
        }
        let pending = state.pending.remove(&id).expect("looked up above");
        drop(state);
        self.tap
            .note(format!("{who} answered the permission request: {chosen}"));
        tell_the_others(&pending, seat, &who, Some(&chosen));
        let _ = pending.done.send(Resolution::Chosen {
            option_id: chosen,
            seat,
        });
    }

    /// Takes the question back from everyone (`by` answered it).
    fn withdraw(&self, id: u64, by: &str) {
        let pending = self.lock().pending.remove(&id);
        if let Some(pending) = pending {
            tell_the_others(&pending, u64::MAX, by, None);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Withdraws the question from every controller but `winner`
/// (`$/cancel_request`), and says who resolved it and how.
fn tell_the_others(pending: &Pending, winner: u64, by: &str, option_id: Option<&str>) {
    let fields = &pending.request;
    let params = json!({
        "sessionId": fields.session_id.to_string(),
        "toolCallId": fields.tool_call.tool_call_id.to_string(),
        "optionId": option_id,
        "by": by,
    });
    for (seat, cx, cancel) in &pending.asked {
        if *seat == winner {
            continue;
        }
        let _ = cancel.cancel();
        if let Ok(note) = UntypedMessage::new(RESOLVED, &params) {
            let _ = cx.send_notification(note);
        }
    }
}
