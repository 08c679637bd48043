//! `runtime acp-serve`: an agent headless over ACP, registered as an
//! agent's runtime like any other — heartbeat, inbox, OFFLINE with the
//! reason on exit — whose deliveries are prompts.
//!
//! The order is interactive-serve's: the record is admitted first (kind and
//! connector `ACP`; a mismatch stops here with the repair command), then the
//! supervisor starts the agent and opens its session — exactly the one the
//! runtime is bound to, continued, unless `--new-session` — and only then is
//! the runtime published ONLINE, bound to that session. Messages a killed
//! serve left mid-delivery go back to the queue first, so the restarted
//! runtime delivers them again, once.
//!
//! Detached (the default) the launching command waits for the one status
//! line of the daemon it started: `READY` once the runtime is ONLINE, or
//! `ERROR` with the reason, so a start that fails is reported by the command
//! that asked for it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::inbox::{SharedStore, Target};
use super::online::{go_offline, Online};
use super::registration::{admit, RuntimeKind, Serving};
use super::ControlError;
use crate::acp::agent::AgentCommand;
use crate::acp::handle::AcpHandle;
use crate::acp::supervisor::{load_policy, AcpConfig, AcpSupervisor, Ended};
use crate::acp::transcript::transcript_path;
use crate::acp::AcpError;
use crate::delivery::{DeliveryError, DeliveryOptions, DEFAULT_TIMEOUT_MS};
use crate::ids::random_hex;
use crate::paths::ensure_runtime_root;
use crate::session::{Registry, SessionName};
use crate::socket::is_dialable;
use crate::socket::protocol::InvocationOutcome;
use crate::store::Evidence;
use crate::supervisor::launch::{daemon_config, spawn_daemon, LaunchError};

/// The hidden first argument that makes our binary an ACP supervisor.
pub const ACP_SUPERVISOR_ARG: &str = "__acp-serve";

/// What `runtime acp-serve` was asked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AcpServeOptions {
    pub id: SessionName,
    pub agent: String,
    pub host: String,
    /// The adapter whose `[acp]` section gave the command, if one did.
    pub provider: Option<String>,
    pub command: AgentCommand,
    pub policy: Option<PathBuf>,
    pub record: Option<PathBuf>,
    /// The first turn's prompt, sent as soon as the session is open.
    pub prompt: Option<String>,
    /// Start a new ACP session even when the runtime is bound to one.
    pub new_session: bool,
    /// Hold the first prompt until a controller attaches.
    #[serde(default)]
    pub wait_for_client: bool,
    pub heartbeat_ms: u64,
    /// The most messages one prompt names (1: one by one).
    pub batch: usize,
    /// The project's state directory (the transcript is kept there, and
    /// the store or its settings).
    pub state_dir: PathBuf,
}

/// What a started runtime tells the command that launched it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Started {
    pub id: String,
    pub supervisor_pid: u32,
    pub agent_pid: u32,
    pub session_id: String,
    pub agent_name: Option<String>,
    pub agent_version: Option<String>,
    pub transcript: PathBuf,
    /// Where ACP clients attach (`acp attach`).
    #[serde(default)]
    pub bridge: Option<PathBuf>,
}

/// Starts the runtime detached and returns once it is ONLINE.
pub fn launch(exe: &std::path::Path, opts: &AcpServeOptions) -> Result<Started, ControlError> {
    let log = Registry::new(ensure_runtime_root()?, is_dialable)
        .paths(&opts.id)
        .log;
    let spec = serde_json::to_vec(opts).expect("options serialize");
    let ready = spawn_daemon(exe, ACP_SUPERVISOR_ARG, &spec, &log).map_err(|e| match e {
        LaunchError::Refused(why) => ControlError::Body(why),
        other => ControlError::Body(other.to_string()),
    })?;
    serde_json::from_str(&ready).map_err(|e| ControlError::Body(format!("bad ready line: {e}")))
}

/// The body of the detached ACP supervisor (after [`ACP_SUPERVISOR_ARG`]).
pub fn daemon_main(init_logging: impl FnOnce()) -> i32 {
    let Some(opts) = daemon_config::<AcpServeOptions>() else {
        return 2;
    };
    let log = match ensure_runtime_root() {
        Ok(root) => Registry::new(root, is_dialable).paths(&opts.id).log,
        Err(e) => {
            println!("ERROR {e}");
            return 1;
        }
    };
    crate::os::redirect_output_to_log(&log);
    init_logging();
    let outcome = serve(opts, |started| {
        let line = serde_json::to_string(started).expect("serializes");
        crate::os::write_ready(&format!("READY {line}"));
    });
    match outcome {
        Ok(ended) => {
            tracing::info!("runtime ended: {}", ended.reason);
            0
        }
        Err(e) => {
            tracing::warn!("runtime did not start: {e}");
            crate::os::write_ready(&format!("ERROR {e}"));
            1
        }
    }
}

