//! `agent-comms runtime …`: serve, configure, list, show, deliver.

use std::path::PathBuf;
use std::time::Duration;

use agent_comms_adapters::conversations;
use agent_comms_core::client::Client;
use agent_comms_core::control::readable::{self, ScreenReading};
use agent_comms_core::control::registration::{self, bind_conversation};
use agent_comms_core::control::registration::{configure, Configure, RuntimeKind, RuntimeView};
use agent_comms_core::control::serve::{grant_agent_comms, serve, ServeOptions, DEFAULT_HEARTBEAT};
use agent_comms_core::control::start::TakeoverOptions;
use agent_comms_core::control::{
    host::host_id, open_store, ControlError, DEFAULT_BATCH, MAX_BATCH,
};
use agent_comms_core::delivery::{validate, DeliveryOptions, DEFAULT_TIMEOUT_MS};
use agent_comms_core::display;
use agent_comms_core::ids::{Id, IdKind};
use agent_comms_core::session::{runtime_id, SessionName};
use agent_comms_core::socket::protocol::{Request, Response};
use agent_comms_core::socket::ForeignEndpoint;
use agent_comms_core::store::RuntimeStatus;
use agent_comms_core::supervisor::DEFAULT_KEYBOARD_QUIET_MS;
use agent_comms_core::takeover::launch::launch;
use agent_comms_core::time::iso_from_unix_millis;
use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use std::sync::Arc;

use super::subject::Subject;

#[derive(Subcommand)]
pub enum RuntimeCommand {
    /// Run a provider CLI in this terminal as agent ID's interactive
    /// runtime: registered, heartbeating, and receiving messages when idle.
    ///
    /// The terminal is dedicated to it: you use the provider as usual, and
    /// other agents' messages are typed into its prompt only when it is
    /// idle and you are not typing. Everything after `--` is the provider's.
    #[command(
        name = "interactive-serve",
        after_help = "Examples:
  agent-comms --actor bob runtime interactive-serve bob -- claude
  agent-comms --actor bob runtime interactive-serve bob --allow-agent-comms -- claude
  agent-comms --actor bob runtime interactive-serve bob --mcp --provider codex -- codex
  agent-comms --actor bob runtime interactive-serve bob --takeover-pid 4242 -- claude

Exits with the provider's exit status once it ends (the runtime goes OFFLINE)."
    )]
    InteractiveServe(ServeArgs),
    /// Run an agent headless over the Agent Client Protocol as agent ID's
    /// runtime: registered, heartbeating, receiving messages as prompts
    /// when no turn runs, its transcript kept (`acp log`). Detached unless
    /// --foreground; returns once the runtime is ONLINE.
    ///
    /// Started again with the same id, it continues the ACP session the
    /// runtime is bound to. What the agent may do is fixed by --policy.
    #[command(name = "acp-serve")]
    AcpServe(super::acp::AcpServeArgs),
    /// End the running turn of an ACP runtime (`session/cancel`) and print
    /// its stop reason.
    #[command(after_help = "Examples:
  agent-comms runtime cancel coder
  agent-comms runtime cancel coder --json

