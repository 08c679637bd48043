//! The keeper thread: the one thread that spawns the postmaster, and lives
//! as long as the process, so that the postmaster's death signal (sent when
//! the spawning *thread* ends) comes only when the test process ends.
//! Starts, restarts and stops are requests to it over a channel; it answers
//! a start once the postmaster accepts connections, or with why it does
//! not, and a stop once the postmaster has exited.

use std::fs::{self, File};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread;
use std::time::{Duration, Instant};

use super::cluster::{bind_to_spawner, Owner};

/// Bound for the postmaster to accept connections after its start.
const READY: Duration = Duration::from_secs(30);
/// Bound for a fast shutdown.
const STOP: Duration = Duration::from_secs(30);
/// Pause between two connection attempts while it starts.
const RETRY: Duration = Duration::from_millis(50);

/// Why a start failed.
pub(super) enum StartError {
    /// Another process took the port first (the log says so).
    PortTaken(String),
    Failed(String),
}

impl StartError {
    pub(super) fn message(self) -> String {
        match self {
            StartError::PortTaken(log) => format!("PostgreSQL found its port taken:\n{log}"),
            StartError::Failed(why) => why,
        }
    }
}

/// What the keeper is asked to do.
enum Request {
    /// A (re)start of the postmaster on `port`, answered with its pid.
    Start {
        port: u16,
        reply: Sender<Result<u32, StartError>>,
    },
    /// A fast shutdown, answered once the postmaster has exited.
    Stop { reply: Sender<()> },
}

/// The handle to the keeper thread.
pub(super) struct Keeper {
    requests: Sender<Request>,
}

/// What the keeper needs to start the postmaster.
struct Cluster {
    bin: PathBuf,
    /// The temporary directory of `cluster::init`.
    base: PathBuf,
    owner: Option<Owner>,
}

impl Keeper {
    /// Starts the keeper thread. It ends when the `Keeper` is dropped,
    /// which the server (a static) never is.
    pub(super) fn spawn(
        bin: PathBuf,
        base: PathBuf,
        owner: Option<Owner>,
    ) -> Result<Keeper, String> {
        let (requests, incoming) = channel();
        let cluster = Cluster { bin, base, owner };
        thread::Builder::new()
            .name("postgres-keeper".into())
            .spawn(move || keep(cluster, incoming))
            .map_err(|e| format!("cannot start the postgres keeper thread: {e}"))?;
        Ok(Keeper { requests })
    }

    /// Starts the postmaster on `port`, stopping the running one first;
    /// returns its pid once it accepts connections.
    pub(super) fn start(&self, port: u16) -> Result<u32, StartError> {
        let (reply, answer) = channel();
        let gone = || StartError::Failed("the postgres keeper thread is gone".into());
        self.requests
            .send(Request::Start { port, reply })
            .map_err(|_| gone())?;
        answer.recv().map_err(|_| gone())?
    }

    /// Stops the postmaster (a fast shutdown) and returns once it exited;
    /// [`Keeper::start`] starts it again.
    pub(super) fn stop(&self) -> Result<(), String> {
        let (reply, answer) = channel();
        let gone = || "the postgres keeper thread is gone".to_owned();
        self.requests
            .send(Request::Stop { reply })
            .map_err(|_| gone())?;
        answer.recv().map_err(|_| gone())
    }
}

fn keep(cluster: Cluster, incoming: Receiver<Request>) {
    let mut running: Option<Child> = None;
    for request in incoming {
        match request {
            Request::Start { port, reply } => {
                let _ = reply.send(cluster.start(port, &mut running));
            }
            Request::Stop { reply } => {
                stop(&mut running);
                let _ = reply.send(());
            }
        }
    }
    stop(&mut running);
}

impl Cluster {
    fn start(&self, port: u16, running: &mut Option<Child>) -> Result<u32, StartError> {
        stop(running);
        let failed = |what: &str, e: io::Error| StartError::Failed(format!("cannot {what}: {e}"));
        let log_path = self.base.join("postgres.log");
        let log = File::create(&log_path).map_err(|e| failed("create postgres.log", e))?;
        let mut cmd = Command::new(self.bin.join("postgres"));
        cmd.arg("-D")
            .arg(self.base.join("data"))
            .args(["-p", &port.to_string(), "-k"])
            .arg(self.base.join("sock"))
            .args(["-c", "listen_addresses=0.0.0.0"])
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "max_connections=200"])
            // TLS when a client asks (sslmode=require); plain otherwise.
            .args(["-c", "ssl=on"])
            .current_dir(&self.base)
            .stdin(Stdio::null())
            .stdout(
                log.try_clone()
                    .map_err(|e| failed("share postgres.log", e))?,
            )
            .stderr(log);
        bind_to_spawner(&mut cmd, self.owner, libc::SIGINT);
        let child = running.insert(cmd.spawn().map_err(|e| failed("start postgres", e))?);
        let pid = child.id();

        let deadline = Instant::now() + READY;
        loop {
            if self.accepts(port) {
                return Ok(pid);
            }
            let read_log = || fs::read_to_string(&log_path).unwrap_or_default();
            if let Ok(Some(status)) = child.try_wait() {
                *running = None;
                let log = read_log();
                return Err(if log.contains("Address already in use") {
                    StartError::PortTaken(log)
                } else {
                    StartError::Failed(format!("postgres exited ({status}):\n{log}"))
                });
            }
            if Instant::now() > deadline {
                stop(running);
                return Err(StartError::Failed(format!(
                    "postgres did not accept connections within {READY:?}:\n{}",
                    read_log()
                )));
            }
            thread::sleep(RETRY);
        }
    }

    /// Whether the postmaster accepts connections on `port` (a connection
    /// attempt by `pg_isready`).
    fn accepts(&self, port: u16) -> bool {
        Command::new(self.bin.join("pg_isready"))
            .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string(), "-t", "2"])
            .stdin(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

/// Stops the running postmaster, if any, and reaps it.
fn stop(running: &mut Option<Child>) {
    if let Some(mut child) = running.take() {
        stop_pid(child.id());
        let _ = child.wait();
    }
}

/// A fast shutdown of the postmaster `pid` (SIGINT), and a wait of at most
/// [`STOP`] for its end; then SIGKILL. Reaps nothing: the keeper does.
pub(super) fn stop_pid(pid: u32) {
    // SAFETY: kill(2) on the pid of the postmaster we spawned.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
    if !wait_exit(pid, STOP) {
        // SAFETY: as above.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        wait_exit(pid, Duration::from_secs(5));
    }
}

/// Waits at most `timeout` for `pid` to end (a pidfd turns readable when
/// the process has exited); true if it has.
fn wait_exit(pid: u32, timeout: Duration) -> bool {
    // SAFETY: pidfd_open takes a pid and flags, and returns a new fd.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    // SAFETY: a new fd of ours, owned from here on.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut poll = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut poll, 1, left.as_millis() as libc::c_int) };
        if ready >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return ready > 0;
        }
    }
}
