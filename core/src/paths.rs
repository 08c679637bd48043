//! Where agent-comms keeps its sockets and per-user state.
//!
//! The socket root is canonical per user (`/tmp/agent-comms-<euid>/`) and is
//! deliberately *not* derived from `TMPDIR` or `XDG_RUNTIME_DIR`: two shells of
//! the same user with different environments must still find each other's
//! sessions, and `XDG_RUNTIME_DIR` (`/run/user/<uid>`) is removed by
//! systemd-logind at the user's last logout, taking with it the sockets of
//! the agents they left running. Because every session socket lives there,
//! the root is checked before use: a root that is a symlink of the user's,
//! or open to the group or the world, is refused with a repair the user can
//! run.
//!
//! `/tmp` is shared, so another user can take the path first. A squatted
//! root (another user's directory or symlink) is not fought over: the user
//! gets a private directory of their own beside it (`/tmp/agent-comms-<euid>-
//! <random>`, made 0700 by an atomic `mkdir`), recorded in their home
//! (`runtime-dir`), so that every later command finds the same one.
//!
//! On Windows the root is `%LOCALAPPDATA%\agent-comms\run` and the
//! endpoints are named pipes; what differs is in `os/` and `socket/`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

#[cfg(unix)]
pub use crate::os::euid;
pub use crate::os::make_owner_only;
use crate::os::NotPrivate;

/// Environment variable that replaces the socket root (tests isolate with it).
pub const RUNTIME_DIR_ENV: &str = "AGENT_COMMS_RUNTIME_DIR";
/// Environment variable that replaces the per-user config/state directory.
pub const HOME_ENV: &str = "AGENT_COMMS_HOME";

#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error(
        "runtime directory {path} is a symlink; remove it (rm {path}) and run the command again"
    )]
    Symlink { path: String },
    #[error("runtime directory {path} belongs to uid {owner}, not to you (uid {me}); set {RUNTIME_DIR_ENV} to a directory of your own, or unset it")]
    ForeignOwner { path: String, owner: u32, me: u32 },
    #[error(
        "runtime directory {path} is open to other users (mode {mode:o}); run: chmod 700 {path}"
    )]
    Permissive { path: String, mode: u32 },
    #[error("runtime directory {path} is not a directory; remove it and run the command again")]
    NotDirectory { path: String },
    #[error("cannot create runtime directory {path}: {source}")]
    Create { path: String, source: io::Error },
}

/// The socket root in effect: `AGENT_COMMS_RUNTIME_DIR`, else
/// `/tmp/agent-comms-<euid>` (Windows: `%LOCALAPPDATA%\agent-comms\run`),
/// else, when another user took that path, the user's own beside it.
pub fn runtime_root() -> PathBuf {
    match std::env::var_os(RUNTIME_DIR_ENV) {
        Some(dir) if !dir.is_empty() => normalized(Path::new(&dir)),
        _ => default_runtime_root(),
    }
}

/// The canonical root, or the user's own beside it when another user
/// took that path first.
#[cfg(unix)]
fn default_runtime_root() -> PathBuf {
    unsquatted(crate::os::default_runtime_root(), &user_home(), euid())
}

/// `%LOCALAPPDATA%` is the user's alone: nobody else can take the path.
#[cfg(not(unix))]
fn default_runtime_root() -> PathBuf {
    crate::os::default_runtime_root()
}

/// `canonical`, unless a user other than `me` owns what is there: then
/// the private directory recorded in `home`, or a new one.
#[cfg(unix)]
fn unsquatted(canonical: PathBuf, home: &Path, me: u32) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let squatted = fs::symlink_metadata(&canonical).is_ok_and(|m| m.uid() != me);
    if !squatted {
        return canonical;
    }
    let pointer = home.join(RUNTIME_DIR_POINTER);
    if let Ok(recorded) = fs::read_to_string(&pointer) {
        let recorded = PathBuf::from(recorded.trim_end());
        if verify_private_dir(&recorded).is_ok() {
            return recorded;
        }
    }
    for _ in 0..16 {
        let mut random = [0u8; 8];
        if getrandom::fill(&mut random).is_err() {
            break;
        }
        let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let own = PathBuf::from(format!("{}-{suffix}", canonical.display()));
        // An atomic mkdir: a name someone else made first is not taken.
        if crate::os::create_private_dir(&own).is_ok() && verify_private_dir(&own).is_ok() {
            let recorded = fs::create_dir_all(home)
                .and_then(|()| fs::write(&pointer, format!("{}\n", own.display())));
            if let Err(e) = recorded {
                tracing::warn!(
                    "cannot record the runtime directory in {}: {e}",
                    pointer.display()
                );
            }
            return own;
        }
    }
    // Nothing better: the check on use says what is wrong.
    canonical
}

