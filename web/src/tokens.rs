//! The two secrets of a served runtime: the controller's token and the
//! observer's (read-only) token, 128 random bits each, in hex.
//!
//! Where they are kept: by default `<runtime dir>/<id>.web.json`, mode
//! 0600, written fresh by each `serve-web` and removed when it ends. The
//! runtime directory is the owner's alone (0700) and holds the bridge
//! socket these tokens open: the tokens live exactly as long as the runtime
//! they are for, and a later runtime of the same id never accepts an old
//! URL. The project's state directory would outlive the runtime and may sit
//! in a shared checkout. `--token-file FILE` (needed to listen beyond
//! loopback) names a file the owner keeps instead: read if it exists, so a
//! bookmarked URL keeps working across runtimes, else created.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Random bytes in each token.
const TOKEN_BYTES: usize = 16;
/// The largest token file read.
const MAX_FILE: u64 = 4096;

/// What a token lets its holder do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Controller,
    Observer,
}

#[derive(Debug, Clone)]
pub struct Tokens {
    controller: String,
    observer: String,
}

/// The file's format.
#[derive(Serialize, Deserialize)]
struct TokenFile {
    token: String,
    read_only_token: String,
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot draw random tokens: {0}")]
    Random(getrandom::Error),
    #[error("cannot write the token file {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot read the token file {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("the token file {0} may be read by other users; make it private with: chmod 600 {0}")]
    Exposed(String),
    #[error("the token file {path} is not {{\"token\": HEX, \"read_only_token\": HEX}} with two different tokens of at least {min} hex digits; delete it to get new ones")]
    Malformed { path: String, min: usize },
}

impl Tokens {
    /// Two new tokens.
    pub fn generate() -> Result<Self, TokenError> {
        Ok(Self {
            controller: random_hex()?,
            observer: random_hex()?,
        })
    }

    /// New tokens, written to `path` (mode 0600), replacing what was there.
    pub fn write_new(path: &Path) -> Result<Self, TokenError> {
        let tokens = Self::generate()?;
        tokens.write(path).map_err(|source| TokenError::Write {
            path: path.to_owned(),
            source,
        })?;
        Ok(tokens)
    }

    /// The tokens in `path` if it exists (it must be private), else new
    /// ones written there.
    pub fn load_or_create(path: &Path) -> Result<Self, TokenError> {
        match fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Self::write_new(path),
            Err(source) => Err(TokenError::Read {
                path: path.to_owned(),
                source,
            }),
            Ok(meta) => {
                if meta.mode() & 0o077 != 0 {
                    return Err(TokenError::Exposed(path.display().to_string()));
                }
                Self::read(path, meta.len())
            }
        }
    }

    pub fn controller(&self) -> &str {
        &self.controller
    }

    pub fn observer(&self) -> &str {
        &self.observer
    }

    /// The role `given` grants, compared in constant time with both tokens.
    pub fn role_of(&self, given: &str) -> Option<Role> {
        let controller = same(given.as_bytes(), self.controller.as_bytes());
        let observer = same(given.as_bytes(), self.observer.as_bytes());
        match (controller, observer) {
            (true, _) => Some(Role::Controller),
            (_, true) => Some(Role::Observer),
            _ => None,
        }
    }

    fn read(path: &Path, len: u64) -> Result<Self, TokenError> {
        let malformed = || TokenError::Malformed {
            path: path.display().to_string(),
            min: TOKEN_BYTES * 2,
        };
        if len > MAX_FILE {
            return Err(malformed());
        }
        let text = fs::read_to_string(path).map_err(|source| TokenError::Read {
            path: path.to_owned(),
            source,
        })?;
        let file: TokenFile = serde_json::from_str(&text).map_err(|_| malformed())?;
        let good = |t: &str| t.len() >= TOKEN_BYTES * 2 && t.bytes().all(|b| b.is_ascii_hexdigit());
        if !good(&file.token) || !good(&file.read_only_token) || file.token == file.read_only_token
        {
            return Err(malformed());
        }
        Ok(Self {
            controller: file.token,
            observer: file.read_only_token,
        })
    }

    /// Written beside `path` and renamed over it, so a reader never sees
    /// half a file and the file is never, even briefly, more than 0600.
    fn write(&self, path: &Path) -> io::Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".new");
        let tmp = PathBuf::from(tmp);
        let _ = fs::remove_file(&tmp);
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let body = TokenFile {
            token: self.controller.clone(),
            read_only_token: self.observer.clone(),
        };
        writeln!(file, "{}", serde_json::to_string(&body)?)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    }
}

/// The default token file of runtime `id`.
pub fn default_path(runtime_dir: &Path, id: &str) -> PathBuf {
    runtime_dir.join(format!("{id}.web.json"))
}

fn random_hex() -> Result<String, TokenError> {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(TokenError::Random)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Equal bytes, in a time that depends on the lengths only (which are no
/// secret: every token has the same).
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_token_grants_its_role_and_nothing_else_grants_any() {
        let tokens = Tokens::generate().unwrap();
        assert_eq!(tokens.controller().len(), 32);
        assert_ne!(tokens.controller(), tokens.observer());
        assert_eq!(tokens.role_of(tokens.controller()), Some(Role::Controller));
        assert_eq!(tokens.role_of(tokens.observer()), Some(Role::Observer));
        assert_eq!(tokens.role_of(""), None);
        assert_eq!(tokens.role_of(&tokens.controller()[..31]), None);
        assert_eq!(tokens.role_of(&format!("{}0", tokens.controller())), None);
    }

    #[test]
    fn a_token_file_is_private_kept_and_checked() {
        let dir = std::env::temp_dir().join(format!("ac-web-tokens-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.json");
        let _ = fs::remove_file(&path);
        let first = Tokens::load_or_create(&path).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        let again = Tokens::load_or_create(&path).unwrap();
        assert_eq!(again.controller(), first.controller());
        assert_eq!(again.observer(), first.observer());
        let fresh = Tokens::write_new(&path).unwrap();
        assert_ne!(fresh.controller(), first.controller());

        fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        let err = Tokens::load_or_create(&path).unwrap_err().to_string();
        assert!(err.contains("chmod 600"), "{err}");

        fs::write(&path, r#"{"token":"ab","read_only_token":"cd"}"#).unwrap();
        fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        let err = Tokens::load_or_create(&path).unwrap_err().to_string();
        assert!(err.contains("delete it"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
