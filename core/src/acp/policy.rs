//! What an ACP agent may do, fixed before it starts (`--policy FILE`).
//!
//! An agent run over ACP asks its client for things: to approve a tool call
//! (`session/request_permission`), to read or write a file
//! (`fs/read_text_file`, `fs/write_text_file`), to run a command
//! (`terminal/*`). The supervisor is that client, and this policy is how it
//! answers. It is read once, from a file the user names, and nothing sent
//! over ACP can change it: an attached client is a new source of
//! instructions, but it cannot widen the run.
//!
//! # The file (TOML)
//!
//! ```toml
//! [permissions]
//! default = "reject_once"       # when no rule matches: allow_once | allow_always | reject_once | reject_always | ask
//! ask_timeout = "60s"           # "ask" waits this long for an attached client, then answers ask_fallback
//! ask_fallback = "reject_once"  # any answer but "ask"
//!
//! [[permissions.rule]]          # first match wins; a rule needs tool_kind, title or both
//! tool_kind = "read"            # read edit delete move search execute think fetch switch_mode other
//! title = "^Read "              # a regex searched in the tool call's title
//! answer = "allow_once"
//!
//! [fs]
//! read = ["."]                  # roots served for fs/read_text_file: relative to the session's cwd, or absolute
//! write = []                    # roots served for fs/write_text_file
//!
//! [terminal]
//! serve = false                 # terminal/* requests; when true, roots bound the command's cwd
//! roots = ["."]
//!
//! [end]
//! when = "agent-exit"           # agent-exit | first-turn | idle | last-client-left | no-client
//! idle = "30m"                  # with when = "idle": end after this long with no turn
//! no_client = "10m"             # with when = "no-client": end after this long with no client attached
//!
//! [clients]                     # who may attach to the bridge (agent-comms acp attach)
//! controller_uids = []          # besides the owner, who always may: uids that may prompt and answer
//! controller_gids = []          # ... and groups
//! observer_uids = []            # uids (and gids) that may only watch
//! observer_gids = []
//! socket = "/srv/acp/rt.sock"   # needed with any of the lists: a bridge socket others can reach
//! busy = "refuse"               # a client's prompt while a turn runs: refuse | queue
//! new_session = "join"          # a client's session/new: join the running session | fresh (a session of its own)
//!
//! [session]
//! mode = "default"              # session/set_mode once the session is open (the agent's own mode ids)
//! ```
//!
//! Every section and key may be left out; unknown keys are errors, so a
//! misspelt key is never silently a default. Durations are a number and a
//! unit: `500ms`, `60s`, `30m`, `2h`. A broken file is one line,
//! `FILE:LINE:COLUMN: FIELD: what is wrong; what to do`, and nothing starts.
//!
//! Permissions are answered by option **kind**, because the option ids are
//! each agent's own (`once`, `allow-once`, `allow_once`…); [`choose_option`]
//! maps the kind to what the agent offered, never to a wider grant.
//!
//! # The default is safe
//!
//! With no `--policy` (or an empty file) every permission is answered
//! `reject_once`, no file may be read or written, no terminal is served, and
//! the run ends when the agent exits. An agent that needs nothing from its
//! client (most run their tools themselves) works as before; one that asks
//! is told no, and its turn goes on. Rejecting *once* rather than always
//! leaves the agent free to ask again after the user widened the policy,
//! and serving nothing means the client capabilities declared at
//! `initialize` promise nothing the user did not write down.
//!
//! Serving a terminal lets the agent run any command as the user: its
//! `roots` bound only the directory the command starts in, not what it
//! does.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use regex::Regex;
use serde::Deserialize;
use toml::Spanned;

use crate::adapter::profile::{line_col, regex_problem};

/// The most a policy file may hold.
const MAX_POLICY_BYTES: u64 = 1 << 20;
/// How long `ask` waits for an attached client when the file does not say.
const DEFAULT_ASK_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `when = "idle"` waits when the file does not say.
const DEFAULT_IDLE: Duration = Duration::from_secs(30 * 60);
/// ACP's tool kinds (v1 `ToolKind`), as they appear on the wire.
const TOOL_KINDS: [&str; 10] = [
    "read",
    "edit",
    "delete",
    "move",
    "search",
    "execute",
    "think",
    "fetch",
    "switch_mode",
    "other",
];

/// A policy file that cannot be used, located in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
pub struct PolicyError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// `FIELD: what is wrong; what to do`.
    pub message: String,
}

/// Why an agent's request is not served: one line, for the JSON-RPC error
/// and the transcript.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

/// The kind of a permission option (ACP's `PermissionOptionKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    AllowOnce,
    AllowAlways,
    RejectOnce,
    RejectAlways,
}

impl OptionKind {
    /// The kind as ACP and the policy file spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            OptionKind::AllowOnce => "allow_once",
            OptionKind::AllowAlways => "allow_always",
            OptionKind::RejectOnce => "reject_once",
            OptionKind::RejectAlways => "reject_always",
        }
    }

    /// The kinds to answer with, best first, when `self` is wanted: the
    /// same, then only narrower ones.
    fn acceptable(self) -> &'static [OptionKind] {
        use OptionKind::*;
        match self {
            AllowAlways => &[AllowAlways, AllowOnce],
            // No narrower allow exists: refusing is narrower than allowing.
            AllowOnce => &[AllowOnce, RejectOnce, RejectAlways],
            RejectOnce => &[RejectOnce, RejectAlways],
            RejectAlways => &[RejectAlways, RejectOnce],
        }
    }
}

