//! `k`: persistent REPL cells, compatible with agent-tty 0.1.5's command line
//! (docs/cells-contract.md). Arguments are parsed by hand because the contract
//! fixes every error text, and `k --version` must cost next to nothing.

use std::io::Write;
use std::path::{Path, PathBuf};

use agent_comms_core::cells::FrameMode;
use agent_comms_core::client::attach::{stream, StreamEnd, DEFAULT_DETACH_KEY};
use agent_comms_core::client::{Client, ClientError};
use agent_comms_core::paths::ensure_runtime_root;
use agent_comms_core::session::{
    Liveness, Registry, SessionError, SessionKind, SessionName, SessionRecord,
};
use agent_comms_core::socket::codec::Message;
use agent_comms_core::socket::is_dialable;
use agent_comms_core::socket::protocol::{
    CellEvent, CellReply, CellState, Event, Request, Response, StreamMode,
};
use agent_comms_core::supervisor::cell_session::{self, CellSession};
use agent_comms_core::supervisor::DEFAULT_KILL_GRACE;

use super::cells_format::{cell_json, error_json, py_repr};

pub(super) const USAGE: &str = "\
k — persistent REPL cells on agent-comms supervisors (agent-tty 0.1.5 compatible)

Usage:
  k new    <session> [cmd...] [--prompt=X]   start a session (default: bash); idempotent
  k fire   [-t N] [session] <code>           send code, return at once (default 300 s)
  k poll   [session] [cell_id]               state of a cell (O(1))
  k run    [-j] [-t N] [session] <code>      send code, wait for the frame end (default 30 s)
  k await  ...                               alias for run
  k notify [session] <message>               a note in the session's event stream
  k int    [session]                         Ctrl-C; the running cell resolves as interrupted
  k kill   <session>                         end the session
  k ls                                       live k sessions
  k status [session]                         health and the next useful command
  k watch  [session]                         live filtered view (Ctrl-C stops)
  k history [-n N] [session]                 the last N*5 lines of that view (default 5)
  k attach <session>                         take over the terminal; Ctrl-\\ detaches
  k --version                                print the version (also -V, version)

Session: explicit argument > K_SESSION > the only live session.

Frame detection (--prompt):
  not set     shell integration for known REPLs (bash, sh, zsh, python, node, gdb,
              sqlite3, psql): exact frame ends with exit status; otherwise repeat mode
              (5 Enters, 5 identical lines end the frame)
  \"string\"    exact prompt match (e.g. --prompt=\"(gdb)\")
  ./file      hook: k feeds output lines to it; its exit ends the frame

Examples:
  k new py python3
  k run py 'print(6 * 7)'
  k fire py 'import time; time.sleep(0.2)'
  k poll py
  k history py
  k kill py
";

pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut out = std::io::stdout().lock();
    let code = dispatch(&args, &mut out);
    let _ = out.flush();
    code
}

/// Exits the process after `ERR invalid session name` (to stderr, as the
/// contract says), like agent-tty's validate_name.
fn valid_name(name: &str) -> SessionName {
    match SessionName::parse(name) {
        Ok(n) => n,
        Err(_) => {
            eprintln!("ERR invalid session name: {}", py_repr(name));
            std::process::exit(1);
        }
    }
}

fn dispatch(args: &[String], out: &mut dyn Write) -> i32 {
    let Some((verb, rest)) = args.split_first() else {
        let _ = write!(out, "{USAGE}");
        return 0;
    };
    match verb.as_str() {
        "-h" | "--help" => {
            let _ = write!(out, "{USAGE}");
            0
        }
        "--version" | "-V" | "version" => {
            let _ = writeln!(out, "agent-comms {}", env!("CARGO_PKG_VERSION"));
            0
        }
        "new" if !rest.is_empty() => new(rest, out),
        "kill" if !rest.is_empty() => kill(&valid_name(&rest[0]), out),
        "ls" => ls(out),
        "run" | "await" => run(rest, out),
        // Without code, fire prints its own usage line (the contract's).
        "fire" => fire(rest, out),
        "poll" => with_session(rest.first(), out, |s, out| poll(s, rest.get(1), out)),
        "notify" if !rest.is_empty() => notify(rest, out),
        "int" => with_session(rest.first(), out, interrupt),
        "status" => with_session(rest.first(), out, status),
        "watch" => with_session(rest.first(), out, watch),
        "history" => history(rest, out),
        "attach" if !rest.is_empty() => attach(&valid_name(&rest[0]), out),
        _ => {
            let _ = write!(out, "{USAGE}");
            1
        }
    }
}

