//! One client's connection: the crate's agent role on it, and the task
//! that shows it the transcript — replayed when it joins, live after.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    CancelNotification, InitializeRequest, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, LoadSessionResponse, NewSessionRequest, NewSessionResponse, PromptRequest,
    PromptResponse, ResumeSessionRequest, ResumeSessionResponse, SessionId, SessionInfo,
    SetSessionConfigOptionRequest, SetSessionModeRequest,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo, Error, UntypedMessage};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::mpsc;

use super::ext::{AttachRequest, AttachResponse, ObserveNotification};
use super::history::{self, History};
use super::{seat_name, Bridge, Peer, Role, MAX_BACKLOG};
use crate::acp::transcript::{self, Entry};
use crate::delivery::DeliveryError;
use crate::supervisor::exited;

/// The JSON-RPC code of what the bridge refuses (as the runtime's client
/// role refuses what the policy does not serve).
const REFUSED: i32 = -32001;
/// How long a queued prompt (`[clients] busy = "queue"`) waits its turn.
const QUEUE_WAIT: Duration = Duration::from_secs(30 * 60);

pub(super) struct Seat {
    pub id: u64,
    pub name: String,
    pub uid: u32,
    pub via: &'static str,
    pub since: String,
    /// The most this connection may do; `role` never goes above it.
    most: Role,
    role: Mutex<Role>,
    joined: AtomicBool,
    /// Lines the transport wrote, and notifications the bridge queued.
    written: Arc<AtomicU64>,
    queued: AtomicU64,
}

impl Seat {
    pub fn new(id: u64, peer: &Peer, since: String, written: Arc<AtomicU64>) -> Self {
        Self {
            id,
            name: seat_name(id),
            uid: peer.uid,
            via: peer.via,
            since,
            most: peer.role,
            role: Mutex::new(peer.role),
            joined: AtomicBool::new(false),
            written,
            queued: AtomicU64::new(0),
        }
    }