/// How a permission request is answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Option(OptionKind),
    /// Wait up to `timeout` for an attached client to answer, then answer
    /// `fallback`.
    Ask {
        timeout: Duration,
        fallback: OptionKind,
    },
}

/// When the run ends, besides `session kill`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    AgentExit,
    /// After the first turn's stop reason.
    FirstTurn,
    /// After this long with no turn running.
    Idle(Duration),
    /// When the last attached client leaves (one must have attached).
    LastClientLeft,
    /// After this long with no client attached.
    NoClient(Duration),
}

/// Who may attach to the bridge besides the owner, and how prompts from
/// clients meet a running turn (`[clients]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Clients {
    pub controller_uids: Vec<u32>,
    pub controller_gids: Vec<u32>,
    pub observer_uids: Vec<u32>,
    pub observer_gids: Vec<u32>,
    /// Where the bridge listens when others may attach: the runtime
    /// directory is the owner's alone, so they could not reach it there.
    pub socket: Option<PathBuf>,
    /// A client's prompt while a turn runs waits for it (else: refused).
    pub queue_when_busy: bool,
    /// `session/new` from a client opens a session of its own (else: it
    /// joins the running one).
    pub fresh_sessions: bool,
}

impl Clients {
    /// Whether anyone but the owner may attach.
    pub fn admits_others(&self) -> bool {
        !(self.controller_uids.is_empty()
            && self.controller_gids.is_empty()
            && self.observer_uids.is_empty()
            && self.observer_gids.is_empty())
    }
}

/// The policy of one run; [`Policy::default`] is the safe one.
#[derive(Debug, Clone)]
pub struct Policy {
    default: Answer,
    rules: Vec<Rule>,
    /// Roots as written: relative ones resolve against the session's cwd.
    fs_read: Vec<PathBuf>,
    fs_write: Vec<PathBuf>,
    /// `Some` when terminals are served, with the roots a command's cwd
    /// must be under.
    terminal: Option<Vec<PathBuf>>,
    end: End,
    /// The agent's session mode to set once its session is open.
    mode: Option<String>,
    clients: Clients,
}

#[derive(Debug, Clone)]
struct Rule {
    tool_kind: Option<String>,
    title: Option<Regex>,
    answer: Answer,
}

impl Rule {
    fn matches(&self, tool_kind: Option<&str>, title: &str) -> bool {
        let kind_ok = match &self.tool_kind {
            Some(wanted) => tool_kind == Some(wanted.as_str()),
            None => true,
        };
        kind_ok && self.title.as_ref().is_none_or(|re| re.is_match(title))
    }
}

impl Default for Policy {
    /// Reject every permission once, serve no file and no terminal, end
    /// with the agent (the module doc says why).
    fn default() -> Self {
        Policy {
            default: Answer::Option(OptionKind::RejectOnce),
            rules: Vec::new(),
            fs_read: Vec::new(),
            fs_write: Vec::new(),
            terminal: None,
            end: End::AgentExit,
            mode: None,
            clients: Clients::default(),
        }
    }
}

impl Policy {
    /// Reads and checks the policy file at `path`.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let file = path.display().to_string();
        let text =
            crate::regular_file::read_text(path, MAX_POLICY_BYTES, "a policy").map_err(|e| {
                PolicyError {
                    file: file.clone(),
                    line: 1,
                    column: 1,
                    message: format!("{e}; check the --policy path"),
                }
            })?;
        Policy::parse(&text, &file)
    }

    /// Parses and checks a policy; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Policy, PolicyError> {
        let source = Source { origin, text };
        let file: PolicyFile = toml::from_str(text).map_err(|e| source.toml_error(&e))?;
        file.check(&source)
    }

    /// The answer for a permission request about a tool call of `tool_kind`
    /// (ACP's lowercase kind, `None` when the request names none) and
    /// `title` (possibly empty): the first rule that matches, else the
    /// default. A rule with a `tool_kind` never matches a request without
    /// one.
    pub fn permission(&self, tool_kind: Option<&str>, title: &str) -> Answer {
        self.rules
            .iter()
            .find(|r| r.matches(tool_kind, title))
            .map_or(&self.default, |r| &r.answer)
            .clone()
    }

    /// Where `fs/read_text_file` of `path` may read: the resolved path,
    /// inside a read root (see [`Policy::fs_write`] for the rules).
    pub fn fs_read(&self, cwd: &Path, path: &Path) -> Result<PathBuf, Refusal> {
        inside_roots(&self.fs_read, cwd, path, "reading files", "[fs] read")
    }

    /// Where `fs/write_text_file` of `path` may write. `path` must be
    /// absolute; it is resolved — `..` and symlinks of the part that exists
    /// (a file that does not exist yet resolves through its nearest
    /// existing ancestor, and no `..` may follow that) — and must then be
    /// under a write root, each resolved the same way against `cwd`.
    /// Open the returned path, not `path`, and without following a
    /// symlink at its end: one swapped in after this check would escape.
    pub fn fs_write(&self, cwd: &Path, path: &Path) -> Result<PathBuf, Refusal> {
        inside_roots(&self.fs_write, cwd, path, "writing files", "[fs] write")
    }

    /// The directory a `terminal/create` command may start in:
    /// `command_cwd` (the session's `cwd` when the agent gives none),
    /// resolved and inside a terminal root.
    pub fn terminal(&self, cwd: &Path, command_cwd: Option<&Path>) -> Result<PathBuf, Refusal> {
        let Some(roots) = &self.terminal else {
            return Err(Refusal(
                "the policy serves no terminals ([terminal] serve = false)".into(),
            ));
        };
        inside_roots(
            roots,
            cwd,
            command_cwd.unwrap_or(cwd),
            "terminals",
            "[terminal] roots",
        )
    }

    /// Whether `fs/read_text_file` is served: the `fs.readTextFile` client
    /// capability.
    pub fn serves_fs_read(&self) -> bool {
        !self.fs_read.is_empty()
    }

    /// Whether `fs/write_text_file` is served: `fs.writeTextFile`.
    pub fn serves_fs_write(&self) -> bool {
        !self.fs_write.is_empty()
    }

    /// Whether `terminal/*` is served: the `terminal` client capability.
    pub fn serves_terminal(&self) -> bool {
        self.terminal.is_some()
    }

    /// The session mode (`[session] mode`) to set with `session/set_mode`
    /// once the session is open: each agent's own id (`default`,
    /// `read-only` …), which decides whether it asks before its tools run.
    pub fn mode(&self) -> Option<&str> {
        self.mode.as_deref()
    }

    pub fn end(&self) -> &End {
        &self.end
    }

    pub fn clients(&self) -> &Clients {
        &self.clients
    }
}

