//! The agent process: an ACP agent on piped stdio, tied to its supervisor.
//!
//! Its standard error is the agent's log: each line goes to the
//! supervisor's log, and the last one is kept, because when an agent dies
//! that line usually says why (the runtime's OFFLINE reason carries it).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::socket::protocol::ExitInfo;

/// The longest stderr line kept for the exit reason.
const MAX_LAST_LINE: usize = 512;
/// How long, once the agent exited, its last stderr lines may take to be
/// read (a helper that inherited the pipe can hold it open: then the line
/// read so far stands).
const STDERR_DRAIN: Duration = Duration::from_millis(500);

/// What to run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct AgentCommand {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub env_remove: Vec<String>,
}

pub struct AgentProcess {
    child: Child,
    pid: u32,
    last_stderr: Arc<Mutex<String>>,
    /// The task reading standard error; done at its end of file.
    stderr_reader: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot start the agent {program}: {source}")]
pub struct SpawnError {
    program: String,
    source: std::io::Error,
}

impl AgentProcess {
    pub fn spawn(cmd: &AgentCommand) -> Result<(Self, ChildStdin, ChildStdout), SpawnError> {
        let program = cmd.argv.first().cloned().unwrap_or_default();
        let mut command = Command::new(&program);
        command
            .args(&cmd.argv[1..])
            .current_dir(&cmd.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for name in &cmd.env_remove {
            command.env_remove(name);
        }
        command.envs(cmd.env.iter().map(|(k, v)| (k, v)));
        crate::os::tie_to_supervisor(&mut command);
        let mut child = command
            .spawn()
            .map_err(|source| SpawnError { program, source })?;
        let pid = child.id().unwrap_or(0);
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let last_stderr = Arc::new(Mutex::new(String::new()));
        let stderr_reader = child
            .stderr
            .take()
            .map(|stderr| tokio::spawn(keep_last_line(stderr, last_stderr.clone())));
        Ok((
            Self {
                child,
                pid,
                last_stderr,
                stderr_reader,
            },
            stdin,
            stdout,
        ))
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The agent's last line on standard error (empty if none).
    pub fn last_stderr(&self) -> String {
        self.last_stderr
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The agent's last line on standard error once it has exited: the
    /// exit can be seen before the reader took the lines written just
    /// before it (the line that says why), so this first lets the reader
    /// reach the pipe's end, for at most [`STDERR_DRAIN`].
    pub async fn last_stderr_after_exit(&mut self) -> String {
        if let Some(reader) = self.stderr_reader.as_mut() {
            if tokio::time::timeout(STDERR_DRAIN, reader).await.is_ok() {
                self.stderr_reader = None;
            }
        }
        self.last_stderr()
    }

    /// Waits for the agent to exit.
    pub async fn wait(&mut self) -> ExitInfo {
        match self.child.wait().await {
            Ok(status) => exit_info(status),
            Err(_) => ExitInfo {
                code: None,
                signal: None,
            },
        }
    }

    /// Ends the agent and the helpers in its process group: SIGTERM, then
    /// SIGKILL after `grace`.
    pub async fn end(&mut self, grace: Duration) -> ExitInfo {
        if let Ok(Some(status)) = self.child.try_wait() {
            crate::os::signal_group(self.pid, true);
            return exit_info(status);
        }
        crate::os::signal_group(self.pid, false);
        let info = match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(status)) => exit_info(status),
            _ => {
                let _ = self.child.start_kill();
                self.wait().await
            }
        };
        // Helpers that stayed behind their leader.
        crate::os::signal_group(self.pid, true);
        info
    }
}

async fn keep_last_line(stderr: tokio::process::ChildStderr, last: Arc<Mutex<String>>) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        tracing::info!(target: "agent", "{line}");
        let kept: String = line.chars().take(MAX_LAST_LINE).collect();
        *last.lock().unwrap_or_else(|p| p.into_inner()) =
            crate::display::one_line(&kept).into_owned();
    }
}

fn exit_info(status: std::process::ExitStatus) -> ExitInfo {
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(&status).map(signal_name);
    #[cfg(not(unix))]
    let signal = None;
    ExitInfo {
        code: status.code(),
        signal,
    }
}

#[cfg(unix)]
fn signal_name(n: i32) -> String {
    nix::sys::signal::Signal::try_from(n)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|_| format!("signal {n}"))
}
