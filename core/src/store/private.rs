//! The state directory and database must be the user's alone.
//!
//! Whoever can write `state.db` can read every message body, point a
//! runtime record at an endpoint of their own and mark deliveries as they
//! like; whoever can write the directory can replace the file. So before a
//! store is opened its directory must be ours and writable by nobody else,
//! and the database (with its `-wal` and `-shm` files) ours and closed to
//! the group and others. A store that is not is refused with the exact
//! repair, never repaired silently: it may already have been read.

use std::fs;
use std::path::{Path, PathBuf};

use super::StoreError;
use crate::os::{DirBuilderExt, NotPrivate};

/// A state directory or database that is not the user's alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivacyProblem {
    pub path: PathBuf,
    /// The state directory (else one of the database's files).
    pub dir: bool,
    pub problem: NotPrivate,
}

impl PrivacyProblem {
    /// What is wrong and why it matters.
    pub fn what(&self) -> String {
        let path = self.path.display();
        match self.problem {
            NotPrivate::ForeignOwner { owner, me } => format!(
                "{path} belongs to uid {owner}, not to you (uid {me}): its owner could read every message and answer deliveries"
            ),
            NotPrivate::Permissive { mode } if self.dir => format!(
                "{path} is writable by other users (mode {mode:o}): they could replace the state database"
            ),
            NotPrivate::Permissive { mode } => format!(
                "{path} is open to other users (mode {mode:o}): they could read and change every message"
            ),
        }
    }

    /// The command (or the choice) that repairs it.
    pub fn repair(&self) -> String {
        let path = self.path.display();
        match self.problem {
            NotPrivate::ForeignOwner { .. } => format!(
                "remove it (rm -r {path}, as its owner or root) or set {} to a project of your own",
                crate::paths::PROJECT_ENV
            ),
            NotPrivate::Permissive { .. } if self.dir => format!("chmod 700 {path}"),
            NotPrivate::Permissive { .. } => format!("chmod 600 {path}"),
        }
    }
}

impl std::fmt::Display for PrivacyProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.problem {
            NotPrivate::ForeignOwner { .. } => write!(f, "{}; {}", self.what(), self.repair()),
            NotPrivate::Permissive { .. } => write!(f, "{}; run: {}", self.what(), self.repair()),
        }
    }
}

/// Creates the state directory 0700 when missing (its parents too, as the
/// project directory may not exist yet), and refuses one that is not ours
/// or that others may write to.
pub(crate) fn ensure_state_dir(dir: &Path) -> Result<(), StoreError> {
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| StoreError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
    }
    problem_of(dir, true).map_or(Ok(()), |p| Err(StoreError::NotPrivate(p)))
}

/// The project's settings (`config.toml`) name its store: a file another
/// user wrote, or may write — or one in a directory they may write — could
/// point the project at a database of theirs, which would then receive
/// every message. Checked, with its directory, before it is read; reading
/// it is allowed to others (it holds no password).
pub(crate) fn check_settings(file: &Path) -> Result<(), StoreError> {
    if let Some(p) = file.parent().and_then(|d| problem_of(d, true)) {
        return Err(StoreError::NotPrivate(p));
    }
    let Ok(meta) = fs::metadata(file) else {
        return Ok(());
    };
    crate::os::check_unwritable_dir(&meta).map_err(|problem| {
        StoreError::NotPrivate(PrivacyProblem {
            path: file.to_path_buf(),
            dir: false,
            problem,
        })
    })
}

/// The first of the database's files (itself, `-wal`, `-shm`) that exists
/// and is not the user's alone.
pub(crate) fn check_db_files(db: &Path) -> Result<(), StoreError> {
    match db_problems(db).into_iter().next() {
        Some(p) => Err(StoreError::NotPrivate(p)),
        None => Ok(()),
    }
}

/// Every problem of the state directory holding `db` and of its files.
pub fn store_problems(db: &Path) -> Vec<PrivacyProblem> {
    let dir = db.parent().and_then(|d| problem_of(d, true));
    dir.into_iter().chain(db_problems(db)).collect()
}

fn db_problems(db: &Path) -> Vec<PrivacyProblem> {
    let mut files = vec![db.to_path_buf()];
    for suffix in ["-wal", "-shm"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        files.push(PathBuf::from(name));
    }
    files.iter().filter_map(|f| problem_of(f, false)).collect()
}

/// What is wrong with `path`, if it exists (one we cannot look at fails
/// when it is opened, with its own error). A link is followed: what
/// matters is what the store's data is in.
fn problem_of(path: &Path, dir: bool) -> Option<PrivacyProblem> {
    let meta = fs::metadata(path).ok()?;
    let checked = if dir {
        crate::os::check_unwritable_dir(&meta)
    } else {
        crate::os::check_private(&meta)
    };
    checked.err().map(|problem| PrivacyProblem {
        path: path.to_path_buf(),
        dir,
        problem,
    })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_directory_others_may_write_and_files_others_may_open_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("project").join(".agent-comms");
        ensure_state_dir(&dir).unwrap();
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        // Readable by others is fine for the directory (project profiles live there).
        chmod(&dir, 0o755);
        ensure_state_dir(&dir).unwrap();
        chmod(&dir, 0o775);
        let err = ensure_state_dir(&dir).unwrap_err().to_string();
        assert!(
            err.ends_with(&format!("run: chmod 700 {}", dir.display())),
            "{err}"
        );

        chmod(&dir, 0o700);
        let db = dir.join("state.db");
        fs::write(&db, b"").unwrap();
        chmod(&db, 0o600);
        check_db_files(&db).unwrap();
        let shm = dir.join("state.db-shm");
        fs::write(&shm, b"").unwrap();
        chmod(&shm, 0o640);
        let err = check_db_files(&db).unwrap_err().to_string();
        assert!(err.contains("mode 640"), "{err}");
        assert!(
            err.ends_with(&format!("run: chmod 600 {}", shm.display())),
            "{err}"
        );
        chmod(&db, 0o604);
        let problems = store_problems(&db);
        assert_eq!(
            problems.iter().map(|p| p.path.clone()).collect::<Vec<_>>(),
            [db.clone(), shm]
        );
    }

    #[test]
    fn another_users_file_is_refused_with_the_choice_of_repairs() {
        let p = PrivacyProblem {
            path: PathBuf::from("/tmp/.agent-comms"),
            dir: true,
            problem: NotPrivate::ForeignOwner {
                owner: 1001,
                me: 1000,
            },
        };
        assert_eq!(
            p.to_string(),
            "/tmp/.agent-comms belongs to uid 1001, not to you (uid 1000): its owner could read every message and answer deliveries; remove it (rm -r /tmp/.agent-comms, as its owner or root) or set AGENT_COMMS_PROJECT to a project of your own"
        );
    }
}
