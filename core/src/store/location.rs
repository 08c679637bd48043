//! Which store a project uses: `AGENT_COMMS_STORE`, else `store` in
//! `<project>/.agent-comms/config.toml`, else the SQLite file beside it.
//!
//! A PostgreSQL database is named by URL; whoever is pointed at one database
//! shares one control plane, whatever their checkouts and paths. Its
//! password never sits in `config.toml` (a project file, often committed):
//! it comes from the URL in the environment, from `AGENT_COMMS_STORE_PASSWORD`,
//! or from a `password_file` that must be the user's alone (0600), like the
//! state database itself. And since whoever writes `config.toml` chooses
//! where every message goes, it (and its directory) must be writable by the
//! user alone before it is read.
//!
//! ```toml
//! # <project>/.agent-comms/config.toml
//! store = "postgres://agents@db.internal:5432/agent_comms?sslmode=require"
//! password_file = "~/.config/agent-comms/db-password"
//! ```

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::postgres::{is_postgres_url, Opener, PgStore, Target};
use super::{SqliteStore, Store, StoreError};

/// Environment variable naming the store: a `postgres://` URL, or
/// `sqlite` for the project's file.
pub const STORE_ENV: &str = "AGENT_COMMS_STORE";
/// Environment variable holding the database password.
pub const PASSWORD_ENV: &str = "AGENT_COMMS_STORE_PASSWORD";
/// The project's settings file, in its state directory.
pub const CONFIG_FILE: &str = "config.toml";

/// Where a project's store is.
#[derive(Debug, Clone)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(Box<Target>),
}

impl Location {
    /// Where it is, for people: the file, or the URL without its password.
    pub fn shown(&self) -> String {
        match self {
            Location::Sqlite(path) => path.display().to_string(),
            Location::Postgres(target) => target.shown().to_owned(),
        }
    }

