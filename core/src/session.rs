//! Session names, the record a live supervisor leaves on disk, and the registry.
//!
//! Sessions are one namespace per user: `k` cells, `session new` sessions and
//! interactive runtimes all live in the same runtime root, so one name can be
//! in use only once. A supervisor writes its [`SessionRecord`] next to its
//! socket once the child runs, and removes both when it exits. A supervisor
//! killed with SIGKILL cannot clean up, so the registry treats a record whose
//! socket refuses connections and whose supervisor pid is gone as *stale*: it
//! removes the leftovers and says so, and the next command proceeds as if the
//! session had ended cleanly.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::os::{pid_alive, wait_gone};

/// Longest session name: the record file name must fit a 255-byte file name.
const MAX_NAME_LEN: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    // Escaped: a name with a newline or escape sequence must not break the
    // one-line error contract or the user's terminal.
    #[error(
        "invalid session name: '{}'; use at most {MAX_NAME_LEN} characters: letters, digits, '.', '_' and '-' (not '..')",
        .0.escape_debug()
    )]
    InvalidName(String),
    #[error("no session '{0}'")]
    NotFound(String),
    #[error("session '{0}' already exists")]
    InUse(String),
    #[error("cannot read session records in {dir}: {source}")]
    Io { dir: String, source: io::Error },
}

/// A validated session name: `^[A-Za-z0-9_.-]+$`, not `.`, without `..`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionName(String);

