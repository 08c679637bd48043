//! The bridge: ACP clients attach to a running ACP runtime.
//!
//! The runtime owns the agent's one connection (the agent is started and
//! initialized once); the bridge is the agent as each client sees it. Every
//! client speaks plain ACP on its own connection — a Unix socket beside the
//! runtime's endpoint (`acp attach`), or a WebSocket — and is served through
//! the crate's agent role, so request ids are each connection's own: an
//! answer reaches only the client that asked, and a client's
//! `$/cancel_request` is carried to the agent under the agent's id.
//!
//! - A plain client just works: `initialize` is answered from the agent's
//!   own answer; `session/new`, `session/load` and `session/resume` join the
//!   running session (with the whole transcript replayed, or not), and
//!   `session/list` lists it.
//! - Every client sees every update ([`history`]): the agent's, and every
//!   prompt sent in the session, whoever sent it.
//! - Controllers prompt — one turn at a time, with the runtime's own
//!   deliveries — cancel, and answer the permission requests the policy
//!   leaves to them ([`asks`]); observers only watch. Nothing a client says
//!   reaches the agent except a prompt and a cancel: the mode, the files and
//!   the terminals stay as the policy set them.
//! - A client that reads nothing is dropped once it is [`MAX_BACKLOG`]
//!   lines behind, so it slows nobody and holds bounded memory.
//!
//! Who may connect is decided before a line is read ([`access`]).

pub mod access;
pub mod asks;
#[cfg(unix)]
pub mod attach;
pub mod bounds;
pub mod ext;
pub mod history;
#[cfg_attr(unix, path = "listen.rs")]
#[cfg_attr(not(unix), path = "listen_none.rs")]
pub mod listen;
mod seat;
pub mod wire;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{InitializeResponse, SessionId};
use futures::{Sink, Stream};
use tokio::sync::watch;

use self::asks::Asks;
#[cfg(unix)]
use self::bounds::Connections;
use self::bounds::Refusals;
use super::handle::AcpHandle;
use super::policy::{Clients, Policy};
use crate::socket::protocol::AttachedClient;
use crate::time::now_iso;

/// Lines a client may fall behind by, live, before it is dropped. A
/// replay goes at the client's pace instead, this many lines ahead at most.
pub const MAX_BACKLOG: u64 = 4096;
const _: () = assert!(super::transcript::FOLLOWERS_BUFFER as u64 >= 2 * MAX_BACKLOG);
/// How long a replay waits for a client that takes nothing.
pub const REPLAY_STALL: std::time::Duration = std::time::Duration::from_secs(10);

/// What a client may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Updates only.
    Observer,
    /// Prompts, cancels and answers permission requests too.
    Controller,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Observer => "observer",
            Role::Controller => "controller",
        }
    }
}

/// Who is on the other end of a new connection, as its credentials say.
#[derive(Debug, Clone)]
pub struct Peer {
    pub uid: u32,
    /// The most this peer may do (a client can narrow it, never widen it).
    pub role: Role,
    /// `socket` or `websocket`.
    pub via: &'static str,
}

/// A client's connection as lines: what it sends, what it is sent, and how
/// many lines of those it has taken (see [`wire`]).
pub struct ClientLines<I, O> {
    pub incoming: I,
    pub outgoing: O,
    pub written: Arc<wire::Written>,
}

/// How many clients are attached, for the end conditions and
/// `--wait-for-client`. The run's life follows its controllers: an
/// observer neither keeps it going nor ends it by leaving.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attached {
    pub clients: usize,
    /// Controllers that joined a session.
    pub controllers: usize,
    /// Whether any controller has joined since the start.
    pub ever: bool,
}

pub struct Bridge {
    handle: AcpHandle,
    /// The agent's `initialize` answer as clients are given it.
    initialize: InitializeResponse,
    cwd: PathBuf,
    clients: Clients,
    /// The session mode the policy sets (for the fresh sessions too).
    mode: Option<String>,
    /// Sessions opened for clients (`[clients] new_session = "fresh"`).
    fresh: Mutex<Vec<String>>,
    asks: Arc<Asks>,
    seats: Mutex<BTreeMap<u64, Arc<seat::Seat>>>,
    next_seat: AtomicU64,
    attached: watch::Sender<Attached>,
    socket: Mutex<Option<PathBuf>>,
    /// Held connections by peer uid; only a Unix socket says who a peer is.
    #[cfg(unix)]
    connections: Arc<Connections>,
    refusals: Refusals,
    /// Joins reading the transcript's past now ([`bounds::CONCURRENT_REPLAYS`]).
    replays: Arc<tokio::sync::Semaphore>,
}

/// How a seat is named in the transcript and to other clients.
pub fn seat_name(seat: u64) -> String {
    format!("client-{seat}")
}

impl Bridge {
    /// The bridge of the runtime `handle` serves, under `policy`;
    /// `initialize` is the agent's answer, `asks` what the runtime's
    /// permission handler puts to controllers.
    pub fn new(
        handle: AcpHandle,
        initialize: &InitializeResponse,
        cwd: PathBuf,
        policy: &Policy,
        asks: Arc<Asks>,
    ) -> Arc<Self> {
        Arc::new(Self {
            handle,
            initialize: as_served(initialize),
            cwd,
            clients: policy.clients().clone(),
            mode: policy.mode().map(str::to_owned),
            fresh: Mutex::default(),
            asks,
            seats: Mutex::default(),
            next_seat: AtomicU64::new(1),
            attached: watch::channel(Attached::default()).0,
            socket: Mutex::default(),
            #[cfg(unix)]
            connections: Connections::new(crate::paths::euid()),
            refusals: Refusals::default(),
            replays: Arc::new(tokio::sync::Semaphore::new(bounds::CONCURRENT_REPLAYS)),
        })
    }