    /// Opens it (migrating an empty one); `opener` is recorded by a shared
    /// database, for doctor.
    pub fn open(&self, opener: Option<&Opener>) -> Result<Box<dyn Store>, StoreError> {
        Ok(match self {
            Location::Sqlite(path) => Box::new(SqliteStore::open(path)?),
            Location::Postgres(target) => Box::new(PgStore::open((**target).clone(), opener)?),
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProjectConfig {
    store: Option<String>,
    password_file: Option<PathBuf>,
}

/// The store of the project whose state directory is `state_dir`.
pub fn locate(state_dir: &Path) -> Result<Location, StoreError> {
    let sqlite = || Location::Sqlite(state_dir.join("state.db"));
    let config_path = state_dir.join(CONFIG_FILE);
    let config = read_config(&config_path)?;
    let password = || password(config.password_file.as_deref(), &config_path);
    if let Some(named) = std::env::var(STORE_ENV).ok().filter(|s| !s.is_empty()) {
        return match named.as_str() {
            "sqlite" => Ok(sqlite()),
            url if is_postgres_url(url) => Ok(Location::Postgres(Box::new(Target::parse(
                url,
                password()?.as_deref(),
            )?))),
            other => Err(StoreError::BadUrl {
                url: super::postgres::without_password(other),
                detail: format!(
                    "{STORE_ENV} must be a postgres:// URL, or sqlite for the project's file"
                ),
            }),
        };
    }
    match config.store.as_deref() {
        None | Some("sqlite") => Ok(sqlite()),
        Some(url) if is_postgres_url(url) => {
            let target = Target::parse(url, password()?.as_deref())?;
            if target.shown() != url {
                return Err(StoreError::Config {
                    path: config_path,
                    detail: format!(
                        "the store URL holds a password; take it out, and put it in {PASSWORD_ENV} or in a file named by password_file (mode 600)"
                    ),
                });
            }
            Ok(Location::Postgres(Box::new(target)))
        }
        Some(other) => Err(StoreError::Config {
            path: config_path,
            detail: format!("store = {other:?} is neither a postgres:// URL nor \"sqlite\""),
        }),
    }
}

fn read_config(path: &Path) -> Result<ProjectConfig, StoreError> {
    super::private::check_settings(path)?;
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ProjectConfig::default()),
        Err(source) => {
            return Err(StoreError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    toml::from_str(&text).map_err(|e| StoreError::Config {
        path: path.to_path_buf(),
        detail: e.message().to_owned()
            + &e.span()
                .map(|s| format!(" (at byte {})", s.start))
                .unwrap_or_default(),
    })
}

/// The password: `AGENT_COMMS_STORE_PASSWORD`, else the first line of
/// `file` (relative to the config's directory; `~/` is the home
/// directory), which must be the user's alone.
fn password(file: Option<&Path>, config: &Path) -> Result<Option<String>, StoreError> {
    if let Some(p) = std::env::var(PASSWORD_ENV).ok().filter(|p| !p.is_empty()) {
        return Ok(Some(p));
    }
    let Some(file) = file else { return Ok(None) };
    let path = match file.strip_prefix("~") {
        Ok(rest) => std::env::var_os("HOME")
            .map_or_else(|| file.to_path_buf(), |home| PathBuf::from(home).join(rest)),
        Err(_) => config
            .parent()
            .map_or_else(|| file.to_path_buf(), |dir| dir.join(file)),
    };
    let bad = |detail: String| StoreError::Config {
        path: config.to_path_buf(),
        detail,
    };
    let meta =
        fs::metadata(&path).map_err(|e| bad(format!("password_file {}: {e}", path.display())))?;
    if let Err(problem) = crate::os::check_private(&meta) {
        return Err(bad(format!(
            "password_file {} is not yours alone ({problem:?}); run: chmod 600 {}",
            path.display(),
            path.display()
        )));
    }
    let text = fs::read_to_string(&path)
        .map_err(|e| bad(format!("password_file {}: {e}", path.display())))?;
    Ok(text.lines().next().map(str::to_owned))
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn state_dir_with(config: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(CONFIG_FILE), config).unwrap();
        dir
    }

    #[test]
    fn sqlite_without_a_config_and_the_url_with_one() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            matches!(locate(dir.path()).unwrap(), Location::Sqlite(p) if p.ends_with("state.db"))
        );
        let dir = state_dir_with("store = \"postgres://agents@db.internal/ac\"\n");
        let found = locate(dir.path()).unwrap();
        assert_eq!(found.shown(), "postgres://agents@db.internal/ac");
    }

    #[test]
    fn a_password_in_the_config_is_refused_and_a_password_file_must_be_private() {
        let dir = state_dir_with("store = \"postgres://agents:hunter2@db/ac\"\n");
        let err = locate(dir.path()).unwrap_err().to_string();
        assert!(err.contains("holds a password"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");

        let dir = state_dir_with("store = \"postgres://agents@db/ac\"\npassword_file = \"pw\"\n");
        let pw = dir.path().join("pw");
        fs::write(&pw, "s3cret\n").unwrap();
        fs::set_permissions(&pw, fs::Permissions::from_mode(0o644)).unwrap();
        let err = locate(dir.path()).unwrap_err().to_string();
        assert!(err.contains("run: chmod 600"), "{err}");
        fs::set_permissions(&pw, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            password(Some(Path::new("pw")), &dir.path().join(CONFIG_FILE)).unwrap(),
            Some("s3cret".into())
        );
    }

    #[test]
    fn settings_others_may_write_are_refused_before_they_are_read() {
        let dir = state_dir_with("store = \"postgres://mallory@evil.example/loot\"\n");
        let config = dir.path().join(CONFIG_FILE);
        fs::set_permissions(&config, fs::Permissions::from_mode(0o666)).unwrap();
        let err = locate(dir.path()).unwrap_err().to_string();
        assert!(err.contains("mode 666"), "{err}");
        assert!(!err.contains("evil.example"), "it was read: {err}");
        fs::set_permissions(&config, fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let err = locate(dir.path()).unwrap_err().to_string();
        assert!(err.contains("writable by other users"), "{err}");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(
            locate(dir.path()).unwrap().shown(),
            "postgres://mallory@evil.example/loot"
        );
    }

    #[test]
    fn an_unknown_key_or_value_is_named() {
        let dir = state_dir_with("stor = \"sqlite\"\n");
        let err = locate(dir.path()).unwrap_err().to_string();
        assert!(err.contains("unknown field `stor`"), "{err}");
        let dir = state_dir_with("store = \"mysql://x\"\n");
        let err = locate(dir.path()).unwrap_err().to_string();
        assert!(err.contains("neither a postgres:// URL"), "{err}");
    }
}
