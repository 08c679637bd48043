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
//! user alone before it is read, and — as it may have come with a cloned
//! repository — trusted by the user ([`crate::trust`]) before what it names
//! is followed; until then the project's SQLite file is its store.
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
use crate::trust::{self, ProjectFile, TrustList};

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

impl ProjectConfig {
    /// What following it would do, one line each; nothing for settings
    /// that change nothing (no file, or the SQLite file named).
    fn effects(&self) -> Vec<String> {
        let mut effects = Vec::new();
        if let Some(store) = self.store.as_deref().filter(|s| *s != "sqlite") {
            effects.push(format!(
                "the project's messages go to the store {}",
                super::postgres::without_password(store)
            ));
        }
        if let Some(file) = &self.password_file {
            effects.push(format!(
                "the first line of {} is sent to it as the password",
                file.display()
            ));
        }
        effects
    }
}

/// The project's settings file when it says anything that needs the user's
/// trust, with what it would do: for `agent-comms trust` and `doctor`.
pub fn project_settings(
    state_dir: &Path,
    trust: &TrustList,
) -> Result<Option<(ProjectFile, Vec<String>)>, StoreError> {
    let path = settings_path(state_dir);
    let (config, text) = read_config(&path)?;
    let effects = config.effects();
    Ok((!effects.is_empty()).then(|| {
        let file = ProjectFile::new(path, Ok(trust::digest(text.as_bytes())), trust);
        (file, effects)
    }))
}

/// Where the settings are, as an absolute path (trust is kept by path).
fn settings_path(state_dir: &Path) -> PathBuf {
    fs::canonicalize(state_dir)
        .unwrap_or_else(|_| state_dir.to_path_buf())
        .join(CONFIG_FILE)
}

/// The store of the project whose state directory is `state_dir`, its
/// settings followed once the user's trust list trusts them.
pub fn locate(state_dir: &Path) -> Result<Location, StoreError> {
    let trust = TrustList::load().unwrap_or_else(|e| {
        trust::say_list_unusable(&e);
        TrustList::default()
    });
    locate_trusting(state_dir, &trust)
}

/// [`locate`] with the trust list `trust`.
pub fn locate_trusting(state_dir: &Path, trust: &TrustList) -> Result<Location, StoreError> {
    let sqlite = || Location::Sqlite(state_dir.join("state.db"));
    let config_path = state_dir.join(CONFIG_FILE);
    let config = match project_settings(state_dir, trust)? {
        Some((file, _)) if !file.trusted => {
            trust::say_untrusted(&file.path, "it names the project's store");
            ProjectConfig::default()
        }
        _ => read_config(&config_path)?.0,
    };
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

/// The settings and their text (empty when there is no file).
fn read_config(path: &Path) -> Result<(ProjectConfig, String), StoreError> {
    super::private::check_settings(path)?;
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok((ProjectConfig::default(), String::new()))
        }
        Err(source) => {
            return Err(StoreError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let config = toml::from_str(&text).map_err(|e| StoreError::Config {
        path: path.to_path_buf(),
        detail: e.message().to_owned()
            + &e.span()
                .map(|s| format!(" (at byte {})", s.start))
                .unwrap_or_default(),
    })?;
    Ok((config, text))
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

    /// [`locate_trusting`] with the settings, as they are, trusted.
    fn locate_trusted(state_dir: &Path) -> Result<Location, StoreError> {
        let mut trust = TrustList::default();
        if let Ok(bytes) = fs::read(state_dir.join(CONFIG_FILE)) {
            trust.trust(&settings_path(state_dir), &trust::digest(&bytes));
        }
        locate_trusting(state_dir, &trust)
    }

    #[test]
    fn untrusted_settings_are_not_followed_until_trusted_as_they_are() {
        let dir = state_dir_with("store = \"postgres://mallory@evil.example/loot\"\n");
        let found = locate_trusting(dir.path(), &TrustList::default()).unwrap();
        assert!(matches!(found, Location::Sqlite(p) if p.ends_with("state.db")));
        let (file, effects) = project_settings(dir.path(), &TrustList::default())
            .unwrap()
            .unwrap();
        assert!(!file.trusted);
        assert!(effects[0].contains("evil.example"), "{effects:?}");
        assert!(locate_trusted(dir.path())
            .unwrap()
            .shown()
            .contains("evil.example"));

        let mut trust = TrustList::default();
        trust.trust(&file.path, file.sha256.as_ref().unwrap());
        fs::write(
            dir.path().join(CONFIG_FILE),
            "store = \"postgres://mallory@other/loot\"\n",
        )
        .unwrap();
        let found = locate_trusting(dir.path(), &trust).unwrap();
        assert!(
            matches!(found, Location::Sqlite(_)),
            "a changed file is untrusted again"
        );

        let dir = state_dir_with("store = \"sqlite\"\n");
        assert!(project_settings(dir.path(), &TrustList::default())
            .unwrap()
            .is_none());
    }

    #[test]
    fn sqlite_without_a_config_and_the_url_with_one() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            matches!(locate_trusted(dir.path()).unwrap(), Location::Sqlite(p) if p.ends_with("state.db"))
        );
        let dir = state_dir_with("store = \"postgres://agents@db.internal/ac\"\n");
        let found = locate_trusted(dir.path()).unwrap();
        assert_eq!(found.shown(), "postgres://agents@db.internal/ac");
    }

    #[test]
    fn a_password_in_the_config_is_refused_and_a_password_file_must_be_private() {
        let dir = state_dir_with("store = \"postgres://agents:hunter2@db/ac\"\n");
        let err = locate_trusted(dir.path()).unwrap_err().to_string();
        assert!(err.contains("holds a password"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");

        let dir = state_dir_with("store = \"postgres://agents@db/ac\"\npassword_file = \"pw\"\n");
        let pw = dir.path().join("pw");
        fs::write(&pw, "s3cret\n").unwrap();
        fs::set_permissions(&pw, fs::Permissions::from_mode(0o644)).unwrap();
        let err = locate_trusted(dir.path()).unwrap_err().to_string();
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
        let err = locate_trusted(dir.path()).unwrap_err().to_string();
        assert!(err.contains("mode 666"), "{err}");
        assert!(!err.contains("evil.example"), "it was read: {err}");
        fs::set_permissions(&config, fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let err = locate_trusted(dir.path()).unwrap_err().to_string();
        assert!(err.contains("writable by other users"), "{err}");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(
            locate_trusted(dir.path()).unwrap().shown(),
            "postgres://mallory@evil.example/loot"
        );
    }

    #[test]
    fn an_unknown_key_or_value_is_named() {
        let dir = state_dir_with("stor = \"sqlite\"\n");
        let err = locate_trusted(dir.path()).unwrap_err().to_string();
        assert!(err.contains("unknown field `stor`"), "{err}");
        let dir = state_dir_with("store = \"mysql://x\"\n");
        let err = locate_trusted(dir.path()).unwrap_err().to_string();
        assert!(err.contains("neither a postgres:// URL"), "{err}");
    }
}
