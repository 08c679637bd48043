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
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{runtime, Supervisor, SupervisorConfig};
// The descriptor (or handle) plumbing of a detached supervisor.
use crate::os::{
    detach, redirect_output_to_log, redirect_stdin_to_null, reset_signals, tune_allocator,
    write_ready,
};
use crate::session::{SessionPaths, SessionRecord};
use crate::takeover::ConversationDiscovery;

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

/// The supervisor-only image, installed next to `agent-comms`.
pub const SUPERVISOR_IMAGE: &str = "agent-comms-supervisor";

/// Starts a detached supervisor for `config` and waits for it to be ready.
/// `exe` is the `agent-comms` binary; the supervisor may be the image
/// beside it ([`supervisor_image`]).
pub fn spawn_detached(
    exe: &Path,
    config: &SupervisorConfig,
    log: &Path,
) -> Result<SessionRecord, LaunchError> {
    let spec = serde_json::to_vec(config).expect("config serializes");
    let image = supervisor_image(exe, config);
    let record = spawn_daemon(&image, SUPERVISOR_ARG, &spec, log)?;
    serde_json::from_str(&record).map_err(|e| LaunchError::Refused(format!("bad ready line: {e}")))
}

/// Which binary supervises `config`'s session: [`SUPERVISOR_IMAGE`] next
/// to `exe` when it is there and the session's adapter loads no plugin,
/// else `exe` itself. Cargo builds the image beside `agent-comms`, and
/// scripts/install installs them together.
pub fn supervisor_image(exe: &Path, config: &SupervisorConfig) -> PathBuf {
    let plugin = config.adapter.as_ref().is_some_and(|a| a.plugin.is_some());
    let image = exe.with_file_name(format!(
        "{SUPERVISOR_IMAGE}{}",
        std::env::consts::EXE_SUFFIX
    ));
    if plugin || !image.is_file() {
        return exe.to_owned();
    }
    image
}

/// Starts `exe ARG` detached with `spec` on its standard input and waits
/// for its one status line: returns what follows `READY `.
pub fn spawn_daemon(exe: &Path, arg: &str, spec: &[u8], log: &Path) -> Result<String, LaunchError> {
    let mut cmd = Command::new(exe);
    cmd.arg(arg)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    detach(&mut cmd);
    let exec_err = |source| LaunchError::Exec {
        exe: exe.display().to_string(),
        source,
    };
    let mut child = cmd.spawn().map_err(exec_err)?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(spec).map_err(exec_err)?;
    }
    let mut line = String::new();
    let stdout = child.stdout.take().expect("piped");
    let _ = BufReader::new(stdout).read_line(&mut line);
    // The supervisor keeps running; reap it only if it already ended, so it
    // does not linger as a zombie of a long-lived launcher (tests, km).
    let _ = child.try_wait();
    if let Some(ready) = line.strip_prefix("READY ") {
        return Ok(ready.trim().to_owned());
    }
    let _ = child.wait();
    match line.strip_prefix("ERROR ") {
        Some(message) => Err(LaunchError::Refused(message.trim().to_owned())),
        None => Err(LaunchError::Died(log.display().to_string())),
    }
}

/// The first steps of every detached daemon: signals as a fresh process
/// has them, and its configuration read from standard input (which then
/// points at /dev/null). `None` (with an ERROR line said) when it is not
/// a `T`.
pub fn daemon_config<T: serde::de::DeserializeOwned>() -> Option<T> {
    reset_signals();
    tune_allocator();
    let mut spec = Vec::new();
    if std::io::stdin().read_to_end(&mut spec).is_err() {
        return None;
    }
    redirect_stdin_to_null();
    match serde_json::from_slice(&spec) {
        Ok(c) => Some(c),
        Err(e) => {
            println!("ERROR invalid supervisor configuration: {e}");
            None
        }
    }
}

/// Finds the [`ConversationDiscovery`] an adapter's `[conversation]
/// discovery` names (the adapters crate knows them; core names none).
pub type Discoveries = fn(&str) -> Option<Box<dyn ConversationDiscovery>>;

/// The body of a detached supervisor process (after [`SUPERVISOR_ARG`]).
/// Returns the process exit code. A program whose adapter has a discovery
/// in `discoveries` has its own activity reports read (busy at once, idle
/// without the debounce), as a served runtime's are.
pub fn daemon_main(init_logging: impl FnOnce(), discoveries: Discoveries) -> i32 {
    let Some(config) = daemon_config::<SupervisorConfig>() else {
        return 2;
    };
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
        if let Some(discovery) = supervisor.discovery().and_then(discoveries) {
            supervisor.handle().take_reports_of(discovery.into());
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::monitor::AdapterSpec;
    use crate::session::SessionName;
    use crate::supervisor::cell_session::CellSession;

    fn config(plugin: Option<&str>) -> SupervisorConfig {
        let mut config = CellSession {
            name: SessionName::parse("s").unwrap(),
            command_line: "bash".into(),
            cwd: "/".into(),
            profile: None,
            frame: None,
            record: None,
            files_dir: "/nowhere".into(),
        }
        .config();
        config.adapter = Some(AdapterSpec {
            name: "a".into(),
            source: "a.toml".into(),
            text: String::new(),
            plugin: plugin.map(PathBuf::from),
        });
        config
    }

    #[test]
    fn the_supervisor_image_serves_sessions_without_a_plugin_where_it_is_installed() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("agent-comms");
        std::fs::write(&exe, "").unwrap();
        assert_eq!(supervisor_image(&exe, &config(None)), exe, "not installed");

        let image = dir.path().join(format!(
            "{SUPERVISOR_IMAGE}{}",
            std::env::consts::EXE_SUFFIX
        ));
        std::fs::write(&image, "").unwrap();
        assert_eq!(supervisor_image(&exe, &config(None)), image);
        assert_eq!(
            supervisor_image(&exe, &config(Some("/p/libplugin.so"))),
            exe,
            "a plugin needs the dynamic agent-comms"
        );
    }
}
