//! `agent-comms`: sessions (and, as they land, runtimes, messages, adapters).

use std::path::PathBuf;

use agent_comms_core::adapter::monitor::Classifier;
use agent_comms_core::client::attach::{stream, StreamEnd, DEFAULT_DETACH_KEY};
use agent_comms_core::client::{Client, ClientError};
use agent_comms_core::control::{store_path, ControlError};
use agent_comms_core::display;
use agent_comms_core::ids::Id;
use agent_comms_core::keys::key_bytes;
use agent_comms_core::paths::ensure_runtime_root;
use agent_comms_core::pty::{size, SpawnSpec};
use agent_comms_core::session::{Registry, SessionKind, SessionName, SessionRecord};
use agent_comms_core::socket::is_dialable;
use agent_comms_core::socket::protocol::{Request, Response, SessionInfo, StreamMode};
use agent_comms_core::store::StoreError;
use agent_comms_core::supervisor::foreground::run_foreground;
use agent_comms_core::supervisor::{
    kill_grace, SupervisorConfig, DEFAULT_KEYBOARD_QUIET_MS, DEFAULT_KILL_GRACE,
};
use anyhow::{bail, Context};
use clap::{Args, FromArgMatches, Parser, Subcommand};
use serde_json::json;

#[derive(Parser)]
#[command(
    name = "agent-comms",
    version,
    about = "Supervise AI coding agents and REPLs in real pseudo-terminals",
    long_about = "Supervise AI coding agents and REPLs in real pseudo-terminals.\n\n\
        Each session is a program in a PTY owned by its own supervisor process, with a private \
        endpoint socket under /tmp/agent-comms-<uid>/ (AGENT_COMMS_RUNTIME_DIR overrides). \
        People attach to it; scripts snapshot, send and watch.",
    after_help = "Examples:
  agent-comms session new work -- bash
  agent-comms session ls
  agent-comms --actor alice send --to bob 'the tests pass'
  agent-comms doctor

Every command says more with --help; `agent-comms --actor ID <command>` works before any command."
)]
pub(super) struct Cli {
    /// Act as this agent (default: $AGENT_COMMS_ACTOR): the sender of a
    /// message, the agent of a runtime.
    #[arg(long, global = true, env = "AGENT_COMMS_ACTOR", value_name = "ID")]
    actor: Option<String>,
    #[command(subcommand)]
    command: Command,
}

/// The commands whose behaviour depends on `--actor`: every other one
/// ignores it, so their help does not offer it (it is still accepted, as
/// `agent-comms --actor A <command>` must work everywhere).
const ACTOR_USERS: &[&[&str]] = &[
    &["send"],
    &["message", "cancel"],
    &["runtime", "interactive-serve"],
    &["runtime", "acp-serve"],
    &["runtime", "configure"],
    &["mcp"],
    &["mcp", "config"],
];

/// The command line as parsed: [`Cli`], with the global `--actor` hidden
/// from the help of the commands that ignore it. Clap has no per-command
/// opt-out for a global argument, but it propagates one only to commands
/// that lack an argument of that id: each command gets its own copy
/// first, hidden where it is ignored (the value still reaches [`Cli`]).
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let actor = cmd
        .get_arguments()
        .find(|a| a.get_id() == "actor")
        .expect("the global --actor")
        .clone();
    let mut path = Vec::new();
    for sub in cmd.get_subcommands_mut() {
        own_actor(sub, &actor, &mut path);
    }
    cmd
}

/// `args` (argv, program first) parsed by [`command`].
pub(super) fn parse(args: &[String]) -> Result<Cli, clap::Error> {
    command()
        .try_get_matches_from(args)
        .and_then(|m| Cli::from_arg_matches(&m))
}

fn own_actor(cmd: &mut clap::Command, actor: &clap::Arg, path: &mut Vec<String>) {
    path.push(cmd.get_name().to_owned());
    let uses = ACTOR_USERS.iter().any(|p| p.iter().eq(path.iter()));
    *cmd = std::mem::take(cmd).arg(actor.clone().hide(!uses));
    for sub in cmd.get_subcommands_mut() {
        own_actor(sub, actor, path);
    }
    path.pop();
}

