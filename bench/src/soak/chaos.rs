//! The soak's chaos: the served runtime and the clients attached to it,
//! and the random things done to them — SIGKILL the serve, SIGKILL its
//! provider, resize the serve's terminal, attach a client, resize it,
//! detach it with its key or SIGKILL it.
//!
//! A serve that ended is started again, as a person would restart it: the
//! new serve replaces the stale record. Its clients ended with it (their
//! socket is gone); they are reaped before it is. Every process here is
//! ended by pid: the serves and clients are children of the benchmark; a
//! provider is killed only while its serve's session record names it and
//! it is still that serve's child.

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use agent_comms_core::paths::PROJECT_ENV;
use anyhow::{bail, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};

use super::random::Random;
use crate::bench::{Bench, NOT_PASSED_ON};
use crate::procs;
use crate::runtimes::{FakeLog, Project, Served, CLAUDE, RECEIVER};

/// At most this many clients attached at once.
const MAX_CLIENTS: usize = 3;
/// How long a detached client, or a serve whose provider was killed, may
/// take to exit.
const EXIT_WAIT: Duration = Duration::from_secs(10);
/// The attach client's detach key (its default, Ctrl-\).
const DETACH_KEY: u8 = 0x1c;

/// What the chaos did, and what it saw go wrong.
#[derive(Default)]
pub struct Tally {
    pub serve_kills: usize,
    pub provider_kills: usize,
    /// Serve or provider kills while a message was DELIVERING.
    pub kills_mid_delivery: usize,
    pub starts: usize,
    pub serve_resizes: usize,
    pub attaches: usize,
    pub client_resizes: usize,
    pub detaches: usize,
    pub client_kills: usize,
    /// Serves that ended when nobody killed them or their provider.
    pub serve_ended: Vec<String>,
    /// Clients that did not exit on their detach key.
    pub detach_ignored: usize,
    /// Providers still running after every serve was ended (then killed).
    pub stale_providers: Vec<u32>,
    /// The last serve once warm: online, its first submission, no client.
    pub warm: Option<Sample>,
}

/// A serve's open fds and resident memory.
#[derive(Clone, Copy)]
pub struct Sample {
    pub pid: u32,
    pub fds: usize,
    pub rss_mb: f64,
}

impl Sample {
    fn of(pid: u32) -> anyhow::Result<Self> {
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .with_context(|| format!("cannot list the fds of process {pid}"))?
            .count();
        Ok(Self {
            pid,
            fds,
            rss_mb: procs::rss_mb(pid)?,
        })
    }
}

pub struct Chaos<'a> {
    bench: &'a Bench,
    project: &'a Project,
    repo: &'a Path,
    log: &'a FakeLog,
    turn_ms: u64,
    random: Random,
    served: Option<Served>,
    /// The fake's submissions when the current serve came online.
    submits_at_start: usize,
    clients: Vec<Client>,
    tally: Tally,
}

impl<'a> Chaos<'a> {
    /// Serves the runtime and waits until it is online.
    pub fn start(
        bench: &'a Bench,
        project: &'a Project,
        repo: &'a Path,
        log: &'a FakeLog,
        turn_ms: u64,
        random: Random,
    ) -> anyhow::Result<Self> {
        let mut chaos = Self {
            bench,
            project,
            repo,
            log,
            turn_ms,
            random,
            served: None,
            submits_at_start: 0,
            clients: Vec::new(),
            tally: Tally::default(),
        };
        chaos.serve()?;
        Ok(chaos)
    }

    /// A random pause, then one random act; `kills` allows killing the
    /// serve or its provider.
    pub fn step(&mut self, kills: bool) -> anyhow::Result<()> {
        // Pacing: the pause is the workload, not a wait for an event.
        std::thread::sleep(self.random.millis(500, 3000));
        self.keep_serving()?;
        self.note_warm();
        let mut acts = vec![Act::ResizeServe, Act::ResizeServe];
        if kills {
            acts.extend([Act::KillServe, Act::KillProvider]);
        }
        if self.clients.len() < MAX_CLIENTS && self.tally.warm.is_some() {
            acts.extend([Act::Attach, Act::Attach]);
        }
        if !self.clients.is_empty() {
            acts.extend([
                Act::ResizeClient,
                Act::ResizeClient,
                Act::Detach,
                Act::KillClient,
            ]);
        }
        let act = acts[self.random.between(0, acts.len() as u64 - 1) as usize];
        self.act(act)
    }

