//! A private PostgreSQL server per test process ([`server`]), and a fresh
//! database with a role of its own per test ([`Server::fresh_database`]).
//!
//! # Why a real server
//!
//! What a store on PostgreSQL has to get right — transactions that conflict,
//! connections that break, a server that restarts under traffic — is what
//! a fake would not do. The server is the distribution's own (PostgreSQL
//! server binaries, found by `pg_config --bindir` or under
//! `/usr/lib/postgresql/*/bin`), set for speed rather than durability
//! (`fsync`, `synchronous_commit` and `full_page_writes` off).
//!
//! # One per test process
//!
//! The first call of [`server`] runs `initdb` into a fresh temporary
//! directory and starts the postmaster on a free port; every later call
//! returns the same server. Tests share it and stay apart by database: each
//! asks for its own, owned by a role of its own with a random password.
//!
//! # Ending with the process
//!
//! The server lives in a static, and statics are never dropped, so nothing
//! in Rust's order of things would stop it. Two mechanisms do:
//!
//! - the postmaster is spawned with `PR_SET_PDEATHSIG` = SIGINT (a fast
//!   shutdown): the kernel sends it when the thread that spawned it ends.
//!   That is a *thread*, not the process, so every start — the first and
//!   each [`Server::restart`] — is made by one keeper thread that lives as
//!   long as the process (`keeper`). The signal is set in the child after
//!   its change of user, since a change of credentials clears it, and the
//!   child then checks that its parent is still the test process: had the
//!   parent died before the signal was set, none would ever come. This
//!   holds even when the test process is killed with SIGKILL;
//! - an `atexit` handler, run when the test process exits normally (also
//!   after failed tests), stops the postmaster, waits for it, and removes
//!   the temporary directory. A killed test process leaves that directory
//!   behind (`/tmp/ac-pg-*`), never a running server.
//!
//! Nothing is ever killed by name: only the pid the keeper spawned.
//!
//! # Root
//!
//! PostgreSQL refuses to run as root. When the tests are root, `initdb` and
//! the postmaster run as the `postgres` system user (Debian's package makes
//! it), else as `nobody`; the temporary directory is theirs. The change of
//! user is made in the child before `exec` (not with `su`), so the pid the
//! keeper holds is the postmaster's own.
//!
//! # Network
//!
//! The server listens on every IPv4 address of this machine
//! (`listen_addresses=0.0.0.0`), because the hosts of [`crate::hosts`] reach
//! it at addresses that appear only after it has started. `pg_hba.conf`
//! admits only 127.0.0.1 and the hosts' subnet ([`crate::hosts::SUBNET`]),
//! by password (SCRAM-SHA-256); the local socket, in the temporary
//! directory, trusts its users.

mod cluster;
mod keeper;

use std::fs::File;
use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use keeper::{Keeper, StartError};

/// The superuser `initdb` makes.
pub const ADMIN: &str = "agentcomms_admin";
/// Its password: fixed, since the server is private to the test process.
const ADMIN_PASSWORD: &str = "agentcomms-admin-password";
/// How many free ports to try in turn, should another process take the one
/// chosen before the postmaster binds it.
const PORT_ATTEMPTS: usize = 5;

/// The running server of this test process.
pub struct Server {
    bin: PathBuf,
    /// The temporary directory: `data/`, `sock/`, `postgres.log`.
    base: PathBuf,
    port: u16,
    /// The postmaster's pid, which changes on [`Server::restart`].
    pid: AtomicU32,
    keeper: Keeper,
    /// Databases made so far, for unique names.
    databases: AtomicU32,
}

/// A database of one test, owned by a role of its own.
#[derive(Debug, Clone)]
pub struct Database {
    name: String,
    user: String,
    password: String,
    port: u16,
}

static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();

/// The server of this test process, started by the first call (`initdb`
/// and the start: under a second on a quiet machine); an error says why it
/// could not start, and later calls return the same error.
pub fn server() -> Result<&'static Server, String> {
    SERVER
        .get_or_init(Server::start)
        .as_ref()
        .map_err(Clone::clone)
}