/// Explicit argument, else K_SESSION, else the only live `k` session.
fn resolve(explicit: Option<&String>) -> Option<SessionName> {
    if let Some(name) = explicit {
        return Some(valid_name(name));
    }
    if let Some(env) = std::env::var("K_SESSION").ok().filter(|s| !s.is_empty()) {
        return Some(valid_name(&env));
    }
    let mut live = live_sessions().ok()?;
    (live.len() == 1).then(|| live.remove(0))
}

fn with_session(
    explicit: Option<&String>,
    out: &mut dyn Write,
    f: impl FnOnce(&SessionName, &mut dyn Write) -> i32,
) -> i32 {
    match resolve(explicit) {
        Some(s) => f(&s, out),
        None => err(out, "no session found; use k ls or k new <session> bash"),
    }
}

fn err(out: &mut dyn Write, message: &str) -> i32 {
    let _ = writeln!(out, "ERR {message}");
    1
}

fn no_session(name: &SessionName) -> String {
    format!("no session '{name}'; use k new {name} bash")
}

/// The live cell sessions, sorted by name (stale ones are cleaned up).
fn live_sessions() -> Result<Vec<SessionName>, ClientError> {
    let registry = Registry::new(ensure_runtime_root()?, is_dialable);
    Ok(registry
        .live(&mut |_| {})?
        .into_iter()
        .filter(|r| r.kind == SessionKind::Cell)
        .map(|r| r.name)
        .collect())
}

enum Connect {
    Ok(Client, SessionRecord),
    Missing,
    Failed(String),
}

fn connect(name: &SessionName) -> Connect {
    match Client::for_session(name) {
        Ok((c, record)) => Connect::Ok(c, record),
        Err(ClientError::Session(SessionError::NotFound(_)) | ClientError::Stale { .. }) => {
            Connect::Missing
        }
        Err(e) => Connect::Failed(e.to_string()),
    }
}

/// Sends one request to a session; errors become the JSON or text error the
/// caller prints.
fn ask(name: &SessionName, request: Request) -> Result<Response, String> {
    match connect(name) {
        Connect::Ok(mut c, _) => c.request(request).map_err(|e| e.to_string()),
        Connect::Missing => Err(no_session(name)),
        Connect::Failed(e) => Err(e),
    }
}

/// Parses a positive integer flag value, printing the contract's error.
fn positive(raw: Option<&String>, flag: &str, usage: &str, out: &mut dyn Write) -> Option<u64> {
    match raw.and_then(|r| r.parse::<i64>().ok()) {
        Some(v) if v > 0 => Some(v as u64),
        _ if raw.is_none() => {
            let _ = writeln!(out, "{usage}");
            None
        }
        _ => {
            let _ = writeln!(out, "ERR {flag} must be a positive integer");
            let _ = writeln!(out, "{usage}");
            None
        }
    }
}

/// `k new`'s words: `--prompt=X`, `--record=FILE` and the command.
struct NewArgs<'a> {
    prompt: Option<String>,
    record: Option<PathBuf>,
    words: Vec<&'a str>,
}

impl<'a> NewArgs<'a> {
    fn parse(rest: &'a [String]) -> Self {
        let mut args = Self {
            prompt: None,
            record: None,
            words: Vec::new(),
        };
        for a in rest {
            if let Some(p) = a.strip_prefix("--prompt=") {
                args.prompt = Some(p.to_owned());
            } else if let Some(path) = a.strip_prefix("--record=") {
                let path = Path::new(path);
                args.record = Some(match std::env::current_dir() {
                    Ok(cwd) if path.is_relative() => cwd.join(path),
                    _ => path.to_owned(),
                });
            } else {
                args.words.push(a.as_str());
            }
        }
        args
    }

    /// The command to run (default: bash).
    fn command_line(&self) -> String {
        if self.words.is_empty() {
            "bash".to_owned()
        } else {
            self.words.join(" ")
        }
    }
}

