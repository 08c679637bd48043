//! The context every measurement runs in: the binaries under test, a private
//! scratch directory, and how many iterations to do.
//!
//! All agent-comms and `k` processes get `AGENT_COMMS_RUNTIME_DIR` and
//! `AGENT_COMMS_HOME` inside the scratch directory, and every tmux server
//! has its socket there, so the run neither sees nor disturbs the user's
//! sessions, and whatever a failed or interrupted measurement left running
//! can be found there: the context's drop, and Ctrl-C or SIGTERM, end every
//! supervisor with a record and every tmux server with a socket in it, by
//! pid.
//!
//! `HOME` is an empty scratch directory too, for both `k`s: a plain `bash`
//! reads `~/.bashrc`, which on a developer's machine can cost more than the
//! tool being measured (a `pyenv init` alone takes hundreds of ms).
//!
//! `AGENT_COMMS_PROJECT` points into the scratch directory as well, so no
//! command can touch the store of the project the benchmark is run from;
//! the measurements that use a store give it one of their own. Variables
//! that the person running the benchmark may have set for their own work
//! (their actor, a log filter, the store they use) are not passed on.
//!
//! Those two directories are what makes a host to agent-comms (the home
//! holds the host's id), so a measurement that needs several hosts gets
//! another pair beside them ([`Bench::other_host`]), swept the same way.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use agent_comms_core::paths::{HOME_ENV, PROJECT_ENV, RUNTIME_DIR_ENV};
use agent_comms_core::session::SessionRecord;
use agent_comms_core::store::location::PASSWORD_ENV;
use agent_comms_core::store::STORE_ENV;
use anyhow::{bail, Context};
use nix::sys::signal::Signal;

use crate::procs;
use crate::tmux::TmuxServer;

/// Iteration counts; `--quick` trades precision for a short smoke run.
pub struct Plan {
    /// `session new` → first prompt, per system.
    pub startups: usize,
    /// Keystrokes timed per system (after [`Plan::echo_warmup`] untimed ones).
    pub keystrokes: usize,
    pub echo_warmup: usize,
    /// 200 MB runs per system.
    pub throughput_runs: usize,
    /// `k run` cells per tool (after [`Plan::cell_warmup`] untimed ones).
    pub cell_runs: usize,
    pub cell_warmup: usize,
    /// `k new` sessions per tool.
    pub cell_news: usize,
    /// `k --version` runs per tool.
    pub versions: usize,
    /// Screen classifications timed per adapter form.
    pub classifications: usize,
    /// Plugin loads timed per form.
    pub plugin_loads: usize,
    /// Deliveries timed per system into an idle program (after one untimed).
    pub deliveries: usize,
    /// Deliveries timed right after the previous turn, per provider.
    pub busy_deliveries: usize,
    /// `send --wait` and `runtime deliver` calls timed into a served runtime.
    pub messages: usize,
    /// `send --wait` calls timed per way between hosts (same host on
    /// SQLite, on PostgreSQL, across hosts).
    pub host_sends: usize,
    /// Messages queued to an offline runtime, then drained.
    pub queued: usize,
    /// Store CLI calls timed per command.
    pub store_calls: usize,
    /// In-process store operations timed per kind.
    pub store_ops: usize,
    /// `runtime deliver` calls timed per runtime kind into the fake agents.
    pub acp_deliveries: usize,
    /// Deliveries timed per runtime kind into each real provider.
    pub acp_real_deliveries: usize,
    /// `Tap::line` appends timed per line size.
    pub tap_appends: usize,
    /// Chunks of the turn streamed to each fan-out watcher.
    pub fanout_chunks: usize,
    /// The controller's timed prompts under each flood.
    pub hostile_prompts: usize,
    /// MCP servers started until their tools are listed.
    pub mcp_starts: usize,
    /// How long the soak's chaos lasts (its drain comes after).
    pub soak: std::time::Duration,
}

impl Plan {
    pub fn full() -> Self {
        Self {
            startups: 20,
            keystrokes: 500,
            echo_warmup: 20,
            throughput_runs: 3,
            cell_runs: 200,
            cell_warmup: 5,
            cell_news: 10,
            versions: 50,
            classifications: 10_000,
            plugin_loads: 50,
            deliveries: 100,
            busy_deliveries: 50,
            messages: 50,
            host_sends: 100,
            queued: 1000,
            store_calls: 50,
            store_ops: 1000,
            acp_deliveries: 100,
            acp_real_deliveries: 5,
            tap_appends: 10_000,
            fanout_chunks: 400,
            hostile_prompts: 100,
            mcp_starts: 20,
            soak: std::time::Duration::from_secs(600),
        }
    }

