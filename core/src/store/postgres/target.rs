//! Where the database is and how to reach it: the URL, the password (never
//! shown), TLS, and the words for what went wrong.
//!
//! The URL is shown in errors and in `store status`, so it is kept twice:
//! as the driver's [`Config`] with the password, and as text without it.
//! TLS is used when the URL asks for it (`sslmode=require`, or `prefer`);
//! the server's certificate is always verified, against `sslrootcert=FILE`
//! when the URL names one and the system's roots otherwise — unlike libpq,
//! whose `require` takes any certificate.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use postgres::config::SslMode;
use postgres::{Client, Config, NoTls};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use super::conn::CONNECT_TIMEOUT;
use crate::store::StoreError;

/// A PostgreSQL database the store lives in.
#[derive(Clone)]
pub struct Target {
    config: Config,
    shown: String,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Target").field(&self.shown).finish()
    }
}

/// Whether `text` names a PostgreSQL database.
pub fn is_postgres_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

impl Target {
    /// Parses `url`; `password`, when given, is used unless the URL holds
    /// one of its own.
    pub fn parse(url: &str, password: Option<&str>) -> Result<Target, StoreError> {
        let shown = without_password(url);
        let bad = |detail: String| StoreError::BadUrl {
            url: shown.clone(),
            detail,
        };
        if !is_postgres_url(url) {
            return Err(bad("it must start with postgres:// or postgresql://".into()));
        }
        let (url, root_cert, mode) = take_our_options(url).map_err(&bad)?;
        let mut config = Config::from_str(&url).map_err(|e| bad(e.to_string()))?;
        if config.get_hosts().is_empty() {
            return Err(bad("it names no host".into()));
        }
        if config.get_dbname().is_none() {
            return Err(bad(
                "it names no database (postgres://USER@HOST/DATABASE)".into()
            ));
        }
        if config.get_user().is_none() {
            return Err(bad(
                "it names no user (postgres://USER@HOST/DATABASE)".into()
            ));
        }
        if config.get_password().is_none() {
            if let Some(p) = password {
                config.password(p);
            }
        }
        config
            .connect_timeout(CONNECT_TIMEOUT)
            .keepalives(true)
            .keepalives_idle(std::time::Duration::from_secs(5))
            .keepalives_interval(std::time::Duration::from_secs(1))
            .keepalives_retries(3);
        #[cfg(target_os = "linux")]
        config.tcp_user_timeout(std::time::Duration::from_secs(6));
        config.ssl_mode(mode);
        let tls = match mode {
            SslMode::Disable => None,
            _ => Some(Arc::new(tls_config(root_cert.as_deref()).map_err(&bad)?)),
        };
        Ok(Target { config, shown, tls })
    }

    /// The URL without its password.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// What tells two databases apart within this process (the idle pool).
    pub(crate) fn key(&self) -> String {
        self.shown.clone()
    }

    pub(crate) fn connect(&self) -> Result<Client, StoreError> {
        let connected = match &self.tls {
            None => self.config.connect(NoTls),
            Some(tls) => self
                .config
                .connect(tokio_postgres_rustls::MakeRustlsConnect::new(
                    (**tls).clone(),
                )),
        };
        connected.map_err(|e| self.error(e))
    }

    /// `e` as the store error it is: the database out of reach, or a
    /// statement it refused.
    pub(crate) fn error(&self, e: postgres::Error) -> StoreError {
        if let Some(db) = e.as_db_error() {
            use postgres::error::SqlState;
            let code = db.code();
            if *code == SqlState::INVALID_PASSWORD
                || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
            {
                return StoreError::Refused {
                    url: self.shown.clone(),
                    detail: db.message().to_owned(),
                };
            }
            if [
                SqlState::LOCK_NOT_AVAILABLE,
                SqlState::QUERY_CANCELED,
                SqlState::T_R_SERIALIZATION_FAILURE,
                SqlState::T_R_DEADLOCK_DETECTED,
            ]
            .contains(code)
            {
                return StoreError::Contended {
                    url: self.shown.clone(),
                    detail: db.message().to_owned(),
                };
            }
            if [
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
                SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
            ]
            .contains(code)
            {
                return self.unreachable(db.message().to_owned());
            }
            return StoreError::Postgres {
                url: self.shown.clone(),
                detail: format!("{}: {}", code.code(), db.message()),
            };
        }
        let detail = match std::error::Error::source(&e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        };
        if detail.contains("invalid peer certificate") {
            return StoreError::Untrusted {
                url: self.shown.clone(),
                detail,
            };
        }
        self.unreachable(detail)
    }

