//! `agent-comms runtime acp-serve`, `runtime cancel` and `acp log`: agents
//! headless over the Agent Client Protocol (docs/acp.md).

use std::io::Write;
use std::path::PathBuf;

use agent_comms_core::acp::agent::AgentCommand;
use agent_comms_core::acp::transcript::{self, transcript_path, Entry};
use agent_comms_core::acp::view::LogView;
use agent_comms_core::adapter::Entry as Adapter;
use agent_comms_core::client::Client;
use agent_comms_core::control::acp_serve::{self, AcpServeOptions, Started};
use agent_comms_core::control::serve::DEFAULT_HEARTBEAT;
use agent_comms_core::control::{host::host_id, state_dir};
use agent_comms_core::delivery::validate::check_prompt;
use agent_comms_core::display;
use agent_comms_core::regular_file;
use agent_comms_core::session::runtime_id;
use agent_comms_core::socket::codec::Message;
use agent_comms_core::socket::protocol::{AcpStatus, Event, Request, Response};
use agent_comms_core::time::iso_from_unix_millis;
use anyhow::{bail, Context};
use clap::{Args, Subcommand};

/// The longest `--prompt-file`.
const MAX_PROMPT_FILE: u64 = 1 << 20;

#[derive(Args)]
#[command(after_help = "Examples:
  agent-comms --actor coder runtime acp-serve coder -- opencode acp
  agent-comms --actor coder runtime acp-serve coder --provider claude-code --prompt 'read the README'
  agent-comms runtime deliver coder 'please run the tests'
  agent-comms acp log coder --follow
  agent-comms runtime acp-serve coder --listen 127.0.0.1:0 -- opencode acp   # and a web page")]
