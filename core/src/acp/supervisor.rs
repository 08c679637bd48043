//! The ACP supervisor: one process per runtime, owning the agent's stdio
//! (where a PTY supervisor owns a terminal) and one endpoint socket.
//!
//! Starting is all or nothing, and everything that can refuse comes first:
//! the policy is read (a broken file starts nothing), the endpoint is bound
//! (a second supervisor of one name fails there), then the agent starts and
//! is initialized once, and its session is opened — a new one, or exactly
//! the one the runtime is bound to, continued (`session/resume` when the
//! agent offers it: agents disagree on whether `session/load` replays, and
//! the transcript already holds the conversation). Only then is the session
//! record written and the runtime usable.
//!
//! The supervisor ends when the agent exits, when asked to (`session kill`,
//! a signal), when the policy's end condition says so, or when the agent
//! stops reading its input; [`Ended`] says which, with the agent's exit and
//! its last line on standard error.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    InitializeResponse, LoadSessionRequest, NewSessionRequest, ResumeSessionRequest, SessionId,
    SetSessionModeRequest,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Agent, Lines};
use tokio::sync::{mpsc, oneshot, watch};

use super::agent::{AgentCommand, AgentProcess};
use super::bridge::asks::Asks;
use super::bridge::{listen, Bridge};
use super::client::{self, Context};
use super::endpoint::{self, Endpoint};
use super::handle::{AcpHandle, AgentInfo, Inner};
use super::lines::{self, STALLED};
use super::policy::{End, Policy};
use super::transcript::Tap;
use super::turns::Turns;
use super::AcpError;
use crate::paths::ensure_runtime_root;
use crate::session::{Registry, SessionKind, SessionName, SessionPaths, SessionRecord};
use crate::socket::protocol::{ExitInfo, SessionInfo};
use crate::socket::{is_dialable, Listener};
use crate::supervisor::limits::Limits;
use crate::supervisor::signals::TerminationSignals;
use crate::supervisor::{claim_endpoint, write_record};
use crate::time::now_iso;

/// How long connections may take to say goodbye once the agent is gone
/// (a `kill`'s answer, a follower's last entries).
const CLIENT_FAREWELL: Duration = Duration::from_secs(1);
/// How long `initialize` and opening the session may take (agents start
/// in one to a few seconds here; a cold npm cache is slower).
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// Everything an ACP supervisor needs.
#[derive(Debug, Clone)]
pub struct AcpConfig {
    pub name: SessionName,
    pub agent: AgentCommand,
    /// The command as the user gave it, for listings.
    pub command_line: String,
    /// What the agent may do ([`load_policy`]).
    pub policy: Policy,
    pub transcript: PathBuf,
    /// `--record FILE`: a copy of the transcript where the user asked.
    pub record: Option<PathBuf>,
    /// The ACP session to continue; none: a new one.
    pub resume: Option<String>,
    pub kill_grace_ms: u64,
}

/// How the supervisor ended.
#[derive(Debug, Clone)]
pub struct Ended {
    pub exit: ExitInfo,
    /// Why, in a few words: what the runtime's OFFLINE reason says.
    pub reason: String,
}

pub struct AcpSupervisor {
    handle: AcpHandle,
    bridge: Arc<Bridge>,
    bridge_listener: BridgeListener,
    endpoint: Arc<Endpoint>,
    listener: Listener,
    agent: AgentProcess,
    connection: tokio::task::JoinHandle<Result<(), agent_client_protocol::Error>>,
    stop: oneshot::Sender<()>,
    /// Set by the transport when a write to the agent ran out of time.
    stalled: Arc<AtomicBool>,
    exit_tx: watch::Sender<Option<ExitInfo>>,
    terminate_rx: mpsc::UnboundedReceiver<Duration>,
    end: End,
    kill_grace: Duration,
    registry: Registry,
    paths: SessionPaths,
}