    pub fn role(&self) -> Role {
        *self.role.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn joined(&self) -> bool {
        self.joined.load(Ordering::Acquire)
    }

    /// Asks for `wanted`: granted up to what the connection may do.
    fn ask_role(&self, wanted: Role) -> Result<Role, String> {
        if wanted > self.most {
            return Err(format!(
                "this connection may only observe (uid {} is listed as an observer, or it asked to); it cannot become a controller",
                self.uid
            ));
        }
        let mut role = self.role.lock().unwrap_or_else(|p| p.into_inner());
        if wanted > *role {
            return Err(
                "a connection that chose to observe stays an observer; attach again to control"
                    .into(),
            );
        }
        *role = wanted;
        Ok(wanted)
    }

    /// Notifications queued but not yet taken by the client.
    fn backlog(&self) -> u64 {
        self.queued
            .load(Ordering::Acquire)
            .saturating_sub(self.written.load(Ordering::Acquire))
    }
}

/// Where a joining client's replay starts.
enum Start {
    History(History),
    /// After this position (a reconnect).
    After(u64),
}

/// A join, answered once its replay is out (with the live stream's
/// position).
struct Join {
    start: Start,
    respond: Box<dyn FnOnce(u64) -> Result<(), Error> + Send>,
}

type Joins = mpsc::UnboundedSender<Join>;

/// Serves the connection until it ends; says why it ended.
pub(super) async fn serve(
    bridge: Arc<Bridge>,
    seat: Arc<Seat>,
    transport: impl ConnectTo<Agent> + 'static,
) -> String {
    let (joins, joined) = mpsc::unbounded_channel();
    let (b, s) = (bridge.clone(), seat.clone());
    let served = handlers(bridge, seat, joins)
        .connect_with(transport, async move |cx: ConnectionTo<Client>| {
            Ok(follow(&b, &s, &cx, joined).await)
        })
        .await;
    served.unwrap_or_else(|e| format!("the connection failed: {e}"))
}

// Long: one handler a method, each a few lines; apart they would only
// pass the same three clones around.
fn handlers(
    bridge: Arc<Bridge>,
    seat: Arc<Seat>,
    joins: Joins,
) -> agent_client_protocol::v1::Builder<Agent, impl agent_client_protocol::HandleDispatchFrom<Client>>
{
    let (b1, b2, b3, b4, b5, b6, b7) = (
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
    );
    let (s1, s2, s3, s4, s5) = (seat.clone(), seat.clone(), seat.clone(), seat.clone(), seat);
    let (j1, j2, j3, j4) = (joins.clone(), joins.clone(), joins.clone(), joins);
    Agent
        .v1()
        .name("agent-comms bridge")
        .on_receive_request(
            async move |_: InitializeRequest, responder: Responder<_>, _cx| {
                responder.respond(b1.initialize.clone())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_: NewSessionRequest, responder: Responder<_>, _cx| {
                let id = b2.session_id();
                join(&j1, Start::History(History::Full), move |_| {
                    responder.respond(NewSessionResponse::new(id))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder: Responder<_>, _cx| match b3
                .check_session(&request.session_id)
            {
                Ok(()) => join(&j2, Start::History(History::Full), move |_| {
                    responder.respond(LoadSessionResponse::new())
                }),
                Err(e) => responder.respond_with_error(e),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ResumeSessionRequest, responder: Responder<_>, _cx| match b4
                .check_session(&request.session_id)
            {
                Ok(()) => join(&j3, Start::History(History::None), move |_| {
                    responder.respond(ResumeSessionResponse::new())
                }),
                Err(e) => responder.respond_with_error(e),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_: ListSessionsRequest, responder: Responder<_>, _cx| {
                let info = SessionInfo::new(b5.session_id(), b5.cwd.clone());
                responder.respond(ListSessionsResponse::new(vec![info]))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: AttachRequest, responder: Responder<_>, _cx| {
                attach(&b6, &s1, &j4, request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest,
                        responder: Responder<_>,
                        cx: ConnectionTo<Client>| {
                if let Err(e) = b7.may_control(&s2, &request.session_id, "prompt") {
                    return responder.respond_with_error(e);
                }
                let (bridge, seat) = (b7.clone(), s2.clone());
                cx.spawn(async move { prompt(&bridge, &seat, request, responder).await })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            {
                let bridge = bridge.clone();
                async move |cancel: CancelNotification, _cx| {
                    match bridge.may_control(&s3, &cancel.session_id, "cancel") {
                        Ok(()) => {
                            if let Err(why) = bridge.handle.send_cancel() {
                                bridge.handle.tap().note(why);
                            }
                        }
                        Err(e) => bridge
                            .handle
                            .tap()
                            .note(format!("refused a cancel from {}: {}", s3.name, e.message)),
                    }
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_notification(
            {
                let bridge = bridge.clone();
                async move |_: ObserveNotification, _cx| {
                    if s4.ask_role(Role::Observer).is_ok() {
                        bridge.asks.controller_left(s4.id);
                        bridge.recount();
                    }
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |_: SetSessionModeRequest, responder: Responder<_>, _cx| {
                responder.respond_with_error(fixed("mode"))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_: SetSessionConfigOptionRequest, responder: Responder<_>, _cx| {
                responder.respond_with_error(fixed("configuration"))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            {
                let name = s5.name.clone();
                async move |_: UntypedMessage, _cx| {
                    tracing::debug!("{name}: ignored a notification nobody handles");
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_notification!(),
        )
}

fn fixed(what: &str) -> Error {
    Error::new(
        REFUSED,
        format!("refused by agent-comms: the session's {what} is fixed by the runtime's policy; clients cannot change it"),
    )
}

fn join(
    joins: &Joins,
    start: Start,
    respond: impl FnOnce(u64) -> Result<(), Error> + Send + 'static,
) -> Result<(), Error> {
    let join = Join {
        start,
        respond: Box::new(respond),
    };
    // The follower is gone only once the connection is.
    let _ = joins.send(join);
    Ok(())
}

fn attach(
    bridge: &Bridge,
    seat: &Seat,
    joins: &Joins,
    request: AttachRequest,
    responder: Responder<AttachResponse>,
) -> Result<(), Error> {
    let invalid = |why: String| Error::new(-32602, why);
    if let Some(id) = &request.session_id {
        if let Err(e) = bridge.check_session(&SessionId::new(id.clone())) {
            return responder.respond_with_error(e);
        }
    }
    let wanted = match request.role.as_deref() {
        None => seat.role(),
        Some("controller") => Role::Controller,
        Some("observer") => Role::Observer,
        Some(other) => {
            return responder.respond_with_error(invalid(format!(
                "role {other:?}: use \"controller\" or \"observer\""
            )))
        }
    };
    let role = match seat.ask_role(wanted) {
        Ok(role) => role,
        Err(why) => return responder.respond_with_error(Error::new(REFUSED, why)),
    };
    let start = match (request.after, request.history.as_deref()) {
        (Some(after), _) => Start::After(after),
        (None, None) => Start::History(History::Full),
        (None, Some(text)) => match History::parse(text) {
            Some(h) => Start::History(h),
            None => {
                return responder.respond_with_error(invalid(format!(
                    "history {text:?}: use \"full\", \"pending_only\" or \"none\""
                )))
            }
        },
    };
    let (session_id, name) = (bridge.handle.session_id(), seat.name.clone());
    join(joins, start, move |position| {
        responder.respond(AttachResponse {
            session_id,
            role: role.as_str().into(),
            position,
            seat: name,
        })
    })
}

async fn prompt(
    bridge: &Bridge,
    seat: &Seat,
    mut request: PromptRequest,
    responder: Responder<PromptResponse>,
) -> Result<(), Error> {
    history::mark_origin(&mut request.meta, &seat.name);
    let queue = bridge.clients.queue_when_busy;
    let turn = bridge
        .handle
        .run_turn(request, !queue, QUEUE_WAIT, Some(responder.cancellation()))
        .await;
    match turn {
        Ok(turn) => responder.respond_with_result(turn.response),
        Err(DeliveryError::NotReady(_)) => responder.respond_with_error(Error::new(
            REFUSED,
            "refused by agent-comms: a turn is running in this session; prompt again when it ends (the policy's [clients] busy = \"queue\" would queue it)",
        )),
        Err(e) => responder.respond_with_error(Error::new(REFUSED, format!("refused by agent-comms: {e}"))),
    }
}

impl Bridge {
    fn check_session(&self, id: &SessionId) -> Result<(), Error> {
        if id.to_string() == self.handle.session_id() {
            return Ok(());
        }
        Err(Error::new(
            -32602,
            format!(
                "unknown session {id}: this runtime runs session {}; session/list names it",
                self.handle.session_id()
            ),
        ))
    }

    /// Whether `seat` may `what` (prompt, cancel) in session `id`.
    fn may_control(&self, seat: &Seat, id: &SessionId, what: &str) -> Result<(), Error> {
        self.check_session(id)?;
        if seat.role() != Role::Controller {
            self.handle
                .tap()
                .note(format!("refused a {what} from {}: an observer", seat.name));
            return Err(Error::new(
                REFUSED,
                format!("refused by agent-comms: this connection observes (read-only); it cannot {what}"),
            ));
        }
        if !seat.joined() {
            return Err(Error::new(
                -32602,
                "join the session first: session/load, session/new or session/resume",
            ));
        }
        Ok(())
    }
}

/// Shows the client what it joins, then what comes, until it or the
/// runtime ends; says why it ended.
async fn follow(
    bridge: &Arc<Bridge>,
    seat: &Seat,
    cx: &ConnectionTo<Client>,
    mut joins: mpsc::UnboundedReceiver<Join>,
) -> String {
    let mut live: Option<broadcast::Receiver<Arc<Entry>>> = None;
    let mut exit = bridge.handle.exit();
    let session = bridge.handle.session_id();
    loop {
        tokio::select! {
            join = joins.recv() => {
                let Some(join) = join else { return "the connection closed".into() };
                match replay(bridge, seat, cx, &session, join).await {
                    Ok(rx) => live = Some(rx),
                    Err(why) => return why,
                }
                if !seat.joined.swap(true, Ordering::AcqRel) && seat.role() == Role::Controller {
                    bridge.asks.controller_joined(seat.id, cx.clone());
                }
                bridge.recount();
            }
            entry = next_live(&mut live) => match entry {
                Ok(entry) => show(seat, cx, &session, &entry, true),
                Err(RecvError::Lagged(n)) => return format!("dropped: it fell {n} entries behind the live stream"),
                Err(RecvError::Closed) => return "the runtime ended".into(),
            },
            _ = cx.incoming_closed() => return "it disconnected".into(),
            _ = exited(&mut exit) => {
                if let Some(live) = live.as_mut() {
                    while let Ok(entry) = live.try_recv() {
                        show(seat, cx, &session, &entry, true);
                    }
                }
                return "the runtime ended".into();
            }
        }
        let behind = seat.backlog();
        if behind > MAX_BACKLOG {
            return format!(
                "dropped: {behind} lines behind (it reads nothing?); the limit is {MAX_BACKLOG}"
            );
        }
    }
}

async fn next_live(
    live: &mut Option<broadcast::Receiver<Arc<Entry>>>,
) -> Result<Arc<Entry>, RecvError> {
    match live {
        Some(live) => live.recv().await,
        None => std::future::pending().await,
    }
}

/// Sends the part of the transcript `join` asks for, answers the join, and
/// returns the live stream that goes on from there.
async fn replay(
    bridge: &Bridge,
    seat: &Seat,
    cx: &ConnectionTo<Client>,
    session: &str,
    join: Join,
) -> Result<broadcast::Receiver<Arc<Entry>>, String> {
    let tap = bridge.handle.tap();
    let (mark, live) = tap.follow();
    let wants_past = !matches!(join.start, Start::History(History::None));
    let entries = if wants_past && mark > 0 {
        let path = tap.path().to_owned();
        tokio::task::spawn_blocking(move || transcript::read(&path))
            .await
            .map_err(|e| format!("cannot read the transcript: {e}"))?
            .map_err(|e| format!("cannot read the transcript: {e}"))?
    } else {
        Vec::new()
    };
    let start = match join.start {
        Start::History(history) => history::replay_start(&entries, history, mark),
        Start::After(position) => position.saturating_add(1),
    };
    for entry in entries.iter().filter(|e| e.seq >= start && e.seq < mark) {
        show(seat, cx, session, entry, false);
    }
    (join.respond)(mark).map_err(|e| format!("cannot answer: {e}"))?;
    Ok(live)
}

/// Sends what `entry` shows (live: without the seat's own prompts).
fn show(seat: &Seat, cx: &ConnectionTo<Client>, session: &str, entry: &Entry, live: bool) {
    let skip = live.then_some(seat.name.as_str());
    for params in history::updates(entry, session, skip) {
        let Ok(update) = UntypedMessage::new("session/update", params) else {
            continue;
        };
        if cx.send_notification(update).is_ok() {
            seat.queued.fetch_add(1, Ordering::AcqRel);
        }
    }
}
