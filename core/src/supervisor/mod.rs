//! The supervisor: the one process that owns a session's PTY and endpoint.
//!
//! There is no global daemon. Each session has its own supervisor, so a crash
//! takes down one session and never the others. The supervisor runs a
//! single-threaded event loop: PTY output is fed to the screen model (and to
//! the cell engine, for `k` sessions), then fanned out to attached clients;
//! requests arrive on the endpoint socket, one task per connection. State that
//! a crash could lose does not live here: the session record on disk is enough
//! for the next command to notice a dead supervisor and clean up.

pub mod cell_session;
mod connection;
pub mod foreground;
pub(crate) mod framed;
pub(crate) mod handle;
mod keyboard;
pub mod launch;
pub(crate) mod limits;
pub(crate) mod signals;
pub(crate) mod status;
mod terminal;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc, watch, Notify};

use crate::adapter::input_line::InputLineReader;
use crate::adapter::monitor::{ActivityMonitor, ActivityReport, AdapterSpec};
use crate::adapter::profile::{Input, Profile};
use crate::adapter::ScreenView;
use crate::cells::{CellEngine, CellsConfig, EngineNote};
use crate::delivery::{DeliveryCoordinator, DeliveryStyle};
use crate::paths::ensure_runtime_root;
use crate::pty::size::SizeError;
use crate::pty::{PtyEvent, PtyProcess, SpawnSpec};
use crate::screen::log::OutputLog;
use crate::screen::ScreenModel;
use crate::session::{Liveness, Registry, SessionKind, SessionName, SessionPaths, SessionRecord};
use crate::socket::protocol::{ExitInfo, SessionInfo};
use crate::socket::{self, BindOutcome, SocketError};
use crate::time::now_iso;
pub use handle::SessionHandle;
use signals::TerminationSignals;

/// How long a child may take to exit after SIGHUP/SIGTERM before SIGKILL.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(3);
/// The longest grace period a kill may ask for: a bound, so that no
/// request (a typo, `inf`, a raw client) keeps a session ending forever.
pub const MAX_KILL_GRACE: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--grace {0} is not a grace period; give 0 to {max} seconds", max = MAX_KILL_GRACE.as_secs())]
pub struct GraceError(pub String);

/// A grace period given in seconds (`--grace`): finite, 0 to
/// [`MAX_KILL_GRACE`]. `inf` waited forever and `nan` killed at once.
pub fn kill_grace(seconds: f64) -> Result<Duration, GraceError> {
    if (0.0..=MAX_KILL_GRACE.as_secs_f64()).contains(&seconds) {
        Ok(Duration::from_secs_f64(seconds))
    } else {
        Err(GraceError(seconds.to_string()))
    }
}
/// After the child exits, how long to wait for output still in the PTY.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(200);
/// Output chunks buffered for each attached client before it counts as
/// lagging (it then gets a fresh redraw instead of the missed bytes).
const CLIENT_BUFFER: usize = 64;
/// How long a `k` session's REPL may take to finish shell-integration set-up.
const SETUP_TIMEOUT: Duration = Duration::from_secs(15);
/// PTY chunks queued for the event loop.
const PTY_QUEUE: usize = 8;
/// How long connections may take to say goodbye after the child exited.
const CLIENT_FAREWELL: Duration = Duration::from_secs(1);
/// Default quiet period after a person's last keystroke before a delivery.
pub const DEFAULT_KEYBOARD_QUIET_MS: u64 = 2000;

/// Set in every supervised program's environment to its session's name.
pub const SESSION_ENV: &str = "AGENT_COMMS_SESSION";

/// Everything a supervisor needs to start; sent from the launching command.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SupervisorConfig {
    pub name: SessionName,
    pub kind: SessionKind,
    pub spawn: SpawnSpec,
    /// The command as the user gave it, for listings.
    pub command_line: String,
    pub kill_grace_ms: u64,
    /// Present for `k` sessions.
    pub cells: Option<CellsConfig>,
    /// The adapter that reads this program's screen, when one claims it.
    #[serde(default)]
    pub adapter: Option<AdapterSpec>,
    /// Deliveries wait this long after a person's last keystroke.
    #[serde(default = "default_keyboard_quiet")]
    pub keyboard_quiet_ms: u64,
}

