//! `runtime interactive-serve`: a provider in this terminal, registered as
//! an agent's runtime, with a heartbeat and an inbox beside it.
//!
//! Order matters, and every refusal comes before the provider starts: the
//! record is admitted (registered, or checked and repaired by hand), the
//! endpoint is bound (a second serve of one runtime fails there), and only
//! then does the provider run. On the way out the record says OFFLINE with
//! the reason, and any attempt this process held is released to the queue.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::inbox::{with_store, SharedStore};
use super::online::{go_offline, Online};
use super::registration::{admit, RuntimeKind, Serving};
use super::start::{plan_start, StartPlan, StartRequest, TakeoverOptions};
use super::ControlError;
use crate::adapter::Entry;
use crate::ids::{random_hex, Id, IdKind};
use crate::paths::ensure_runtime_root;
use crate::pty::SpawnSpec;
use crate::session::{Registry, SessionKind, SessionName};
use crate::socket::is_dialable;
use crate::store::{RuntimeRecord, Store};
use crate::supervisor::foreground::run_foreground;
use crate::supervisor::{SessionHandle, SupervisorConfig, DEFAULT_KILL_GRACE};
use crate::takeover::terminate::{end_process, Ended, TERM_GRACE};
use crate::takeover::{ConversationDiscovery, Discovery, ProcessInfo, ProviderEnv};

/// Default heartbeat interval; a runtime is offline after three missed.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(2);

pub struct ServeOptions {
    pub id: SessionName,
    pub agent: String,
    pub host: String,
    /// The adapter that reads the provider's screen (none: the screen's
    /// stillness stands in for idle).
    pub adapter: Option<Entry>,
    /// The provider's command line, as given after `--`.
    pub argv: Vec<String>,
    /// Variables set for the provider on top of its profile's (this run's
    /// MCP configuration, for one).
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub heartbeat: Duration,
    /// The most messages one notification names (1: one by one).
    pub batch: usize,
    pub keyboard_quiet: Duration,
    pub record: Option<PathBuf>,
    /// The adapter's conversation knowledge (takeover, pinning, the guard).
    pub discovery: Option<Arc<dyn ConversationDiscovery>>,
    pub takeover: Option<TakeoverOptions>,
    /// Start even when another process holds the conversation.
    pub allow_shared: bool,
}

/// Serves the runtime until the provider exits; returns its exit code.
pub fn serve(store: Box<dyn Store>, opts: ServeOptions) -> Result<i32, ControlError> {
    let registry = Registry::new(ensure_runtime_root()?, is_dialable);
    let serving = Serving {
        host: &opts.host,
        agent: &opts.agent,
        id: &opts.id,
        kind: RuntimeKind::Interactive,
    };
    let admission = admit(store.as_ref(), &registry, &serving, store.now())?;
    let start = plan_start(&StartRequest {
        argv: &opts.argv,
        cwd: opts.cwd.clone(),
        adapter: opts.adapter.as_ref(),
        discovery: opts.discovery.as_deref(),
        takeover: opts.takeover.as_ref(),
        allow_shared: opts.allow_shared,
        runtime: &admission.record,
    })?;
    for note in admission.notes.iter().chain(&start.notes) {
        eprintln!("agent-comms: {note}");
    }
    if let Some(pid) = start.replaces {
        end_replaced(pid)?;
    }
    let mut record = admission.record;
    // A start on an unknown conversation is a new one: it is discovered below.
    record.conversation_id = start.conversation.clone();
    let endpoint_id = random_hex(8);
    let config = supervisor_config(&opts, &start);
    let banner = banner(&opts);
    let store: SharedStore = Arc::new(Mutex::new(store));
    let online = GoingOnline {
        online: Online {
            store: store.clone(),
            host: opts.host.clone(),
            endpoint: registry.paths(&opts.id).socket.display().to_string(),
            endpoint_id: endpoint_id.clone(),
            agent: opts.agent.clone(),
            provider: opts.adapter.as_ref().map(|e| e.profile.name.clone()),
            heartbeat: opts.heartbeat,
            batch: opts.batch,
        },
        record,
        discovery: opts.discovery.clone(),
        discover_conversation: start.conversation.is_none(),
    };
    let mut started: Option<Result<(), ControlError>> = None;
    let started_slot = &mut started;
    let exit = run_foreground(config, Some(&banner), move |session: SessionHandle| {
        let outcome = online.start(session.clone());
        if outcome.is_err() {
            session.terminate();
        }
        *started_slot = Some(outcome);
    })?;
    go_offline(
        &store,
        opts.id.as_str(),
        &endpoint_id,
        &format!("the provider exited ({exit})"),
    )?;
    if let Some(Err(e)) = started {
        return Err(e);
    }
    Ok(exit.code.unwrap_or(128 + 1))
}

/// Ends the process a takeover replaces, saying how it went.
fn end_replaced(pid: u32) -> Result<(), ControlError> {
    let ended = match end_process(pid, TERM_GRACE)? {
        Ended::AlreadyGone => "it had already exited",
        Ended::Terminated => "it exited on SIGTERM",
        Ended::Killed => "it needed SIGKILL",
    };
    eprintln!("agent-comms: ended process {pid}: {ended}");
    Ok(())
}