#[derive(Subcommand)]
enum Command {
    /// Start, list, attach to, watch, drive and end supervised sessions.
    #[command(subcommand)]
    Session(SessionCommand),
    /// Inspect, check and scaffold the adapters that describe providers and
    /// REPLs (TOML profiles, native and Wasm plugins).
    #[command(subcommand)]
    Adapters(super::adapters::AdaptersCommand),
    /// Runtimes: serve a provider CLI (in this terminal) or an ACP agent
    /// (headless) as an agent's runtime; configure, list, show, deliver,
    /// cancel, remove.
    #[command(subcommand)]
    Runtime(super::runtime::RuntimeCommand),
    /// Agents headless over the Agent Client Protocol: their transcripts.
    #[command(subcommand)]
    Acp(super::acp::AcpCommand),
    /// Send a message to another agent: stored, then announced in its
    /// runtime's prompt when idle (as the acting agent).
    Send(super::messages::SendArgs),
    /// Messages between agents: list, show (with body and evidence),
    /// redeliver, cancel. (`invocation` is an alias: the store calls a stored
    /// message an invocation, and its ids start with `inv_`.)
    #[command(subcommand, visible_alias = "invocation")]
    Message(super::messages::MessageCommand),
    /// Check runtimes, messages and adapters; print findings with the
    /// command that repairs each (changes nothing).
    #[command(after_help = "Examples:
  agent-comms doctor
  agent-comms doctor --json | jq -r '.[] | select(.severity == \"error\") | .repair'

Exit status: 0 no errors (warnings may be printed), 2 at least one error
finding, 1 the check itself could not run.")]
    Doctor {
        /// Print the findings as one JSON array: [{"code", "severity",
        /// "subject", "message", "repair"}].
        #[arg(long)]
        json: bool,
    },
    /// Review what the project directory brings (profiles, plugins,
    /// settings) and trust it: until then it is not used.
    Trust(super::trust::TrustArgs),
    /// The project's store: check it, see its status, or migrate it from
    /// SQLite to a PostgreSQL database several hosts share.
    #[command(subcommand)]
    Store(super::store::StoreCommand),
    /// Serve agent-comms to an agent as MCP tools on standard input and
    /// output (cells, sessions, messages, ACP runtimes); `mcp config`
    /// prints the snippet that configures an agent to start it.
    Mcp(super::mcp::McpArgs),
    /// Every session and runtime, and the latest messages, live in one
    /// screen: busy or idle, who is attached or typing, messages waiting and
    /// delivered, heartbeats.
    #[command(
        after_help = "Keys: Enter/a attach · m show a message · r redeliver · / filter · Tab switch lists · q quit\n\n\
        Examples:\n  agent-comms top"
    )]
    Top,
    /// Print the shell script that completes agent-comms, k and km
    /// (commands, flags, and live session, runtime and agent names).
    #[command(
        after_help = "Examples:\n  agent-comms completions bash > agent-comms.bash   # then in ~/.bashrc: source it\n  \
        agent-comms completions zsh > _agent-comms        # into a directory on $fpath\n\n\
        In ~/.bashrc, `source <(agent-comms completions bash)` keeps it current; \
        scripts/install-shell-extras installs completions and man pages for every shell found."
    )]
    Completions {
        /// The shell to print the script for.
        #[arg(value_enum)]
        shell: super::completions::Shell,
    },
    /// Print the manual page of agent-comms, k or km (roff, for man -l), or
    /// write every page, subcommands' included, to a directory.
    #[command(after_help = "Examples:\n  agent-comms man k | man -l -\n  \
        agent-comms man --out-dir ~/.local/share/man/man1")]
    Man {
        /// The page (default: agent-comms; with --out-dir: all three).
        #[arg(value_enum)]
        page: Option<super::man::Page>,
        /// Write the pages as NAME.1 files there instead of printing one.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum SessionCommand {
    /// Start CMD detached in a new session; returns once it runs.
    #[command(after_help = "Examples:
  agent-comms session new work -- bash
  agent-comms session new py --rows 40 --cols 120 -- python3 -q
  agent-comms session new build --cwd /tmp --env CI=1 -- bash --norc
  agent-comms session new demo --record demo.cast -- bash   # replay: asciinema play demo.cast")]
    New {
        /// The session's name: letters, digits, '.', '_' or '-'.
        name: String,
        #[command(flatten)]
        spawn: SpawnArgs,
        /// Print the session record as JSON: {"name", "kind", "pid",
        /// "supervisor_pid", "command", "cwd", "started", "socket"}.
        #[arg(long)]
        json: bool,
    },
    /// Run CMD in a new session in this terminal (raw pass-through), while
    /// other programs can snapshot, send and attach; exits with CMD's status.
    #[command(after_help = "Examples:
  agent-comms session run work -- bash
  agent-comms session run py -- python3 -q")]
    Run {
        /// The session's name: letters, digits, '.', '_' or '-'.
        name: String,
        #[command(flatten)]
        spawn: SpawnArgs,
    },
    /// List live sessions (every kind: sessions, k cells, runtimes).
    #[command(after_help = "Examples:
  agent-comms session ls
  agent-comms session ls --json | jq -r '.[].name'")]
    Ls {
        /// One JSON array of the session records, each with "clients",
        /// "rows" and "cols" added.
        #[arg(long)]
        json: bool,
    },
    /// Take over the session's terminal; the detach key gives it back.
    #[command(after_help = "Examples:
  agent-comms session attach work
  agent-comms session attach work --detach-key C-]")]
    Attach {
        /// The session's name (see `agent-comms session ls`).
        name: String,
        /// Leave with this key (a name such as C-\, C-], C-q).
        #[arg(long, default_value = "C-\\", value_name = "KEY")]
        detach_key: String,
        /// Draw no banner (which session, how to detach) on the last row.
        #[arg(long)]
        no_banner: bool,
    },
    /// Follow the session's screen read-only (Ctrl-C or q to stop).
    #[command(after_help = "Examples:
  agent-comms session watch work
  agent-comms session watch work --no-banner")]
    Watch {
        /// The session's name (see `agent-comms session ls`).
        name: String,
        /// Draw no header line (which session, how to stop) on the last row.
        #[arg(long)]
        no_banner: bool,
    },
    /// Print what the program printed, as plain text (escape sequences
    /// removed), from what the supervisor keeps (its last 256 KiB).
    #[command(after_help = "Examples:
  agent-comms session logs work           # everything kept
  agent-comms session logs work -n 20     # the last 20 lines
  agent-comms session logs work -f        # and then each new line as it is printed")]
    Logs {
        /// The session's name (see `agent-comms session ls`).
        name: String,
        /// Only the last N lines.
        #[arg(short = 'n', long = "lines", value_name = "N")]
        lines: Option<usize>,
        /// Keep printing what the program prints, until it ends (Ctrl-C
        /// to stop).
        #[arg(short = 'f', long)]
        follow: bool,
    },
    /// Print the current screen as text.
    #[command(after_help = "Examples:
  agent-comms session snapshot work
  agent-comms session snapshot work --json | jq -r '.lines[]'")]
    Snapshot {
        /// The session's name (see `agent-comms session ls`).
        name: String,
        /// The screen as JSON: {"rows", "cols", "cursor": [row, col],
        /// "title", "alternate_screen", "lines": [...]}.
        #[arg(long)]
        json: bool,
    },
    /// Busy or idle, as the session's adapter reads its screen now.
    #[command(after_help = "Examples:
  agent-comms session activity work
  agent-comms session activity work --json | jq -r .activity   # busy, idle or unknown")]
    Activity {
        /// The session's name (see `agent-comms session ls`).
        name: String,
        /// The reading as JSON: {"activity", "raw", "adapter", "by",
        /// "plugin_error", "unknown_for_ms"}.
        #[arg(long)]
        json: bool,
    },
    /// Write TEXT to the session as is (no Enter added).
    #[command(after_help = "Examples:
  agent-comms session send work 'echo hello'
  agent-comms session send work --keys Enter
  agent-comms session send work --keys C-c")]
    Send {
        /// The session's name (see `agent-comms session ls`).
        name: String,
        /// Treat each TEXT as a key name (Enter, C-c, Escape, Tab, Up …).
        #[arg(long)]
        keys: bool,
        /// What to write; several are joined with spaces (with --keys, one
        /// key each).
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
    },
    /// Type one line into the session with the delivery discipline (wait
    /// for idle and a quiet keyboard, verify echo and submission), as
    /// `runtime deliver` does for runtimes; prints the evidence.
    #[command(after_help = "Examples:
  agent-comms session deliver work 'echo hello'
  agent-comms session deliver work --timeout 10 --json 'echo hello'