/// The policy of `--policy FILE`, or the safe default; one this build
/// cannot honour (serving terminals) is refused.
pub fn load_policy(path: Option<&std::path::Path>) -> Result<Policy, AcpError> {
    let policy = match path {
        Some(path) => Policy::load(path)?,
        None => Policy::default(),
    };
    if policy.serves_terminal() {
        return Err(AcpError::Unsupported(
            "[terminal] serve = true: serving terminals is not built yet; set serve = false".into(),
        ));
    }
    Ok(policy)
}

impl AcpSupervisor {
    /// Starts the agent and opens its session; see the module docs for
    /// the order. Runs inside a tokio runtime.
    pub async fn start(config: AcpConfig) -> Result<Self, AcpError> {
        let policy = config.policy.clone();
        let registry = Registry::new(ensure_runtime_root()?, is_dialable);
        let paths = registry.paths(&config.name);
        let (listener, _) = claim_endpoint(&registry, &config.name)?;
        let bridge_path = bridge_path(&paths, &policy);
        let bridge_listener = match bind_bridge(&bridge_path, &policy) {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_file(&paths.socket);
                return Err(e);
            }
        };
        let bound = Bound {
            endpoint: listener,
            bridge: bridge_listener,
            bridge_path: bridge_path.clone(),
        };
        let started = Self::start_agent(config, policy, bound, registry, paths).await;
        if let Err(e) = &started {
            let _ = std::fs::remove_file(&bridge_path);
            tracing::warn!("the ACP session did not start: {e}");
        }
        started
    }

    async fn start_agent(
        config: AcpConfig,
        policy: Policy,
        bound: Bound,
        registry: Registry,
        paths: SessionPaths,
    ) -> Result<Self, AcpError> {
        let cleanup = |e: AcpError| {
            let _ = std::fs::remove_file(&paths.socket);
            e
        };
        let launched = launch(&config, &policy).await.map_err(cleanup)?;
        let info = &launched.info;
        launched.tap.note(format!(
            "session {} open with {} {}",
            launched.session_id,
            info.name.as_deref().unwrap_or("the agent"),
            info.version.as_deref().unwrap_or("")
        ));
        let record = publish_record(&config, &paths, launched.agent.pid()).map_err(cleanup)?;
        let (exit_tx, exit) = watch::channel(None);
        let (terminate, terminate_rx) = mpsc::unbounded_channel();
        let handle = AcpHandle {
            inner: Arc::new(Inner {
                connection: launched.cx,
                session_id: launched.session_id,
                agent: launched.info,
                turns: launched.turns,
                tap: launched.tap,
                inbox: Default::default(),
                exit,
                terminate,
            }),
        };
        let bridge = Bridge::new(
            handle.clone(),
            &launched.initialize,
            config.agent.cwd.clone(),
            &policy,
            launched.asks,
        );
        if bound.bridge.is_some() {
            bridge.listening_at(bound.bridge_path);
        }
        let endpoint = Arc::new(Endpoint {
            bridge: bridge.clone(),
            handle: handle.clone(),
            info: SessionInfo {
                record,
                clients: 0,
                rows: 0,
                cols: 0,
            },
            limits: Arc::new(Limits::from_env()),
        });
        Ok(Self {
            handle,
            bridge,
            bridge_listener: bound.bridge,
            endpoint,
            listener: bound.endpoint,
            agent: launched.agent,
            connection: launched.connection,
            stop: launched.stop,
            stalled: launched.stalled,
            exit_tx,
            terminate_rx,
            end: policy.end().clone(),
            kill_grace: Duration::from_millis(config.kill_grace_ms),
            registry,
            paths,
        })
    }

    pub fn handle(&self) -> AcpHandle {
        self.handle.clone()
    }

    /// Where clients attach.
    pub fn bridge(&self) -> Arc<Bridge> {
        self.bridge.clone()
    }

    pub fn record(&self) -> &SessionRecord {
        &self.endpoint.info.record
    }

    /// Serves the endpoint until the session ends; see [`Ended`].
    pub async fn run(mut self) -> Ended {
        let mut signals = TerminationSignals::new();
        let turns = self.handle.inner.turns.clone();
        let mut ended_turns = turns.watch_ended();
        let mut attached = self.bridge.attached();
        // Idle since the start or the last turn's end; alone since the
        // start or the last controller's leaving (observers do not count).
        let mut idle_since = tokio::time::Instant::now();
        let mut alone_since = Some(idle_since);
        let mut connections = tokio::task::JoinSet::new();
        let bridge = self.serve_bridge();
        let reason = loop {
            let deadline = match self.end {
                End::Idle(after) => Some(idle_since + after),
                End::NoClient(after) => alone_since.map(|since| since + after),
                _ => None,
            };
            tokio::select! {
                stream = self.listener.accept() => {
                    connections.spawn(endpoint::serve(stream, self.endpoint.clone()));
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                exit = self.agent.wait() => {
                    // The exit status is added where the reason is shown.
                    let why = format!("the agent exited{}", last_line(&self.agent.last_stderr_after_exit().await));
                    break Stop::Exited(exit, why);
                }
                finished = &mut self.connection => {
                    let why = match finished {
                        _ if self.stalled.load(Ordering::Acquire) => STALLED.to_owned(),
                        Ok(Err(e)) => format!("the ACP connection failed: {e}"),
                        Ok(Ok(())) | Err(_) => "the ACP connection closed".to_owned(),
                    };
                    break Stop::End(why, self.kill_grace);
                }
                grace = self.terminate_rx.recv() => {
                    let grace = grace.unwrap_or(self.kill_grace);
                    break Stop::End("ended on request (session kill)".into(), grace);
                }
                _ = signals.recv() => break Stop::End("ended by a signal to its supervisor".into(), self.kill_grace),
                changed = ended_turns.changed() => {
                    if changed.is_ok() && self.end == End::FirstTurn {
                        break Stop::End("the policy's end condition: after the first turn".into(), self.kill_grace);
                    }
                    idle_since = tokio::time::Instant::now();
                }
                changed = attached.changed() => {
                    let now = *attached.borrow_and_update();
                    if changed.is_err() || now.controllers > 0 {
                        alone_since = None;
                    } else if alone_since.is_none() {
                        alone_since = Some(tokio::time::Instant::now());
                        if self.end == End::LastClientLeft && now.ever {
                            break Stop::End("the policy's end condition: the last client left".into(), self.kill_grace);
                        }
                    }
                }
                _ = sleep_until(deadline) => {
                    if let End::NoClient(_) = self.end {
                        break Stop::End("the policy's end condition: no client attached".into(), self.kill_grace);
                    }
                    if turns.running().is_none() {
                        break Stop::End("the policy's end condition: idle".into(), self.kill_grace);
                    }
                    idle_since = tokio::time::Instant::now();
                }
            }
        };
        bridge.abort();
        let ended = self.finish(reason).await;
        // They see the exit and close; the last answers go out first.
        let _ = tokio::time::timeout(CLIENT_FAREWELL, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        ended
    }

    async fn finish(mut self, stop: Stop) -> Ended {
        let (exit, reason) = match stop {
            Stop::Exited(exit, why) => (exit, why),
            Stop::End(why, grace) => (self.agent.end(grace).await, why),
        };
        let tap = self.handle.tap().clone();
        tap.note(format!("session ended: {reason}; the agent: {exit}"));
        let _ = self.stop.send(());
        self.connection.abort();
        let _ = self.exit_tx.send(Some(exit.clone()));
        self.registry
            .remove_files(&self.paths, &self.endpoint.info.record.socket);
        if let Some(socket) = self.bridge.socket() {
            let _ = std::fs::remove_file(socket);
        }
        Ended { exit, reason }
    }

    /// Accepts clients on the bridge socket, in a task of its own.
    fn serve_bridge(&mut self) -> tokio::task::JoinHandle<()> {
        match self.bridge_listener.take() {
            Some(listener) => tokio::spawn(listen::serve(self.bridge.clone(), listener)),
            None => tokio::spawn(async {}),
        }
    }
}

/// The bridge socket, bound at start and served by the run loop (none on
/// a platform without one yet).
type BridgeListener = Option<listen::Listener>;

/// What start bound before the agent started: the endpoint, and the
/// bridge socket at its path.
struct Bound {
    endpoint: Listener,
    bridge: BridgeListener,
    bridge_path: PathBuf,
}

fn bridge_path(paths: &SessionPaths, policy: &Policy) -> PathBuf {
    listen::socket_path(&paths.socket, policy.clients().socket.as_deref())
}

fn bind_bridge(path: &std::path::Path, policy: &Policy) -> Result<BridgeListener, AcpError> {
    listen::bind(path, policy.clients().admits_others()).map_err(|e| {
        AcpError::Start(format!(
            "cannot listen for clients at {}: {e}",
            path.display()
        ))
    })
}

/// Why the run loop stopped: the agent exited by itself, or it is to be
/// ended (SIGTERM, then SIGKILL after the grace).
enum Stop {
    Exited(ExitInfo, String),
    End(String, Duration),
}

/// The agent started, its connection running, its session open.
struct Launched {
    agent: AgentProcess,
    initialize: InitializeResponse,
    asks: Arc<Asks>,
    connection: tokio::task::JoinHandle<Result<(), agent_client_protocol::Error>>,
    stop: oneshot::Sender<()>,
    cx: ConnectionTo<Agent>,
    session_id: SessionId,
    info: AgentInfo,
    turns: Arc<Turns>,
    tap: Arc<Tap>,
    stalled: Arc<AtomicBool>,
}

/// Starts the agent on the tapped line transport, then `initialize` and
/// its session (bounded by [`START_TIMEOUT`], and by the agent's exit).
async fn launch(config: &AcpConfig, policy: &Policy) -> Result<Launched, AcpError> {
    let tap = Tap::open(&config.transcript, config.record.as_deref()).map_err(|source| {
        AcpError::Transcript {
            path: config.transcript.clone(),
            source,
        }
    })?;
    let (mut agent, stdin, stdout) = AgentProcess::spawn(&config.agent)?;
    tap.note(format!(
        "started the agent (pid {}): {}",
        agent.pid(),
        config.command_line
    ));
    let stalled = Arc::new(AtomicBool::new(false));
    let transport = Lines::new(
        lines::outgoing(stdin, tap.clone(), lines::write_deadline(), stalled.clone()),
        lines::incoming(stdout, tap.clone()),
    );
    let turns = Arc::new(Turns::default());
    let asks = Asks::new(tap.clone());
    let ctx = Arc::new(Context {
        policy: policy.clone(),
        cwd: config.agent.cwd.clone(),
        tap: tap.clone(),
        turns: turns.clone(),
        asks: asks.clone(),
    });
    let (ready_tx, ready_rx) = oneshot::channel();
    let (stop, stop_rx) = oneshot::channel();
    let connection = tokio::spawn(client::run(ctx, transport, ready_tx, stop_rx));
    let opened = tokio::select! {
        opened = tokio::time::timeout(START_TIMEOUT, open(ready_rx, policy, config)) => match opened {
            Ok(opened) => opened,
            Err(_) => Err(AcpError::Start(format!("the agent did not initialize and open its session within {} s", START_TIMEOUT.as_secs()))),
        },
        exit = agent.wait() => Err(AcpError::Start(format!(
            "the agent exited during start-up ({exit}){}",
            last_line(&agent.last_stderr_after_exit().await)
        ))),
    };
    let (cx, session_id, info, initialize) = match opened {
        Ok(o) => o,
        Err(e) => {
            tap.note(format!("start failed: {e}"));
            let _ = agent.end(Duration::from_secs(1)).await;
            return Err(e);
        }
    };
    Ok(Launched {
        agent,
        initialize,
        asks,
        connection,
        stop,
        cx,
        session_id,
        info,
        turns,
        tap,
        stalled,
    })
}

/// The session record beside the endpoint: from here on the session is
/// listed and its endpoint can be found.
fn publish_record(
    config: &AcpConfig,
    paths: &SessionPaths,
    agent_pid: u32,
) -> Result<SessionRecord, AcpError> {
    let record = SessionRecord {
        name: config.name.clone(),
        kind: SessionKind::Acp,
        pid: agent_pid,
        supervisor_pid: std::process::id(),
        command: config.command_line.clone(),
        cwd: config.agent.cwd.display().to_string(),
        started: now_iso(),
        socket: paths.socket.clone(),
    };
    write_record(paths, &record).map_err(|source| AcpError::Record {
        path: paths.record.clone(),
        source,
    })?;
    Ok(record)
}

/// Waits for the connection, then `initialize` and the session.
async fn open(
    ready: oneshot::Receiver<ConnectionTo<Agent>>,
    policy: &Policy,
    config: &AcpConfig,
) -> Result<
    (
        ConnectionTo<Agent>,
        SessionId,
        AgentInfo,
        InitializeResponse,
    ),
    AcpError,
> {
    let cx = ready
        .await
        .map_err(|_| AcpError::Start("the ACP connection ended before it was ready".into()))?;
    let init = client::initialize(&cx, policy)
        .await
        .map_err(|e| AcpError::Start(format!("initialize failed: {e}")))?;
    let info = AgentInfo {
        name: init.agent_info.as_ref().map(|i| i.name.clone()),
        version: init.agent_info.as_ref().map(|i| i.version.clone()),
        protocol_version: super::wire_name(&init.protocol_version)
            .parse()
            .unwrap_or(1),
    };
    let cwd = config.agent.cwd.clone();
    let session_id = match &config.resume {
        None => {
            cx.send_request(NewSessionRequest::new(cwd))
                .block_task()
                .await
                .map_err(|e| AcpError::Start(format!("session/new failed: {e}")))?
                .session_id
        }
        Some(id) => {
            let id = SessionId::new(id.clone());
            continue_session(&cx, &id, cwd, init.agent_capabilities.load_session).await?;
            id
        }
    };
    if let Some(mode) = policy.mode() {
        cx.send_request(SetSessionModeRequest::new(session_id.clone(), mode.to_owned()))
            .block_task()
            .await
            .map_err(|e| {
                AcpError::Start(format!(
                    "session/set_mode {mode:?} (the policy's [session] mode) failed: {e}; give a mode the agent offers"
                ))
            })?;
    }
    Ok((cx, session_id, info, init))
}

/// Continues session `id`: `session/resume` first (it replays nothing, and
/// the transcript already holds the conversation), `session/load` when
/// the agent does not know resume and offers load.
async fn continue_session(
    cx: &ConnectionTo<Agent>,
    id: &SessionId,
    cwd: PathBuf,
    loads: bool,
) -> Result<(), AcpError> {
    let failed = |method: &str, e: agent_client_protocol::Error| {
        AcpError::Continue(id.to_string(), format!("{method}: {e}"))
    };
    let resumed = cx
        .send_request(ResumeSessionRequest::new(id.clone(), cwd.clone()))
        .block_task()
        .await;
    match resumed {
        Ok(_) => Ok(()),
        Err(e) if loads && i32::from(e.code) == -32601 => cx
            .send_request(LoadSessionRequest::new(id.clone(), cwd))
            .block_task()
            .await
            .map(drop)
            .map_err(|e| failed("session/load", e)),
        Err(e) => Err(failed("session/resume", e)),
    }
}

fn last_line(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