/// The file in the user's home naming their own runtime directory when the
/// canonical one was squatted.
pub const RUNTIME_DIR_POINTER: &str = "runtime-dir";

/// `path` without trailing separators or `.` components. They matter: the
/// kernel resolves `link/` (or `link/.`) to the directory `link` points
/// at, so a symlink given so would pass for the directory itself.
fn normalized(path: &Path) -> PathBuf {
    path.components().collect()
}

/// The socket root, created 0700 if missing and verified to be the user's alone.
pub fn ensure_runtime_root() -> Result<PathBuf, PathError> {
    let root = runtime_root();
    match crate::os::create_private_dir(&root) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(source) => {
            return Err(PathError::Create {
                path: root.display().to_string(),
                source,
            })
        }
    }
    verify_private_dir(&root)?;
    Ok(root)
}

/// Refuses a directory that is a symlink, not ours, or group/world accessible.
pub fn verify_private_dir(dir: &Path) -> Result<(), PathError> {
    let dir = normalized(dir);
    let path = dir.display().to_string();
    let meta = fs::symlink_metadata(&dir).map_err(|source| PathError::Create {
        path: path.clone(),
        source,
    })?;
    if meta.file_type().is_symlink() {
        return Err(PathError::Symlink { path });
    }
    if !meta.is_dir() {
        return Err(PathError::NotDirectory { path });
    }
    crate::os::check_private(&meta).map_err(|e| match e {
        NotPrivate::ForeignOwner { owner, me } => PathError::ForeignOwner { path, owner, me },
        NotPrivate::Permissive { mode } => PathError::Permissive { path, mode },
    })
}

/// The per-user config and state directory: `AGENT_COMMS_HOME`, else
/// `$XDG_CONFIG_HOME/agent-comms`, else `~/.config/agent-comms` (Windows:
/// `%APPDATA%\agent-comms`).
pub fn user_home() -> PathBuf {
    if let Some(dir) = std::env::var_os(HOME_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("agent-comms");
    }
    crate::os::config_base().join("agent-comms")
}

/// Environment variable that names the project root.
pub const PROJECT_ENV: &str = "AGENT_COMMS_PROJECT";

/// The project whose `.agent-comms/` holds state and project profiles:
/// `AGENT_COMMS_PROJECT`, else the nearest ancestor holding `.agent-comms/`,
/// else the git top level, else the current directory.
///
/// The walk up from the current directory stays among the user's own
/// directories: it stops below the first directory another user owns, and
/// at an `.agent-comms/` another user owns, which is never taken (another
/// user's store would let them read every message and answer deliveries).
/// Skipping one is said once on stderr; the store itself is checked again
/// when it is opened (`store::sqlite`), for a project named explicitly too.
pub fn project_root() -> PathBuf {
    if let Some(dir) = std::env::var_os(PROJECT_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let found = discover(&cwd, |path| {
        let meta = fs::metadata(path).ok()?;
        Some(crate::os::foreign_owner(&meta).map_or(Owner::Me, Owner::Other))
    });
    if let Some((skipped, owner)) = &found.skipped {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            eprintln!(
                "agent-comms: not using {}: it belongs to uid {owner}, not to you; using the project {} (set {PROJECT_ENV} to choose another)",
                skipped.display(),
                found.root.display()
            );
        });
    }
    found.root
}

/// Who owns a path that exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Me,
    Other(u32),
}

/// What [`discover`] decided.
#[derive(Debug, PartialEq, Eq)]
struct Discovery {
    root: PathBuf,
    /// Another user's `.agent-comms/` the walk stopped at, and its owner.
    skipped: Option<(PathBuf, u32)>,
}

