//! Takeover: turning a live, ordinary provider process into a supervised
//! runtime in place, on the same conversation, and the guard that keeps two
//! processes off one conversation.
//!
//! A *conversation* is the provider's own session or thread (what its
//! `--resume ID` names); a *session* is always ours, a supervised PTY.
//!
//! The order is the point (docs/takeover.md gives the reasons):
//!
//! 1. refuse when we descend from the target (we would kill ourselves),
//!    when it belongs to another user, or when it is not the provider the
//!    command names (`--force` overrides only this);
//! 2. find the conversation the target is on, through the adapter, *before*
//!    touching it — never "the most recent one", which another process may
//!    have used since; when the adapter cannot tie the pid to one conversation,
//!    refuse and list the candidates (`--conversation ID` says which);
//! 3. end the target: SIGTERM, wait, SIGKILL, wait — nothing starts until it
//!    is gone;
//! 4. start the command in the target's working directory, its resume
//!    pinned to the discovered conversation.
//!
//! Provider knowledge — where a CLI keeps its conversations, how to tie a pid to
//! one — comes from a [`ConversationDiscovery`] (built-in code in the adapters
//! crate); whether two processes on one conversation are harmful comes from the
//! profile's `[conversation]`.

pub mod launch;
pub mod process;
pub mod terminate;

use std::collections::HashMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::adapter::profile::{Profile, Sharing};
pub use process::ProcessInfo;

#[derive(Debug, thiserror::Error)]
pub enum TakeoverError {
    /// The provider's files name a conversation id outside the id rule: it
    /// would be typed into a resume command line, so it is not used.
    #[error("process {pid}'s files name an unusable conversation: {source}; give the right one with --conversation ID")]
    InvalidConversation {
        pid: u32,
        source: crate::ids::IdError,
    },
    #[error("no process {0}; check the pid (ps -u $USER)")]
    NoProcess(u32),
    #[error("process {0} is this command or one of its parents: ending it would end this command too; run the takeover from another terminal, or add --launch-terminal to open one")]
    Ancestor(u32),
    #[error("process {0} belongs to another user; only your own processes can be taken over")]
    ForeignUser(u32),
    #[error("process {pid} runs {program}, not {provider} (the command after --); check the pid, or add --force if it really is {provider}")]
    NotProvider {
        pid: u32,
        program: String,
        provider: String,
    },
    #[error(
        "the {0} adapter cannot tell which conversation a process is on, so it cannot take one over"
    )]
    NoDiscovery(String),
    #[error(
        "cannot tell which {provider} conversation process {pid} is on ({reason}); nothing was changed"
    )]
    NotFound {
        pid: u32,
        provider: String,
        reason: String,
    },
    #[error("process {pid} may be on any of these conversations: {}; say which with --conversation ID", list(.candidates))]
    Ambiguous {
        pid: u32,
        candidates: Vec<ConversationCandidate>,
    },
    #[error("process {pid} is on conversation {found}, not {given}; nothing was changed")]
    ConversationMismatch {
        pid: u32,
        found: String,
        given: String,
    },
    #[error("the command names conversation {named}, but process {pid} is on {found}; leave the conversation out of the command, and agent-comms pins it")]
    CommandNamesOther {
        pid: u32,
        named: String,
        found: String,
    },
    #[error("cannot signal process {pid}: {reason}")]
    Signal { pid: u32, reason: String },
    #[error("process {0} is still running after SIGTERM and SIGKILL; nothing was started")]
    WillNotDie(u32),
    #[error("conversation {id} is in use by process {pid}; to move it here safely: {takeover}; or add --allow-shared-conversation ({reason})")]
    Collision {
        id: String,
        pid: u32,
        reason: String,
        /// The takeover command that hands the conversation over.
        takeover: String,
    },
    #[error("{0}")]
    Launch(String),
}