Exit status: 0 the turn ended, 1 no turn was running or the runtime is not.")]
    Cancel {
        #[command(flatten)]
        id: Subject,
        /// Print {"id", "stop_reason"}.
        #[arg(long)]
        json: bool,
    },
    /// Bind the runtime to a conversation (the provider's own session or
    /// thread): a later serve that asks to continue resumes exactly that
    /// one. Without --conversation, the one the running runtime's provider
    /// is on.
    #[command(
        name = "bind-conversation",
        visible_alias = "bind-session",
        after_help = "Examples:
  agent-comms runtime bind-conversation bob   # the one its provider is on now
  agent-comms runtime bind-conversation bob --conversation 0f6c2a4e-5b1d-4c39-9a57-3b7d2f1e8c90"
    )]
    BindConversation {
        #[command(flatten)]
        id: Subject,
        /// The conversation's id, as the provider names it.
        #[arg(long, visible_alias = "session", value_name = "ID")]
        conversation: Option<String>,
        /// Print {"id", "conversation_id", "session_id"} (session_id: the
        /// same, under its old name).
        #[arg(long)]
        json: bool,
    },
    /// Create or change a runtime record and claim it for this host (the
    /// repair that interactive-serve and doctor print). The acting agent
    /// becomes the runtime's agent.
    #[command(after_help = "Examples:
  agent-comms --actor bob runtime configure bob
  agent-comms --actor bob runtime configure bob --kind ACP --connector ACP --max-concurrent 1")]
    Configure {
        #[command(flatten)]
        id: Subject,
        /// What serves it: INTERACTIVE (interactive-serve) or ACP
        /// (acp-serve); a serve refuses any other kind (default: kept, or
        /// INTERACTIVE for a new record).
        #[arg(long, value_name = "KIND")]
        kind: Option<String>,
        /// How it is reached: INTERACTIVE or ACP, the same as the kind
        /// (default: kept, or INTERACTIVE for a new record).
        #[arg(long, value_name = "CONNECTOR")]
        connector: Option<String>,
        /// Deliveries at a time; the serves accept 1 (default: kept, or 1).
        #[arg(long, value_name = "N")]
        max_concurrent: Option<u32>,
        /// Print the record as `runtime show --json` does.
        #[arg(long)]
        json: bool,
    },
    /// List runtimes with their effective status (a stale heartbeat reads
    /// OFFLINE).
    #[command(after_help = "Examples:
  agent-comms runtime list
  agent-comms runtime list --json | jq -r '.[] | select(.status == \"ONLINE\") | .id'")]
    List {
        /// One JSON array of records: {"id", "agent", "kind", "connector",
        /// "status", "host", "pid", "endpoint", "last_heartbeat", …}.
        #[arg(long)]
        json: bool,
    },
    /// Show one runtime: its record, and for a live one how its adapter
    /// reads the screen (or, for ACP, its session and turn).
    #[command(after_help = "Examples:
  agent-comms runtime show bob
  agent-comms runtime show bob --json | jq -r .status   # ONLINE, OFFLINE, DRAINING or REVOKED")]
    Show {
        #[command(flatten)]
        id: Subject,
        /// The record as one JSON object (as in `runtime list --json`),
        /// with "screen" or "acp" for a live runtime.
        #[arg(long)]
        json: bool,
    },
    /// Remove a runtime's record (one that is not ONLINE): it leaves
    /// `runtime list` and `doctor`; its messages stay, addressed to its agent.
    /// An ONLINE one is refused: stop it first (`session kill ID`).
    #[command(after_help = "Examples:
  agent-comms runtime rm bob
  agent-comms runtime rm bob --json   # the record removed, as runtime show --json")]
    Rm {
        #[command(flatten)]
        id: Subject,
        /// Print the removed record as `runtime show --json` does.
        #[arg(long)]
        json: bool,
    },
    /// Type TEXT into the runtime's prompt with the delivery discipline:
    /// wait for its turn and for idle, verify the echo, press Enter, verify
    /// the submission; prints the evidence.
    #[command(after_help = "Examples:
  agent-comms runtime deliver coder 'please run the tests'
  agent-comms runtime deliver coder --try 'are you free?'
  agent-comms runtime deliver coder --timeout 30 --json 'status?'

A text of several lines goes as a message instead: agent-comms send --to AGENT --body-file FILE.
Exit status: 0 delivered (with evidence), 1 not delivered (offline, busy with --try, timed out,
refused text, or an error; the line says which).")]
    Deliver {
        #[command(flatten)]
        id: Subject,
        #[command(flatten)]
        options: DeliverArgs,
        /// One line of text (no newlines or control characters).
        #[arg(required_unless_present = "id_flag")]
        text: Option<String>,
    },
}