    pub(crate) fn unreachable(&self, detail: String) -> StoreError {
        StoreError::Unreachable {
            url: self.shown.clone(),
            detail,
        }
    }
}

/// `url` with the password between `user:` and `@` removed.
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, hosts)) => {
            let user = user_info.split_once(':').map_or(user_info, |(u, _)| u);
            format!("{scheme}://{user}@{hosts}{tail}")
        }
        None => url.to_owned(),
    }
}

/// Takes the options the driver does not know (`sslrootcert`) or that we
/// read differently (`sslmode`) out of the URL's query.
fn take_our_options(url: &str) -> Result<(String, Option<PathBuf>, SslMode), String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), None, SslMode::Disable));
    };
    let mut kept = Vec::new();
    let mut root_cert = None;
    let mut mode = SslMode::Disable;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslrootcert" => root_cert = Some(PathBuf::from(value)),
            "sslmode" => {
                mode = match value {
                    "disable" => SslMode::Disable,
                    "prefer" | "allow" => SslMode::Prefer,
                    "require" | "verify-ca" | "verify-full" => SslMode::Require,
                    other => {
                        return Err(format!(
                        "sslmode={other} is not one of disable, allow, prefer, require, verify-ca, verify-full"
                    ))
                    }
                }
            }
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, root_cert, mode))
}

/// The TLS set-up: the roots in `root_cert` (PEM), else the system's.
fn tls_config(root_cert: Option<&std::path::Path>) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    match root_cert {
        Some(path) => {
            let pem = std::fs::read(path)
                .map_err(|e| format!("cannot read sslrootcert {}: {e}", path.display()))?;
            let mut added = 0;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
                added += 1;
            }
            if added == 0 {
                return Err(format!(
                    "sslrootcert {} holds no PEM certificate",
                    path.display()
                ));
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_never_shown() {
        assert_eq!(
            without_password("postgres://bob:s3cr:et@db.example:5432/ac?sslmode=require"),
            "postgres://bob@db.example:5432/ac?sslmode=require"
        );
        assert_eq!(
            without_password("postgresql://bob@db/ac"),
            "postgresql://bob@db/ac"
        );
        let t = Target::parse("postgres://bob:hunter2@db.example/ac", None).unwrap();
        assert!(!format!("{t:?}").contains("hunter2"));
        assert_eq!(t.shown(), "postgres://bob@db.example/ac");
    }

    #[test]
    fn a_url_missing_a_part_says_which() {
        let err = |u: &str| Target::parse(u, None).unwrap_err().to_string();
        assert!(err("mysql://x@y/z").contains("must start with postgres://"));
        assert!(err("postgres://bob@db").contains("names no database"));
        assert!(err("postgres://db/ac").contains("names no user"));
        let bad_mode = err("postgres://bob:pw@db/ac?sslmode=sometimes");
        assert!(bad_mode.contains("sslmode=sometimes"), "{bad_mode}");
        assert!(!bad_mode.contains("pw@"), "{bad_mode}");
    }

    #[test]
    fn a_password_from_elsewhere_fills_the_url_only_when_it_has_none() {
        let t = Target::parse("postgres://bob@db/ac", Some("from-file")).unwrap();
        assert_eq!(t.config.get_password(), Some(&b"from-file"[..]));
        let t = Target::parse("postgres://bob:inline@db/ac", Some("from-file")).unwrap();
        assert_eq!(t.config.get_password(), Some(&b"inline"[..]));
    }

    #[test]
    fn tls_only_when_asked_and_a_missing_root_file_is_named() {
        assert!(Target::parse("postgres://b@db/ac", None)
            .unwrap()
            .tls
            .is_none());
        let err = Target::parse(
            "postgres://b@db/ac?sslmode=require&sslrootcert=/nonexistent.pem",
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("cannot read sslrootcert /nonexistent.pem"),
            "{err}"
        );
    }
}
