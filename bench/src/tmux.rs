//! tmux: the same programs in tmux panes, driven through the tmux command
//! line, as scripts (and agent-tty) drive it.
//!
//! Every server here has a private socket (`-S`, inside the scratch
//! directory) and no configuration file (`-f /dev/null`), so neither the
//! user's server nor their `.tmux.conf` takes part; each server is ended by
//! its pid when dropped.
//!
//! tmux has no push notification for "this text is on screen", so the
//! prompt is found by polling `capture-pane`, as a script would: each poll
//! is a client process, which bounds the resolution to a few milliseconds.
//! The end of a pane's command, on the other hand, is exact: the command is
//! followed by `tmux wait-for -S`, and the benchmark blocks in `wait-for`.

use std::cell::Cell;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use nix::sys::signal::Signal;

use crate::bench::Bench;
use crate::procs;
use crate::workload::{throughput_command, PROMPT, PROMPT_SHOWN, SHELL, STEP_TIMEOUT};

/// Pause between two `capture-pane` polls, so the poller does not take a
/// whole core from the shell it waits for on a 2-core machine.
const POLL_PAUSE: Duration = Duration::from_millis(1);

pub struct TmuxServer {
    socket: PathBuf,
    pid: Cell<Option<u32>>,
}

impl TmuxServer {
    /// The server at `socket`; it starts with its first session.
    pub fn at(socket: PathBuf) -> Self {
        Self {
            socket,
            pid: Cell::new(None),
        }
    }

    /// A server in the scratch directory, named `name`.
    pub fn private(bench: &Bench, name: &str) -> anyhow::Result<Self> {
        Ok(Self::at(
            bench.private_dir("tmux")?.join(format!("{name}.sock")),
        ))
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.arg("-S")
            .arg(&self.socket)
            .args(["-f", "/dev/null"])
            .env_remove("TMUX");
        cmd
    }

    /// Runs a tmux client command; its stdout on success.
    pub fn run(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = self
            .command()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .context("cannot run tmux")?;
        ensure!(
            out.status.success(),
            "tmux {} failed: {}",
            args.first().unwrap_or(&""),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A detached 80×24 session `name` running `argv`: a program and its
    /// arguments, or one shell command line.
    pub fn new_session(
        &self,
        name: &str,
        env: &[(&str, &str)],
        argv: &[&str],
    ) -> anyhow::Result<()> {
        procs::before_start();
        let vars: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut args = vec!["new-session", "-d", "-s", name, "-x", "80", "-y", "24"];
        for var in &vars {
            args.extend(["-e", var.as_str()]);
        }
        args.extend(argv);
        self.run(&args).map(drop)
    }

    /// Polls `capture-pane` until `text` is on the pane's screen.
    pub fn wait_for_text(&self, session: &str, text: &str) -> anyhow::Result<()> {
        ensure!(
            self.poll_pane(session, STEP_TIMEOUT, |screen| screen.contains(text))?,
            "{text:?} not shown within {STEP_TIMEOUT:?}"
        );
        Ok(())
    }

    /// Polls `capture-pane` until `done` says yes to the pane's screen, at
    /// most `timeout`; false if it never did.
    pub fn poll_pane(
        &self,
        session: &str,
        timeout: Duration,
        done: impl Fn(&str) -> bool,
    ) -> anyhow::Result<bool> {
        let deadline = Instant::now() + timeout;
        while !done(&self.run(&["capture-pane", "-p", "-t", session])?) {
            if Instant::now() >= deadline {
                return Ok(false);
            }
            std::thread::sleep(POLL_PAUSE);
        }
        Ok(true)
    }

    fn kill_session(&self, session: &str) -> anyhow::Result<()> {
        self.run(&["kill-session", "-t", session]).map(drop)
    }

    /// The pid of the program in `session`'s pane.
    pub fn pane_pid(&self, session: &str) -> anyhow::Result<u32> {
        Ok(self
            .run(&["display-message", "-p", "-t", session, "#{pane_pid}"])?
            .trim()
            .parse()?)
    }

    /// The server's pid (asked once, then remembered).
    pub fn pid(&self) -> anyhow::Result<u32> {
        if let Some(pid) = self.pid.get() {
            return Ok(pid);
        }
        let pid = self
            .run(&["display-message", "-p", "#{pid}"])?
            .trim()
            .parse()?;
        self.pid.set(Some(pid));
        Ok(pid)
    }
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        if let Ok(pid) = self.pid() {
            procs::stop(pid, Signal::SIGTERM);
        }
    }
}

/// A new server and session → the prompt on its screen.
pub fn first_prompt_new_server(bench: &Bench, run: usize) -> anyhow::Result<Duration> {
    let server = TmuxServer::private(bench, &format!("prompt-{run}"))?;
    let start = Instant::now();
    server.new_session("prompt", &[("PS1", PROMPT)], SHELL)?;
    server.wait_for_text("prompt", PROMPT_SHOWN)?;
    Ok(start.elapsed())
}

/// A new session on a running server → the prompt on its screen.
pub fn first_prompt_running_server(bench: &Bench, runs: usize) -> anyhow::Result<Vec<Duration>> {
    let server = TmuxServer::private(bench, "prompt-warm")?;
    server.new_session("keep", &[], &["cat"])?;
    (0..runs)
        .map(|run| {
            let name = format!("prompt-{run}");
            let start = Instant::now();
            server.new_session(&name, &[("PS1", PROMPT)], SHELL)?;
            server.wait_for_text(&name, PROMPT_SHOWN)?;
            let elapsed = start.elapsed();
            server.kill_session(&name)?;
            Ok(elapsed)
        })
        .collect()
}

/// A new session running the 200 MB writer on a running server → the
/// `wait-for` signal sent after the writer ends.
pub fn throughput(bench: &Bench, run: usize) -> anyhow::Result<Duration> {
    let server = TmuxServer::private(bench, &format!("tp-{run}"))?;
    server.new_session("keep", &[], &["cat"])?;
    let channel = format!("tp-{run}-done");
    let pane = format!(
        "{}; tmux -S '{}' wait-for -S {channel}",
        throughput_command(),
        server.socket.display()
    );
    let start = Instant::now();
    server.new_session("tp", &[], &[&pane])?;
    // A signal sent before anyone waits is kept, so this cannot miss it.
    server.run(&["wait-for", &channel])?;
    Ok(start.elapsed())
}

/// PSS in MB of one server holding `count` idle `bash` sessions, read once
/// the last prompt has been shown `idle` ago.
pub fn idle_memory(bench: &Bench, count: usize, idle: Duration) -> anyhow::Result<f64> {
    let server = TmuxServer::private(bench, &format!("idle-{count}"))?;
    for i in 0..count {
        let name = format!("idle-{i}");
        server.new_session(&name, &[("PS1", PROMPT)], SHELL)?;
        server.wait_for_text(&name, PROMPT_SHOWN)?;
    }
    std::thread::sleep(idle);
    procs::pss_mb(server.pid()?)
}