#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub(super) id: Subject,
    /// The adapter for the provider (default: the one that claims the
    /// command; see `agent-comms adapters list`).
    #[arg(long, value_name = "ADAPTER")]
    provider: Option<String>,
    /// Let the provider run agent-comms without asking: appends the
    /// adapter's `[permissions]` grant, nothing broader (for claude,
    /// `--allowedTools "Bash(<agent-comms path> *)"` and
    /// `--allowedTools "Bash(agent-comms *)"`).
    #[arg(long, alias = "claude-allow-agent-comms")]
    allow_agent_comms: bool,
    /// Give the provider agent-comms as MCP tools for this run (`agent-comms
    /// mcp`, default tool set, acting as this runtime's agent), with its
    /// tools allowed; the user's configuration files are not touched.
    /// Claude Code, Codex and opencode.
    #[arg(long)]
    mcp: bool,
    /// Deliveries wait this long after your last keystroke.
    #[arg(long, default_value_t = DEFAULT_KEYBOARD_QUIET_MS, value_name = "MS")]
    keyboard_quiet_ms: u64,
    #[command(flatten)]
    batch: BatchArg,
    /// Heartbeat interval; the runtime counts as offline after three
    /// missed beats.
    #[arg(long, default_value_t = DEFAULT_HEARTBEAT.as_millis() as u64, value_name = "MS")]
    heartbeat_ms: u64,
    /// Record the session as asciicast v2 to FILE.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Take over the provider process PID in place: find the conversation
    /// it is on, end it (SIGTERM, then SIGKILL), and start CMD in its
    /// working directory resuming that conversation.
    #[arg(long, value_name = "PID")]
    takeover_pid: Option<u32>,
    /// With --takeover-pid: the conversation PID is on, when agent-comms
    /// cannot tell on its own (it lists the candidates).
    #[arg(
        long,
        visible_alias = "session",
        value_name = "ID",
        requires = "takeover_pid"
    )]
    conversation: Option<String>,
    /// With --takeover-pid: take PID over even if it does not look like
    /// the provider CMD names.
    #[arg(long, requires = "takeover_pid")]
    force: bool,
    /// Start even when another live process holds the conversation (two
    /// processes on one conversation may diverge).
    #[arg(long, visible_alias = "allow-shared-session")]
    allow_shared_conversation: bool,
    /// Run this same command in a new terminal window and exit (for a
    /// takeover from inside the session it replaces).
    #[arg(long)]
    launch_terminal: bool,
    /// The provider's command and arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(Args)]
pub struct DeliverArgs {
    /// Fail at once if the program is busy, a person is typing, or another
    /// delivery is in progress.
    #[arg(long = "try")]
    try_only: bool,
    /// Seconds to wait for the turn and for idle.
    #[arg(long, default_value_t = DEFAULT_TIMEOUT_MS / 1000, value_name = "SECONDS")]
    timeout: u64,
    /// Print the evidence as JSON: {"echoed", "entered", "submitted"
    /// (Unix ms), "enter_presses", "style", "stop_reason" (ACP)}.
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: RuntimeCommand, actor: Option<Id>) -> anyhow::Result<i32> {
    let actor = actor.as_ref().map(Id::as_str);
    match cmd {
        RuntimeCommand::InteractiveServe(args) => interactive_serve(args, actor),
        RuntimeCommand::AcpServe(args) => super::acp::serve(args, actor),
        RuntimeCommand::Cancel { id, json } => super::acp::cancel(id.id()?, json),
        RuntimeCommand::BindConversation {
            id,
            conversation,
            json,
        } => {
            let conversation = conversation.as_deref().map(conversation_id).transpose()?;
            bind(
                &runtime_id(id.id()?)?,
                conversation.as_ref().map(Id::as_str),
                json,
            )
        }
        RuntimeCommand::Configure {
            id,
            kind,
            connector,
            max_concurrent,
            json,
        } => configure_runtime(
            id.id()?,
            &Configure {
                id: &runtime_id(id.id()?)?,
                agent: actor,
                kind: kind.as_deref(),
                connector: connector.as_deref(),
                max_concurrent,
            },
            json,
        ),
        RuntimeCommand::List { json } => list(json),
        RuntimeCommand::Show { id, json } => show(runtime_id(id.id()?)?.as_str(), json),
        RuntimeCommand::Rm { id, json } => remove(runtime_id(id.id()?)?.as_str(), json),
        RuntimeCommand::Deliver { id, options, text } => {
            let (id, text) = id.id_then(text)?;
            let Some(text) = text else {
                bail!("give the TEXT to deliver: agent-comms runtime deliver {id} TEXT");
            };
            deliver(runtime_id(&id)?.as_str(), options, text)
        }
    }
}

/// Whether `cmd` serves a program given after `--`, its id given once.
pub(super) fn takes_program(cmd: &RuntimeCommand) -> bool {
    match cmd {
        RuntimeCommand::InteractiveServe(args) => args.id.agrees() && !args.command.is_empty(),
        RuntimeCommand::AcpServe(args) => args.program_given(),
        _ => false,
    }
}