impl SessionName {
    pub fn parse(name: &str) -> Result<Self, SessionError> {
        let valid = !name.is_empty()
            && name.len() <= MAX_NAME_LEN
            && name != "."
            && !name.contains("..")
            && crate::ids::in_id_alphabet(name);
        if valid {
            Ok(Self(name.to_owned()))
        } else {
            Err(SessionError::InvalidName(name.to_owned()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SessionName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for SessionName {
    type Error = SessionError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<SessionName> for String {
    fn from(n: SessionName) -> String {
        n.0
    }
}

/// A runtime id: an [`crate::ids::Id`] that is also a session name (a runtime is served
/// as the supervised session of the same name, which adds the session
/// rule's own refusal of `.` and `..`).
pub fn runtime_id(value: &str) -> Result<SessionName, RuntimeIdError> {
    crate::ids::Id::parse(crate::ids::IdKind::Runtime, value)?;
    Ok(SessionName::parse(value)?)
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeIdError {
    #[error(transparent)]
    Id(#[from] crate::ids::IdError),
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// What started a session; `session ls` shows it and `k ls` keeps only cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionKind {
    /// `agent-comms session new` / `session run`.
    Session,
    /// `k new`: a REPL that runs cells.
    Cell,
    /// `agent-comms runtime interactive-serve`.
    Interactive,
    /// `agent-comms runtime acp-serve`: an agent over ACP, no PTY.
    Acp,
}

impl SessionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Session => "session",
            Self::Cell => "cell",
            Self::Interactive => "interactive",
            Self::Acp => "acp",
        }
    }
}

/// The on-disk record of a live session (`<root>/<name>.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub name: SessionName,
    pub kind: SessionKind,
    /// The child's pid (the program in the PTY).
    pub pid: u32,
    pub supervisor_pid: u32,
    pub command: String,
    pub cwd: String,
    /// UTC ISO 8601.
    pub started: String,
    pub socket: PathBuf,
}

/// The paths one session uses inside a runtime root.
#[derive(Debug, Clone)]
pub struct SessionPaths {
    pub record: PathBuf,
    pub socket: PathBuf,
    pub log: PathBuf,
}

impl SessionPaths {
    pub fn new(root: &Path, name: &SessionName) -> Self {
        Self {
            record: root.join(format!("{name}.json")),
            socket: crate::os::endpoint_path(root, name.as_str()),
            log: root.join(format!("{name}.log")),
        }
    }
}

/// What the registry found for one record.
#[derive(Debug)]
pub enum Liveness {
    Live(SessionRecord),
    /// The supervisor is gone; its files were removed.
    Stale(SessionRecord),
}

/// Tells whether something accepts connections on an endpoint path. The
/// endpoint layer (`socket::is_dialable`) provides it: this layer only
/// knows where the endpoint lives.
pub type EndpointProbe = fn(&Path) -> bool;

/// Reads records in the runtime root and tells live sessions from stale ones.
pub struct Registry {
    root: PathBuf,
    probe: EndpointProbe,
}

impl Registry {
    pub fn new(root: PathBuf, probe: EndpointProbe) -> Self {
        Self { root, probe }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn paths(&self, name: &SessionName) -> SessionPaths {
        SessionPaths::new(&self.root, name)
    }

    /// Every session record in the root, each checked for liveness; stale
    /// leftovers are removed on the way.
    pub fn scan(&self) -> Result<Vec<Liveness>, SessionError> {
        let entries = match fs::read_dir(&self.root) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(SessionError::Io {
                    dir: self.root.display().to_string(),
                    source,
                })
            }
        };
        let mut names: Vec<SessionName> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let file = e.file_name().into_string().ok()?;
                SessionName::parse(file.strip_suffix(".json")?).ok()
            })
            .collect();
        names.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        Ok(names.iter().filter_map(|n| self.check(n)).collect())
    }

    /// The live record of `name`, if any. Removes a stale one.
    pub fn check(&self, name: &SessionName) -> Option<Liveness> {
        let record = self.record(name)?;
        Some(self.judge(record))
    }

    /// The record of `name` as written, whether or not its supervisor lives.
    pub fn record(&self, name: &SessionName) -> Option<SessionRecord> {
        fs::read(self.paths(name).record)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    }

    /// Live or stale; a stale record and its socket are removed.
    pub fn judge(&self, record: SessionRecord) -> Liveness {
        if (self.probe)(&record.socket) || pid_alive(record.supervisor_pid) {
            return Liveness::Live(record);
        }
        self.remove_files(&self.paths(&record.name), &record.socket);
        Liveness::Stale(record)
    }

    /// Removes what a session left behind (record and socket; the log stays
    /// for post-mortems until the name is reused).
    pub fn remove_files(&self, paths: &SessionPaths, socket: &Path) {
        let _ = fs::remove_file(socket);
        let _ = fs::remove_file(&paths.record);
    }

    /// The live sessions, with a warning line for each stale one removed.
    pub fn live(
        &self,
        warn: &mut dyn FnMut(&SessionRecord),
    ) -> Result<Vec<SessionRecord>, SessionError> {
        Ok(self
            .scan()?
            .into_iter()
            .filter_map(|l| match l {
                Liveness::Live(r) => Some(r),
                Liveness::Stale(r) => {
                    warn(&r);
                    None
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_contract() {
        for ok in ["a", "py-1", "A.b_c", "x.y"] {
            SessionName::parse(ok).unwrap();
        }
        for bad in ["", ".", "..", "a..b", "a/b", "a b", "é", "a\n"] {
            assert!(SessionName::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn runtime_ids_follow_both_the_id_and_the_session_rule() {
        assert_eq!(runtime_id("bob-2").unwrap().as_str(), "bob-2");
        assert!(runtime_id("..").is_err());
        let long = runtime_id(&"x".repeat(129)).unwrap_err().to_string();
        assert!(long.contains(crate::ids::ID_RULE), "{long}");
    }

    #[cfg(unix)]
    #[test]
    fn zombie_and_missing_pids_are_not_alive() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(0));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        assert!(
            wait_gone(pid, std::time::Duration::from_secs(10)),
            "a zombie counts as gone"
        );
        // Not yet reaped: a zombie once it exits.
        while pid_alive(pid) {
            std::thread::yield_now();
        }
        child.wait().unwrap();
    }
}