    fn act(&mut self, act: Act) -> anyhow::Result<()> {
        match act {
            Act::KillServe => {
                let pid = self.serve_pid()?;
                self.note_mid_delivery();
                self.tally.serve_kills += 1;
                signal(pid, Signal::SIGKILL);
                if !procs::wait_gone(pid, EXIT_WAIT) {
                    bail!("the serve (pid {pid}) outlived SIGKILL for {EXIT_WAIT:?}");
                }
                self.restart_after_a_pause()
            }
            Act::KillProvider => {
                let serve = self.serve_pid()?;
                let provider = self.provider_pid(serve)?;
                self.note_mid_delivery();
                self.tally.provider_kills += 1;
                signal(provider, Signal::SIGKILL);
                if !procs::wait_gone(serve, EXIT_WAIT) {
                    self.tally.serve_ended.push(format!(
                        "the serve (pid {serve}) was still running {EXIT_WAIT:?} after its \
                         provider (pid {provider}) was SIGKILLed; killed"
                    ));
                    signal(serve, Signal::SIGKILL);
                    procs::wait_gone(serve, EXIT_WAIT);
                }
                self.restart_after_a_pause()
            }
            Act::ResizeServe => {
                let (rows, cols) = self.random.size();
                if let Some(served) = &self.served {
                    served.resize(rows, cols)?;
                    self.tally.serve_resizes += 1;
                }
                Ok(())
            }
            Act::Attach => {
                let size = self.random.size();
                self.clients
                    .push(Client::attach(self.bench, self.project, size)?);
                self.tally.attaches += 1;
                Ok(())
            }
            Act::ResizeClient => {
                let (rows, cols) = self.random.size();
                let i = self.random.between(0, self.clients.len() as u64 - 1) as usize;
                self.clients[i].resize(rows, cols)?;
                self.tally.client_resizes += 1;
                Ok(())
            }
            Act::Detach => {
                let i = self.random.between(0, self.clients.len() as u64 - 1) as usize;
                let client = self.clients.swap_remove(i);
                self.detach(client);
                Ok(())
            }
            Act::KillClient => {
                let i = self.random.between(0, self.clients.len() as u64 - 1) as usize;
                self.clients.swap_remove(i).kill();
                self.tally.client_kills += 1;
                Ok(())
            }
        }
    }

    /// After the chaos: every client detached, and the serve running.
    pub fn settle(&mut self) -> anyhow::Result<()> {
        for client in std::mem::take(&mut self.clients) {
            self.detach(client);
        }
        self.keep_serving()?;
        self.note_warm();
        Ok(())
    }

    /// While the runtime drains: the serve kept running.
    pub fn keep_serving(&mut self) -> anyhow::Result<()> {
        let ended = match &mut self.served {
            Some(served) => served.check_running().err(),
            None => None,
        };
        if let Some(why) = ended {
            self.tally.serve_ended.push(format!("{why:#}"));
            self.serve()?;
        }
        Ok(())
    }

    /// The current serve's fds and memory.
    pub fn sample(&self) -> anyhow::Result<Sample> {
        Sample::of(self.serve_pid()?)
    }

    /// Ends every client and the serve, and any provider that outlived its
    /// serve; what the chaos did.
    pub fn finish(mut self) -> Tally {
        for client in std::mem::take(&mut self.clients) {
            client.kill();
        }
        // Dropping it ends it by pid (SIGTERM: it ends its provider).
        self.served = None;
        self.tally.stale_providers = self.end_stale_providers();
        self.tally
    }

    fn detach(&mut self, client: Client) {
        self.tally.detaches += 1;
        if !client.detach() {
            self.tally.detach_ignored += 1;
        }
    }

    /// The serve ended: its clients ended with it; a pause of up to 2 s
    /// (messages queue meanwhile), and a new one.
    fn restart_after_a_pause(&mut self) -> anyhow::Result<()> {
        for client in std::mem::take(&mut self.clients) {
            client.kill();
        }
        self.served = None;
        std::thread::sleep(self.random.millis(0, 2000));
        self.serve()
    }

    /// Starts a serve (the first, or after one ended) and waits until it
    /// is online; it is warm from its first submission.
    fn serve(&mut self) -> anyhow::Result<()> {
        self.served = None;
        self.tally.warm = None;
        let mut served = Served::start(
            self.bench,
            self.project,
            self.repo,
            &CLAUDE,
            self.log,
            self.turn_ms,
        )?;
        served.wait_online(self.project)?;
        self.tally.starts += 1;
        self.submits_at_start = self.log.submits()?.len();
        self.served = Some(served);
        Ok(())
    }

    /// Takes the warm sample once the serve has made its first submission
    /// (before any client attaches to it).
    fn note_warm(&mut self) {
        if self.tally.warm.is_some() || !self.clients.is_empty() {
            return;
        }
        let submitted = self.log.submits().map_or(0, |s| s.len());
        if submitted > self.submits_at_start {
            self.tally.warm = self.sample().ok();
        }
    }

    /// Counts a kill about to happen while a message is DELIVERING (the
    /// case the store's leases are for).
    fn note_mid_delivery(&mut self) {
        let delivering = self
            .project
            .list(self.bench, &["--status", "DELIVERING"])
            .is_ok_and(|(_, listed)| !listed.is_empty());
        if delivering {
            self.tally.kills_mid_delivery += 1;
        }
    }

