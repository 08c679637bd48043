//! agent-comms: sessions started as a user starts them, observed through the
//! client library.
//!
//! A session is started by spawning `agent-comms session new` (the process
//! start, the supervisor's daemonizing and its ready handshake are part of
//! what a user waits for), and observed through an attach or watch stream on
//! its socket rather than by polling `session snapshot`: a stream delivers
//! each output chunk as the supervisor reads it, so the time measured ends
//! when the bytes are there, not at the next poll. The stream starts with a
//! redraw of the current screen, so a prompt drawn before the stream opened
//! is still seen.
//!
//! Throughput is measured twice: with a watch client (output is also relayed
//! over the socket, as when someone watches) and with no client, where the
//! end is the supervisor's exit, seen through a pidfd.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use agent_comms_core::client::{Client, ClientError};
use agent_comms_core::session::SessionRecord;
use agent_comms_core::socket::codec::Message;
use agent_comms_core::socket::protocol::{Event, ExitInfo, Request, Response, StreamMode};
use anyhow::{bail, ensure, Context};

use crate::bench::Bench;
use crate::procs;
use crate::workload::{
    contains, echo_command, key, throughput_command, ECHO_READY, PROMPT, PROMPT_SHOWN, SHELL,
    STEP_TIMEOUT,
};

/// How long a 200 MB run may take before it counts as hung.
const THROUGHPUT_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a session sits untouched before its memory is read.
pub const IDLE: Duration = Duration::from_secs(1);

/// A live session; its supervisor is ended by pid when this is dropped.
pub struct Session<'a> {
    bench: &'a Bench,
    pub record: SessionRecord,
}

impl<'a> Session<'a> {
    /// `agent-comms session new --json NAME [--env K=V]… -- ARGV…`.
    pub fn start(
        bench: &'a Bench,
        name: &str,
        env: &[(&str, &str)],
        argv: &[&str],
    ) -> anyhow::Result<Self> {
        let mut cmd = bench.agent_comms();
        cmd.args(["session", "new", "--json", name]);
        for (k, v) in env {
            cmd.arg("--env").arg(format!("{k}={v}"));
        }
        cmd.arg("--").args(argv).stdin(Stdio::null());
        let out = cmd.output().context("cannot run agent-comms session new")?;
        ensure!(
            out.status.success(),
            "agent-comms session new failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let record =
            serde_json::from_slice(&out.stdout).context("session new --json printed no record")?;
        Ok(Self { bench, record })
    }

    fn stream(&self, mode: StreamMode) -> anyhow::Result<Stream> {
        Stream::open(&self.record.socket, mode)
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        self.bench.end_session(&self.record);
    }
}

/// An attach (interactive) or watch stream on a session's socket.
struct Stream {
    client: Client,
    /// Output not yet matched by [`Stream::read_until`].
    seen: Vec<u8>,
}

impl Stream {
    fn open(socket: &Path, mode: StreamMode) -> anyhow::Result<Self> {
        let mut client = Client::connect(socket)
            .with_context(|| format!("cannot connect to {}", socket.display()))?;
        // The timeout belongs to the socket, so it holds for the client too.
        client
            .try_clone_stream()?
            .set_read_timeout(Some(STEP_TIMEOUT))?;
        client.send(Message::Request(Request::Attach {
            mode,
            rows: None,
            cols: None,
        }))?;
        match client.read_frame()?.message {
            Message::Response(Response::Ok) => Ok(Self {
                client,
                seen: Vec::new(),
            }),
            other => bail!("attach refused: {other:?}"),
        }
    }