Exit status: 0 delivered (echo and submission seen), 1 not delivered (busy
with --try, timed out, refused text, or an error; the line says which).")]
    Deliver {
        /// The session's name (see `agent-comms session ls`).
        name: String,
        #[command(flatten)]
        options: super::runtime::DeliverArgs,
        /// One line of text (no newlines or control characters).
        text: String,
    },
    /// End the session (SIGHUP/SIGTERM, then SIGKILL after the grace period)
    /// and wait until it is gone.
    #[command(after_help = "Examples:
  agent-comms session kill work
  agent-comms session kill work --grace 0.5 --json")]
    Kill {
        /// The session's name (see `agent-comms session ls`).
        name: String,
        /// Seconds to wait before SIGKILL (0 to 3600).
        #[arg(long, default_value_t = DEFAULT_KILL_GRACE.as_secs_f64(), value_name = "SECONDS")]
        grace: f64,
        /// How it ended as JSON: {"name", "exit_code", "signal"}.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
struct SpawnArgs {
    /// Working directory (default: the current one).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Set a variable for CMD (repeatable).
    #[arg(long = "env", value_name = "K=V")]
    env: Vec<String>,
    /// Terminal rows while nobody is attached (1 to 1000).
    #[arg(long, default_value_t = 24, value_name = "N")]
    rows: u16,
    /// Terminal columns while nobody is attached (1 to 1000).
    #[arg(long, default_value_t = 80, value_name = "N")]
    cols: u16,
    /// Record the session (output, input, resizes) as asciicast v2 to FILE,
    /// which `asciinema play` replays.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// The adapter that reads this program's screen (default: the one that
    /// claims the command; see `agent-comms adapters list`).
    #[arg(long, value_name = "ADAPTER")]
    provider: Option<String>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().collect();
    let cli = match parse(&args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            let asked = matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            );
            let fixed = (!asked)
                .then(|| super::dashes::missing(&args, takes_program))
                .flatten();
            if let Some(fixed) = fixed {
                eprintln!("agent-comms: put `--` before the program: {fixed}");
                return 2;
            }
            e.exit()
        }
    };
    let fixed = (!ids_agree(&cli))
        .then(|| super::dashes::missing(&args, takes_program))
        .flatten();
    if let Some(fixed) = fixed {
        eprintln!("agent-comms: put `--` before the program: {fixed}");
        return 2;
    }
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            let line = format!("agent-comms: {}", one_line(&located(e)));
            eprintln!("{}", super::look::error(&line));
            1
        }
    }
}