    fn serve_pid(&self) -> anyhow::Result<u32> {
        self.served
            .as_ref()
            .and_then(Served::pid)
            .context("no serve is running")
    }

    /// The provider the session record of `serve` names, checked to be its
    /// child still.
    fn provider_pid(&self, serve: u32) -> anyhow::Result<u32> {
        let record = self.bench.record(RECEIVER)?;
        if record.supervisor_pid != serve {
            bail!(
                "the session record names supervisor {}, not the serve {serve}",
                record.supervisor_pid
            );
        }
        let parent = parent_pid(record.pid)?;
        if parent != serve {
            bail!(
                "process {} is a child of {parent}, not of the serve {serve}",
                record.pid
            );
        }
        Ok(record.pid)
    }

    /// Providers the fake logged starting that still run: ended by pid,
    /// once checked to be this soak's fake (same program, same log).
    fn end_stale_providers(&self) -> Vec<u32> {
        let mut stale = Vec::new();
        for pid in self.log.start_pids() {
            if procs::wait_gone(pid, Duration::from_secs(5)) || !self.is_our_fake(pid) {
                continue;
            }
            stale.push(pid);
            signal(pid, Signal::SIGKILL);
            procs::wait_gone(pid, EXIT_WAIT);
        }
        stale
    }

    fn is_our_fake(&self, pid: u32) -> bool {
        let read = |what: &str| std::fs::read(format!("/proc/{pid}/{what}")).unwrap_or_default();
        let fake = CLAUDE.path(self.repo).unwrap_or_default();
        let contains = |hay: &[u8], needle: &str| {
            !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle.as_bytes())
        };
        contains(&read("cmdline"), &fake)
            && contains(&read("environ"), &self.log.path().display().to_string())
    }
}

#[derive(Clone, Copy)]
enum Act {
    KillServe,
    KillProvider,
    ResizeServe,
    Attach,
    ResizeClient,
    Detach,
    KillClient,
}

fn signal(pid: u32, signal: Signal) {
    let _ = kill(Pid::from_raw(pid as i32), signal);
}

/// The parent of `pid`, from `/proc/PID/stat` (the field after the
/// command's closing parenthesis and the state).
fn parent_pid(pid: u32) -> anyhow::Result<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("process {pid} is gone"))?;
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok())
        .with_context(|| format!("unreadable /proc/{pid}/stat"))
}

/// `session attach bob` in a PTY the benchmark opens: a person's terminal
/// attached to the runtime's session. What it shows is read and dropped (a
/// terminal nobody reads stalls its program).
/// Dropping one SIGKILLs it unless it has exited already.
struct Client {
    child: Box<dyn Child + Send + Sync>,
    master: Box<dyn MasterPty + Send>,
    writer: Box<dyn Write + Send>,
    /// Waited for: its pid is no longer its own.
    reaped: bool,
}

impl Client {
    fn attach(bench: &Bench, project: &Project, (rows, cols): (u16, u16)) -> anyhow::Result<Self> {
        let pair = native_pty_system().openpty(pty_size(rows, cols))?;
        let mut cmd = CommandBuilder::new(bench.agent_comms_path());
        cmd.args(["session", "attach", RECEIVER]);
        for var in NOT_PASSED_ON {
            cmd.env_remove(var);
        }
        for (k, v) in bench.our_env() {
            cmd.env(k, v);
        }
        cmd.env(PROJECT_ENV, project.path());
        procs::before_start();
        let child = pair.slave.spawn_command(cmd)?;
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader()?;
        std::thread::spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            while let Ok(1..) = reader.read(&mut buf) {}
        });
        let writer = pair.master.take_writer()?;
        Ok(Self {
            child,
            master: pair.master,
            writer,
            reaped: false,
        })
    }

    fn resize(&self, rows: u16, cols: u16) -> anyhow::Result<()> {
        self.master.resize(pty_size(rows, cols))
    }

    /// Presses the detach key; true if the client then exited (else it is
    /// killed).
    fn detach(mut self) -> bool {
        let pressed = self
            .writer
            .write_all(&[DETACH_KEY])
            .and_then(|()| self.writer.flush())
            .is_ok();
        let deadline = Instant::now() + EXIT_WAIT;
        while pressed && Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                self.reaped = true;
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// SIGKILL: a client that vanishes.
    fn kill(self) {
        drop(self);
    }
}

impl Drop for Client {
    /// SIGKILL by pid while it is still this child's (not waited for);
    /// portable-pty's own kill hangs up first, which a vanishing client
    /// does not do.
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        if let Some(pid) = self.child.process_id() {
            signal(pid, Signal::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

fn pty_size(rows: u16, cols: u16) -> PtySize {
    PtySize {
        rows,
        cols,
        pixel_width: 0,
        pixel_height: 0,
    }
}