pub struct AcpServeArgs {
    #[command(flatten)]
    pub(super) id: super::subject::Subject,
    /// The adapter whose `[acp]` section runs the agent (default: the one
    /// whose `[acp]` command CMD is); without CMD, its command is run.
    #[arg(long, value_name = "ADAPTER")]
    provider: Option<String>,
    /// What the agent may do (TOML; see docs/acp.md#the-policy). Without
    /// it: every permission rejected once, no files or terminals served.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Start the first turn with this prompt.
    #[arg(long, conflicts_with = "prompt_file", value_name = "TEXT")]
    prompt: Option<String>,
    /// Start the first turn with the prompt in FILE.
    #[arg(long, value_name = "FILE")]
    prompt_file: Option<PathBuf>,
    /// Also keep the transcript (JSON lines) in FILE.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Start a new ACP session even when the runtime is bound to one (and
    /// bind the runtime to the new one).
    #[arg(long)]
    new_session: bool,
    /// Hold the first prompt (--prompt) until a controller attaches.
    #[arg(long)]
    wait_for_client: bool,
    /// Stay in this terminal and print the live transcript; Ctrl-C ends it.
    #[arg(long)]
    foreground: bool,
    /// Also serve the session to browsers on ADDR (`acp serve-web`, run
    /// in the background until the runtime ends); port 0 picks one.
    #[arg(long, value_name = "ADDR", conflicts_with = "foreground")]
    listen: Option<std::net::SocketAddr>,
    #[command(flatten)]
    remote: RemoteArgs,
    /// Heartbeat interval; the runtime counts as offline after three
    /// missed beats.
    #[arg(long, default_value_t = DEFAULT_HEARTBEAT.as_millis() as u64, value_name = "MS")]
    heartbeat_ms: u64,
    #[command(flatten)]
    batch: super::runtime::BatchArg,
    /// Print what started as JSON: {"id", "supervisor_pid", "agent_pid",
    /// "session_id", "agent_name", "agent_version", "transcript", "bridge"}
    /// (and "web" with --listen).
    #[arg(long)]
    json: bool,
    /// The agent's ACP command and arguments, after `--` (default: the
    /// `--provider` adapter's `[acp]` command).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

impl AcpServeArgs {
    /// An agent command after `--`, the id given once.
    pub(super) fn program_given(&self) -> bool {
        self.id.agrees() && !self.command.is_empty()
    }
}

/// The flags that let a web server listen beyond loopback.
#[derive(Args, Clone, Default)]
pub struct RemoteArgs {
    /// Allow a --listen address other than loopback (needs --token-file).
    #[arg(long)]
    pub allow_remote: bool,
    /// Keep the tokens in FILE (mode 0600; read if it exists, else
    /// created), instead of a file in the runtime directory that lives as
    /// long as the runtime.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

#[derive(Subcommand)]
pub enum AcpCommand {
    /// Print an ACP runtime's transcript: prompts, replies, thoughts, tool
    /// calls, permissions and how they were answered, stop reasons.
    #[command(after_help = "Examples:
  agent-comms acp log coder
  agent-comms acp log coder --follow
  agent-comms acp log coder --json | jq -c 'select(.dir == \"from_agent\")'")]
    Log {
        /// The runtime's id.
        id: String,
        /// Keep printing as the session goes on, until it ends (Ctrl-C stops).
        #[arg(long, short = 'f')]
        follow: bool,
        /// The raw transcript: one JSON object per JSON-RPC message or note.
        #[arg(long)]
        json: bool,
    },
    /// Speak ACP on standard input and output to a running ACP runtime:
    /// name this as an ACP client's agent command to use the session, as
    /// if the client had started the agent itself.
    #[command(after_help = "Examples:
  agent-comms acp attach coder                  # an editor's agent command
  agent-comms acp attach coder --read-only      # watch only
  ssh dev-box agent-comms acp attach coder      # from another machine
  agent-comms acp attach --socket /srv/acp/coder.sock   # another user's shared runtime")]
    Attach {
        /// The runtime's id (its bridge socket is found from it).
        #[arg(required_unless_present = "socket")]
        id: Option<String>,
        /// Watch only: prompts, cancels and permission answers are refused.
        #[arg(long)]
        read_only: bool,
        /// The bridge socket to use, as the runtime's policy ([clients]
        /// socket) names it: how another user attaches.
        #[arg(long, value_name = "PATH", conflicts_with = "id")]
        socket: Option<PathBuf>,
    },
    /// Serve a running ACP runtime to browsers: a page that shows the
    /// session live and lets a controller prompt, cancel and answer
    /// permissions, over WebSocket; until the runtime ends.
    #[command(after_help = "Examples:
  agent-comms acp serve-web coder --listen 127.0.0.1:8700
  agent-comms acp serve-web coder --listen 127.0.0.1:0 --json   # {\"url\", \"read_only_url\", \"listen\"}
  agent-comms acp serve-web coder --listen 0.0.0.0:8700 --allow-remote --token-file ~/.config/coder-web.json

It prints two URLs, each with its token: a controller's and a read-only one.
Without --token-file the tokens are new each time and die with the runtime.
See docs/acp-web.md.")]
    ServeWeb {
        /// The runtime's id.
        id: String,
        /// Where to listen, as IP:PORT; port 0 picks a free one (printed).
        #[arg(long, value_name = "ADDR")]
        listen: std::net::SocketAddr,
        #[command(flatten)]
        remote: RemoteArgs,
        /// Print the URLs as JSON: {"url", "read_only_url", "listen"}.
        #[arg(long)]
        json: bool,
    },
}

pub fn serve(args: AcpServeArgs, actor: Option<&str>) -> anyhow::Result<i32> {
    if args.heartbeat_ms == 0 {
        bail!("--heartbeat-ms must be above 0");
    }
    let id = runtime_id(args.id.id()?)?;
    let agent = actor.map_or_else(|| id.to_string(), str::to_owned);
    let adapter = acp_adapter(args.provider.as_deref(), &args.command)?;
    let argv = match (&args.command[..], &adapter) {
        ([], Some(a)) => a.profile.acp.as_ref().expect("an [acp] adapter").command.clone(),
        ([], None) => bail!("no agent to run: give its ACP command after --, or an adapter with --provider NAME (see: agent-comms adapters list)"),
        (command, _) => command.to_vec(),
    };
    // Read by the supervisor before anything starts: a broken file is its
    // one line, said by this command.
    let policy = args.policy.map(super::absolute);
    let prompt = match (&args.prompt, &args.prompt_file) {
        (Some(text), _) => Some(text.clone()),
        (None, Some(file)) => Some(regular_file::read_text(
            file,
            MAX_PROMPT_FILE,
            "prompt file",
        )?),
        (None, None) => None,
    };
    if let Some(text) = &prompt {
        check_prompt(text).context("--prompt")?;
    }
    if let Some(listen) = args.listen {
        super::bridge::check_listen(listen, &args.remote)?;
    }
    let opts = AcpServeOptions {
        command: agent_command(argv, adapter.as_ref(), &agent)?,
        id,
        agent,
        host: host_id()?,
        provider: adapter.as_ref().map(|a| a.profile.name.clone()),
        policy,
        record: args.record.map(super::absolute),
        prompt,
        new_session: args.new_session,
        wait_for_client: args.wait_for_client,
        heartbeat_ms: args.heartbeat_ms,
        batch: args.batch.limit(),
        state_dir: state_dir(),
    };
    if args.foreground {
        return foreground(opts);
    }
    let exe =
        std::env::current_exe().context("cannot resolve the agent-comms executable's path")?;
    let started = acp_serve::launch(&exe, &opts)?;
    let web = match args.listen {
        Some(listen) => Some(super::bridge::launch(
            &exe,
            &started.id,
            listen,
            &args.remote,
        )?),
        None => None,
    };
    if args.json {
        let mut out = serde_json::to_value(&started)?;
        if let Some(web) = web {
            out["web"] = web;
        }
        println!("{}", agent_comms_core::display::json(&out)?);
        return Ok(0);
    }
    print_started(&started, false)?;
    if let Some(web) = web {
        println!(
            "in a browser: {} (read only: {})",
            web["url"].as_str().unwrap_or_default(),
            web["read_only_url"].as_str().unwrap_or_default()
        );
    }
    Ok(0)
}

/// The adapter that says how to run the agent: the one named, which must
/// have `[acp]`, or the one whose `[acp]` command `command` is.
fn acp_adapter(provider: Option<&str>, command: &[String]) -> anyhow::Result<Option<Adapter>> {
    let registry = agent_comms_adapters::registry();
    match provider {
        Some(name) => match registry.named(name)? {
            entry if entry.profile.acp.is_some() => Ok(Some(entry.clone())),
            _ => bail!("adapter '{name}' has no [acp] section, so it cannot run headless; see which do with: agent-comms adapters list"),
        },
        None => {
            agent_comms_adapters::say_untrusted(&registry);
            Ok(registry.for_acp_command(command).cloned())
        }
    }
}

/// The agent's command with the environment its adapter's `[acp]` needs.
fn agent_command(
    argv: Vec<String>,
    adapter: Option<&Adapter>,
    agent: &str,
) -> anyhow::Result<AgentCommand> {
    let acp = adapter.and_then(|a| a.profile.acp.as_ref());
    let mut env = acp
        .map(|a| a.env_set(agent_comms_core::os::running_as_root()))
        .unwrap_or_default();
    // The agent calls agent-comms as itself without flags.
    env.push(("AGENT_COMMS_ACTOR".into(), agent.to_owned()));
    Ok(AgentCommand {
        argv,
        cwd: std::env::current_dir().context("cannot read the current directory")?,
        env,
        env_remove: acp.map(|a| a.env.remove.clone()).unwrap_or_default(),
    })
}

fn print_started(started: &Started, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", agent_comms_core::display::json(started)?);
        return Ok(());
    }
    let agent = match (&started.agent_name, &started.agent_version) {
        (Some(n), Some(v)) => format!("{} {}", display::one_line(n), display::one_line(v)),
        (Some(n), None) => display::one_line(n).into_owned(),
        _ => "the agent".into(),
    };
    println!(
        "runtime {} serves {agent} over ACP (session {}, supervisor pid {}); follow it with: agent-comms acp log {} --follow",
        started.id,
        display::one_line(&started.session_id),
        started.supervisor_pid,
        started.id
    );
    Ok(())
}

/// `--foreground`: serve here, printing the transcript as it grows.
fn foreground(opts: AcpServeOptions) -> anyhow::Result<i32> {
    let id = opts.id.to_string();
    let ended = acp_serve::serve(opts, |started| {
        let _ = print_started(started, false);
        let path = started.transcript.clone();
        std::thread::spawn(move || {
            if let Err(e) = follow(&id, &path, false) {
                eprintln!("agent-comms: the live transcript stopped: {e:#}");
            }
        });
    })?;
    eprintln!("agent-comms: {} ({})", ended.reason, ended.exit);
    Ok(ended.exit.code.unwrap_or(1))
}

/// `runtime cancel --id ID`.
pub fn cancel(id: &str, json: bool) -> anyhow::Result<i32> {
    let id = runtime_id(id)?;
    let mut client = live(id.as_str())?;
    match client.request(Request::Cancel)? {
        Response::TurnEnded { stop_reason } => {
            if json {
                println!(
                    "{}",
                    agent_comms_core::display::json(
                        &serde_json::json!({ "id": id.as_str(), "stop_reason": stop_reason })
                    )?
                );
            } else {
                println!(
                    "runtime {id}: the turn ended: {}",
                    display::one_line(&stop_reason)
                );
            }
            Ok(0)
        }
        Response::Error { message } => bail!("{message}"),
        other => bail!("unexpected reply to cancel: {other:?}"),
    }
}

pub fn run(cmd: AcpCommand) -> anyhow::Result<i32> {
    match cmd {
        AcpCommand::Attach {
            id,
            read_only,
            socket,
        } => super::bridge::attach(id.as_deref(), socket, read_only),
        AcpCommand::ServeWeb {
            id,
            listen,
            remote,
            json,
        } => super::bridge::serve_web(runtime_id(&id)?.as_str(), listen, &remote, json),
        AcpCommand::Log {
            id,
            follow: live,
            json,
        } => {
            let id = runtime_id(&id)?;
            let path = transcript_path(&state_dir(), id.as_str());
            if !path.exists() {
                bail!("runtime {id} has no transcript ({}); start it with: agent-comms runtime acp-serve {id} -- <ACP command>", path.display());
            }
            if live {
                follow(id.as_str(), &path, json)?;
            } else {
                let mut out = Output::new(json);
                for entry in transcript::read(&path).context("cannot read the transcript")? {
                    out.print(&entry)?;
                }
                out.finish()?;
            }
            Ok(0)
        }
    }
}

/// The transcript so far, then each new entry until the session ends.
fn follow(id: &str, path: &std::path::Path, json: bool) -> anyhow::Result<()> {
    let mut out = Output::new(json);
    let client = live(id).ok();
    let Some(mut client) = client else {
        for entry in transcript::read(path)? {
            out.print(&entry)?;
        }
        out.finish()?;
        eprintln!("agent-comms: runtime {id} is not running; that is all of its transcript");
        return Ok(());
    };
    let request = client.send(Message::Request(Request::Follow))?;
    let next_seq = loop {
        let frame = client.read_frame()?;
        match frame.message {
            Message::Response(Response::Following { next_seq }) if frame.id == request => {
                break next_seq
            }
            Message::Response(Response::Error { message }) => bail!("{message}"),
            _ => {}
        }
    };
    // Subscribed first, then the file: nothing is missed or shown twice.
    for entry in transcript::read(path)?.iter().filter(|e| e.seq < next_seq) {
        out.print(entry)?;
    }
    while let Ok(frame) = client.read_frame() {
        match frame.message {
            Message::Event(Event::Transcript(entry)) => out.print(&entry)?,
            Message::Event(Event::Exited(_)) => break,
            _ => {}
        }
    }
    out.finish()
}

/// What a live ACP runtime's supervisor says of its session.
pub fn status(endpoint: &std::path::Path) -> Option<AcpStatus> {
    let mut client = Client::connect(endpoint).ok()?;
    match client.request(Request::AcpStatus).ok()? {
        Response::Acp(status) => Some(status),
        _ => None,
    }
}

/// `runtime show`'s lines for an ACP runtime.
pub fn print_status(status: &AcpStatus) {
    let agent = [&status.agent_name, &status.agent_version]
        .iter()
        .filter_map(|s| s.as_deref())
        .map(|s| display::one_line(s).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    println!(
        "{:<15} {}",
        "acp session",
        display::one_line(&status.session_id)
    );
    println!(
        "{:<15} {agent} (ACP protocol {})",
        "acp agent", status.protocol_version
    );
    let turn = match status.turn_started {
        Some(ms) => format!("running since {}", iso_from_unix_millis(ms)),
        None => "none running".into(),
    };
    println!("{:<15} {turn}; {} ended", "turn", status.turns);
    if let Some(bridge) = &status.bridge {
        println!("{:<15} {}", "acp bridge", bridge.display());
    }
    if status.clients.is_empty() {
        println!("{:<15} none attached", "clients");
    }
    for client in &status.clients {
        println!(
            "{:<15} client-{} {} uid {} via {} since {}",
            "client", client.seat, client.role, client.uid, client.via, client.since
        );
    }
}

/// A live ACP runtime's endpoint.
pub(super) fn live(id: &str) -> anyhow::Result<Client> {
    let name = runtime_id(id)?;
    match Client::for_session(&name) {
        Ok((client, record)) if record.kind == agent_comms_core::session::SessionKind::Acp => {
            Ok(client)
        }
        Ok(_) => bail!("session {id} is not an ACP runtime (see: agent-comms session ls)"),
        Err(_) => bail!(
            "ACP runtime {id} is not running; start it with: agent-comms runtime acp-serve {id} -- <ACP command>"
        ),
    }
}

/// Entries to standard output, readable or as JSON lines.
struct Output {
    view: Option<LogView>,
    stdout: std::io::Stdout,
}

impl Output {
    fn new(json: bool) -> Self {
        Self {
            view: (!json).then(LogView::new),
            stdout: std::io::stdout(),
        }
    }

    fn print(&mut self, entry: &Entry) -> anyhow::Result<()> {
        let mut out = self.stdout.lock();
        match &mut self.view {
            Some(view) => out.write_all(view.push(entry).as_bytes())?,
            None => writeln!(out, "{}", agent_comms_core::display::json(entry)?)?,
        }
        out.flush()?;
        Ok(())
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        if let Some(view) = &mut self.view {
            let mut out = self.stdout.lock();
            out.write_all(view.finish().as_bytes())?;
            out.flush()?;
        }
        Ok(())
    }
}