fn default_keyboard_quiet() -> u64 {
    DEFAULT_KEYBOARD_QUIET_MS
}

#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error(transparent)]
    Paths(#[from] crate::paths::PathError),
    #[error("session '{0}' already exists; pick another name or end it with: agent-comms session kill {0}")]
    InUse(SessionName),
    #[error(transparent)]
    Socket(#[from] SocketError),
    #[error(transparent)]
    Pty(#[from] crate::pty::PtyError),
    #[error("cannot write the session record {path}: {source}")]
    Record {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the supervisor's event loop: {0}")]
    Runtime(std::io::Error),
}

/// Reads what the program itself reports it is doing (its own state file),
/// `None` when it says nothing. Called with the state locked: it must be
/// quick (one small file read).
pub type ReportedActivity = Box<dyn Fn() -> Option<crate::adapter::Activity> + Send>;

/// State shared by the event loop and the connection tasks. Locked briefly,
/// never across an await.
pub(crate) struct State {
    pub model: ScreenModel,
    pub pty: PtyProcess,
    pub info: SessionInfo,
    /// Attached clients that can type (they own the terminal's answers).
    pub interactive_clients: u32,
    /// A real terminal is wired to this supervisor (foreground mode).
    pub foreground_terminal: bool,
    pub cells: Option<CellEngine>,
    pub activity: Option<ActivityMonitor>,
    /// What the program itself reports it is doing, read when the screen is
    /// (see [`SessionHandle::take_reports_from`]).
    pub reports: Option<ReportedActivity>,
    /// Where the program's input line is (the adapter's rule, or the
    /// cursor's row).
    pub input_line: InputLineReader,
    pub input_rule: bool,
    pub keyboard: keyboard::Keyboard,
    pub last_output: std::time::Instant,
    /// When the terminal was last resized (the program redraws after).
    pub resized_at: Option<std::time::Instant>,
    /// The text printed so far, by position (`output_since`).
    pub output_log: OutputLog,
}

impl State {
    /// The state of a session whose child just started: the screen model
    /// answers queries until a terminal attaches, and a `k` session's cell
    /// engine starts its set-up.
    fn new(
        config: &SupervisorConfig,
        record: SessionRecord,
        pty: PtyProcess,
        notes: mpsc::UnboundedSender<EngineNote>,
        input: &Input,
    ) -> Self {
        let mut model = ScreenModel::new(config.spawn.rows, config.spawn.cols);
        model.set_answer_queries(true);
        let mut cells = config.cells.as_ref().map(|c| {
            let group = i32::try_from(pty.pid()).ok();
            CellEngine::new(config.name.clone(), c.clone(), pty.writer(), group, notes)
        });
        if let Some(cells) = cells.as_mut() {
            cells.start();
        }
        Self {
            model,
            info: SessionInfo {
                record,
                clients: 0,
                rows: config.spawn.rows,
                cols: config.spawn.cols,
            },
            pty,
            interactive_clients: 0,
            foreground_terminal: false,
            cells,
            activity: config.adapter.as_ref().map(crate::plugin::load::monitor),
            reports: None,
            input_line: InputLineReader::new(input.line.as_ref()),
            input_rule: input.line.is_some(),
            keyboard: keyboard::Keyboard::default(),
            last_output: std::time::Instant::now(),
            resized_at: None,
            output_log: OutputLog::default(),
        }
    }

    /// The screen model answers terminal queries only while no real terminal
    /// can: never two answers to one query.
    fn update_responder(&mut self) {
        let answer = self.interactive_clients == 0 && !self.foreground_terminal;
        self.model.set_answer_queries(answer);
    }

    /// Resizes the PTY and the screen model; a size out of bounds (see
    /// [`crate::pty::size`]) changes nothing.
    pub fn resize(&mut self, rows: u16, cols: u16) -> Result<(), SizeError> {
        let (rows, cols) = crate::pty::size::checked(rows, cols)?;
        if (rows, cols) != (self.info.rows, self.info.cols) {
            let _ = self.pty.resize(rows, cols);
            self.model.resize(rows, cols);
            self.resized_at = Some(std::time::Instant::now());
            self.info.rows = rows;
            self.info.cols = cols;
        }
        Ok(())
    }

    /// The cell engine, or the error a request for cells gets in a session
    /// that does not run them.
    pub fn cells_mut(&mut self) -> Result<&mut CellEngine, String> {
        let name = &self.info.record.name;
        match self.cells.as_mut() {
            Some(c) => Ok(c),
            None => Err(format!(
                "session '{name}' does not run cells; start one with: k new <name> <repl>"
            )),
        }
    }

    /// The session's activity as its adapter reads the screen now.
    pub fn activity(&mut self) -> Result<ActivityReport, String> {
        let lines = self.model.lines();
        self.activity_of(&lines)
    }

    /// [`State::activity`] for the screen's rows, already rendered by the
    /// caller (a delivery reads them too).
    pub fn activity_of(&mut self, lines: &[String]) -> Result<ActivityReport, String> {
        let Some(monitor) = self.activity.as_mut() else {
            return Err(format!(
                "session '{}' has no adapter to read its screen; start it with --provider NAME (see: agent-comms adapters list)",
                self.info.record.name
            ));
        };
        let osc: Vec<Vec<u8>> = self.model.recent_osc().map(<[u8]>::to_vec).collect();
        let foreground = self
            .pty
            .foreground_group()
            .and_then(|pgid| crate::os::process_name(pgid as u32))
            .unwrap_or_default();
        let view = ScreenView {
            lines,
            title: self.model.title(),
            osc: &osc,
            cursor_row: self.model.cursor().0,
            foreground: &foreground,
        };
        let reports = &self.reports;
        let reported = || reports.as_ref().and_then(|read| read());
        Ok(monitor.observe(&view, std::time::Instant::now(), reported))
    }

    pub fn client_joined(&mut self, interactive: bool) {
        self.info.clients += 1;
        if interactive {
            self.interactive_clients += 1;
            self.update_responder();
        }
    }

    pub fn client_left(&mut self, interactive: bool) {
        self.info.clients = self.info.clients.saturating_sub(1);
        if interactive {
            self.interactive_clients = self.interactive_clients.saturating_sub(1);
            self.update_responder();
        }
    }
}

/// Handles the connection tasks share with the event loop.
#[derive(Clone)]
pub(crate) struct Shared {
    state: Arc<Mutex<State>>,
    pub output: broadcast::Sender<Arc<Vec<u8>>>,
    pub exit: watch::Receiver<Option<ExitInfo>>,
    pub terminate: mpsc::UnboundedSender<Duration>,
    pub kill_grace: Duration,
    /// Woken on every output chunk and keystroke (deliveries wait on it).
    pub changed: Arc<Notify>,
    pub delivery: Arc<DeliveryCoordinator>,
    pub inbox: Arc<handle::InboxLink>,
    /// Connections, their unfinished frames and the budget they share.
    pub limits: Arc<limits::Limits>,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Binds the session's endpoint: refused while a live supervisor holds the
/// name; a stale record or socket is replaced (the bool says so).
pub(crate) fn claim_endpoint(
    registry: &Registry,
    name: &SessionName,
) -> Result<(socket::Listener, bool), SupervisorError> {
    let in_use = || SupervisorError::InUse(name.clone());
    let mut replaced_stale = false;
    match registry.check(name) {
        Some(Liveness::Live(_)) => return Err(in_use()),
        Some(Liveness::Stale(_)) => replaced_stale = true,
        None => {}
    }
    match socket::bind(&registry.paths(name).socket) {
        Ok((listener, outcome)) => Ok((
            listener,
            replaced_stale || outcome == BindOutcome::ReplacedStale,
        )),
        Err(SocketError::InUse(_)) => Err(in_use()),
        Err(SocketError::Bind { source, .. }) if source.kind() == std::io::ErrorKind::AddrInUse => {
            Err(in_use())
        }
        Err(e) => Err(e.into()),
    }
}

/// Starts the child and writes the session record beside the endpoint;
/// on failure removes the socket (and ends the child) again.
fn start_child(
    config: &SupervisorConfig,
    paths: &SessionPaths,
    events: mpsc::Sender<PtyEvent>,
) -> Result<(PtyProcess, SessionRecord), SupervisorError> {
    // What runs inside knows which session it is in: an MCP server started
    // there refuses to kill its own session or type into it.
    let mut spawn = config.spawn.clone();
    spawn
        .env
        .push((SESSION_ENV.into(), config.name.as_str().to_owned()));
    let pty = match PtyProcess::spawn(&spawn, events) {
        Ok(p) => p,
        Err(e) => {
            let _ = std::fs::remove_file(&paths.socket);
            return Err(e.into());
        }
    };
    let record = SessionRecord {
        name: config.name.clone(),
        kind: config.kind,
        pid: pty.pid(),
        supervisor_pid: std::process::id(),
        command: config.command_line.clone(),
        cwd: config.spawn.cwd.display().to_string(),
        started: now_iso(),
        socket: paths.socket.clone(),
    };
    if let Err(source) = write_record(paths, &record) {
        pty.kill();
        let _ = std::fs::remove_file(&paths.socket);
        return Err(SupervisorError::Record {
            path: paths.record.clone(),
            source,
        });
    }
    Ok((pty, record))
}

/// How far the child is in ending: the event loop stops once it exited
/// and its output was read to the end (or the drain time ran out).
#[derive(Default)]
struct Ending {
    exited: Option<ExitInfo>,
    eof: bool,
    /// SIGKILL follows at this time (a termination was asked for).
    kill_deadline: Option<tokio::time::Instant>,
    drain_deadline: Option<tokio::time::Instant>,
}

/// A supervisor whose child runs and whose socket listens.
pub struct Supervisor {
    shared: Shared,
    listener: socket::Listener,
    events: mpsc::Receiver<PtyEvent>,
    notes: mpsc::UnboundedReceiver<EngineNote>,
    exit_tx: watch::Sender<Option<ExitInfo>>,
    terminate_rx: mpsc::UnboundedReceiver<Duration>,
    paths: SessionPaths,
    registry: Registry,
    record: SessionRecord,
    /// Said once at start when a stale socket or record was replaced.
    pub replaced_stale: bool,
    discovery: Option<String>,
}

impl Supervisor {
    /// Binds the endpoint, starts the child and writes the session record.
    /// Must run inside a tokio runtime. On error nothing is left behind.
    pub fn start(config: SupervisorConfig) -> Result<Self, SupervisorError> {
        let registry = Registry::new(ensure_runtime_root()?, socket::is_dialable);
        let (listener, replaced_stale) = claim_endpoint(&registry, &config.name)?;
        let paths = registry.paths(&config.name);
        // Few slots: in a flood the reader merges what waits into one chunk
        // (see pty::send_coalesced), so this bounds the bytes in flight.
        let (events_tx, events) = mpsc::channel(PTY_QUEUE);
        let (pty, record) = start_child(&config, &paths, events_tx)?;
        let (notes_tx, notes) = mpsc::unbounded_channel();
        // One parse for the input line and the delivery style; the
        // profile was validated when it loaded.
        let profile = config
            .adapter
            .as_ref()
            .and_then(|s| Profile::parse(&s.source, &s.text).ok());
        let input = profile
            .as_ref()
            .map(|p| p.input.clone())
            .unwrap_or_default();
        let discovery = profile
            .as_ref()
            .and_then(|p| p.conversation.as_ref()?.discovery.clone());
        let state = State::new(&config, record.clone(), pty, notes_tx, &input);
        let (exit_tx, exit) = watch::channel(None);
        let (terminate, terminate_rx) = mpsc::unbounded_channel();
        let (output, _) = broadcast::channel(CLIENT_BUFFER);
        let changed = Arc::new(Notify::new());
        let style = DeliveryStyle {
            input,
            shows_busy_within: Duration::from_millis(
                profile
                    .as_ref()
                    .and_then(|p| p.detect.as_ref())
                    .map_or(0, |d| d.shows_busy_within_ms),
            ),
            keyboard_quiet: Duration::from_millis(config.keyboard_quiet_ms),
            session: config.name.to_string(),
            adapter: config.adapter.as_ref().map(|a| a.name.clone()),
        };
        Ok(Self {
            shared: Shared {
                state: Arc::new(Mutex::new(state)),
                output,
                exit,
                terminate,
                kill_grace: Duration::from_millis(config.kill_grace_ms),
                delivery: Arc::new(DeliveryCoordinator::new(style, changed.clone())),
                inbox: Arc::default(),
                limits: Arc::new(limits::Limits::from_env()),
                changed,
            },
            listener,
            events,
            notes,
            exit_tx,
            terminate_rx,
            paths,
            registry,
            record,
            replaced_stale,
            discovery,
        })
    }

    pub fn record(&self) -> &SessionRecord {
        &self.record
    }

    /// The adapter's `[conversation] discovery`: which provider's files
    /// tell about this program.
    pub fn discovery(&self) -> Option<&str> {
        self.discovery.as_deref()
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// A handle for code that runs beside the supervisor.
    pub fn handle(&self) -> SessionHandle {
        SessionHandle {
            shared: self.shared.clone(),
        }
    }

    /// Runs until the child has exited and every client was told. `tap`
    /// sees every output chunk first (foreground mode writes it to the
    /// user's terminal). `ready` is called once the session accepts work:
    /// at once, or for a `k` session once its REPL finished set-up; if the
    /// child exits first it is never called.
    pub async fn run(mut self, mut tap: impl FnMut(&[u8]), ready: impl FnOnce()) -> ExitInfo {
        let mut ready = Some(ready);
        let mut connections = tokio::task::JoinSet::new();
        let mut signals = TerminationSignals::new();
        let mut ending = Ending::default();
        let ready_deadline = tokio::time::Instant::now() + SETUP_TIMEOUT;
        loop {
            if ready.is_some() && self.is_ready() {
                (ready.take().expect("checked"))();
            }
            let setup_deadline = ready
                .as_ref()
                .map(|_| ready_deadline)
                .filter(|_| ending.kill_deadline.is_none());
            let cell_deadline = self.cell_deadline();
            tokio::select! {
                event = self.events.recv() => {
                    if self.on_pty_event(event, &mut tap, &mut ending) {
                        break;
                    }
                }
                stream = self.listener.accept() => {
                    connections.spawn(connection::serve(stream, self.shared.clone()));
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                Some(note) = self.notes.recv() => {
                    if let Some(cells) = self.shared.lock().cells.as_mut() {
                        cells.on_note(note);
                    }
                }
                grace = self.terminate_rx.recv() => {
                    let grace = grace.unwrap_or(self.shared.kill_grace);
                    self.begin_termination(grace, &mut ending.kill_deadline);
                }
                _ = signals.recv() => {
                    let grace = self.shared.kill_grace;
                    self.begin_termination(grace, &mut ending.kill_deadline);
                }
                _ = sleep_until(ending.kill_deadline) => {
                    tracing::warn!("child still running after the grace period; sending SIGKILL");
                    self.shared.lock().pty.kill();
                    ending.kill_deadline = None;
                }
                _ = sleep_until(cell_deadline) => self.on_cell_tick(),
                _ = sleep_until(ending.drain_deadline) => break,
                _ = sleep_until(setup_deadline) => {
                    tracing::error!("the REPL did not finish shell-integration set-up in {SETUP_TIMEOUT:?}; ending it");
                    let grace = self.shared.kill_grace;
                    self.begin_termination(grace, &mut ending.kill_deadline);
                }
            }
        }
        let info = ending.exited.unwrap_or(ExitInfo {
            code: None,
            signal: None,
        });
        self.finish(&info);
        // Let connections deliver their last words (exit events, a waiting
        // `k run`'s reply), but never wait long for a silent client.
        let _ = tokio::time::timeout(CLIENT_FAREWELL, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        info
    }

    /// Output, end of output or the child's exit; true once both of the
    /// last two came (the session is over).
    fn on_pty_event(
        &mut self,
        event: Option<PtyEvent>,
        tap: &mut impl FnMut(&[u8]),
        ending: &mut Ending,
    ) -> bool {
        match event {
            Some(PtyEvent::Output(bytes)) => {
                tap(&bytes);
                self.on_output(bytes);
                false
            }
            Some(PtyEvent::Eof) | None => {
                ending.eof = true;
                ending.exited.is_some()
            }
            Some(PtyEvent::Exited(info)) => {
                tracing::info!(session = %self.record.name, "child exited: {info}");
                ending.exited = Some(info);
                // Output may still sit in the PTY; a grandchild that keeps
                // the slave open must not keep us alive.
                ending.drain_deadline = Some(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
                ending.eof
            }
        }
    }

    /// When a `k` session's cell engine next needs a tick.
    fn cell_deadline(&self) -> Option<tokio::time::Instant> {
        self.shared
            .lock()
            .cells
            .as_ref()
            .and_then(|c| c.next_deadline())
            .map(tokio::time::Instant::from_std)
    }

    fn is_ready(&self) -> bool {
        self.shared
            .lock()
            .cells
            .as_ref()
            .is_none_or(CellEngine::is_ready)
    }

    fn on_output(&self, bytes: Vec<u8>) {
        let mut state = self.shared.lock();
        let replies = state.model.feed(&bytes);
        if !replies.is_empty() {
            state.pty.write(replies);
        }
        if let Some(cells) = state.cells.as_mut() {
            cells.on_output(&bytes);
        }
        state.last_output = std::time::Instant::now();
        state.output_log.push(&bytes);
        if state.activity.is_some() {
            // The debounce needs every screen the program shows, not only
            // the ones somebody asked about: a busy moment between two
            // requests must still hold idle back.
            let _ = state.activity();
        }
        drop(state);
        self.shared.changed.notify_waiters();
        // No receivers is the common case and not an error.
        let _ = self.shared.output.send(Arc::new(bytes));
    }

    fn on_cell_tick(&self) {
        let mut state = self.shared.lock();
        let foreground = state.pty.foreground_group();
        if let Some(cells) = state.cells.as_mut() {
            cells.on_tick(std::time::Instant::now(), foreground);
        }
    }

    fn begin_termination(&self, grace: Duration, deadline: &mut Option<tokio::time::Instant>) {
        let state = self.shared.lock();
        state.pty.ask_to_exit();
        let new_deadline = tokio::time::Instant::now() + grace;
        if deadline.is_none_or(|d| new_deadline < d) {
            *deadline = Some(new_deadline);
        }
    }

    /// Tells clients, removes the socket and the record.
    fn finish(&self, info: &ExitInfo) {
        // Dropping the engine closes its event stream: `km` sees `closed`
        // and then the end of the stream.
        if let Some(mut cells) = self.shared.lock().cells.take() {
            cells.on_exit(info);
        }
        let _ = self.exit_tx.send(Some(info.clone()));
        self.registry.remove_files(&self.paths, &self.record.socket);
    }
}

pub(crate) fn write_record(paths: &SessionPaths, record: &SessionRecord) -> std::io::Result<()> {
    let tmp = paths.record.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec(record).expect("record serializes"))?;
    crate::paths::make_owner_only(&tmp)?;
    std::fs::rename(&tmp, &paths.record)
}

/// Resolves once the child (a PTY's program, an ACP agent) has exited.
pub(crate) async fn exited(exit: &mut tokio::sync::watch::Receiver<Option<ExitInfo>>) -> ExitInfo {
    let unknown = ExitInfo {
        code: None,
        signal: None,
    };
    match exit.wait_for(Option::is_some).await {
        Ok(info) => info.clone().unwrap_or(unknown),
        Err(_) => unknown,
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// A current-thread runtime: one session's traffic never needs two cores,
/// and an idle supervisor should cost next to nothing.
pub fn runtime() -> Result<tokio::runtime::Runtime, SupervisorError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(SupervisorError::Runtime)
}