/// Whether `cli` runs a program given after `--` (and names its subject
/// consistently): what a `--` put in can turn a refused command into.
fn takes_program(cli: &Cli) -> bool {
    match &cli.command {
        Command::Session(SessionCommand::New { spawn, .. } | SessionCommand::Run { spawn, .. }) => {
            !spawn.command.is_empty()
        }
        Command::Runtime(cmd) => super::runtime::takes_program(cmd),
        _ => false,
    }
}

/// Whether the ids given to a serve agree; `--id x claude` makes the
/// program a second id.
fn ids_agree(cli: &Cli) -> bool {
    match &cli.command {
        Command::Runtime(cmd) => super::runtime::ids_agree(cmd),
        _ => true,
    }
}

/// A store error as told about the project's store: a query that finds
/// the file damaged does not know which file it read; this command does.
fn located(e: anyhow::Error) -> anyhow::Error {
    let store = match e.downcast_ref::<ControlError>() {
        Some(ControlError::Store(store)) => Some(store),
        _ => e.downcast_ref::<StoreError>(),
    };
    if !store.is_some_and(StoreError::is_damage) {
        return e;
    }
    let store = match e.downcast::<ControlError>() {
        Ok(ControlError::Store(store)) => store,
        Ok(other) => return other.into(),
        Err(e) => match e.downcast::<StoreError>() {
            Ok(store) => store,
            Err(e) => return e,
        },
    };
    store.at(&store_path()).into()
}

/// The error and its causes on one line. Core errors already quote their
/// source in their message, so a cause whose text is already there is not
/// repeated (`{e:#}` would print "Broken pipe: Broken pipe").
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    // The actor is typed into other agents' prompts (it names a message's
    // sender): held to the id rule before anything else happens.
    let actor = cli.actor.as_deref().map(Id::agent).transpose()?;
    match cli.command {
        Command::Session(cmd) => session(cmd),
        Command::Adapters(cmd) => super::adapters::run(cmd),
        Command::Runtime(cmd) => super::runtime::run(cmd, actor),
        Command::Acp(cmd) => super::acp::run(cmd),
        Command::Send(args) => super::messages::send(args, actor),
        Command::Message(cmd) => super::messages::message(cmd, actor),
        Command::Doctor { json } => super::doctor::run(json),
        Command::Trust(args) => super::trust::run(args),
        Command::Store(cmd) => super::store::run(cmd),
        Command::Mcp(args) => super::mcp::run(args, actor),
        Command::Top => super::top::run(),
        Command::Completions { shell } => super::completions::run(shell),
        Command::Man { page, out_dir } => super::man::run(page, out_dir),
    }
}