/// The one line printed before the terminal becomes the provider's.
fn banner(opts: &ServeOptions) -> String {
    let adapter = opts.adapter.as_ref().map_or_else(
        || "no adapter".to_owned(),
        |e| format!("adapter {}", e.profile.name),
    );
    format!(
        "agent-comms: this terminal is dedicated to runtime {} (agent {}, {adapter}); messages are typed in when it is idle",
        opts.id, opts.agent
    )
}

/// What the runtime needs once its provider runs: the record to publish
/// and the tasks to start beside the session.
struct GoingOnline {
    online: Online,
    record: RuntimeRecord,
    /// The adapter's knowledge of the provider's own files: the
    /// conversation it is on, and what it reports it is doing.
    discovery: Option<Arc<dyn ConversationDiscovery>>,
    /// The conversation is not known yet: it is discovered.
    discover_conversation: bool,
}

impl GoingOnline {
    /// Publishes the runtime ONLINE, then starts the heartbeat, the
    /// conversation discovery and the inbox. Runs inside the supervisor's
    /// runtime.
    fn start(mut self, session: SessionHandle) -> Result<(), ControlError> {
        self.online.publish(&mut self.record, session.child_pid())?;
        let runtime = self.record.id.clone();
        if let Some(discovery) = self.discovery {
            let pid = session.child_pid();
            if self.discover_conversation {
                tokio::spawn(bind_when_discovered(
                    self.online.store.clone(),
                    runtime.clone(),
                    pid,
                    discovery.clone(),
                ));
            }
            session.take_reports_of(discovery);
        }
        self.online.start_tasks(runtime, session);
        Ok(())
    }
}

/// How long a new provider process may take to write down its conversation.
const DISCOVERY_WINDOW: Duration = Duration::from_secs(20);
const DISCOVERY_PERIOD: Duration = Duration::from_millis(250);

/// Finds the conversation a freshly started provider is on (it writes its files
/// at start-up) and binds it to the runtime, so a later "continue" resumes
/// exactly that one.
async fn bind_when_discovered(
    store: SharedStore,
    runtime: String,
    pid: u32,
    discovery: Arc<dyn ConversationDiscovery>,
) {
    let deadline = tokio::time::Instant::now() + DISCOVERY_WINDOW;
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(DISCOVERY_PERIOD).await;
        let Ok(proc) = ProcessInfo::read(pid) else {
            return;
        };
        if let Discovery::Found(found) = discovery.discover(&proc, &ProviderEnv::of(&proc)) {
            // An id outside the rule would later be typed into a resume
            // command line: leave the runtime unbound instead.
            if let Err(e) = Id::parse(IdKind::Conversation, &found.id) {
                tracing::warn!("not binding the provider's conversation: {e}");
                return;
            }
            let runtime = runtime.clone();
            let bound = with_store(&store, move |s| {
                s.bind_conversation(&runtime, Some(&found.id), s.now())
            })
            .await;
            if let Err(e) = bound {
                tracing::error!("binding the conversation: {e}");
            }
            return;
        }
    }
    tracing::warn!(
        "no conversation found for process {pid}; bind one with runtime bind-conversation"
    );
}

fn supervisor_config(opts: &ServeOptions, start: &StartPlan) -> SupervisorConfig {
    let profile = opts.adapter.as_ref().map(|e| &e.profile);
    let mut env = profile.map(|p| p.env.pairs()).unwrap_or_default();
    env.extend(opts.env.iter().cloned());
    env.push(("AGENT_COMMS_ACTOR".into(), opts.agent.clone()));
    SupervisorConfig {
        name: opts.id.clone(),
        kind: SessionKind::Interactive,
        spawn: SpawnSpec {
            argv: start.argv.clone(),
            cwd: start.cwd.clone(),
            env,
            env_remove: profile.map(|p| p.env.remove.clone()).unwrap_or_default(),
            rows: 24,
            cols: 80,
            record: opts.record.clone(),
        },
        command_line: start.argv.join(" "),
        kill_grace_ms: DEFAULT_KILL_GRACE.as_millis() as u64,
        cells: None,
        adapter: opts.adapter.as_ref().map(Entry::spec),
        keyboard_quiet_ms: opts.keyboard_quiet.as_millis() as u64,
    }
}

/// `argv` with the adapter's grant for agent-comms itself appended
/// (`--allow-agent-comms`): exactly the profile's `[permissions] args`, with
/// `{exe}` replaced by the resolved agent-comms path — nothing broader. An
/// adapter that declares no grant cannot give one.
pub fn grant_agent_comms(
    argv: &[String],
    adapter: Option<&Entry>,
    exe: &std::path::Path,
) -> Result<Vec<String>, ControlError> {
    let Some(entry) = adapter else {
        return Err(ControlError::NoGrant(
            "no adapter claims this command".into(),
        ));
    };
    let Some(grant) = entry.profile.permissions.as_ref() else {
        return Err(ControlError::NoGrant(format!(
            "adapter '{}' declares no [permissions] grant",
            entry.profile.name
        )));
    };
    let exe = exe.display().to_string();
    let mut out = argv.to_vec();
    out.extend(grant.args.iter().map(|a| a.replace("{exe}", &exe)));
    Ok(out)
}