fn new(rest: &[String], out: &mut dyn Write) -> i32 {
    let name = valid_name(&rest[0]);
    let args = NewArgs::parse(&rest[1..]);
    let registry = match ensure_runtime_root() {
        Ok(root) => Registry::new(root, is_dialable),
        Err(e) => return err(out, &e.to_string()),
    };
    if let Some(Liveness::Live(record)) = registry.check(&name) {
        if record.kind != SessionKind::Cell {
            return err(
                out,
                &format!(
                    "session '{name}' exists but is not managed by k (it is a {})",
                    record.kind.as_str()
                ),
            );
        }
        let _ = writeln!(out, "OK {name} (alive)");
        return 0;
    }
    let frame = match args.prompt.as_deref().map(parse_prompt).transpose() {
        Ok(f) => f,
        Err(message) => return err(out, &message),
    };
    let command_line = args.command_line();
    if let Some(program) = cell_session::missing_program(&command_line) {
        return err(out, &format!("create failed: command not found: {program}"));
    }
    let files_dir = registry.root().join(format!("{name}.cells"));
    let adapters = agent_comms_adapters::registry();
    agent_comms_adapters::say_untrusted(&adapters);
    let config = CellSession {
        name: name.clone(),
        profile: adapters
            .for_command(&command_line)
            .map(|entry| &entry.profile),
        command_line,
        cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        frame,
        record: args.record,
        files_dir,
    }
    .config();
    if let Err(e) = super::launch::start_detached(&config) {
        return err(out, &format!("create failed: {e:#}"));
    }
    match config.cells.as_ref().map(|c| &c.frame) {
        Some(FrameMode::Prompt(p)) => writeln!(out, "OK {name} prompt={}", py_repr(p)),
        Some(FrameMode::Hook(h)) => writeln!(
            out,
            "OK {name} prompt={}",
            py_repr(&h.display().to_string())
        ),
        _ => writeln!(out, "OK {name}"),
    }
    .map_or(1, |_| 0)
}

/// `--prompt=X`: a hook when X names a path (made absolute and checked
/// now), else an exact prompt.
fn parse_prompt(raw: &str) -> Result<FrameMode, String> {
    if raw.contains('/') {
        let path = Path::new(raw);
        let abs = normalize(&if path.is_absolute() {
            path.to_owned()
        } else {
            std::env::current_dir()
                .map_err(|e| e.to_string())?
                .join(path)
        });
        let shown = abs.display().to_string();
        let meta = std::fs::metadata(&abs).map_err(|_| format!("hook not found: {shown}"))?;
        if !meta.is_file() {
            return Err(format!("hook not found: {shown}"));
        }
        if !agent_comms_core::os::is_executable(&abs) {
            return Err(format!("hook not executable: {shown}"));
        }
        return Ok(FrameMode::Hook(abs));
    }
    let p = raw.trim();
    if p.is_empty() {
        return Err("empty prompt".into());
    }
    Ok(FrameMode::Prompt(p.to_owned()))
}

/// `.` and `..` resolved lexically, as Python's `os.path.abspath` does (so
/// `--prompt=./hook` shows as `/dir/hook`, like agent-tty).
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Ends the session; "OK killed" once its supervisor is gone too.
fn kill(name: &SessionName, out: &mut dyn Write) -> i32 {
    if let Connect::Ok(mut client, record) = connect(name) {
        let _ = client.kill(record.supervisor_pid, DEFAULT_KILL_GRACE);
    }
    let _ = writeln!(out, "OK killed {name}");
    0
}

fn ls(out: &mut dyn Write) -> i32 {
    match live_sessions() {
        Ok(names) if names.is_empty() => writeln!(out, "no sessions").map_or(1, |_| 0),
        Ok(names) => {
            for n in names {
                let _ = writeln!(out, "{n}");
            }
            0
        }
        Err(e) => err(out, &e.to_string()),
    }
}

/// `[-j] [-t N]` flags, then `[session] <code>`.
struct CellArgs {
    json: bool,
    timeout_s: u64,
    session: Option<SessionName>,
    code: String,
}

fn cell_args(
    mut rest: &[String],
    allow_json: bool,
    default_timeout: u64,
    usage: &str,
    out: &mut dyn Write,
) -> Result<CellArgs, i32> {
    let mut json = false;
    let mut timeout_s = default_timeout;
    while let Some(flag) = rest.first().filter(|a| a.starts_with('-')) {
        match flag.as_str() {
            "-t" => {
                timeout_s = positive(rest.get(1), "-t", usage, out).ok_or(1)?;
                rest = &rest[2..];
            }
            "-j" if allow_json => {
                json = true;
                rest = &rest[1..];
            }
            _ => break,
        }
    }
    let (session, code) = match rest {
        [s, c, ..] => (Some(valid_name(s)), c.clone()),
        [c] => (resolve(None), c.clone()),
        [] => {
            let _ = writeln!(out, "{usage}");
            return Err(1);
        }
    };
    Ok(CellArgs {
        json,
        timeout_s,
        session,
        code,
    })
}

