//! Project trust: what a project directory brings is inert until the user
//! trusts it.
//!
//! A cloned repository is the user's own files (same uid, private modes), so
//! no ownership check tells a hostile one from a checkout the user wrote.
//! Yet some of its files make agent-comms run code or grant something: a
//! profile in `.agent-comms/providers/` claims a program, names the plugin
//! loaded into the supervisor, the permission arguments `--allow-agent-comms`
//! appends and the `[acp]` command `acp-serve` runs; `.agent-comms/config.toml`
//! chooses the database every message goes to. As VS Code's Workspace Trust,
//! direnv's `allow` and git's `safe.directory` do, those files are used only
//! once the user said so, here: `$AGENT_COMMS_HOME/trust.json`, outside every
//! project, one record per file keyed by its absolute path and the SHA-256
//! of its content. A changed file is a new file: untrusted again.
//!
//! The list grants what it names, so it is held as the state database is:
//! it must be the user's and writable by nobody else, checked on every
//! read; a list that is not is refused whole (nothing is trusted).

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::os::{NotPrivate, OpenOptionsExt};
use crate::regular_file;

/// The trust list's file name, in the user's agent-comms home.
pub const TRUST_FILE: &str = "trust.json";
/// The format of the trust list.
const VERSION: u32 = 1;
/// The most a file may hold to be trusted: native plugins are the largest
/// files a project brings.
pub const MAX_TRUSTED_BYTES: u64 = 256 << 20;

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("cannot read the trust list {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: regular_file::FileError,
    },
    #[error("the trust list {} is not one agent-comms wrote ({detail}); move it away, then trust the projects again with: agent-comms trust", path.display())]
    Corrupt { path: PathBuf, detail: String },
    #[error("the trust list {} is not yours alone ({}), so nothing in it is trusted; {}", path.display(), describe(problem), repair(path, problem))]
    NotPrivate { path: PathBuf, problem: NotPrivate },
    #[error("cannot write the trust list {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn describe(problem: &NotPrivate) -> String {
    match problem {
        NotPrivate::ForeignOwner { owner, me } => {
            format!("it belongs to uid {owner}, not to you (uid {me})")
        }
        NotPrivate::Permissive { mode } => format!("mode {mode:o}"),
    }
}

fn repair(path: &Path, problem: &NotPrivate) -> String {
    match problem {
        NotPrivate::ForeignOwner { .. } => {
            format!("remove it (rm {}, as its owner or root)", path.display())
        }
        NotPrivate::Permissive { .. } => format!("run: chmod 600 {}", path.display()),
    }
}

/// The SHA-256 of `bytes`, in lower-case hex: what a record keys on.
pub fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The digest of the file at `path`, a regular file of bounded size.
pub fn digest_file(path: &Path) -> Result<String, regular_file::FileError> {
    regular_file::read(path, MAX_TRUSTED_BYTES, "a trusted file").map(|b| digest(&b))
}

/// A file a project brings, as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectFile {
    pub path: PathBuf,
    /// Its SHA-256, or why it could not be read (then it cannot be
    /// trusted).
    pub sha256: Result<String, String>,
    /// Whether the user trusts it as it is.
    pub trusted: bool,
}

impl ProjectFile {
    pub fn new(path: PathBuf, sha256: Result<String, String>, trust: &TrustList) -> Self {
        let trusted = sha256.as_ref().is_ok_and(|d| trust.trusts(&path, d));
        Self {
            path,
            sha256,
            trusted,
        }
    }
}

/// One file the user trusted, as it was then.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub path: PathBuf,
    pub sha256: String,
    /// When (UTC, ISO 8601): for people reading the list.
    pub trusted: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListFile {
    version: u32,
    files: Vec<Record>,
}

/// The user's trust list.
#[derive(Debug, Default)]
pub struct TrustList {
    file: PathBuf,
    records: Vec<Record>,
}

impl TrustList {
    /// The list in the user's agent-comms home ([`crate::paths::user_home`]).
    pub fn load() -> Result<Self, TrustError> {
        Self::load_from(crate::paths::user_home().join(TRUST_FILE))
    }