/// Serves the runtime until its session ends. `ready` is called once it
/// is ONLINE.
pub fn serve(opts: AcpServeOptions, ready: impl FnOnce(&Started)) -> Result<Ended, ControlError> {
    // Before anything is touched: a broken policy registers nothing.
    let policy = load_policy(opts.policy.as_deref()).map_err(acp_error)?;
    let store = super::open_store_in(&opts.state_dir)?;
    let registry = Registry::new(ensure_runtime_root()?, is_dialable);
    let serving = Serving {
        host: &opts.host,
        agent: &opts.agent,
        id: &opts.id,
        kind: RuntimeKind::Acp,
    };
    let admission = admit(store.as_ref(), &registry, &serving, store.now())?;
    for note in &admission.notes {
        tracing::info!("{note}");
    }
    let resume = admission
        .record
        .conversation_id
        .clone()
        .filter(|_| !opts.new_session);
    let transcript = transcript_path(&opts.state_dir, opts.id.as_str());
    let config = AcpConfig {
        name: opts.id.clone(),
        command_line: opts.command.argv.join(" "),
        agent: opts.command.clone(),
        policy,
        transcript: transcript.clone(),
        record: opts.record.clone(),
        resume,
        kill_grace_ms: crate::supervisor::DEFAULT_KILL_GRACE.as_millis() as u64,
    };
    let rt = crate::supervisor::runtime()?;
    let store: SharedStore = Arc::new(Mutex::new(store));
    rt.block_on(async move {
        let supervisor = AcpSupervisor::start(config).await.map_err(acp_error)?;
        let handle = supervisor.handle();
        let endpoint_id = random_hex(8);
        let online = Online {
            store: store.clone(),
            host: opts.host.clone(),
            endpoint: supervisor.record().socket.display().to_string(),
            endpoint_id: endpoint_id.clone(),
            agent: opts.agent.clone(),
            provider: opts.provider.clone(),
            heartbeat: Duration::from_millis(opts.heartbeat_ms),
            batch: opts.batch,
        };
        let mut record = admission.record;
        // Bound to the session it serves: the next start continues it.
        record.conversation_id = Some(handle.session_id());
        online.publish(&mut record, supervisor.record().pid)?;
        online.start_tasks(record.id, handle.clone());
        let status = handle.status();
        let bridge = supervisor.bridge();
        ready(&Started {
            id: opts.id.to_string(),
            supervisor_pid: std::process::id(),
            agent_pid: supervisor.record().pid,
            session_id: status.session_id,
            agent_name: status.agent_name,
            agent_version: status.agent_version,
            transcript,
            bridge: bridge.socket(),
        });
        if let Some(text) = opts.prompt.clone() {
            let held = opts.wait_for_client.then(|| bridge.attached());
            tokio::spawn(first_turn(handle.clone(), text, held));
        }
        let ended = supervisor.run().await;
        let reason = format!("{} ({})", ended.reason, ended.exit);
        // The agent is gone: nothing else runs that needs the event loop.
        go_offline(&store, opts.id.as_str(), &endpoint_id, &reason)?;
        Ok(ended)
    })
}

fn acp_error(e: AcpError) -> ControlError {
    ControlError::Body(e.to_string())
}

/// The first turn (`--prompt`): a prompt like a delivery's, which no
/// message stands behind; its outcome is in the transcript. `held`: it
/// waits until a controller is attached (`--wait-for-client`).
async fn first_turn(
    handle: AcpHandle,
    text: String,
    held: Option<tokio::sync::watch::Receiver<crate::acp::bridge::Attached>>,
) {
    if let Some(mut attached) = held {
        handle
            .tap()
            .note("the first prompt waits for a controller to attach (--wait-for-client)");
        if attached.wait_for(|a| a.controllers > 0).await.is_err() {
            return;
        }
    }
    let options = DeliveryOptions {
        try_only: false,
        timeout_ms: DEFAULT_TIMEOUT_MS,
    };
    if let Err(e) = handle.first_prompt(&text, options).await {
        handle.tap().note(format!("the --prompt turn failed: {e}"));
    }
}

impl Target for AcpHandle {
    fn ready(
        &self,
        options: DeliveryOptions,
    ) -> impl std::future::Future<Output = Result<(), DeliveryError>> + Send {
        let handle = self.clone();
        async move { handle.ready(options).await }
    }

    fn deliver(
        &self,
        text: &str,
        options: DeliveryOptions,
    ) -> impl std::future::Future<Output = Result<Evidence, DeliveryError>> + Send {
        let handle = self.clone();
        let text = text.to_owned();
        async move { handle.prompt(&text, options).await }
    }

    fn nudges(&self) -> Arc<tokio::sync::Notify> {
        AcpHandle::nudges(self)
    }

    fn announce(&self, outcome: InvocationOutcome) {
        AcpHandle::announce(self, outcome)
    }
}