fn run(rest: &[String], out: &mut dyn Write) -> i32 {
    let usage = "usage: k run [-j] [-t N] [session] <code>";
    let args = match cell_args(rest, true, 30, usage, out) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let Some(session) = args.session else {
        return err(out, "no session found; use k ls or k new <session> bash");
    };
    let emit = |out: &mut dyn Write, reply: &CellReply| {
        let _ = if args.json {
            writeln!(out, "{}", cell_json(reply))
        } else {
            writeln!(out, "{}", reply.output.as_deref().unwrap_or(""))
        };
    };
    let (mut client, record) = match connect(&session) {
        Connect::Ok(c, record) => (c, record),
        Connect::Missing => return emit_error(out, args.json, &no_session(&session)),
        Connect::Failed(e) => return emit_error(out, args.json, &format!("send failed: {e}")),
    };
    let interrupter = super::interrupt::on_ctrl_c(&record.socket);
    let result = client.request(Request::CellRun {
        code: args.code,
        timeout_ms: args.timeout_s * 1000,
        wait: true,
    });
    drop(interrupter);
    match result {
        Ok(Response::Cell(reply)) => {
            emit(out, &reply);
            i32::from(reply.status == CellState::Error)
        }
        Ok(other) => emit_error(out, args.json, &format!("unexpected reply: {other:?}")),
        Err(ClientError::Server(message)) => emit_error(out, args.json, &message),
        Err(e) => emit_error(out, args.json, &format!("send failed: {e}")),
    }
}

fn emit_error(out: &mut dyn Write, json: bool, message: &str) -> i32 {
    let _ = if json {
        writeln!(out, "{}", error_json(message))
    } else {
        writeln!(out, "{message}")
    };
    1
}

fn fire(rest: &[String], out: &mut dyn Write) -> i32 {
    let usage = "usage: k fire [-t N] [session] <code>";
    let args = match cell_args(rest, false, 300, usage, out) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let Some(session) = args.session else {
        return err(out, "no session found; use k ls or k new <session> bash");
    };
    let request = Request::CellRun {
        code: args.code,
        timeout_ms: args.timeout_s * 1000,
        wait: false,
    };
    match ask(&session, request) {
        Ok(Response::Cell(reply)) => {
            let _ = writeln!(out, "{}", cell_json(&reply));
            i32::from(reply.status == CellState::Error)
        }
        Ok(other) => emit_error(out, true, &format!("unexpected reply: {other:?}")),
        Err(message) => emit_error(out, true, &message),
    }
}

fn poll(session: &SessionName, cell_id: Option<&String>, out: &mut dyn Write) -> i32 {
    match ask(
        session,
        Request::CellPoll {
            cell_id: cell_id.cloned(),
            keep: false,
        },
    ) {
        Ok(Response::Cell(reply)) => {
            let _ = writeln!(out, "{}", cell_json(&reply));
            let hint = reply.status == CellState::Timeout
                && reply.output.as_deref().is_some_and(|o| !o.is_empty());
            i32::from(hint || (reply.status == CellState::Error && !is_settled_result(&reply)))
        }
        Ok(other) => emit_error(out, true, &format!("unexpected reply: {other:?}")),
        Err(message) => emit_error(out, true, &message),
    }
}

/// A cell that ended in error (interrupted, session exited) is a result
/// handed out by poll like any other: agent-tty exits 0 for it.
fn is_settled_result(reply: &CellReply) -> bool {
    reply.cell_id.is_some()
        && !matches!(
            reply.output.as_deref(),
            Some("unknown cell") | Some("result missing")
        )
}

fn notify(rest: &[String], out: &mut dyn Write) -> i32 {
    // `k notify s msg…` when s is a live session, else the whole rest is the
    // message for the resolved session (as agent-tty does).
    let explicit = (rest.len() >= 2)
        .then(|| SessionName::parse(&rest[0]).ok())
        .flatten()
        .filter(|n| matches!(connect(n), Connect::Ok(..)));
    let (session, message) = match explicit {
        Some(s) => (Some(s), rest[1..].join(" ")),
        None => (resolve(None), rest.join(" ")),
    };
    let Some(session) = session else {
        return err(out, "no session found; use k ls or k new <session> bash");
    };
    let from = format!("{}@k:{}", parent_name(), std::process::id());
    match ask(
        &session,
        Request::Notify {
            from,
            message: message.clone(),
        },
    ) {
        Ok(_) => writeln!(out, "OK notified: {message}").map_or(1, |_| 0),
        Err(e) => err(out, &e),
    }
}