/// Which offered option answers with kind `wanted`: one of that kind, or
/// when the agent offers none, a narrower one only — `allow_always` falls
/// back to `allow_once`; `allow_once` to `reject_once`, then
/// `reject_always`; each reject to the other. `offered` is the request's
/// (option id, kind) pairs; `None` when nothing fits (answer `cancelled`
/// only then).
pub fn choose_option(offered: &[(String, OptionKind)], wanted: OptionKind) -> Option<&str> {
    wanted.acceptable().iter().find_map(|kind| {
        offered
            .iter()
            .find(|(_, k)| k == kind)
            .map(|(id, _)| id.as_str())
    })
}

/// `path` resolved, if it lies under one of `roots` (resolved against
/// `cwd`); `what` and `key` name the service in refusals.
fn inside_roots(
    roots: &[PathBuf],
    cwd: &Path,
    path: &Path,
    what: &str,
    key: &str,
) -> Result<PathBuf, Refusal> {
    if roots.is_empty() {
        return Err(Refusal(format!(
            "the policy serves no {what} (no {key} roots)"
        )));
    }
    if !path.is_absolute() {
        return Err(Refusal(format!(
            "{} is not an absolute path; ACP paths are absolute",
            path.display()
        )));
    }
    let resolved = resolve(path)?;
    // A root that cannot be resolved (a dangling symlink) serves nothing.
    let roots: Vec<PathBuf> = roots
        .iter()
        .filter_map(|r| resolve(&cwd.join(r)).ok())
        .collect();
    if roots.iter().any(|r| resolved.starts_with(r)) {
        return Ok(resolved);
    }
    let shown: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    Err(Refusal(format!(
        "{} is outside the roots the policy serves for {what} ({})",
        resolved.display(),
        shown.join(", ")
    )))
}

/// An absolute `path` with its existing part canonical (`..` and symlinks
/// resolved by the system) and the rest, which does not exist yet,
/// appended as written — without `..`, which could climb out of wherever
/// the rest is created.
fn resolve(path: &Path) -> Result<PathBuf, Refusal> {
    let parts: Vec<Component<'_>> = path.components().collect();
    let cannot = |e: std::io::Error| Refusal(format!("cannot resolve {}: {e}", path.display()));
    for split in (1..=parts.len()).rev() {
        let existing: PathBuf = parts[..split].iter().collect();
        match std::fs::symlink_metadata(&existing) {
            Ok(_) => {
                // Exists, but a dangling symlink fails here: writing through
                // it would create its target, wherever that is.
                let mut real = std::fs::canonicalize(&existing).map_err(cannot)?;
                for part in &parts[split..] {
                    match part {
                        Component::Normal(name) => real.push(name),
                        _ => {
                            return Err(Refusal(format!(
                                "{}: a `..` after a directory that does not exist is not resolved; \
                                 give the path without it",
                                path.display()
                            )));
                        }
                    }
                }
                return Ok(real);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(cannot(e)),
        }
    }
    // Only a path whose root itself is missing gets here.
    Err(Refusal(format!("cannot resolve {}", path.display())))
}

/// A policy's text, for errors that point into it.
struct Source<'a> {
    origin: &'a str,
    text: &'a str,
}

impl Source<'_> {
    /// An error at byte `offset`: `field: what; todo`.
    fn error(&self, offset: usize, field: &str, what: &str, todo: &str) -> PolicyError {
        let (line, column) = line_col(self.text, offset);
        PolicyError {
            file: self.origin.to_owned(),
            line,
            column,
            message: format!("{field}: {what}; {todo}"),
        }
    }

    /// A TOML or serde error, with the field it is about (toml reports
    /// only the place) and what to do about it.
    fn toml_error(&self, e: &toml::de::Error) -> PolicyError {
        let offset = e.span().map_or(0, |s| s.start);
        let what = e
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(", ");
        let todo = if what.starts_with("unknown field") {
            "remove it or correct its spelling"
        } else if what.starts_with("unknown variant") {
            "use one of the values listed"
        } else if what.starts_with("missing field") {
            "add it"
        } else if what.starts_with("invalid type") {
            "give a value of the type the field takes"
        } else {
            "fix the TOML there"
        };
        self.error(offset, &field_at(self.text, offset), &what, todo)
    }
}

