//! Starting a detached supervisor and waiting until its session runs.
//!
//! The launching command re-executes its own binary with [`SUPERVISOR_ARG`];
//! the new process starts a new session (no controlling terminal), reads its
//! [`SupervisorConfig`] from stdin, and reports on stdout exactly one line —
//! `READY <record json>` or `ERROR <message>` — before pointing stdout and
//! stderr at the session log. The launcher therefore returns only once the
//! child is running and the socket listens, and a command that cannot start
//! is reported by the command that asked for it, with nothing left behind.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use super::{runtime, Supervisor, SupervisorConfig};
use crate::session::{SessionPaths, SessionRecord};

/// The hidden first argument that makes any of our binaries a supervisor.
pub const SUPERVISOR_ARG: &str = "__supervise";

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("cannot start the supervisor ({exe}): {source}")]
    Exec { exe: String, source: std::io::Error },
    /// The supervisor started but could not start the session.
    #[error("{0}")]
    Refused(String),
    #[error("the supervisor exited before the session was ready; see {0}")]
    Died(String),
}

/// Starts a detached supervisor for `config` and waits for it to be ready.
pub fn spawn_detached(
    exe: &Path,
    config: &SupervisorConfig,
    log: &Path,
) -> Result<SessionRecord, LaunchError> {
    let mut cmd = Command::new(exe);
    cmd.arg(SUPERVISOR_ARG)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe; nothing else runs in pre_exec.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    let exec_err = |source| LaunchError::Exec {
        exe: exe.display().to_string(),
        source,
    };
    let mut child = cmd.spawn().map_err(exec_err)?;
    let spec = serde_json::to_vec(config).expect("config serializes");
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&spec).map_err(exec_err)?;
    }
    let mut line = String::new();
    let stdout = child.stdout.take().expect("piped");
    let _ = BufReader::new(stdout).read_line(&mut line);
    // The supervisor keeps running; reap it only if it already ended, so it
    // does not linger as a zombie of a long-lived launcher (tests, km).
    let _ = child.try_wait();
    if let Some(record) = line.strip_prefix("READY ") {
        return serde_json::from_str(record.trim())
            .map_err(|e| LaunchError::Refused(format!("bad ready line: {e}")));
    }
    let _ = child.wait();
    match line.strip_prefix("ERROR ") {
        Some(message) => Err(LaunchError::Refused(message.trim().to_owned())),
        None => Err(LaunchError::Died(log.display().to_string())),
    }
}

/// The body of a detached supervisor process (after [`SUPERVISOR_ARG`]).
/// Returns the process exit code.
pub fn daemon_main(init_logging: impl FnOnce()) -> i32 {
    reset_signals();
    return_large_buffers_to_the_system();
    let mut spec = Vec::new();
    if std::io::stdin().read_to_end(&mut spec).is_err() {
        return 2;
    }
    let config: SupervisorConfig = match serde_json::from_slice(&spec) {
        Ok(c) => c,
        Err(e) => {
            println!("ERROR invalid supervisor configuration: {e}");
            return 2;
        }
    };
    redirect_stdin_to_null();
    let log = crate::paths::runtime_root();
    let paths = SessionPaths::new(&log, &config.name);
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            println!("ERROR {e}");
            return 1;
        }
    };
    rt.block_on(async move {
        let supervisor = match Supervisor::start(config) {
            Ok(s) => s,
            Err(e) => {
                println!("ERROR {e}");
                return 1;
            }
        };
        redirect_output_to_log(&paths.log);
        init_logging();
        if supervisor.replaced_stale {
            tracing::info!("replaced a stale socket or record left by an earlier supervisor");
        }
        let record = serde_json::to_string(supervisor.record()).expect("record serializes");
        // The launcher reads exactly one line from the pipe (stdout was just
        // pointed at the log): READY once the session accepts work, or ERROR
        // if the child ended before that.
        let info = supervisor
            .run(|_| {}, || write_ready(&format!("READY {record}")))
            .await;
        tracing::info!("session ended: {info}");
        write_ready(&format!(
            "ERROR the command ended before the session was ready ({info}); its last output is in the log: {}",
            paths.log.display()
        ));
        0
    })
}

/// A supervisor must answer SIGTERM, SIGINT and SIGHUP whatever its
/// launcher had blocked or ignored (both survive exec): a script that
/// blocks SIGTERM around `session new` would otherwise leave a session that
/// nothing but SIGKILL can end.
fn reset_signals() {
    use nix::sys::signal::{signal, SigHandler, SigSet, Signal};
    let _ = SigSet::empty().thread_set_mask();
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        // SAFETY: restoring the default disposition before any thread or
        // handler exists.
        let _ = unsafe { signal(sig, SigHandler::SigDfl) };
    }
}

/// A flood passes through buffers of up to a few MiB (merged PTY chunks, a
/// cell's kept output and its reply). glibc raises its mmap threshold each
/// time such a buffer is freed, after which they come from the heap and
/// fragment it, so a long-lived supervisor's footprint creeps up with the
/// output it has seen. A fixed threshold keeps every large buffer mapped
/// and returned on free: the footprint stays bounded.
fn return_large_buffers_to_the_system() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only tunes the allocator; called before any thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
    }
}

/// Writes the one status line to the launcher's pipe (moved to a spare
/// descriptor when stdout went to the log) and closes it; later calls do
/// nothing.
fn write_ready(line: &str) {
    let fd = READY_FD.swap(-1, std::sync::atomic::Ordering::SeqCst);
    if fd < 0 {
        return;
    }
    // SAFETY: `fd` is the launcher pipe we dup'ed and own; File closes it.
    let mut pipe = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let _ = writeln!(pipe, "{line}");
}

static READY_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

fn redirect_stdin_to_null() {
    if let Ok(null) = std::fs::File::open("/dev/null") {
        let _ = nix::unistd::dup2(std::os::fd::AsRawFd::as_raw_fd(&null), 0);
    }
}

fn redirect_output_to_log(log: &Path) {
    use std::os::fd::AsRawFd;
    let _ = std::io::stdout().flush();
    // Keep the launcher's pipe for the ready line.
    if let Ok(fd) = nix::unistd::dup(1) {
        READY_FD.store(fd, std::sync::atomic::Ordering::SeqCst);
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(log);
    if let Ok(file) = file {
        let _ = crate::paths::make_owner_only(log);
        let _ = nix::unistd::dup2(file.as_raw_fd(), 1);
        let _ = nix::unistd::dup2(file.as_raw_fd(), 2);
    }
}