/// Whether a serve's two forms of id agree.
pub(super) fn ids_agree(cmd: &RuntimeCommand) -> bool {
    match cmd {
        RuntimeCommand::InteractiveServe(args) => args.id.agrees(),
        RuntimeCommand::AcpServe(args) => args.id.agrees(),
        _ => true,
    }
}

/// How many waiting messages one notification names: a served runtime's
/// `--batch`.
#[derive(Args)]
pub struct BatchArg {
    /// Name up to N waiting messages in one notification (one agent turn
    /// for a burst; `agent-comms message show ID...` prints them all); 1
    /// delivers one by one.
    #[arg(
        long = "batch",
        default_value_t = DEFAULT_BATCH as u64,
        value_parser = clap::value_parser!(u64).range(1..=MAX_BATCH as u64),
        value_name = "N"
    )]
    limit: u64,
}

impl BatchArg {
    pub fn limit(&self) -> usize {
        self.limit as usize
    }
}

/// A conversation id given on the command line: it becomes part of the
/// provider's command line on resume.
fn conversation_id(value: &str) -> Result<Id, agent_comms_core::ids::IdError> {
    Id::parse(IdKind::Conversation, value)
}

fn interactive_serve(args: ServeArgs, actor: Option<&str>) -> anyhow::Result<i32> {
    if args.launch_terminal {
        return relaunch_in_terminal();
    }
    if args.heartbeat_ms == 0 {
        bail!("--heartbeat-ms must be above 0");
    }
    let id = runtime_id(args.id.id()?)?;
    if let Some(conversation) = &args.conversation {
        conversation_id(conversation)?;
    }
    let registry = agent_comms_adapters::registry();
    let adapter = match &args.provider {
        Some(name) => Some(registry.named(name)?.clone()),
        None => {
            agent_comms_adapters::say_untrusted(&registry);
            registry.for_command(&args.command.join(" ")).cloned()
        }
    };
    let agent = actor.map_or_else(|| id.to_string(), str::to_owned);
    let mut argv = if args.allow_agent_comms {
        let exe = std::env::current_exe()
            .and_then(|p| p.canonicalize())
            .context("cannot resolve the agent-comms executable's path")?;
        grant_agent_comms(&args.command, adapter.as_ref(), &exe)?
    } else {
        args.command
    };
    let mut env = Vec::new();
    if args.mcp {
        let one_run = super::mcp::for_provider(adapter.as_ref(), &agent)?;
        argv.extend(one_run.args);
        env = one_run.env;
    }
    let discovery = adapter
        .as_ref()
        .and_then(|e| conversations::discovery_for(&e.profile))
        .map(Arc::from);
    let store = open_store()?;
    let code = serve(
        store,
        ServeOptions {
            agent,
            id,
            host: host_id()?,
            adapter,
            argv,
            env,
            cwd: std::env::current_dir().context("cannot read the current directory")?,
            heartbeat: Duration::from_millis(args.heartbeat_ms),
            batch: args.batch.limit(),
            keyboard_quiet: Duration::from_millis(args.keyboard_quiet_ms),
            record: args.record.map(super::absolute),
            discovery,
            takeover: args.takeover_pid.map(|pid| TakeoverOptions {
                pid,
                conversation: args.conversation,
                force: args.force,
            }),
            allow_shared: args.allow_shared_conversation,
        },
    )?;
    Ok(code)
}

fn bind(id: &SessionName, conversation: Option<&str>, json: bool) -> anyhow::Result<i32> {
    let id = id.as_str();
    let store = open_store()?;
    let store = store.as_ref();
    let registry = agent_comms_adapters::registry();
    let bound = bind_conversation(store, &host_id()?, id, conversation, |provider| {
        registry
            .get(provider)
            .and_then(|e| conversations::discovery_for(&e.profile))
    })?;
    if json {
        // `session_id` is `conversation_id`'s old name, kept for one release.
        let line = serde_json::json!({"id": id, "conversation_id": bound, "session_id": bound});
        println!("{}", agent_comms_core::display::json(&line)?);
    } else {
        let bound = display::one_line(&bound);
        println!("runtime {id} is bound to conversation {bound}");
    }
    Ok(0)
}