    /// Serves one client until it leaves, the runtime ends, or it falls
    /// too far behind.
    pub async fn serve<I, O>(self: Arc<Self>, lines: ClientLines<I, O>, peer: Peer)
    where
        I: Stream<Item = std::io::Result<String>> + Send + 'static,
        O: Sink<String, Error = std::io::Error> + Send + 'static,
    {
        let seat = self.seat_for(&peer, lines.written.clone());
        let transport = agent_client_protocol::Lines::new(lines.outgoing, lines.incoming);
        let why = seat::serve(self.clone(), seat.clone(), transport).await;
        self.leave(&seat, &why);
    }

    /// Whether clients are attached now, and ever were.
    pub fn attached(&self) -> watch::Receiver<Attached> {
        self.attached.subscribe()
    }

    /// The clients attached now.
    pub fn list(&self) -> Vec<AttachedClient> {
        self.lock_seats()
            .values()
            .map(|s| AttachedClient {
                seat: s.id,
                role: s.role().as_str().into(),
                uid: s.uid,
                via: s.via.into(),
                since: s.since.clone(),
            })
            .collect()
    }

    /// The bridge listens at `path`.
    pub fn listening_at(&self, path: PathBuf) {
        *self.socket.lock().unwrap_or_else(|p| p.into_inner()) = Some(path);
    }

    /// Where the bridge socket is, once it listens.
    pub fn socket(&self) -> Option<PathBuf> {
        self.socket
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn policy(&self) -> &Clients {
        &self.clients
    }

    pub fn handle(&self) -> &AcpHandle {
        &self.handle
    }

    /// Counts a refused connection or call: a counter, and a transcript
    /// note (and log line) at most once a minute — a flood of refusals
    /// must not fill the disk or the live stream controllers read.
    pub fn refused(&self, why: &str) {
        if let Some(note) = self.refusals.count(why, std::time::Instant::now()) {
            tracing::warn!("the bridge {note}");
            self.handle.tap().note(note);
        }
    }

    /// How many connections and calls were refused since the start.
    pub fn refusals(&self) -> u64 {
        self.refusals.total()
    }

    /// A place for one more connection from `uid`, or why not.
    #[cfg(unix)]
    pub fn connection_from(&self, uid: u32) -> Result<bounds::Ticket, String> {
        self.connections.take(uid)
    }

    /// The connections the socket holds, by uid, and the pace of those it
    /// refuses.
    #[cfg(unix)]
    pub fn connections(&self) -> &Connections {
        &self.connections
    }

    /// The running session's id (the runtime's own).
    fn session_id(&self) -> SessionId {
        SessionId::new(self.handle.session_id())
    }

    /// Every session a client may join: the runtime's, then the fresh ones.
    fn sessions(&self) -> Vec<String> {
        let fresh = self.fresh.lock().unwrap_or_else(|p| p.into_inner());
        std::iter::once(self.handle.session_id())
            .chain(fresh.iter().cloned())
            .collect()
    }

    fn seat_for(&self, peer: &Peer, written: Arc<wire::Written>) -> Arc<seat::Seat> {
        let id = self.next_seat.fetch_add(1, Ordering::Relaxed);
        let seat = Arc::new(seat::Seat::new(id, peer, now_iso(), written));
        self.lock_seats().insert(id, seat.clone());
        self.recount();
        seat
    }

    fn leave(&self, seat: &seat::Seat, why: &str) {
        self.lock_seats().remove(&seat.id);
        self.asks.controller_left(seat.id);
        self.recount();
        if seat.greeted() {
            self.handle.tap().note(format!("{} left: {why}", seat.name));
        } else {
            self.refused(&format!("{} (uid {}): {why}", seat.name, seat.uid));
        }
    }

    /// A seat's role changed, or it came or went.
    fn recount(&self) {
        let seats = self.lock_seats();
        let controllers = seats
            .values()
            .filter(|s| s.role() == Role::Controller && s.joined())
            .count();
        let clients = seats.len();
        self.attached.send_modify(|a| {
            a.ever |= controllers > 0;
            a.clients = clients;
            a.controllers = controllers;
        });
    }

    fn lock_seats(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<seat::Seat>>> {
        self.seats.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The agent's `initialize` answer as the bridge serves it: the bridge
/// itself loads, resumes and lists the running session (whatever the agent
/// offers), and the runtime is authenticated already.
fn as_served(agent: &InitializeResponse) -> InitializeResponse {
    use agent_client_protocol::schema::ProtocolVersion;
    use agent_client_protocol::v1::schema::{SessionListCapabilities, SessionResumeCapabilities};
    let mut served = agent.clone();
    served.protocol_version = ProtocolVersion::V1;
    served.auth_methods.clear();
    let capabilities = &mut served.agent_capabilities;
    capabilities.load_session = true;
    capabilities.session_capabilities.list = Some(SessionListCapabilities::new());
    capabilities.session_capabilities.resume = Some(SessionResumeCapabilities::new());
    served
}