/// The walk of [`project_root`], given `owner` of each path that exists.
fn discover(cwd: &Path, owner: impl Fn(&Path) -> Option<Owner>) -> Discovery {
    let mut git = None;
    let mut skipped = None;
    for dir in cwd.ancestors() {
        if matches!(owner(dir), Some(Owner::Other(_))) {
            break;
        }
        let state = dir.join(".agent-comms");
        match owner(&state) {
            Some(Owner::Me) => {
                return Discovery {
                    root: dir.to_path_buf(),
                    skipped: None,
                }
            }
            Some(Owner::Other(uid)) => {
                skipped = Some((state, uid));
                break;
            }
            None => {}
        }
        if git.is_none() && owner(&dir.join(".git")).is_some() {
            git = Some(dir.to_path_buf());
        }
    }
    Discovery {
        root: git.unwrap_or_else(|| cwd.to_path_buf()),
        skipped,
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_squatted_root_gives_way_to_a_private_one_every_command_finds() {
        let tmp = tempfile::tempdir().unwrap();
        let canonical = tmp.path().join("agent-comms-7");
        let home = tmp.path().join("home");
        // Free, or the user's own: the canonical path.
        assert_eq!(unsquatted(canonical.clone(), &home, euid()), canonical);
        fs::create_dir(&canonical).unwrap();
        assert_eq!(unsquatted(canonical.clone(), &home, euid()), canonical);
        // Taken by "another user" (here: the test's uid is not `me`).
        let other = euid().wrapping_add(1);
        let own = unsquatted(canonical.clone(), &home, other);
        assert_ne!(own, canonical);
        let name = own.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("agent-comms-7-"), "{name}");
        verify_private_dir(&own).unwrap();
        assert_eq!(
            fs::metadata(&own).unwrap().permissions().mode() & 0o777,
            0o700
        );
        // The next command finds the same one.
        assert_eq!(unsquatted(canonical.clone(), &home, other), own);
        // A recorded directory that is no longer private is not used.
        fs::set_permissions(&own, fs::Permissions::from_mode(0o755)).unwrap();
        let again = unsquatted(canonical.clone(), &home, other);
        assert_ne!(again, own);
        verify_private_dir(&again).unwrap();
    }

    #[test]
    fn refuses_permissive_and_symlinked_roots() {
        let tmp = tempfile::tempdir().unwrap();
        let open = tmp.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).unwrap();
        assert!(matches!(
            verify_private_dir(&open),
            Err(PathError::Permissive { mode: 0o755, .. })
        ));
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&open, &link).unwrap();
        assert!(matches!(
            verify_private_dir(&link),
            Err(PathError::Symlink { .. })
        ));
        for spelling in ["/", "//", "/.", "/./"] {
            let link = PathBuf::from(format!("{}{spelling}", link.display()));
            assert!(
                matches!(verify_private_dir(&link), Err(PathError::Symlink { .. })),
                "{link:?}"
            );
        }
        fs::set_permissions(&open, fs::Permissions::from_mode(0o700)).unwrap();
        verify_private_dir(&open).unwrap();
    }

    /// A file system of (path, owner) for [`discover`].
    fn owners<'a>(entries: &'a [(&'a str, Owner)]) -> impl Fn(&Path) -> Option<Owner> + 'a {
        move |path| {
            entries
                .iter()
                .find(|(p, _)| Path::new(p) == path)
                .map(|(_, o)| *o)
        }
    }

    #[test]
    fn discovery_takes_the_nearest_own_state_directory_then_git_then_cwd() {
        use Owner::Me;
        let cwd = Path::new("/home/me/work/repo/sub");
        let mine = [
            ("/home/me", Me),
            ("/home/me/work", Me),
            ("/home/me/work/repo", Me),
            ("/home/me/work/repo/sub", Me),
        ];
        let with = |extra: &[(&'static str, Owner)]| {
            let mut all = mine.to_vec();
            all.extend_from_slice(extra);
            discover(cwd, owners(&all)).root
        };
        assert_eq!(with(&[]), cwd);
        assert_eq!(
            with(&[("/home/me/work/repo/.git", Me)]),
            Path::new("/home/me/work/repo")
        );
        assert_eq!(
            with(&[
                ("/home/me/work/repo/.git", Me),
                ("/home/me/work/.agent-comms", Me)
            ]),
            Path::new("/home/me/work")
        );
    }

    #[test]
    fn discovery_never_takes_or_crosses_what_another_user_owns() {
        use Owner::{Me, Other};
        let cwd = Path::new("/tmp/repo/sub");
        let base = [
            ("/tmp/repo", Me),
            ("/tmp/repo/sub", Me),
            ("/tmp/repo/.git", Me),
        ];
        let with = |extra: &[(&'static str, Owner)]| {
            let mut all = base.to_vec();
            all.extend_from_slice(extra);
            discover(cwd, owners(&all))
        };
        // A sticky /tmp of another user (root, for a user): never looked into.
        let found = with(&[("/tmp", Other(0)), ("/tmp/.agent-comms", Other(1001))]);
        assert_eq!(found.root, Path::new("/tmp/repo"));
        assert_eq!(found.skipped, None);
        // Our own /tmp (for root) holding another user's .agent-comms: skipped, said.
        let found = with(&[
            ("/tmp", Me),
            ("/tmp/.agent-comms", Other(1001)),
            ("/.agent-comms", Me),
        ]);
        assert_eq!(found.root, Path::new("/tmp/repo"));
        assert_eq!(
            found.skipped,
            Some((PathBuf::from("/tmp/.agent-comms"), 1001))
        );
        // Nor above a directory another user owns, even to a store of ours.
        let found = with(&[("/tmp", Other(0)), ("/.agent-comms", Me), ("/", Me)]);
        assert_eq!(found.root, Path::new("/tmp/repo"));
    }
}