    pub fn quick() -> Self {
        Self {
            startups: 5,
            keystrokes: 100,
            echo_warmup: 10,
            throughput_runs: 1,
            cell_runs: 30,
            cell_warmup: 3,
            cell_news: 3,
            versions: 10,
            classifications: 1_000,
            plugin_loads: 5,
            deliveries: 10,
            busy_deliveries: 5,
            messages: 10,
            host_sends: 10,
            queued: 50,
            store_calls: 10,
            store_ops: 100,
            acp_deliveries: 10,
            acp_real_deliveries: 2,
            tap_appends: 1_000,
            fanout_chunks: 100,
            hostile_prompts: 20,
            mcp_starts: 5,
            soak: std::time::Duration::from_secs(60),
        }
    }
}

pub struct Bench {
    pub plan: Plan,
    /// `target/release/agent-comms`, next to this executable.
    agent_comms: PathBuf,
    /// `target/release/k`.
    k: PathBuf,
    /// `target/`: where the agent-tty venv is kept between runs.
    pub target_dir: PathBuf,
    scratch: tempfile::TempDir,
}

impl Bench {
    /// The repository this benchmark was built from, where the fakes and
    /// fixtures are: `bench/`'s parent (not `target/`'s, which
    /// `CARGO_TARGET_DIR` may put anywhere).
    pub fn repo(&self) -> std::path::PathBuf {
        let bench = Path::new(env!("CARGO_MANIFEST_DIR"));
        bench.parent().unwrap_or(bench).to_path_buf()
    }

    pub fn new(plan: Plan) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("cannot find this executable")?;
        let bin_dir = exe.parent().context("this executable has no directory")?;
        let agent_comms = bin_dir.join("agent-comms");
        let k = bin_dir.join("k");
        // `k` may be missing or unfinished: its section then says so.
        if !agent_comms.is_file() {
            bail!(
                "{} not found; build the binaries under test first: cargo build --release",
                agent_comms.display()
            );
        }
        let target_dir = bin_dir.parent().unwrap_or(bin_dir).to_path_buf();
        // Short and under /tmp: socket paths must fit sun_path.
        let scratch = tempfile::Builder::new()
            .prefix("acb.")
            .tempdir_in("/tmp")
            .context("cannot create a scratch directory")?;
        let bench = Self {
            plan,
            agent_comms,
            k,
            target_dir,
            scratch,
        };
        for dir in [RUNTIME, "home", "agent-comms-home", "project"] {
            bench.private_dir(dir)?;
        }
        let scratch = bench.scratch.path().to_owned();
        procs::on_interrupt(move || {
            sweep(&scratch);
            let _ = std::fs::remove_dir_all(&scratch);
        })
        .context("cannot set up clean-up on interrupt")?;
        Ok(bench)
    }

    /// A 0700 directory `name` inside the scratch directory.
    pub fn private_dir(&self, name: &str) -> anyhow::Result<PathBuf> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = self.scratch.path().join(name);
        if !dir.is_dir() {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        Ok(dir)
    }

    pub fn runtime_dir(&self) -> PathBuf {
        self.host().runtime
    }

    /// The host every measurement runs on unless it says otherwise.
    pub fn host(&self) -> Host {
        let scratch = self.scratch.path();
        Host {
            home: scratch.join("agent-comms-home"),
            runtime: scratch.join(RUNTIME),
        }
    }

    /// Another host on this machine, `name`: a home and a runtime
    /// directory of its own in the scratch directory.
    pub fn other_host(&self, name: &str) -> anyhow::Result<Host> {
        Ok(Host {
            home: self.private_dir(&format!("agent-comms-home-{name}"))?,
            runtime: self.private_dir(&format!("{RUNTIME}-{name}"))?,
        })
    }

    /// `agent-comms` with the private runtime directory.
    pub fn agent_comms(&self) -> Command {
        self.ours(&self.agent_comms)
    }

    /// `k` with the private runtime directory.
    pub fn k(&self) -> Command {
        self.ours(&self.k)
    }

    /// The `agent-comms` executable, for a terminal the benchmark opens
    /// itself: give it [`Bench::our_env`], less [`NOT_PASSED_ON`].
    pub fn agent_comms_path(&self) -> &Path {
        &self.agent_comms
    }

    /// `program`, one of ours, with the private runtime directory.
    pub fn ours(&self, program: &Path) -> Command {
        procs::before_start();
        let mut cmd = Command::new(program);
        for var in NOT_PASSED_ON {
            cmd.env_remove(var);
        }
        cmd.envs(self.our_env());
        cmd
    }

    /// What every agent-comms and `k` process gets set (on top of the
    /// environment, less [`NOT_PASSED_ON`]): the private directories and
    /// the neutral terminal of [`Bench::neutral_env`].
    pub fn our_env(&self) -> Vec<(&'static str, OsString)> {
        let mut vars = self.host().vars().to_vec();
        vars.push((PROJECT_ENV, self.scratch.path().join("project").into()));
        vars.extend(self.neutral_vars());
        vars
    }

    /// The same terminal type for every system measured, and an empty home
    /// (no start-up files).
    pub fn neutral_env(&self, cmd: &mut Command) {
        cmd.envs(self.neutral_vars());
    }

    fn neutral_vars(&self) -> [(&'static str, OsString); 2] {
        [
            ("TERM", crate::workload::TERM.into()),
            ("HOME", self.scratch.path().join("home").into()),
        ]
    }

    /// The record of a live session in the private runtime directory.
    pub fn record(&self, name: &str) -> anyhow::Result<SessionRecord> {
        self.host().record(name)
    }

    /// Ends a session's supervisor by pid: SIGTERM (the supervisor ends its
    /// child and removes its socket), SIGKILL if it lingers.
    pub fn end_session(&self, record: &SessionRecord) {
        procs::stop(record.supervisor_pid, Signal::SIGTERM);
    }
}