fn list(candidates: &[ConversationCandidate]) -> String {
    candidates
        .iter()
        .map(|c| match &c.cwd {
            Some(cwd) => format!("{} ({cwd}, {})", c.id, c.detail),
            None => format!("{} ({})", c.id, c.detail),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A provider conversation a process may be on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConversationCandidate {
    pub id: String,
    pub cwd: Option<String>,
    /// Why it is a candidate (which file said so).
    pub detail: String,
}

/// What discovery found for one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Discovery {
    Found(ConversationCandidate),
    /// It may be on any of these; a person must say which.
    Ambiguous(Vec<ConversationCandidate>),
    /// Nothing ties it to a conversation (the reason says what was looked at).
    Nothing(String),
}

/// The environment a provider process sees, which says where its files
/// are (`HOME`, `CODEX_HOME`, `XDG_DATA_HOME` …).
#[derive(Debug, Clone, Default)]
pub struct ProviderEnv {
    vars: HashMap<String, String>,
}

impl ProviderEnv {
    /// This process's environment: where a provider we start will look.
    pub fn current() -> Self {
        Self {
            vars: std::env::vars().collect(),
        }
    }

    /// `proc`'s environment, with ours filling in what cannot be read.
    pub fn of(proc: &ProcessInfo) -> Self {
        let mut env = Self::current();
        env.vars.extend(proc.environ());
        env
    }

    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// `$HOME`.
    pub fn home(&self) -> PathBuf {
        PathBuf::from(self.var("HOME").unwrap_or("/"))
    }
}

/// Provider-specific conversation knowledge.
pub trait ConversationDiscovery: Send + Sync {
    /// Whether `proc` marks itself as this provider (a pid file of its own).
    fn marks(&self, proc: &ProcessInfo, env: &ProviderEnv) -> bool;
    /// The conversation `proc` is on.
    fn discover(&self, proc: &ProcessInfo, env: &ProviderEnv) -> Discovery;
    /// Live processes on conversation `id` now.
    fn holders(&self, id: &str, env: &ProviderEnv) -> Vec<u32>;
    /// What process `pid` reports in its own files it is doing now, when
    /// they say: the program's own word, which the adapter takes over its
    /// reading of the screen (busy at once; idle without the debounce).
    /// Read on every look at the screen, so it must be one small read.
    fn reported_activity(&self, pid: u32, env: &ProviderEnv) -> Option<crate::adapter::Activity> {
        let _ = (pid, env);
        None
    }
}

/// What a takeover will do, decided before anything is touched.
#[derive(Debug, Clone)]
pub struct Plan {
    pub target: ProcessInfo,
    pub conversation: ConversationCandidate,
    /// Where the command starts: the target's working directory.
    pub cwd: PathBuf,
    /// The command with its resume pinned to the conversation.
    pub argv: Vec<String>,
}

/// A takeover request, as the user gave it.
pub struct Request<'a> {
    pub pid: u32,
    pub argv: &'a [String],
    pub profile: &'a Profile,
    pub discovery: Option<&'a dyn ConversationDiscovery>,
    /// Skip the "is it the provider" check.
    pub force: bool,
    /// The conversation, when the user says which.
    pub conversation: Option<&'a str>,
}

/// Steps 1 and 2: every check, and the conversation found, without touching
/// the target.
pub fn plan(req: &Request<'_>) -> Result<Plan, TakeoverError> {
    if process::is_self_or_ancestor(req.pid) {
        return Err(TakeoverError::Ancestor(req.pid));
    }
    let target = ProcessInfo::read(req.pid)?;
    if !target.mine {
        return Err(TakeoverError::ForeignUser(req.pid));
    }
    let env = ProviderEnv::of(&target);
    let provider = &req.profile.name;
    if !req.force && !is_provider(req, &target, &env) {
        return Err(TakeoverError::NotProvider {
            pid: req.pid,
            program: target.program().unwrap_or_default(),
            provider: provider.clone(),
        });
    }
    let discovery = req
        .discovery
        .ok_or_else(|| TakeoverError::NoDiscovery(provider.clone()))?;
    let conversation = choose_conversation(req, discovery.discover(&target, &env))?;
    crate::ids::Id::parse(crate::ids::IdKind::Conversation, &conversation.id).map_err(
        |source| TakeoverError::InvalidConversation {
            pid: req.pid,
            source,
        },
    )?;
    if let Some(named) = req.profile.named_conversation(req.argv) {
        if named != conversation.id {
            return Err(TakeoverError::CommandNamesOther {
                pid: req.pid,
                named,
                found: conversation.id,
            });
        }
    }
    let cwd = conversation
        .cwd
        .as_ref()
        .map(PathBuf::from)
        .filter(|d| d.is_dir())
        .or_else(|| target.cwd.clone())
        .unwrap_or_else(|| PathBuf::from("/"));
    Ok(Plan {
        argv: req.profile.resume_conversation(req.argv, &conversation.id),
        target,
        conversation,
        cwd,
    })
}

/// Whether `target` runs the provider the profile describes: by its
/// program, a package marker in its arguments, or the adapter's own files.
fn is_provider(req: &Request<'_>, target: &ProcessInfo, env: &ProviderEnv) -> bool {
    let program = target.program().unwrap_or_default();
    req.profile.claims(&program)
        || req
            .profile
            .conversation
            .as_ref()
            .is_some_and(|s| s.markers.iter().any(|m| target.mentions(m)))
        || req.discovery.is_some_and(|d| d.marks(target, env))
}

/// The conversation to take over: the one discovered, which `--conversation` must
/// match; or among ambiguous candidates, the one `--conversation` names; or,
/// when nothing was found, the one `--conversation` names.
fn choose_conversation(
    req: &Request<'_>,
    found: Discovery,
) -> Result<ConversationCandidate, TakeoverError> {
    let pid = req.pid;
    match (found, req.conversation) {
        (Discovery::Found(found), Some(given)) if found.id != given => {
            Err(TakeoverError::ConversationMismatch {
                pid,
                found: found.id,
                given: given.to_owned(),
            })
        }
        (Discovery::Found(found), _) => Ok(found),
        (Discovery::Ambiguous(candidates), given) => {
            match candidates.iter().find(|c| Some(c.id.as_str()) == given) {
                Some(c) => Ok(c.clone()),
                None => Err(TakeoverError::Ambiguous { pid, candidates }),
            }
        }
        (Discovery::Nothing(_), Some(given)) => Ok(ConversationCandidate {
            id: given.to_owned(),
            cwd: None,
            detail: "given with --conversation".into(),
        }),
        (Discovery::Nothing(reason), None) => Err(TakeoverError::NotFound {
            pid,
            provider: req.profile.name.clone(),
            reason,
        }),
    }
}

/// The collision guard: refuses to start a provider on conversation `id` while a
/// live process (other than `except`) holds it, unless the adapter says two
/// are harmless or the user allows it. Returns a note to show when sharing
/// goes ahead. `takeover` makes the command that would hand the conversation
/// over instead, given the holder's pid.
pub fn guard(
    profile: &Profile,
    discovery: &dyn ConversationDiscovery,
    id: &str,
    env: &ProviderEnv,
    allow_shared: bool,
    except: Option<u32>,
    takeover: impl Fn(u32) -> String,
) -> Result<Option<String>, TakeoverError> {
    let holders: Vec<u32> = discovery
        .holders(id, env)
        .into_iter()
        .filter(|p| Some(*p) != except)
        .collect();
    let Some(&pid) = holders.first() else {
        return Ok(None);
    };
    let sharing = profile
        .conversation
        .as_ref()
        .map(|s| (s.shared, s.shared_reason.clone()))
        .unwrap_or((
            Sharing::Refuse,
            "two processes on one conversation diverge".into(),
        ));
    match sharing {
        (Sharing::Allow, reason) => Ok(Some(format!(
            "conversation {id} is also open in process {pid}; {reason}"
        ))),
        (Sharing::Refuse, reason) if allow_shared => Ok(Some(format!(
            "conversation {id} is also open in process {pid} (--allow-shared-conversation): {reason}"
        ))),
        (Sharing::Refuse, reason) => Err(TakeoverError::Collision {
            id: id.to_owned(),
            pid,
            reason,
            takeover: takeover(pid),
        }),
    }
}