fn configure_runtime(id: &str, change: &Configure, json: bool) -> anyhow::Result<i32> {
    let store = open_store()?;
    let store = store.as_ref();
    let host = host_id()?;
    let r = configure(store, &host, change, store.now())?;
    let view = RuntimeView::new(&r, &host, store.now());
    if json {
        println!("{}", agent_comms_core::display::json(&view)?);
    } else {
        println!(
            "runtime {id} configured: agent {}, kind {}, connector {}, max-concurrent {}, this host",
            display::one_line(&view.agent),
            display::one_line(&view.kind),
            display::one_line(&view.connector),
            view.max_concurrent
        );
    }
    Ok(0)
}

/// `runtime rm ID`.
fn remove(id: &str, json: bool) -> anyhow::Result<i32> {
    let store = open_store()?;
    let store = store.as_ref();
    let removed = registration::remove(store, &host_id()?, id, store.now())?;
    if json {
        let view = RuntimeView::new(&removed, &host_id()?, store.now());
        println!("{}", agent_comms_core::display::json(&view)?);
    } else {
        println!("runtime {id} removed (it was {})", removed.status);
    }
    Ok(0)
}

fn list(json: bool) -> anyhow::Result<i32> {
    let store = open_store()?;
    let store = store.as_ref();
    let host = host_id()?;
    let now = store.now();
    let views: Vec<RuntimeView> = store
        .runtimes()?
        .iter()
        .map(|r| RuntimeView::new(r, &host, now))
        .collect();
    if json {
        println!("{}", agent_comms_core::display::json(&views)?);
        return Ok(0);
    }
    if views.is_empty() {
        println!("no runtimes; start one with: agent-comms --actor ID runtime interactive-serve ID -- <provider command>");
        return Ok(0);
    }
    println!(
        "{:<20} {:<16} {:<8} {:>8}  {:<14} {:<12} WHERE",
        "ID", "AGENT", "STATUS", "PID", "LAST HEARTBEAT", "PROVIDER"
    );
    let colour = super::look::colour(false);
    for v in &views {
        println!(
            "{:<20} {:<16} {} {:>8}  {:<14} {:<12} {}",
            display::one_line(&v.id),
            display::one_line(&v.agent),
            super::look::state(&format!("{:<8}", v.status), colour),
            v.pid.map_or_else(|| "-".into(), |p| p.to_string()),
            v.last_heartbeat
                .as_deref()
                .map_or("-".into(), super::look::ago_iso),
            display::one_line(v.provider.as_deref().unwrap_or("-")),
            if v.local { "this host" } else { "other host" }
        );
    }
    Ok(0)
}

fn deliver(id: &str, options: DeliverArgs, text: String) -> anyhow::Result<i32> {
    let view = runtime_view(id)?;
    let id = id.to_owned();
    if !view.local {
        let host = view.host.unwrap_or_default();
        let agent = view.agent;
        return Err(ControlError::ForeignHost { id, agent, host }.into());
    }
    let endpoint = match (view.status, &view.endpoint) {
        (RuntimeStatus::Online, Some(e)) => e.clone(),
        _ => return Err(ControlError::Offline(id).into()),
    };
    // Another user's server is refused as such: "offline" would hide it.
    let client = Client::connect(endpoint.as_ref()).map_err(|e| -> anyhow::Error {
        match ForeignEndpoint::in_error(&e) {
            Some(_) => e.into(),
            None => ControlError::Offline(id.clone()).into(),
        }
    })?;
    deliver_with(client, &id, options, text)
}

/// `--launch-terminal`: this command line, minus the flag, in a new window.
fn relaunch_in_terminal() -> anyhow::Result<i32> {
    let exe =
        std::env::current_exe().context("cannot resolve the agent-comms executable's path")?;
    let mut argv = vec![exe.display().to_string()];
    argv.extend(
        std::env::args()
            .skip(1)
            .filter(|a| a != "--launch-terminal"),
    );
    let ran = launch(&argv)?;
    eprintln!("agent-comms: started in a new terminal: {}", ran.join(" "));
    Ok(0)
}

