//! One client's connection: the crate's agent role on it, and the task
//! that shows it the transcript — replayed when it joins, live after.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    CancelNotification, InitializeRequest, InitializeResponse, ListSessionsRequest,
    ListSessionsResponse, LoadSessionRequest, LoadSessionResponse, NewSessionRequest,
    NewSessionResponse, PromptRequest, PromptResponse, ResumeSessionRequest, ResumeSessionResponse,
    SessionId, SessionInfo, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
    SetSessionModeRequest, SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{
    on_receive_notification, on_receive_request, Agent, Client, ConnectTo, Error, UntypedMessage,
};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::mpsc;

use super::bounds::{
    Pace, INITIALIZE_DEADLINE, MAX_REFUSED_PER_CONNECTION, REPLAY_BURST_BYTES,
    REPLAY_BYTES_PER_SECOND,
};
use super::ext::{AttachRequest, AttachResponse, ObserveNotification};
use super::history::{self, History};
use super::wire::Written;
use super::{seat_name, Bridge, Peer, Role, MAX_BACKLOG, REPLAY_STALL};
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
    /// The session it joined last; none before it joined one.
    session: Mutex<Option<String>>,
    /// Lines the transport wrote, and notifications the bridge queued.
    written: Arc<Written>,
    queued: AtomicU64,
    /// Whether it sent `initialize`: until then it is not in the
    /// transcript (a connect-and-close flood costs no notes).
    greeted: std::sync::atomic::AtomicBool,
    /// The transcript position its follower reached: every entry before
    /// it was shown (or was not for this client).
    reached: tokio::sync::watch::Sender<u64>,
}