fn session(cmd: SessionCommand) -> anyhow::Result<i32> {
    match cmd {
        SessionCommand::New { name, spawn, json } => new(&name, spawn, json),
        SessionCommand::Run { name, spawn } => {
            let info = run_foreground(config(&name, spawn)?, None, |_| {})?;
            Ok(info.code.unwrap_or(128 + 1))
        }
        SessionCommand::Ls { json } => list(json),
        SessionCommand::Attach {
            name,
            detach_key,
            no_banner,
        } => attach(&name, &detach_key, no_banner),
        SessionCommand::Watch { name, no_banner } => {
            let (client, _) = connect(&name)?;
            let banner = format!("[watching {name}, read-only; q or Ctrl-C to stop]");
            let banner = (!no_banner).then_some(banner);
            report_end(
                &name,
                stream(client, StreamMode::Watch, DEFAULT_DETACH_KEY, banner)?,
            )
        }
        SessionCommand::Logs {
            name,
            lines,
            follow,
        } => super::logs::logs(connect(&name)?.0, &name, lines, follow),
        SessionCommand::Snapshot { name, json } => snapshot(&name, json),
        SessionCommand::Activity { name, json } => activity(&name, json),
        SessionCommand::Send { name, keys, text } => send(&name, keys, &text),
        SessionCommand::Deliver {
            name,
            options,
            text,
        } => {
            let (client, _) = connect(&name)?;
            super::runtime::deliver_with(client, &name, options, text)
        }
        SessionCommand::Kill { name, grace, json } => kill(&name, grace, json),
    }
}

fn new(name: &str, spawn: SpawnArgs, json: bool) -> anyhow::Result<i32> {
    let record = super::launch::start_detached(&config(name, spawn)?)?;
    if json {
        println!("{}", agent_comms_core::display::json(&record)?);
    } else {
        println!("started session {} (pid {})", record.name, record.pid);
    }
    Ok(0)
}

fn attach(name: &str, detach_key: &str, no_banner: bool) -> anyhow::Result<i32> {
    let key = match key_bytes(detach_key)?.as_slice() {
        [b] => *b,
        _ => bail!(
            "detach key {detach_key} is not a single byte; use a control key such as C-\\ or C-]"
        ),
    };
    let (client, _) = connect(name)?;
    let banner = format!("[attached to {name}; detach with {detach_key}]");
    let banner = (!no_banner).then_some(banner);
    report_end(name, stream(client, StreamMode::Interactive, key, banner)?)
}

fn snapshot(name: &str, json: bool) -> anyhow::Result<i32> {
    let (mut client, _) = connect(name)?;
    let Response::Snapshot(snap) = client.request(Request::Snapshot)? else {
        bail!("unexpected reply to snapshot");
    };
    if json {
        println!("{}", agent_comms_core::display::json(&snap)?);
        return Ok(0);
    }
    let last = snap
        .lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1);
    for line in &snap.lines[..last] {
        println!("{line}");
    }
    Ok(0)
}

fn activity(name: &str, json: bool) -> anyhow::Result<i32> {
    let (mut client, _) = connect(name)?;
    let Response::Activity(report) = client.request(Request::Activity)? else {
        bail!("unexpected reply to activity");
    };
    if json {
        println!("{}", agent_comms_core::display::json(&report)?);
        return Ok(0);
    }
    let by = match report.by {
        Classifier::Plugin => "its plugin",
        Classifier::Rules => "its rules",
        Classifier::Nothing => "nothing: it has no rules",
    };
    println!(
        "{} ({} adapter, read by {by})",
        report.activity.as_str(),
        report.adapter
    );
    if let Some(e) = &report.plugin_error {
        println!("plugin not used: {e}");
    }
    Ok(0)
}

/// `session send`: the text as is, or named keys.
fn send(name: &str, keys: bool, text: &[String]) -> anyhow::Result<i32> {
    let data = if keys {
        let mut bytes = Vec::new();
        for k in text {
            bytes.extend(key_bytes(k)?);
        }
        String::from_utf8(bytes).expect("key bytes are ASCII")
    } else {
        text.join(" ")
    };
    let (mut client, _) = connect(name)?;
    client.request(Request::Write { data })?;
    Ok(0)
}

