//! Where agent-comms keeps its sockets and per-user state.
//!
//! The socket root is canonical per user (`/tmp/agent-comms-<euid>/`) and is
//! deliberately *not* derived from `TMPDIR` or `XDG_RUNTIME_DIR`: two shells of
//! the same user with different environments must still find each other's
//! sessions. Because every session socket lives there, the root is checked
//! before use: a root that is a symlink, belongs to someone else, or is open to
//! the group or the world could let another user impersonate or spy on a
//! session, so it is refused rather than repaired silently.
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
    #[error("runtime directory {path} belongs to uid {owner}, not to you (uid {me}); remove it or set {RUNTIME_DIR_ENV} to a directory of your own")]
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
/// `/tmp/agent-comms-<euid>` (Windows: `%LOCALAPPDATA%\agent-comms\run`).
pub fn runtime_root() -> PathBuf {
    match std::env::var_os(RUNTIME_DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => crate::os::default_runtime_root(),
    }
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
    let path = dir.display().to_string();
    let meta = fs::symlink_metadata(dir).map_err(|source| PathError::Create {
        path: path.clone(),
        source,
    })?;
    if meta.file_type().is_symlink() {
        return Err(PathError::Symlink { path });
    }
    if !meta.is_dir() {
        return Err(PathError::NotDirectory { path });
    }
    crate::os::check_private_dir(&meta).map_err(|e| match e {
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
pub fn project_root() -> PathBuf {
    if let Some(dir) = std::env::var_os(PROJECT_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let nearest = |marker: &str| {
        cwd.ancestors()
            .find(|d| d.join(marker).exists())
            .map(Path::to_path_buf)
    };
    nearest(".agent-comms")
        .or_else(|| nearest(".git"))
        .unwrap_or(cwd.clone())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

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
        fs::set_permissions(&open, fs::Permissions::from_mode(0o700)).unwrap();
        verify_private_dir(&open).unwrap();
    }
}