fn parent_name() -> String {
    agent_comms_core::os::parent_name().unwrap_or_else(|| "?".into())
}

fn interrupt(session: &SessionName, out: &mut dyn Write) -> i32 {
    match ask(session, Request::CellInterrupt) {
        Ok(_) => writeln!(out, "OK").map_or(1, |_| 0),
        Err(e) => err(out, &e),
    }
}

fn status(session: &SessionName, out: &mut dyn Write) -> i32 {
    let reply = match ask(session, Request::CellStatus) {
        Ok(Response::CellStatus(s)) => s,
        Ok(other) => return err(out, &format!("unexpected reply: {other:?}")),
        Err(e) => return err(out, &e),
    };
    let s = session;
    let id = reply.cell_id.unwrap_or_default();
    let line = match reply.state.as_str() {
        "running" => format!("state=running cell={id} next='k poll {s} {id} or k int {s}'"),
        "done" => format!("state=done cell={id} next='k poll {s} {id}'"),
        "timeout" => format!("state=timeout cell={id} next='k int {s} or k kill {s}'"),
        _ => format!("state=idle next='k run {s} <code>'"),
    };
    writeln!(out, "OK {s} pipe=ok {line}").map_or(1, |_| 0)
}

fn watch(session: &SessionName, out: &mut dyn Write) -> i32 {
    let mut client = match connect(session) {
        Connect::Ok(c, _) => c,
        Connect::Missing => return err(out, &no_session(session)),
        Connect::Failed(e) => return err(out, &e),
    };
    let _ = writeln!(out, "\x1b[2mwatching {session} (ctrl-c to stop)\x1b[0m\n");
    let _ = out.flush();
    if client
        .send(Message::Request(Request::Subscribe {
            history: false,
            lines: true,
        }))
        .is_err()
    {
        return err(out, "watch failed: the supervisor closed the connection");
    }
    // Ctrl-C ends the view; the default SIGINT action does that cleanly
    // since nothing here needs undoing.
    loop {
        match client.read_frame() {
            Ok(frame) => match frame.message {
                Message::Event(Event::Cell(CellEvent::Line { text })) => {
                    let _ = writeln!(out, "{text}");
                    let _ = out.flush();
                }
                Message::Event(Event::Cell(CellEvent::Closed { .. })) => {
                    let _ = writeln!(out, "\x1b[2msession {session} ended\x1b[0m");
                    return 0;
                }
                _ => {}
            },
            Err(_) => return 0,
        }
    }
}

fn history(mut rest: &[String], out: &mut dyn Write) -> i32 {
    let mut n = 5;
    if rest.first().map(String::as_str) == Some("-n") {
        let usage = "usage: k history [-n N] [session]";
        match positive(rest.get(1), "-n", usage, out) {
            Some(v) => n = v as usize,
            None => return 1,
        }
        rest = &rest[2..];
    }
    with_session(rest.first(), out, |s, out| {
        match ask(s, Request::History { lines: n * 5 }) {
            Ok(Response::Lines { lines }) => {
                for l in lines {
                    let _ = writeln!(out, "{l}");
                }
                0
            }
            Ok(other) => err(out, &format!("unexpected reply: {other:?}")),
            Err(e) => err(out, &e),
        }
    })
}

fn attach(session: &SessionName, out: &mut dyn Write) -> i32 {
    let client = match connect(session) {
        Connect::Ok(c, _) => c,
        Connect::Missing => return err(out, &no_session(session)),
        Connect::Failed(e) => return err(out, &e),
    };
    let banner = format!("[attached to {session}; detach with Ctrl-\\]");
    match stream(
        client,
        StreamMode::Interactive,
        DEFAULT_DETACH_KEY,
        Some(banner),
    ) {
        Ok(StreamEnd::Detached) => {
            eprintln!("[detached from {session}; it keeps running]");
            0
        }
        Ok(StreamEnd::Exited(info)) => {
            eprintln!("[session {session} ended: {info}]");
            0
        }
        Ok(StreamEnd::Lost) => err(out, &format!("lost the connection to session '{session}'")),
        Err(e) => err(out, &e.to_string()),
    }
}