/// `runtime show`: the record as readers see it, and — for a live runtime
/// of this host — how its adapter reads the screen: when it cannot, the
/// adapter's name and the screen's bottom rows say why nothing is delivered.
fn show(id: &str, json: bool) -> anyhow::Result<i32> {
    let view = runtime_view(id)?;
    let acp = view.kind == RuntimeKind::Acp.as_str();
    let endpoint = view.endpoint.as_ref().filter(|_| view.local);
    let reading = endpoint
        .filter(|_| !acp)
        .and_then(|e| readable::read(e.as_ref()).ok());
    let status = endpoint
        .filter(|_| acp)
        .and_then(|e| super::acp::status(e.as_ref()));
    if json {
        let mut value = serde_json::to_value(&view)?;
        if let Some(object) = value.as_object_mut() {
            if let Some(reading) = &reading {
                object.insert("screen".into(), serde_json::to_value(reading)?);
            }
            if let Some(status) = &status {
                object.insert("acp".into(), serde_json::to_value(status)?);
            }
        }
        println!("{}", agent_comms_core::display::json(&value)?);
        return Ok(0);
    }
    let text = serde_json::to_value(&view)?;
    // `session_id` repeats `conversation_id` for scripts; people need it once.
    let fields = text.as_object().expect("a struct");
    for (k, v) in fields.iter().filter(|(k, _)| *k != "session_id") {
        let v = match v {
            serde_json::Value::Null => "-".to_owned(),
            serde_json::Value::String(s) => display::one_line(s).into_owned(),
            other => other.to_string(),
        };
        println!("{k:<15} {v}");
    }
    if let Some(reading) = reading {
        print_reading(&reading);
    }
    if let Some(status) = status {
        super::acp::print_status(&status);
    }
    Ok(0)
}

fn print_reading(reading: &ScreenReading) {
    let activity = reading.activity.as_str();
    match reading.unknown_for_ms {
        Some(ms) => println!(
            "{:<15} {activity} for {} s: the {} adapter cannot read the screen (neither busy nor idle), so nothing is delivered",
            "activity",
            ms / 1000,
            reading.adapter
        ),
        None => println!("{:<15} {activity} ({} adapter)", "activity", reading.adapter),
    }
    for (i, row) in reading.bottom_rows.iter().enumerate() {
        let key = if i == 0 { "screen ends" } else { "" };
        println!("{}", format!("{key:<15} | {row}").trim_end());
    }
}

/// Runtime `id` as readers see it now.
fn runtime_view(id: &str) -> anyhow::Result<RuntimeView> {
    let store = open_store()?;
    let store = store.as_ref();
    let r = store
        .runtime(id)?
        .ok_or_else(|| ControlError::UnknownRuntime(id.to_owned()))?;
    Ok(RuntimeView::new(&r, &host_id()?, store.now()))
}

/// Asks the supervisor behind `client` to deliver `text`; prints the
/// evidence.
pub fn deliver_with(
    mut client: Client,
    name: &str,
    args: DeliverArgs,
    text: String,
) -> anyhow::Result<i32> {
    validate(&text)?;
    let options = DeliveryOptions {
        try_only: args.try_only,
        timeout_ms: args.timeout.saturating_mul(1000),
    };
    let request = Request::Deliver { text, options };
    let replied = match super::waiting::WaitLine::on_terminal() {
        Some(mut line) => client.request_telling_waits(request, &mut |w| line.show(w)),
        None => client.request(request),
    };
    match replied? {
        Response::Delivered(e) => {
            if args.json {
                println!("{}", agent_comms_core::display::json(&e)?);
            } else if e.style == "prompt" {
                println!(
                    "delivered to {name} as a prompt: sent {}, first update {}, turn ended {} ({})",
                    iso_from_unix_millis(e.entered),
                    iso_from_unix_millis(e.echoed),
                    iso_from_unix_millis(e.submitted),
                    display::one_line(e.stop_reason.as_deref().unwrap_or("no stop reason"))
                );
            } else {
                println!(
                    "delivered to {name}: echoed {}, entered {}, submitted {} ({} Enter, {})",
                    iso_from_unix_millis(e.echoed),
                    iso_from_unix_millis(e.entered),
                    iso_from_unix_millis(e.submitted),
                    e.enter_presses,
                    e.style
                );
            }
            Ok(0)
        }
        Response::Error { message } => bail!("{message}"),
        other => bail!("unexpected reply to deliver: {other:?}"),
    }
}