fn kill(name: &str, grace: f64, json: bool) -> anyhow::Result<i32> {
    let grace = kill_grace(grace)?;
    let (mut client, record) = connect(name)?;
    let info = match client.kill(record.supervisor_pid, grace)? {
        Response::Exited(info) => info,
        other => bail!("unexpected reply to kill: {other:?}"),
    };
    if json {
        println!(
            "{}",
            agent_comms_core::display::json(
                &json!({"name": name, "exit_code": info.code, "signal": info.signal})
            )?
        );
    } else {
        println!("killed session {name} ({info})");
    }
    Ok(0)
}

fn config(name: &str, spawn: SpawnArgs) -> anyhow::Result<SupervisorConfig> {
    let name = SessionName::parse(name)?;
    let (rows, cols) = size::checked(spawn.rows, spawn.cols)?;
    let cwd = match spawn.cwd {
        Some(dir) => dir,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let cwd = cwd
        .canonicalize()
        .with_context(|| format!("working directory {} does not exist", cwd.display()))?;
    let env = spawn
        .env
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
            _ => bail!("--env takes K=V, got '{kv}'"),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let command_line = spawn.command.join(" ");
    let registry = agent_comms_adapters::registry();
    let adapter = match &spawn.provider {
        Some(name) => Some(registry.named(name)?.spec()),
        None => {
            agent_comms_adapters::say_untrusted(&registry);
            registry.for_command(&command_line).map(|e| e.spec())
        }
    };
    Ok(SupervisorConfig {
        name,
        kind: SessionKind::Session,
        spawn: SpawnSpec {
            argv: spawn.command,
            cwd,
            env,
            env_remove: Vec::new(),
            rows,
            cols,
            record: spawn.record.map(super::absolute),
        },
        command_line,
        kill_grace_ms: DEFAULT_KILL_GRACE.as_millis() as u64,
        cells: None,
        adapter,
        keyboard_quiet_ms: DEFAULT_KEYBOARD_QUIET_MS,
    })
}

/// A client for `name`, with a clear error for missing and stale sessions.
fn connect(name: &str) -> anyhow::Result<(Client, SessionRecord)> {
    let name = SessionName::parse(name)?;
    match Client::for_session(&name) {
        Ok(ok) => Ok(ok),
        Err(ClientError::Session(agent_comms_core::session::SessionError::NotFound(n))) => {
            bail!("no session '{n}'; see running ones with: agent-comms session ls")
        }
        Err(e) => Err(e.into()),
    }
}

fn list(json: bool) -> anyhow::Result<i32> {
    let registry = Registry::new(ensure_runtime_root()?, is_dialable);
    let records = registry.live(&mut |stale| {
        eprintln!(
            "agent-comms: removed stale session '{}' (its supervisor, pid {}, is gone)",
            stale.name, stale.supervisor_pid
        );
    })?;
    let infos: Vec<SessionInfo> = records.iter().filter_map(info_of).collect();
    if json {
        println!("{}", agent_comms_core::display::json(&infos)?);
    } else if infos.is_empty() {
        println!("no sessions");
    } else {
        println!(
            "{:<20} {:<11} {:>8} {:>7}  {:<13} COMMAND",
            "NAME", "KIND", "PID", "CLIENTS", "STARTED"
        );
        for i in &infos {
            println!(
                "{:<20} {:<11} {:>8} {:>7}  {:<13} {}",
                // As a str: a name's Display writes it without the padding.
                i.record.name.as_str(),
                i.record.kind.as_str(),
                i.record.pid,
                i.clients,
                super::look::ago_iso(&i.record.started),
                display::one_line(&i.record.command)
            );
        }
    }
    Ok(0)
}

/// Live details from the supervisor (clients, size); a supervisor that does
/// not answer is left out rather than guessed at.
fn info_of(record: &SessionRecord) -> Option<SessionInfo> {
    let mut client = Client::connect(&record.socket).ok()?;
    match client.request(Request::Info).ok()? {
        Response::Info(info) => Some(info),
        _ => None,
    }
}

fn report_end(name: &str, end: StreamEnd) -> anyhow::Result<i32> {
    match end {
        StreamEnd::Detached => eprintln!("[detached from {name}; it keeps running]"),
        StreamEnd::Exited(info) => eprintln!("[session {name} ended: {info}]"),
        StreamEnd::Lost => bail!("lost the connection to session '{name}'"),
    }
    Ok(0)
}