/// The dotted name of the key whose line holds byte `offset` (the nearest
/// one above, for a value spread over lines), under its table header; the
/// header itself when the offset is on one.
fn field_at(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let mut key = None;
    for line in text[..line_end].lines().rev() {
        let line = line.trim_start();
        if let Some(header) = table_header(line) {
            return match key {
                Some(key) => format!("{header}.{key}"),
                None => header.to_owned(),
            };
        }
        if key.is_none() {
            if let Some((name, _)) = line.split_once('=') {
                key = Some(name.trim().trim_matches('"').to_owned());
            }
        }
    }
    key.unwrap_or_else(|| "policy".to_owned())
}

/// `permissions.rule` for `[[permissions.rule]]`, `fs` for `[fs]`.
fn table_header(line: &str) -> Option<&str> {
    let inner = line.strip_prefix('[')?;
    let inner = inner.strip_prefix('[').unwrap_or(inner);
    Some(inner.split(']').next()?.trim())
}

/// The file as written; [`PolicyFile::check`] makes it a [`Policy`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    permissions: PermissionsFile,
    #[serde(default)]
    fs: FsFile,
    #[serde(default)]
    terminal: TerminalFile,
    #[serde(default)]
    end: EndFile,
    #[serde(default)]
    session: SessionFile,
    #[serde(default)]
    clients: ClientsFile,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ClientsFile {
    #[serde(default)]
    controller_uids: Vec<u32>,
    #[serde(default)]
    controller_gids: Vec<u32>,
    #[serde(default)]
    observer_uids: Vec<u32>,
    #[serde(default)]
    observer_gids: Vec<u32>,
    socket: Option<Spanned<String>>,
    busy: Option<Busy>,
    new_session: Option<NewSession>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum NewSession {
    Join,
    Fresh,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Busy {
    Refuse,
    Queue,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SessionFile {
    mode: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PermissionsFile {
    default: Option<Setting>,
    ask_timeout: Option<Spanned<String>>,
    ask_fallback: Option<Spanned<Setting>>,
    #[serde(default)]
    rule: Vec<Spanned<RuleFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    tool_kind: Option<Spanned<String>>,
    title: Option<Spanned<String>>,
    answer: Setting,
}

/// An answer as the file spells it.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Setting {
    AllowOnce,
    AllowAlways,
    RejectOnce,
    RejectAlways,
    Ask,
}

impl Setting {
    fn option(self) -> Option<OptionKind> {
        match self {
            Setting::AllowOnce => Some(OptionKind::AllowOnce),
            Setting::AllowAlways => Some(OptionKind::AllowAlways),
            Setting::RejectOnce => Some(OptionKind::RejectOnce),
            Setting::RejectAlways => Some(OptionKind::RejectAlways),
            Setting::Ask => None,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FsFile {
    #[serde(default)]
    read: Vec<Spanned<String>>,
    #[serde(default)]
    write: Vec<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TerminalFile {
    #[serde(default)]
    serve: bool,
    roots: Option<Vec<Spanned<String>>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct EndFile {
    when: Option<When>,
    idle: Option<Spanned<String>>,
    no_client: Option<Spanned<String>>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "kebab-case")]
enum When {
    AgentExit,
    FirstTurn,
    Idle,
    LastClientLeft,
    NoClient,
}

impl PolicyFile {
    fn check(self, source: &Source<'_>) -> Result<Policy, PolicyError> {
        let permissions = self.permissions;
        let timeout = match &permissions.ask_timeout {
            Some(t) => duration(t, "permissions.ask_timeout", source)?,
            None => DEFAULT_ASK_TIMEOUT,
        };
        let fallback = match &permissions.ask_fallback {
            None => OptionKind::RejectOnce,
            Some(f) => f.get_ref().option().ok_or_else(|| {
                source.error(
                    f.span().start,
                    "permissions.ask_fallback",
                    "\"ask\" cannot answer for a client that did not",
                    "use allow_once, allow_always, reject_once or reject_always",
                )
            })?,
        };
        let answer = |setting: Setting| match setting.option() {
            Some(kind) => Answer::Option(kind),
            None => Answer::Ask { timeout, fallback },
        };
        let rules = permissions
            .rule
            .iter()
            .enumerate()
            .map(|(i, rule)| check_rule(i, rule, source, answer))
            .collect::<Result<_, _>>()?;
        let terminal_roots = match &self.terminal.roots {
            Some(written) => roots(written, "terminal.roots", source)?,
            None => vec![PathBuf::from(".")],
        };
        let end = match self.end.when.unwrap_or(When::AgentExit) {
            When::AgentExit => End::AgentExit,
            When::FirstTurn => End::FirstTurn,
            When::LastClientLeft => End::LastClientLeft,
            When::Idle => End::Idle(match &self.end.idle {
                Some(idle) => nonzero(
                    duration(idle, "end.idle", source)?,
                    idle,
                    "end.idle",
                    source,
                )?,
                None => DEFAULT_IDLE,
            }),
            When::NoClient => End::NoClient(match &self.end.no_client {
                Some(after) => nonzero(
                    duration(after, "end.no_client", source)?,
                    after,
                    "end.no_client",
                    source,
                )?,
                None => DEFAULT_IDLE,
            }),
        };
        let clients = self.clients.check(source)?;
        Ok(Policy {
            default: answer(permissions.default.unwrap_or(Setting::RejectOnce)),
            rules,
            fs_read: roots(&self.fs.read, "fs.read", source)?,
            fs_write: roots(&self.fs.write, "fs.write", source)?,
            terminal: self.terminal.serve.then_some(terminal_roots),
            end,
            mode: match self.session.mode {
                Some(mode) if mode.get_ref().trim().is_empty() => {
                    return Err(source.error(
                        mode.span().start,
                        "session.mode",
                        "an empty mode",
                        "give a mode id the agent lists in session/new (default, read-only …), or leave the key out",
                    ))
                }
                other => other.map(Spanned::into_inner),
            },
            clients,
        })
    }
}

impl ClientsFile {
    fn check(self, source: &Source<'_>) -> Result<Clients, PolicyError> {
        let socket = match self.socket {
            Some(path) if !Path::new(path.get_ref()).is_absolute() => {
                return Err(source.error(
                    path.span().start,
                    "clients.socket",
                    &format!("{:?} is not an absolute path", path.get_ref()),
                    "give the bridge socket's absolute path, in a directory that is yours",
                ))
            }
            other => other.map(|p| PathBuf::from(p.into_inner())),
        };
        let clients = Clients {
            controller_uids: self.controller_uids,
            controller_gids: self.controller_gids,
            observer_uids: self.observer_uids,
            observer_gids: self.observer_gids,
            socket,
            queue_when_busy: self.busy == Some(Busy::Queue),
            fresh_sessions: self.new_session == Some(NewSession::Fresh),
        };
        if clients.admits_others() && clients.socket.is_none() {
            return Err(source.error(
                0,
                "clients",
                "other users may attach, but the bridge socket would be in your private runtime directory, which they cannot reach",
                "add socket = \"/absolute/path.sock\" in a directory of yours that they can enter",
            ));
        }
        Ok(clients)
    }
}

fn check_rule(
    i: usize,
    rule: &Spanned<RuleFile>,
    source: &Source<'_>,
    answer: impl Fn(Setting) -> Answer,
) -> Result<Rule, PolicyError> {
    let field = format!("permissions.rule[{i}]");
    let span = rule.span();
    let rule = rule.get_ref();
    if rule.tool_kind.is_none() && rule.title.is_none() {
        return Err(source.error(
            span.start,
            &field,
            "a rule matches nothing without tool_kind or title",
            "give tool_kind, title or both",
        ));
    }
    if let Some(kind) = &rule.tool_kind {
        if !TOOL_KINDS.contains(&kind.get_ref().as_str()) {
            return Err(source.error(
                kind.span().start,
                &format!("{field}.tool_kind"),
                &format!("{:?} is not an ACP tool kind", kind.get_ref()),
                &format!("use one of {}", TOOL_KINDS.join(", ")),
            ));
        }
    }
    let title = match &rule.title {
        None => None,
        Some(t) => Some(Regex::new(t.get_ref()).map_err(|e| {
            source.error(
                t.span().start,
                &format!("{field}.title"),
                &regex_problem(&e),
                "fix the regular expression",
            )
        })?),
    };
    Ok(Rule {
        tool_kind: rule.tool_kind.as_ref().map(|k| k.get_ref().clone()),
        title,
        answer: answer(rule.answer),
    })
}

fn roots(
    written: &[Spanned<String>],
    field: &str,
    source: &Source<'_>,
) -> Result<Vec<PathBuf>, PolicyError> {
    written
        .iter()
        .map(|root| {
            let text = root.get_ref();
            if text.is_empty() || text.starts_with('~') {
                return Err(source.error(
                    root.span().start,
                    field,
                    &format!("{text:?} is not a directory the policy can resolve"),
                    "give a path relative to the session's cwd (\".\") or an absolute one",
                ));
            }
            Ok(PathBuf::from(text))
        })
        .collect()
}

/// `500ms`, `60s`, `30m`, `2h`.
fn duration(
    written: &Spanned<String>,
    field: &str,
    source: &Source<'_>,
) -> Result<Duration, PolicyError> {
    let text = written.get_ref().trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let millis_per = match unit {
        "ms" => Some(1),
        "s" => Some(1000),
        "m" => Some(60_000),
        "h" => Some(3_600_000),
        _ => None,
    };
    number
        .parse::<u64>()
        .ok()
        .zip(millis_per)
        .and_then(|(n, per)| n.checked_mul(per))
        .map(Duration::from_millis)
        .ok_or_else(|| {
            source.error(
                written.span().start,
                field,
                &format!("{:?} is not a duration", written.get_ref()),
                "write a whole number and a unit: 500ms, 60s, 30m or 2h",
            )
        })
}

fn nonzero(
    d: Duration,
    written: &Spanned<String>,
    field: &str,
    source: &Source<'_>,
) -> Result<Duration, PolicyError> {
    if d.is_zero() {
        return Err(source.error(
            written.span().start,
            field,
            "a time of zero would end the run before its first turn",
            "give a longer one, e.g. 30m, or use when = \"first-turn\"",
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Policy {
        Policy::parse(text, "p.toml").unwrap_or_else(|e| panic!("{e}"))
    }

    fn error(text: &str) -> PolicyError {
        Policy::parse(text, "p.toml").unwrap_err()
    }

    const REJECT: Answer = Answer::Option(OptionKind::RejectOnce);

    #[test]
    fn no_policy_and_an_empty_one_serve_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        std::fs::write(cwd.join("a.txt"), "x").unwrap();
        for policy in [Policy::default(), parse(""), parse("[permissions]\n[fs]\n")] {
            assert_eq!(policy.permission(Some("read"), "Read a.txt"), REJECT);
            assert_eq!(policy.permission(None, ""), REJECT);
            assert!(!policy.serves_fs_read());
            assert!(!policy.serves_fs_write());
            assert!(!policy.serves_terminal());
            assert_eq!(policy.end(), &End::AgentExit);
            let file = cwd.join("a.txt");
            assert_eq!(
                policy.fs_read(cwd, &file).unwrap_err().to_string(),
                "the policy serves no reading files (no [fs] read roots)"
            );
            assert!(policy.fs_write(cwd, &file).is_err());
            assert_eq!(
                policy.terminal(cwd, None).unwrap_err().to_string(),
                "the policy serves no terminals ([terminal] serve = false)"
            );
        }
    }

    #[test]
    fn the_first_matching_rule_answers_and_the_default_the_rest() {
        let policy = parse(
            r#"
[permissions]
default = "ask"
ask_timeout = "1500ms"
ask_fallback = "reject_always"
[[permissions.rule]]
tool_kind = "read"
title = "^Read "
answer = "allow_always"
[[permissions.rule]]
tool_kind = "read"
answer = "allow_once"
[[permissions.rule]]
title = "rm -rf"
answer = "reject_always"
"#,
        );
        let ask = Answer::Ask {
            timeout: Duration::from_millis(1500),
            fallback: OptionKind::RejectAlways,
        };
        let option = Answer::Option;
        assert_eq!(
            policy.permission(Some("read"), "Read a.txt"),
            option(OptionKind::AllowAlways)
        );
        assert_eq!(
            policy.permission(Some("read"), "cat a.txt"),
            option(OptionKind::AllowOnce)
        );
        assert_eq!(
            policy.permission(Some("execute"), "run rm -rf /"),
            option(OptionKind::RejectAlways)
        );
        // A request that names no kind matches no rule about kinds.
        assert_eq!(policy.permission(None, "Read a.txt"), ask);
        assert_eq!(policy.permission(Some("edit"), ""), ask);
    }

    #[test]
    fn ask_waits_a_minute_and_then_rejects_once_unless_told() {
        let policy = parse("[[permissions.rule]]\ntool_kind = \"edit\"\nanswer = \"ask\"\n");
        assert_eq!(
            policy.permission(Some("edit"), "Edit a.txt"),
            Answer::Ask {
                timeout: Duration::from_secs(60),
                fallback: OptionKind::RejectOnce
            }
        );
        assert_eq!(policy.permission(Some("read"), "Read a.txt"), REJECT);
    }

    #[test]
    fn an_option_is_chosen_by_kind_and_never_wider() {
        use OptionKind::*;
        let offer = |kinds: &[(&str, OptionKind)]| -> Vec<(String, OptionKind)> {
            kinds.iter().map(|(id, k)| (id.to_string(), *k)).collect()
        };
        let all = offer(&[
            ("once", AllowOnce),
            ("always", AllowAlways),
            ("reject", RejectOnce),
            ("never", RejectAlways),
        ]);
        for (kind, id) in [
            (AllowOnce, "once"),
            (AllowAlways, "always"),
            (RejectOnce, "reject"),
            (RejectAlways, "never"),
        ] {
            assert_eq!(choose_option(&all, kind), Some(id), "{}", kind.as_str());
        }
        let no_always = offer(&[("once", AllowOnce), ("reject", RejectOnce)]);
        assert_eq!(choose_option(&no_always, AllowAlways), Some("once"));
        assert_eq!(choose_option(&no_always, RejectAlways), Some("reject"));
        // allow_once never becomes allow_always: a reject is narrower.
        let always_or_never = offer(&[("always", AllowAlways), ("never", RejectAlways)]);
        assert_eq!(choose_option(&always_or_never, AllowOnce), Some("never"));
        assert_eq!(choose_option(&always_or_never, RejectOnce), Some("never"));
        let allows_only = offer(&[("always", AllowAlways), ("once", AllowOnce)]);
        assert_eq!(choose_option(&allows_only, RejectOnce), None);
        assert_eq!(choose_option(&[], AllowOnce), None);
    }

    #[test]
    // Long: a table of broken files and the one line each gives.
    fn a_broken_file_is_one_line_with_file_line_column_and_field() {
        let cases = [
            (
                "[permissions]\ndefault = \"reject_once\"\nasktimeout = \"5s\"\n",
                (3, 1),
                "permissions.asktimeout: unknown field `asktimeout`",
                "; remove it or correct its spelling",
            ),
            (
                "[permissions]\ndefault = \"maybe\"\n",
                (2, 11),
                "permissions.default: unknown variant `maybe`",
                "; use one of the values listed",
            ),
            (
                "[permissions]\nask_fallback = \"ask\"\n",
                (2, 16),
                "permissions.ask_fallback: \"ask\" cannot answer",
                "; use allow_once, allow_always, reject_once or reject_always",
            ),
            (
                "[permissions]\nask_timeout = \"soon\"\n",
                (2, 15),
                "permissions.ask_timeout: \"soon\" is not a duration",
                "; write a whole number and a unit: 500ms, 60s, 30m or 2h",
            ),
            (
                "[[permissions.rule]]\nanswer = \"allow_once\"\n",
                (1, 1),
                "permissions.rule[0]: a rule matches nothing without tool_kind or title",
                "; give tool_kind, title or both",
            ),
            (
                "[[permissions.rule]]\ntitle = \"x\"\nanswer = \"allow_once\"\n[[permissions.rule]]\ntool_kind = \"exec\"\nanswer = \"allow_once\"\n",
                (5, 13),
                "permissions.rule[1].tool_kind: \"exec\" is not an ACP tool kind",
                "; use one of read, edit, delete, move, search, execute, think, fetch, switch_mode, other",
            ),
            (
                "[[permissions.rule]]\ntitle = \"(unclosed\"\nanswer = \"allow_once\"\n",
                (2, 9),
                "permissions.rule[0].title: invalid regex",
                "; fix the regular expression",
            ),
            (
                "[[permissions.rule]]\ntitle = \"x\"\n",
                (1, 1),
                "permissions.rule: missing field `answer`",
                "; add it",
            ),
            (
                "[fs]\nread = [\n  \".\",\n  7,\n]\n",
                (4, 3),
                "fs.read: invalid type",
                "; give a value of the type the field takes",
            ),
            (
                "[fs]\nwrite = [\"~/notes\"]\n",
                (2, 10),
                "fs.write: \"~/notes\" is not a directory the policy can resolve",
                "; give a path relative to the session's cwd (\".\") or an absolute one",
            ),
            (
                "[end]\nwhen = \"idle\"\nidle = \"0s\"\n",
                (3, 8),
                "end.idle: a time of zero would end the run before its first turn",
                "; give a longer one, e.g. 30m, or use when = \"first-turn\"",
            ),
            (
                "[end]\nwhen = \"never\"\n",
                (2, 8),
                "end.when: unknown variant `never`",
                "; use one of the values listed",
            ),
            (
                "[terminal]\nserve = true\n[fs\n",
                (3, 4),
                "fs: ",
                "; fix the TOML there",
            ),
        ];
        for (text, (line, column), starts, ends) in cases {
            let e = error(text);
            let shown = e.to_string();
            assert_eq!((e.line, e.column), (line, column), "{shown}");
            assert!(
                shown.starts_with(&format!("p.toml:{line}:{column}: {starts}")),
                "{shown}"
            );
            assert!(shown.ends_with(ends), "{shown}");
            assert!(!shown.contains('\n'), "{shown}");
        }
    }

    #[test]
    fn load_reads_a_regular_file_and_names_it_when_it_cannot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, "[end]\nwhen = \"idle\"\n").unwrap();
        assert_eq!(
            Policy::load(&path).unwrap().end(),
            &End::Idle(Duration::from_secs(1800))
        );
        std::fs::write(&path, "[end]\nwhen = \"first-turn\"\nidle = \"2h\"\n").unwrap();
        assert_eq!(Policy::load(&path).unwrap().end(), &End::FirstTurn);

        let missing = dir.path().join("missing.toml");
        let e = Policy::load(&missing).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:1:1: cannot read it: ", missing.display())));
        assert!(e.ends_with("; check the --policy path"), "{e}");
        let e = Policy::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("not read: it is a directory"), "{e}");
    }

    #[test]
    fn clients_and_their_end_conditions() {
        let policy = parse(
            "[clients]\nobserver_uids = [1002]\ncontroller_gids = [50]\nsocket = \"/srv/acp/a.sock\"\nbusy = \"queue\"\nnew_session = \"fresh\"\n[end]\nwhen = \"no-client\"\nno_client = \"5m\"\n",
        );
        let clients = policy.clients();
        assert!(clients.admits_others());
        assert_eq!(clients.observer_uids, [1002]);
        assert_eq!(clients.controller_gids, [50]);
        assert_eq!(
            clients.socket.as_deref(),
            Some(Path::new("/srv/acp/a.sock"))
        );
        assert!(clients.queue_when_busy);
        assert!(clients.fresh_sessions);
        assert_eq!(policy.end(), &End::NoClient(Duration::from_secs(300)));
        assert_eq!(
            parse("[end]\nwhen = \"last-client-left\"\n").end(),
            &End::LastClientLeft
        );
        assert!(!Policy::default().clients().admits_others());

        let e = error("[clients]\nobserver_uids = [7]\n").to_string();
        assert!(
            e.starts_with("p.toml:1:1: clients: other users may attach, but"),
            "{e}"
        );
        assert!(e.contains("add socket = \"/absolute/path.sock\""), "{e}");
        let e = error("[clients]\nsocket = \"rel.sock\"\n").to_string();
        assert!(
            e.starts_with("p.toml:2:10: clients.socket: \"rel.sock\" is not an absolute path"),
            "{e}"
        );
        let e = error("[clients]\nbusy = \"wait\"\n").to_string();
        assert!(e.contains("clients.busy: unknown variant `wait`"), "{e}");
        let e = error("[end]\nwhen = \"no-client\"\nno_client = \"0s\"\n").to_string();
        assert!(e.contains("end.no_client: a time of zero"), "{e}");
    }

    #[test]
    fn the_example_file_is_a_valid_policy() {
        let text = include_str!("../../../config/acp-policy.example.toml");
        let policy = parse(text);
        assert!(policy.serves_fs_read());
        assert!(!policy.serves_fs_write());
        assert!(!policy.serves_terminal());
    }

    /// A session directory `proj` (the cwd) next to `outside`, with a file
    /// in each, and symlinks from inside to outside.
    struct Tree {
        _dir: tempfile::TempDir,
        cwd: PathBuf,
        outside: PathBuf,
    }

    fn tree() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        // Canonical, so that expected paths compare equal (macOS /var → /private/var).
        let base = dir.path().canonicalize().unwrap();
        let cwd = base.join("proj");
        let outside = base.join("outside");
        std::fs::create_dir_all(cwd.join("src")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(cwd.join("src/a.txt"), "in").unwrap();
        std::fs::write(outside.join("secret"), "out").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::symlink;
            symlink(&outside, cwd.join("link")).unwrap();
            symlink(outside.join("new"), cwd.join("dangling")).unwrap();
            symlink(cwd.join("src/a.txt"), cwd.join("alias")).unwrap();
        }
        Tree {
            _dir: dir,
            cwd,
            outside,
        }
    }

    #[test]
    fn fs_paths_are_served_only_under_their_roots() {
        let t = tree();
        let policy = parse("[fs]\nread = [\".\"]\nwrite = [\"src\"]\n");
        assert!(policy.serves_fs_read() && policy.serves_fs_write());
        let cwd = &t.cwd;
        let a = cwd.join("src/a.txt");
        assert_eq!(policy.fs_read(cwd, &a).unwrap(), a);
        assert_eq!(policy.fs_write(cwd, &a).unwrap(), a);
        // Resolved: `.` and `..` that stay inside are fine.
        assert_eq!(
            policy
                .fs_read(cwd, &cwd.join("./src/../src/a.txt"))
                .unwrap(),
            a
        );
        // A new file, and one in new directories, under a write root.
        let new = cwd.join("src/new/deeper/b.txt");
        assert_eq!(policy.fs_write(cwd, &new).unwrap(), new);

        let refused = |r: Result<PathBuf, Refusal>| r.unwrap_err().to_string();
        assert_eq!(
            refused(policy.fs_read(cwd, Path::new("src/a.txt"))),
            "src/a.txt is not an absolute path; ACP paths are absolute"
        );
        let escape = cwd.join("../outside/secret");
        assert_eq!(
            refused(policy.fs_read(cwd, &escape)),
            format!(
                "{} is outside the roots the policy serves for reading files ({})",
                t.outside.join("secret").display(),
                cwd.display()
            )
        );
        // Only src is writable, not the cwd.
        assert!(refused(policy.fs_write(cwd, &cwd.join("b.txt"))).contains("is outside the roots"));
        // `..` below a directory that does not exist is never resolved.
        let climb = cwd.join("src/nothere/../../../outside/x");
        assert!(refused(policy.fs_write(cwd, &climb))
            .contains("a `..` after a directory that does not exist"));
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_followed_before_the_check() {
        let t = tree();
        let policy = parse("[fs]\nread = [\".\"]\nwrite = [\".\"]\n");
        let cwd = &t.cwd;
        let refused = |r: Result<PathBuf, Refusal>| r.unwrap_err().to_string();
        // A symlink inside the root to a directory outside it.
        assert!(
            refused(policy.fs_read(cwd, &cwd.join("link/secret"))).contains("is outside the roots")
        );
        assert!(refused(policy.fs_write(cwd, &cwd.join("link/new.txt")))
            .contains("is outside the roots"));
        // A dangling one: writing through it would create its target outside.
        assert!(refused(policy.fs_write(cwd, &cwd.join("dangling"))).starts_with("cannot resolve"));
        // One that stays inside resolves to its target.
        assert_eq!(
            policy.fs_read(cwd, &cwd.join("alias")).unwrap(),
            cwd.join("src/a.txt")
        );
        // A root given as a symlink is its target.
        let policy = parse(&format!("[fs]\nread = [{:?}]\n", cwd.join("link")));
        assert_eq!(
            policy.fs_read(cwd, &t.outside.join("secret")).unwrap(),
            t.outside.join("secret")
        );
    }

    #[test]
    fn terminals_start_only_under_their_roots() {
        let t = tree();
        let cwd = &t.cwd;
        let policy = parse("[terminal]\nserve = true\n");
        assert!(policy.serves_terminal());
        assert!(!policy.serves_fs_read());
        assert_eq!(policy.terminal(cwd, None).unwrap(), *cwd);
        assert_eq!(
            policy.terminal(cwd, Some(&cwd.join("src"))).unwrap(),
            cwd.join("src")
        );
        assert!(policy
            .terminal(cwd, Some(&t.outside))
            .unwrap_err()
            .to_string()
            .contains("is outside the roots the policy serves for terminals"));
        let policy = parse(&format!(
            "[terminal]\nserve = true\nroots = [{:?}]\n",
            t.outside
        ));
        assert!(policy.terminal(cwd, None).is_err());
        assert_eq!(policy.terminal(cwd, Some(&t.outside)).unwrap(), t.outside);
    }
}