    /// The next output chunk, or `Err(exit)` once the session has ended
    /// (`None` when the supervisor closed without saying how).
    fn next_output(&mut self) -> anyhow::Result<Result<Vec<u8>, Option<ExitInfo>>> {
        loop {
            match self.client.read_frame() {
                Ok(frame) => match frame.message {
                    Message::Output(bytes) => return Ok(Ok(bytes)),
                    Message::Event(Event::Exited(info)) => return Ok(Err(Some(info))),
                    Message::Response(Response::Error { message }) => {
                        bail!("supervisor error: {message}")
                    }
                    _ => continue,
                },
                Err(ClientError::Closed) => return Ok(Err(None)),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Reads until `needle` has appeared in the output since the last match.
    fn read_until(&mut self, needle: &[u8]) -> anyhow::Result<()> {
        while !contains(&self.seen, needle) {
            match self.next_output()? {
                Ok(bytes) => self.seen.extend_from_slice(&bytes),
                Err(exit) => bail!(
                    "the session ended ({exit:?}) before {:?} was shown",
                    String::from_utf8_lossy(needle)
                ),
            }
        }
        self.seen.clear();
        Ok(())
    }

    /// Reads until the session has ended; returns how it ended and how
    /// many output bytes arrived.
    fn read_to_exit(&mut self) -> anyhow::Result<(Option<ExitInfo>, u64)> {
        let mut received = 0;
        loop {
            match self.next_output()? {
                Ok(bytes) => received += bytes.len() as u64,
                Err(exit) => return Ok((exit, received)),
            }
        }
    }

    fn type_key(&mut self, key: u8) -> anyhow::Result<()> {
        self.client.send(Message::Input(vec![key]))?;
        Ok(())
    }
}

/// `session new` (spawned) → the prompt in the output stream.
pub fn first_prompt(bench: &Bench, run: usize) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let session = Session::start(bench, &format!("prompt-{run}"), &[("PS1", PROMPT)], SHELL)?;
    session
        .stream(StreamMode::Watch)?
        .read_until(PROMPT_SHOWN.as_bytes())?;
    Ok(start.elapsed())
}

/// Keystroke → echo round trips through an interactive attach stream.
pub fn echo(bench: &Bench) -> anyhow::Result<Vec<Duration>> {
    let plan = &bench.plan;
    let session = Session::start(bench, "echo", &[], &["sh", "-c", &echo_command()])?;
    let mut attach = session.stream(StreamMode::Interactive)?;
    attach.read_until(ECHO_READY.as_bytes())?;
    let mut samples = Vec::with_capacity(plan.keystrokes);
    for i in 0..plan.echo_warmup + plan.keystrokes {
        let key = key(i);
        let start = Instant::now();
        attach.type_key(key)?;
        attach.read_until(&[key])?;
        if i >= plan.echo_warmup {
            samples.push(start.elapsed());
        }
    }
    Ok(samples)
}

/// `session new` of the 200 MB writer → the exit event on a watch stream.
/// Also returns the bytes the watcher received: a client that falls behind
/// is sent a redraw in place of what it missed, so it may get fewer.
pub fn throughput_watched(bench: &Bench, run: usize) -> anyhow::Result<(Duration, u64)> {
    let start = Instant::now();
    let session = Session::start(
        bench,
        &format!("tp-watch-{run}"),
        &[],
        &["sh", "-c", &throughput_command()],
    )?;
    let (exit, received) = session.stream(StreamMode::Watch)?.read_to_exit()?;
    let elapsed = start.elapsed();
    ensure!(
        matches!(exit, Some(ExitInfo { code: Some(0), .. })),
        "the writer did not finish cleanly: {exit:?}"
    );
    Ok((elapsed, received))
}

/// `session new` of the 200 MB writer → the supervisor's exit, nobody
/// attached.
pub fn throughput_unwatched(bench: &Bench, run: usize) -> anyhow::Result<Duration> {
    let name = format!("tp-{run}");
    let start = Instant::now();
    let session = Session::start(bench, &name, &[], &["sh", "-c", &throughput_command()])?;
    ensure!(
        procs::wait_gone(session.record.supervisor_pid, THROUGHPUT_TIMEOUT),
        "still running after {THROUGHPUT_TIMEOUT:?}"
    );
    let elapsed = start.elapsed();
    // A supervisor removes its record only on a clean finish, after its
    // child ended; one that crashed would leave it behind.
    let record = bench.runtime_dir().join(format!("{name}.json"));
    ensure!(
        !record.exists(),
        "the supervisor did not finish cleanly; see {}",
        record.with_extension("log").display()
    );
    Ok(elapsed)
}

/// What an idle session's supervisor holds, and the executable it runs.
pub struct Idle {
    /// Its PSS in MB ([`procs::pss_mb`]).
    pub pss: f64,
    /// `/proc/<pid>/exe`: `agent-comms-supervisor` beside `agent-comms`
    /// (`supervisor::launch::supervisor_image`), or `agent-comms` itself.
    pub image: PathBuf,
}

/// Each supervisor of `count` idle `bash` sessions, read once all of them
/// have sat untouched for [`IDLE`] after their prompt.
pub fn idle_memory(bench: &Bench, count: usize) -> anyhow::Result<Vec<Idle>> {
    let sessions = (0..count)
        .map(|i| {
            let session = Session::start(bench, &format!("idle-{i}"), &[("PS1", PROMPT)], SHELL)?;
            session
                .stream(StreamMode::Watch)?
                .read_until(PROMPT_SHOWN.as_bytes())?;
            Ok(session)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    std::thread::sleep(IDLE);
    sessions
        .iter()
        .map(|s| {
            let pid = s.record.supervisor_pid;
            let image = std::fs::read_link(format!("/proc/{pid}/exe"))
                .with_context(|| format!("process {pid} is gone"))?;
            Ok(Idle {
                pss: procs::pss_mb(pid)?,
                image,
            })
        })
        .collect()
}