/// Variables of the person running the benchmark that its agent-comms and
/// `k` processes must not see: they would act as that person's agent, in
/// that person's session, or log for them.
pub const NOT_PASSED_ON: &[&str] = &[
    "K_SESSION",
    "AGENT_COMMS_ACTOR",
    "AGENT_COMMS_LOG",
    STORE_ENV,
    PASSWORD_ENV,
];

/// The runtime directory's name in the scratch directory (another host's
/// is `runtime-NAME`).
const RUNTIME: &str = "runtime";

/// What makes a host to agent-comms: its home (the host's id is in it, so
/// two homes are two hosts to a shared store) and its runtime directory
/// (its sessions' records and sockets).
#[derive(Clone)]
pub struct Host {
    home: PathBuf,
    runtime: PathBuf,
}

impl Host {
    /// What puts an agent-comms process on this host.
    pub fn vars(&self) -> [(&'static str, OsString); 2] {
        [
            (RUNTIME_DIR_ENV, self.runtime.clone().into()),
            (HOME_ENV, self.home.clone().into()),
        ]
    }

    /// The host's id, which its first agent-comms command made.
    pub fn id(&self) -> anyhow::Result<String> {
        let path = self.home.join("host-id");
        let id = std::fs::read_to_string(&path)
            .with_context(|| format!("no host id in {}", path.display()))?;
        Ok(id.trim().to_owned())
    }

    /// The record of a live session on this host.
    pub fn record(&self, name: &str) -> anyhow::Result<SessionRecord> {
        let path = self.runtime.join(format!("{name}.json"));
        let text = std::fs::read(&path)
            .with_context(|| format!("no session record {}", path.display()))?;
        serde_json::from_slice(&text)
            .with_context(|| format!("unreadable session record {}", path.display()))
    }
}

impl Drop for Bench {
    /// The safety net for what a failed measurement left behind.
    fn drop(&mut self) {
        sweep(self.scratch.path());
    }
}

/// Ends every supervisor with a record in a host's runtime directory, and
/// every tmux server with a socket, under `scratch`.
fn sweep(scratch: &Path) {
    let is_runtime = |dir: &Path| {
        dir.parent() == Some(scratch)
            && dir
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.split('-').next() == Some(RUNTIME))
    };
    let entries = |dir: &Path| std::fs::read_dir(dir).into_iter().flatten().flatten();
    for runtime in entries(scratch).map(|e| e.path()).filter(|d| is_runtime(d)) {
        for entry in entries(&runtime) {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "json") {
                let record = std::fs::read(&path)
                    .ok()
                    .and_then(|t| serde_json::from_slice::<SessionRecord>(&t).ok());
                if let Some(record) = record {
                    procs::stop(record.supervisor_pid, Signal::SIGTERM);
                }
            }
        }
    }
    let mut dirs = vec![scratch.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in entries(&dir) {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() && !is_runtime(&entry.path()) {
                dirs.push(entry.path());
            } else if std::os::unix::fs::FileTypeExt::is_socket(&kind) {
                // Dropping the handle ends the server, if one still runs.
                drop(TmuxServer::at(entry.path()));
            }
        }
    }
}