impl Seat {
    pub fn new(id: u64, peer: &Peer, since: String, written: Arc<Written>) -> Self {
        Self {
            id,
            name: seat_name(id),
            uid: peer.uid,
            via: peer.via,
            since,
            most: peer.role,
            role: Mutex::new(peer.role),
            session: Mutex::new(None),
            written,
            queued: AtomicU64::new(0),
            greeted: std::sync::atomic::AtomicBool::new(false),
            reached: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Waits until the follower has shown everything before `position`
    /// (at most [`REPLAY_STALL`]: a follower that far behind is dropped).
    async fn shown_up_to(&self, position: u64) {
        let mut reached = self.reached.subscribe();
        let _ = tokio::time::timeout(REPLAY_STALL, reached.wait_for(|&r| r >= position)).await;
    }

    /// Marks it greeted; true the first time.
    fn greet(&self) -> bool {
        !self.greeted.swap(true, Ordering::AcqRel)
    }

    pub fn greeted(&self) -> bool {
        self.greeted.load(Ordering::Acquire)
    }

    pub fn role(&self) -> Role {
        *self.role.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn joined(&self) -> bool {
        self.session().is_some()
    }

    fn session(&self) -> Option<String> {
        self.session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn follow_session(&self, session: &str) {
        *self.session.lock().unwrap_or_else(|p| p.into_inner()) = Some(session.to_owned());
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
            .saturating_sub(self.written.count())
    }

    /// Waits until the client is at most [`MAX_BACKLOG`] lines behind; an
    /// error when it takes nothing for [`REPLAY_STALL`].
    async fn keep_pace(&self) -> Result<(), String> {
        let queued = self.queued.load(Ordering::Acquire);
        let wanted = queued.saturating_sub(MAX_BACKLOG);
        if self.written.reach(wanted, REPLAY_STALL).await {
            Ok(())
        } else {
            Err(format!(
                "dropped: it took nothing of its replay for {} s",
                REPLAY_STALL.as_secs()
            ))
        }
    }
}

/// Where a joining client's replay starts.
enum Start {
    History(History),
    /// After this position (a reconnect).
    After(u64),
}

/// A join of `session`, answered once its replay is out (with the live
/// stream's position).
struct Join {
    session: String,
    start: Start,
    respond: Box<dyn FnOnce(u64) -> Result<(), Error> + Send>,
}

/// What every handler of one connection works with.
struct Ctx {
    bridge: Arc<Bridge>,
    seat: Arc<Seat>,
    joins: mpsc::UnboundedSender<Join>,
    /// Told once the client sent `initialize`.
    initialized: tokio::sync::Notify,
    /// How many of its calls were refused; told at the bound.
    refused: AtomicU64,
    ejected: tokio::sync::Notify,
}

/// A handler of request `$request` that calls `Ctx::$method`.
macro_rules! request {
    ($ctx:expr, $request:ty, $method:ident) => {{
        let ctx = $ctx.clone();
        async move |request: $request, responder: Responder<_>, cx: ConnectionTo<Client>| {
            ctx.$method(request, responder, cx)
        }
    }};
}

/// A handler of notification `$notification` that calls `Ctx::$method`.
macro_rules! notification {
    ($ctx:expr, $notification:ty, $method:ident) => {{
        let ctx = $ctx.clone();
        async move |notification: $notification, _cx| {
            ctx.$method(notification);
            Ok(())
        }
    }};
}

/// Serves the connection until it ends; says why it ended.
pub(super) async fn serve(
    bridge: Arc<Bridge>,
    seat: Arc<Seat>,
    transport: impl ConnectTo<Agent> + 'static,
) -> String {
    let (joins, joined) = mpsc::unbounded_channel();
    let ctx = Arc::new(Ctx {
        bridge,
        seat,
        joins,
        initialized: tokio::sync::Notify::new(),
        refused: AtomicU64::new(0),
        ejected: tokio::sync::Notify::new(),
    });
    let waiting = ctx.clone();
    let follower = ctx.clone();
    let (dropped, on_drop) = tokio::sync::oneshot::channel();
    let served = Agent
        .v1()
        .name("agent-comms bridge")
        .on_receive_request(
            request!(ctx, InitializeRequest, initialize),
            on_receive_request!(),
        )
        .on_receive_request(
            request!(ctx, NewSessionRequest, new_session),
            on_receive_request!(),
        )
        .on_receive_request(
            request!(ctx, LoadSessionRequest, load_session),
            on_receive_request!(),
        )
        .on_receive_request(
            request!(ctx, ResumeSessionRequest, resume_session),
            on_receive_request!(),
        )
        .on_receive_request(
            request!(ctx, ListSessionsRequest, list_sessions),
            on_receive_request!(),
        )
        .on_receive_request(request!(ctx, AttachRequest, attach), on_receive_request!())
        .on_receive_request(request!(ctx, PromptRequest, prompt), on_receive_request!())
        .on_receive_request(
            request!(ctx, SetSessionModeRequest, set_mode),
            on_receive_request!(),
        )
        .on_receive_request(
            request!(ctx, SetSessionConfigOptionRequest, set_config),
            on_receive_request!(),
        )
        .on_receive_notification(
            notification!(ctx, CancelNotification, cancel),
            on_receive_notification!(),
        )
        .on_receive_notification(
            notification!(ctx, ObserveNotification, observe),
            on_receive_notification!(),
        )
        .on_receive_notification(
            notification!(ctx, UntypedMessage, ignore),
            on_receive_notification!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Client>| {
            let leaving = follow(&follower.bridge, &follower.seat, &cx, joined).await;
            if let Leaving::Dropped(why) = &leaving {
                let _ = dropped.send(why.clone());
            }
            Ok(leaving)
        });
    until_it_ends(served, on_drop, &waiting).await
}

/// Why the connection `served` ended: its own end, or the first of a drop
/// for what it did not read, no `initialize` in time, or too many refused
/// calls. A client dropped for what it did not read is not waited for: its
/// connection would wait to write the lines it never reads. Dropping the
/// connection closes the socket and frees its queue.
async fn until_it_ends<E: std::fmt::Display>(
    served: impl std::future::Future<Output = Result<Leaving, E>>,
    on_drop: tokio::sync::oneshot::Receiver<String>,
    ctx: &Ctx,
) -> String {
    tokio::select! {
        served = served => match served {
            Ok(Leaving::Done(why) | Leaving::Dropped(why)) => why,
            Err(e) => format!("the connection failed: {e}"),
        },
        Ok(why) = on_drop => why,
        why = no_initialize(ctx) => why,
        () = ctx.ejected.notified() => format!(
            "dropped: {MAX_REFUSED_PER_CONNECTION} of its calls were refused"
        ),
    }
}

/// Resolves, with why, if the client does not send `initialize` within
/// [`INITIALIZE_DEADLINE`]: a connection that says nothing holds a place
/// another client could use.
async fn no_initialize(ctx: &Ctx) -> String {
    match tokio::time::timeout(INITIALIZE_DEADLINE, ctx.initialized.notified()).await {
        Ok(()) => std::future::pending().await,
        Err(_) => format!(
            "dropped: it sent no initialize within {} s",
            INITIALIZE_DEADLINE.as_secs()
        ),
    }
}

/// Why a client's connection ends.
enum Leaving {
    /// It, or the runtime, ended: what is queued still goes out.
    Done(String),
    /// The bridge ends it, at once (it falls too far behind).
    Dropped(String),
}

impl Ctx {
    fn initialize(
        &self,
        _: InitializeRequest,
        responder: Responder<InitializeResponse>,
        _: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        self.initialized.notify_one();
        let seat = &self.seat;
        if seat.greet() {
            self.bridge.handle.tap().note(format!(
                "{} attached ({}, uid {}, via {})",
                seat.name,
                seat.most.as_str(),
                seat.uid,
                seat.via
            ));
        }
        responder.respond(self.bridge.initialize.clone())
    }

    /// Joins the running session, or opens one of the client's own when
    /// the policy says so.
    fn new_session(
        &self,
        _: NewSessionRequest,
        responder: Responder<NewSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        if !self.bridge.clients.fresh_sessions {
            let id = self.bridge.session_id();
            return self.join(id.to_string(), Start::History(History::Full), move |_| {
                responder.respond(NewSessionResponse::new(id))
            });
        }
        if self.seat.role() != Role::Controller {
            return responder.respond_with_error(self.refuse_observer("open a session"));
        }
        let (bridge, joins) = (self.bridge.clone(), self.joins.clone());
        let name = self.seat.name.clone();
        cx.spawn(async move {
            let opened = bridge
                .handle
                .open_session(bridge.cwd.clone(), bridge.mode.as_deref())
                .await;
            match opened {
                Ok(opened) => {
                    let id = opened.session_id.to_string();
                    bridge
                        .handle
                        .tap()
                        .note(format!("opened session {id} for {name}"));
                    bridge
                        .fresh
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(id.clone());
                    send_join(&joins, id, Start::History(History::None), move |_| {
                        responder.respond(opened)
                    })
                }
                Err(e) => responder.respond_with_error(e),
            }
        })
    }

    fn load_session(
        &self,
        request: LoadSessionRequest,
        responder: Responder<LoadSessionResponse>,
        _: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        match self.bridge.known_session(&request.session_id) {
            Ok(id) => self.join(id, Start::History(History::Full), move |_| {
                responder.respond(LoadSessionResponse::new())
            }),
            Err(e) => responder.respond_with_error(e),
        }
    }

    fn resume_session(
        &self,
        request: ResumeSessionRequest,
        responder: Responder<ResumeSessionResponse>,
        _: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        match self.bridge.known_session(&request.session_id) {
            Ok(id) => self.join(id, Start::History(History::None), move |_| {
                responder.respond(ResumeSessionResponse::new())
            }),
            Err(e) => responder.respond_with_error(e),
        }
    }

    fn list_sessions(
        &self,
        _: ListSessionsRequest,
        responder: Responder<ListSessionsResponse>,
        _: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let sessions = self
            .bridge
            .sessions()
            .into_iter()
            .map(|id| SessionInfo::new(id, self.bridge.cwd.clone()))
            .collect();
        responder.respond(ListSessionsResponse::new(sessions))
    }

    fn attach(
        &self,
        request: AttachRequest,
        responder: Responder<AttachResponse>,
        _: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let invalid = |why: String| Error::new(-32602, why);
        let id = request
            .session_id
            .unwrap_or_else(|| self.bridge.handle.session_id());
        let session = match self.bridge.known_session(&SessionId::new(id)) {
            Ok(session) => session,
            Err(e) => return responder.respond_with_error(e),
        };
        let wanted = match request.role.as_deref() {
            None => self.seat.role(),
            Some("controller") => Role::Controller,
            Some("observer") => Role::Observer,
            Some(other) => {
                return responder.respond_with_error(invalid(format!(
                    "role {other:?}: use \"controller\" or \"observer\""
                )))
            }
        };
        let role = match self.seat.ask_role(wanted) {
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
        let (session_id, name) = (session.clone(), self.seat.name.clone());
        self.join(session, start, move |position| {
            responder.respond(AttachResponse {
                session_id,
                role: role.as_str().into(),
                position,
                seat: name,
            })
        })
    }

    fn prompt(
        &self,
        request: PromptRequest,
        responder: Responder<PromptResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        if let Err(e) = self.may_control(&request.session_id, "prompt") {
            return responder.respond_with_error(e);
        }
        let (bridge, seat) = (self.bridge.clone(), self.seat.clone());
        cx.spawn(async move { prompt(&bridge, &seat, request, responder).await })
    }

    fn set_mode(
        &self,
        _: SetSessionModeRequest,
        responder: Responder<SetSessionModeResponse>,
        _: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        responder.respond_with_error(fixed("mode"))
    }

    fn set_config(
        &self,
        _: SetSessionConfigOptionRequest,
        responder: Responder<SetSessionConfigOptionResponse>,
        _: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        responder.respond_with_error(fixed("configuration"))
    }

    fn cancel(&self, cancel: CancelNotification) {
        let tap = self.bridge.handle.tap();
        match self.may_control(&cancel.session_id, "cancel") {
            Ok(()) => {
                if let Err(why) = self.bridge.handle.send_cancel(&cancel.session_id) {
                    tap.note(why);
                }
            }
            // An observer's is counted already.
            Err(_) if self.seat.role() != Role::Controller => {}
            Err(e) => self.refused(&format!("a cancel from {}: {}", self.seat.name, e.message)),
        }
    }

    fn observe(&self, _: ObserveNotification) {
        if self.seat.ask_role(Role::Observer).is_ok() {
            self.bridge.asks.controller_left(self.seat.id);
            self.bridge.recount();
        }
    }

    fn ignore(&self, notification: UntypedMessage) {
        tracing::debug!(
            "{}: ignored a notification nobody handles: {}",
            self.seat.name,
            notification.method
        );
    }

    fn join(
        &self,
        session: String,
        start: Start,
        respond: impl FnOnce(u64) -> Result<(), Error> + Send + 'static,
    ) -> Result<(), Error> {
        send_join(&self.joins, session, start, respond)
    }

    /// Whether this seat may `what` (prompt, cancel) in session `id`: the
    /// one it joined, as a controller.
    fn may_control(&self, id: &SessionId, what: &str) -> Result<(), Error> {
        let seat = &self.seat;
        if seat.role() != Role::Controller {
            return Err(self.refuse_observer(what));
        }
        match seat.session() {
            Some(joined) if joined == id.to_string() => Ok(()),
            Some(joined) => Err(Error::new(
                -32602,
                format!("unknown session {id}: this connection joined session {joined}"),
            )),
            None => Err(Error::new(
                -32602,
                "join a session first: session/load, session/new or session/resume",
            )),
        }
    }
}

impl Ctx {
    /// Counts a refused call, for the bridge and for this connection: one
    /// that keeps asking for what it may not do is let go at
    /// [`MAX_REFUSED_PER_CONNECTION`] (each refusal still costs a parse on
    /// the supervisor's one thread, which every client shares).
    fn refused(&self, why: &str) {
        self.bridge.refused(why);
        if self.seat_refused() == MAX_REFUSED_PER_CONNECTION {
            self.ejected.notify_one();
        }
    }

    fn seat_refused(&self) -> u64 {
        self.refused.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Counts an observer's call to `what` as refused, and says why.
    fn refuse_observer(&self, what: &str) -> Error {
        self.refused(&format!(
            "a call to {what} from {}: an observer",
            self.seat.name
        ));
        Error::new(
            REFUSED,
            format!(
                "refused by agent-comms: this connection observes (read-only); it cannot {what}"
            ),
        )
    }
}

fn send_join(
    joins: &mpsc::UnboundedSender<Join>,
    session: String,
    start: Start,
    respond: impl FnOnce(u64) -> Result<(), Error> + Send + 'static,
) -> Result<(), Error> {
    let join = Join {
        session,
        start,
        respond: Box::new(respond),
    };
    // The follower is gone only once the connection is.
    let _ = joins.send(join);
    Ok(())
}

fn fixed(what: &str) -> Error {
    Error::new(
        REFUSED,
        format!("refused by agent-comms: the session's {what} is fixed by the runtime's policy; clients cannot change it"),
    )
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
        Ok(turn) => {
            // The turn's updates were tapped before its response: they go
            // out first, whatever the turn's size, so a client that closes
            // the turn on the response has all of it.
            seat.shown_up_to(bridge.handle.tap().next_seq()).await;
            responder.respond_with_result(turn.response)
        }
        Err(DeliveryError::NotReady(_)) => responder.respond_with_error(Error::new(
            REFUSED,
            "refused by agent-comms: a turn is running in this session; prompt again when it ends (the policy's [clients] busy = \"queue\" would queue it)",
        )),
        Err(e) => responder.respond_with_error(Error::new(REFUSED, format!("refused by agent-comms: {e}"))),
    }
}

impl Bridge {
    /// `id`, if it names a session a client may join.
    fn known_session(&self, id: &SessionId) -> Result<String, Error> {
        let id = id.to_string();
        let sessions = self.sessions();
        if sessions.contains(&id) {
            return Ok(id);
        }
        Err(Error::new(
            -32602,
            format!(
                "unknown session {id}: this runtime runs session {}; session/list names it",
                sessions[0]
            ),
        ))
    }
}

/// Shows the client what it joins, then what comes, until it or the
/// runtime ends, or it falls too far behind.
async fn follow(
    bridge: &Arc<Bridge>,
    seat: &Seat,
    cx: &ConnectionTo<Client>,
    mut joins: mpsc::UnboundedReceiver<Join>,
) -> Leaving {
    let done = |why: &str| Leaving::Done(why.to_owned());
    let mut live: Option<broadcast::Receiver<Arc<Entry>>> = None;
    let mut exit = bridge.handle.exit();
    let mut session = String::new();
    loop {
        tokio::select! {
            join = joins.recv() => {
                let Some(join) = join else { return done("the connection closed") };
                session = join.session.clone();
                seat.follow_session(&session);
                match replay(bridge, seat, cx, &session, join).await {
                    Ok(rx) => live = Some(rx),
                    Err(why) => return Leaving::Dropped(why),
                }
                if seat.role() == Role::Controller {
                    bridge.asks.controller_joined(seat.id, cx.clone(), &session);
                }
                bridge.recount();
            }
            entry = next_live(&mut live) => match entry {
                Ok(entry) => {
                    show(seat, cx, &session, &entry, true);
                    seat.reached.send_replace(entry.seq + 1);
                }
                Err(RecvError::Lagged(n)) => return Leaving::Dropped(format!("dropped: it fell {n} entries behind the live stream")),
                Err(RecvError::Closed) => return done("the runtime ended"),
            },
            _ = cx.incoming_closed() => return done("it disconnected"),
            _ = exited(&mut exit) => {
                if let Some(live) = live.as_mut() {
                    while let Ok(entry) = live.try_recv() {
                        show(seat, cx, &session, &entry, true);
                    }
                }
                return done("the runtime ended");
            }
        }
        let behind = seat.backlog();
        if behind > MAX_BACKLOG {
            return Leaving::Dropped(format!(
                "dropped: {behind} lines behind (it reads nothing?); the limit is {MAX_BACKLOG}"
            ));
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
/// returns the live stream that goes on from there. The past is streamed
/// from the file at the client's pace: the bridge holds a few entries of
/// it at a time, however long the transcript and however many join.
async fn replay(
    bridge: &Bridge,
    seat: &Seat,
    cx: &ConnectionTo<Client>,
    session: &str,
    join: Join,
) -> Result<broadcast::Receiver<Arc<Entry>>, String> {
    let tap = bridge.handle.tap();
    let (mark, live) = tap.follow();
    let path = tap.path().to_owned();
    let unreadable = |e: &dyn std::fmt::Display| format!("cannot read the transcript: {e}");
    let wants_past = match join.start {
        Start::History(History::None) => false,
        Start::History(_) => mark > 0,
        Start::After(position) => position.saturating_add(1) < mark,
    };
    if wants_past {
        // One join reads the disk at a time: see CONCURRENT_REPLAYS.
        let permit = bridge
            .replays
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| unreadable(&e))?;
        let start = match join.start {
            Start::History(History::PendingOnly) => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || {
                    let past = transcript::entries(&path)?
                        .map_while(Result::ok)
                        .take_while(|e| e.seq < mark);
                    io::Result::Ok(history::replay_start(past, History::PendingOnly, mark))
                })
                .await
                .map_err(|e| unreadable(&e))?
                .map_err(|e| unreadable(&e))?
            }
            Start::History(history) => {
                history::replay_start(std::iter::empty::<Entry>(), history, mark)
            }
            Start::After(position) => position.saturating_add(1),
        };
        let mut past = read_between(path, session.to_owned(), start..mark, permit);
        while let Some(updates) = past.recv().await {
            for params in updates? {
                send_update(seat, cx, params);
            }
            if seat.backlog() > MAX_BACKLOG {
                seat.keep_pace().await?;
            }
        }
    }
    (join.respond)(mark).map_err(|e| format!("cannot answer: {e}"))?;
    seat.reached.send_replace(mark);
    Ok(live)
}

/// What the transcript's entries in `range` show a client of `session`,
/// an entry's updates at a time, made on a blocking thread a few ahead of
/// the one who takes them (the runtime's thread only sends them); it stops
/// when they stop taking, and lets `permit` go.
fn read_between(
    path: PathBuf,
    session: String,
    range: std::ops::Range<u64>,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> mpsc::Receiver<Result<Vec<serde_json::Value>, String>> {
    const AHEAD: usize = 64;
    let (tx, rx) = mpsc::channel(AHEAD);
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        // Read, parsed and sent at a pace; the permit makes joins take
        // turns, so together they go no faster than one.
        let mut pace = Pace::new(REPLAY_BURST_BYTES, REPLAY_BYTES_PER_SECOND);
        let entries = match transcript::sized_entries(&path) {
            Ok(entries) => entries,
            Err(e) => {
                let _ = tx.blocking_send(Err(format!("cannot read the transcript: {e}")));
                return;
            }
        };
        for entry in entries {
            if let Ok((_, bytes)) = &entry {
                let wait = pace.take_many(*bytes, std::time::Instant::now());
                if !wait.is_zero() {
                    std::thread::sleep(wait);
                }
            }
            let updates = match entry {
                Ok((e, _)) if e.seq < range.start => continue,
                Ok((e, _)) if e.seq >= range.end => return,
                Ok((e, _)) => history::updates(&e, &session, None),
                Err(e) => {
                    let _ = tx.blocking_send(Err(format!("cannot read the transcript: {e}")));
                    return;
                }
            };
            if !updates.is_empty() && tx.blocking_send(Ok(updates)).is_err() {
                return;
            }
        }
    });
    rx
}

/// Sends what `entry` shows (live: without the seat's own prompts).
fn show(seat: &Seat, cx: &ConnectionTo<Client>, session: &str, entry: &Entry, live: bool) {
    let skip = live.then_some(seat.name.as_str());
    for params in history::updates(entry, session, skip) {
        send_update(seat, cx, params);
    }
}

fn send_update(seat: &Seat, cx: &ConnectionTo<Client>, params: serde_json::Value) {
    // Built in place: `UntypedMessage::new` would copy the params again.
    let update = UntypedMessage {
        method: "session/update".into(),
        params,
    };
    if cx.send_notification(update).is_ok() {
        seat.queued.fetch_add(1, Ordering::AcqRel);
    }
}