impl Server {
    fn start() -> Result<Server, String> {
        let bin = cluster::bin_dir()?;
        let owner = cluster::Owner::for_this_process()?;
        let dir = cluster::init(&bin, owner)?;
        let keeper = Keeper::spawn(bin.clone(), dir.path().to_owned(), owner)?;
        let mut taken = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let port = free_port()?;
            match keeper.start(port) {
                Ok(pid) => {
                    // SAFETY: atexit only records the function, which is
                    // an `extern "C" fn()` that does not unwind.
                    unsafe { libc::atexit(stop_at_exit) };
                    return Ok(Server {
                        bin,
                        base: dir.keep(),
                        port,
                        pid: AtomicU32::new(pid),
                        keeper,
                        databases: AtomicU32::new(0),
                    });
                }
                Err(StartError::PortTaken(log)) => taken = log,
                Err(StartError::Failed(why)) => return Err(why),
            }
        }
        Err(format!(
            "each of {PORT_ATTEMPTS} free ports was taken when PostgreSQL started: {taken}"
        ))
    }

    /// `postgres://agentcomms_admin:PASSWORD@127.0.0.1:PORT/postgres`.
    /// The CA (PEM) that signed the server's TLS certificate, which is
    /// for `localhost` and 127.0.0.1: `?sslmode=require&sslrootcert=` it.
    pub fn ca_cert(&self) -> PathBuf {
        self.base.join("ca.crt")
    }

    pub fn admin_url(&self) -> String {
        format!(
            "postgres://{ADMIN}:{ADMIN_PASSWORD}@127.0.0.1:{}/postgres",
            self.port
        )
    }

    /// A new database, owned by a new role (`LOGIN`, a random password)
    /// that has no other rights; no other role but the superuser may
    /// connect to it.
    pub fn fresh_database(&self) -> Result<Database, String> {
        let n = self.databases.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let db = Database {
            name: format!("t_{pid}_{n}"),
            user: format!("u_{pid}_{n}"),
            password: random_hex(16)?,
            port: self.port,
        };
        self.psql_admin(&[
            &format!("CREATE ROLE {} LOGIN PASSWORD '{}'", db.user, db.password),
            &format!("CREATE DATABASE {} OWNER {}", db.name, db.user),
            &format!("REVOKE CONNECT ON DATABASE {} FROM PUBLIC", db.name),
        ])?;
        Ok(db)
    }

    /// The TCP port, the same across restarts.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The postmaster's pid (a new one after [`Server::restart`]; 0 while
    /// stopped).
    pub fn pid(&self) -> u32 {
        self.pid.load(Ordering::SeqCst)
    }

    /// The PostgreSQL program `name` (`psql`, `pg_isready`, `pg_dump` …)
    /// of the server's own installation.
    pub fn bin(&self, name: &str) -> PathBuf {
        self.bin.join(name)
    }

    /// Stops the postmaster (a fast shutdown: open connections are ended)
    /// and starts it again on the same port and data, returning once it
    /// accepts connections: "the database restarted during traffic".
    pub fn restart(&self) -> Result<(), String> {
        let pid = self.keeper.start(self.port).map_err(StartError::message)?;
        self.pid.store(pid, Ordering::SeqCst);
        Ok(())
    }

    /// Stops the postmaster (a fast shutdown: open connections are ended)
    /// and returns once it has exited: "the database went away". Nothing
    /// listens on the port until [`Server::start_again`]; the stop-at-exit
    /// handler then finds nothing left to stop.
    pub fn stop(&self) -> Result<(), String> {
        self.keeper.stop()?;
        self.pid.store(0, Ordering::SeqCst);
        Ok(())
    }

    /// Starts a stopped postmaster again on the same port and data,
    /// returning once it accepts connections: "the database came back".
    pub fn start_again(&self) -> Result<(), String> {
        self.restart()
    }

    /// Runs each statement in turn as the superuser (each in a transaction
    /// of its own: `CREATE DATABASE` cannot run inside one).
    fn psql_admin(&self, statements: &[&str]) -> Result<(), String> {
        let mut cmd = Command::new(self.bin("psql"));
        cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d"])
            .arg(self.admin_url())
            .env("PGCONNECT_TIMEOUT", "10")
            .stdin(Stdio::null());
        for statement in statements {
            cmd.args(["-c", statement]);
        }
        let out = cmd
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.bin("psql").display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "psql as {ADMIN} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }
}

impl Database {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The role that owns the database.
    pub fn user(&self) -> &str {
        &self.user
    }

    pub fn password(&self) -> &str {
        &self.password
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://USER:PASSWORD@HOST:PORT/NAME`: `host` is 127.0.0.1, or a
    /// host's [`db_address`](crate::hosts::Host::db_address).
    pub fn url(&self, host: &str) -> String {
        format!(
            "postgres://{}:{}@{host}:{}/{}",
            self.user, self.password, self.port, self.name
        )
    }

    /// [`Database::url`] without the password, for a test of how one is
    /// supplied some other way.
    pub fn url_without_password(&self, host: &str) -> String {
        format!(
            "postgres://{}@{host}:{}/{}",
            self.user, self.port, self.name
        )
    }
}

/// Stops the server and removes its directory when the test process exits.
extern "C" fn stop_at_exit() {
    if let Some(Ok(server)) = SERVER.get() {
        // 0 after a [`Server::stop`]: nothing runs (and kill(0) would
        // signal our own process group).
        if server.pid() != 0 {
            keeper::stop_pid(server.pid());
        }
        let _ = std::fs::remove_dir_all(&server.base);
    }
}

/// A TCP port that was free a moment ago (bound to port 0, then released);
/// [`Server::start`] tries another should it be taken meanwhile.
fn free_port() -> Result<u16, String> {
    let listener =
        TcpListener::bind(("0.0.0.0", 0)).map_err(|e| format!("cannot find a free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free port: {e}"))
}

/// `bytes` random bytes from the system, as hex: safe inside SQL quotes and
/// URLs alike.
fn random_hex(bytes: usize) -> Result<String, String> {
    let mut buf = vec![0u8; bytes];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}
