//! This host's id: random, made once per user, kept owner-only.
//!
//! A runtime's PTY can only be reached from the host that serves it; when a
//! shared store later backs several hosts, every record names its host by
//! this id, so a message to a runtime elsewhere is marked unavailable
//! instead of being "delivered" into nothing.

use std::io::Write;
use std::path::PathBuf;

use super::ControlError;
use crate::ids::random_hex;
use crate::os::OpenOptionsExt;
use crate::paths::user_home;

const FILE: &str = "host-id";

/// The host id, created on first use under the user's agent-comms home.
pub fn host_id() -> Result<String, ControlError> {
    let home = user_home();
    let path = home.join(FILE);
    if let Ok(text) = std::fs::read_to_string(&path) {
        let id = text.trim();
        if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(id.to_owned());
        }
    }
    let io = |source| ControlError::HostId {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(&home).map_err(io)?;
    let id = random_hex(16);
    // Written beside and renamed: two first uses at once agree on one id.
    let tmp: PathBuf = home.join(format!("{FILE}.{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    file.write_all(id.as_bytes()).map_err(io)?;
    drop(file);
    match std::fs::hard_link(&tmp, &path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(e)),
    }
    let _ = std::fs::remove_file(&tmp);
    Ok(std::fs::read_to_string(&path)
        .map_err(io)?
        .trim()
        .to_owned())
}