    /// The list at `file`; a file that does not exist is an empty list.
    pub fn load_from(file: PathBuf) -> Result<Self, TrustError> {
        let meta = match fs::metadata(&file) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self {
                    file,
                    records: Vec::new(),
                })
            }
            Err(e) => {
                return Err(TrustError::Read {
                    path: file,
                    source: e.into(),
                })
            }
        };
        if let Err(problem) = crate::os::check_unwritable_dir(&meta) {
            return Err(TrustError::NotPrivate {
                path: file,
                problem,
            });
        }
        let bytes = match regular_file::read(&file, regular_file::MAX_PROFILE_BYTES, "a trust list")
        {
            Ok(bytes) => bytes,
            Err(source) => return Err(TrustError::Read { path: file, source }),
        };
        match serde_json::from_slice::<ListFile>(&bytes) {
            Ok(list) if list.version == VERSION => Ok(Self {
                file,
                records: list.files,
            }),
            Ok(list) => Err(TrustError::Corrupt {
                path: file,
                detail: format!("format {}, this agent-comms reads {VERSION}", list.version),
            }),
            Err(e) => Err(TrustError::Corrupt {
                path: file,
                detail: e.to_string(),
            }),
        }
    }

    /// Where the list is kept.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Whether the file at `path` with content `sha256` is trusted.
    pub fn trusts(&self, path: &Path, sha256: &str) -> bool {
        self.records
            .iter()
            .any(|r| r.path == path && r.sha256 == sha256)
    }

    /// The records of files at or below `dir`.
    pub fn under<'a>(&'a self, dir: &'a Path) -> impl Iterator<Item = &'a Record> + 'a {
        self.records.iter().filter(move |r| r.path.starts_with(dir))
    }

    /// Trusts `path` as it is now (`sha256`), replacing what was trusted
    /// of it before.
    pub fn trust(&mut self, path: &Path, sha256: &str) {
        self.records.retain(|r| r.path != path);
        self.records.push(Record {
            path: path.to_path_buf(),
            sha256: sha256.to_owned(),
            trusted: crate::time::now_iso(),
        });
        self.records.sort_by(|a, b| a.path.cmp(&b.path));
    }

    /// Forgets every file at or below `dir`; returns how many.
    pub fn forget_under(&mut self, dir: &Path) -> usize {
        let before = self.records.len();
        self.records.retain(|r| !r.path.starts_with(dir));
        before - self.records.len()
    }

    /// Writes the list: whole or not at all (a new file renamed over the
    /// old one), mode 600.
    pub fn save(&self) -> Result<(), TrustError> {
        let write_err = |source| TrustError::Write {
            path: self.file.clone(),
            source,
        };
        if let Some(dir) = self.file.parent() {
            fs::create_dir_all(dir).map_err(write_err)?;
        }
        let list = ListFile {
            version: VERSION,
            files: self.records.clone(),
        };
        let text = serde_json::to_string_pretty(&list).expect("the list serialises");
        let mut partial = self.file.as_os_str().to_owned();
        partial.push(format!(".{}.partial", std::process::id()));
        let partial = PathBuf::from(partial);
        let written = (|| {
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&partial)?;
            file.write_all(text.as_bytes())?;
            file.write_all(b"\n")?;
            file.sync_all()?;
            fs::rename(&partial, &self.file)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&partial);
        }
        written.map_err(write_err)
    }
}

/// Says once per process, on standard error, that the project's `path` is
/// not used because it is not trusted (`what` it would have done).
pub fn say_untrusted(path: &Path, what: &str) {
    static SAID: std::sync::Mutex<BTreeSet<PathBuf>> = std::sync::Mutex::new(BTreeSet::new());
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    if said.insert(path.to_path_buf()) {
        eprintln!(
            "agent-comms: not using {} ({what}): it is not trusted yet; review it and trust it with: agent-comms trust",
            crate::display::one_line(&path.display().to_string())
        );
    }
}

/// Says once per process that the trust list itself could not be used.
pub fn say_list_unusable(error: &TrustError) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| eprintln!("agent-comms: {error}"));
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_trusted_file_is_trusted_only_as_it_was() {
        let tmp = tempfile::tempdir().unwrap();
        let list_file = tmp.path().join("home").join(TRUST_FILE);
        let mut list = TrustList::load_from(list_file.clone()).unwrap();
        let profile = tmp.path().join("p.toml");
        assert!(!list.trusts(&profile, &digest(b"a")));
        list.trust(&profile, &digest(b"a"));
        list.save().unwrap();
        assert_eq!(
            fs::metadata(&list_file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let list = TrustList::load_from(list_file).unwrap();
        assert!(list.trusts(&profile, &digest(b"a")));
        assert!(!list.trusts(&profile, &digest(b"b")), "changed content");
        assert!(!list.trusts(&tmp.path().join("q.toml"), &digest(b"a")));
    }

    #[test]
    fn a_list_others_may_write_or_that_does_not_parse_trusts_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join(TRUST_FILE);
        fs::write(&file, r#"{"version": 1, "files": []}"#).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o622)).unwrap();
        let err = TrustList::load_from(file.clone()).unwrap_err().to_string();
        assert!(
            err.contains("mode 622") && err.ends_with(&format!("chmod 600 {}", file.display())),
            "{err}"
        );
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        fs::write(&file, "{").unwrap();
        let err = TrustList::load_from(file).unwrap_err().to_string();
        assert!(err.contains("not one agent-comms wrote"), "{err}");
    }

    #[test]
    fn forgetting_a_project_forgets_only_its_files() {
        let mut list = TrustList::default();
        list.trust(Path::new("/p/.agent-comms/providers/a.toml"), "1");
        list.trust(Path::new("/p2/.agent-comms/config.toml"), "2");
        assert_eq!(list.forget_under(Path::new("/p")), 1);
        assert_eq!(list.under(Path::new("/p2")).count(), 1);
    }
}
