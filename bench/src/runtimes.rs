//! What the delivery and hosts sections drive: the fake providers of
//! `tests/fakes` and their logs, projects (each on a host, with a store of
//! its own or a database shared with others), and runtimes served in a
//! terminal the benchmark opens.
//!
//! The fakes log every submission, so a series is checked against what
//! the program received, not against what agent-comms believes. Projects
//! live under `target/`, on the disk a project is on: the store syncs
//! every transaction (`synchronous=FULL`), which a tmpfs `/tmp` would make
//! free. `interactive-serve` runs in the foreground and needs a terminal:
//! it gets a PTY whose output is read (a terminal nobody reads stalls the
//! program) and in which nobody types; it is ended by pid.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_comms_core::adapter::Profile;
use agent_comms_core::paths::PROJECT_ENV;
use agent_comms_core::store::postgres::Target;
use agent_comms_core::store::{PgStore, RuntimeStatus, SqliteStore, Store, STORE_ENV};
use anyhow::{bail, ensure, Context};
use nix::sys::signal::Signal;
use portable_pty::{Child, CommandBuilder, MasterPty};
use serde_json::Value;

use crate::bench::{Bench, Host, NOT_PASSED_ON};
use crate::procs;
use crate::workload::STEP_TIMEOUT;

/// The agent whose runtime receives, and the one that sends.
pub const RECEIVER: &str = "bob";
pub const SENDER: &str = "alice";

/// A fake provider from `tests/fakes/bin`, set up to take input one way.
pub struct Fake {
    /// Its name there; the host picks the adapter by it.
    pub program: &'static str,
    /// Its built-in adapter profile in `config/providers`.
    pub profile: &'static str,
    /// How it takes input, for the rows.
    pub input: &'static str,
    /// The input style delivery's evidence must report.
    pub style: &'static str,
    /// Variables that make it take input that way.
    vars: &'static [(&'static str, &'static str)],
    /// The first character of its input line's row, and of the history
    /// rows of the messages it was sent.
    pub prompt: char,
    /// On its screen once it is up and idle.
    pub ready: &'static str,
    /// The tmux scripts compared: their pause between text and Enter.
    pub script_pauses: &'static [Duration],
    /// What tells the adapter its turn ended, for the rows.
    pub turn_end: &'static str,
}

pub const CLAUDE: Fake = Fake {
    program: "claude",
    profile: "claude-code",
    input: "bracketed paste",
    style: "paste",
    vars: &[],
    prompt: '❯',
    ready: "? for shortcuts",
    script_pauses: &[Duration::from_millis(100)],
    turn_end: TURN_END_CLAUDE,
};

/// Codex as 0.171 runs: bracketed paste on, turns reported by OSC 7501
/// (`state=done`, which the adapter takes as authoritative).
pub const CODEX_PASTE: Fake = Fake {
    program: "codex",
    profile: "codex",
    input: "bracketed paste, as Codex turns on",
    style: "paste",
    vars: &[],
    prompt: '›',
    ready: "Ask Codex to do anything",
    script_pauses: &[Duration::from_millis(100)],
    turn_end: TURN_END_CODEX,
};

/// Codex without bracketed paste: its paste-burst rule turns an Enter
/// within 120 ms of typed text into a newline, which the usual script's
/// 0.1 s pause runs into; the script with 0.2 s is measured as well.
pub const CODEX: Fake = Fake {
    program: "codex",
    profile: "codex",
    input: "typed: no bracketed paste",
    style: "typed",
    vars: &[("FAKE_NO_BRACKETED", "1")],
    prompt: '›',
    ready: "Ask Codex to do anything",
    script_pauses: &[Duration::from_millis(100), Duration::from_millis(200)],
    turn_end: TURN_END_CODEX,
};

/// The fakes report their turns' ends as the real CLIs do, in signals the
/// adapters take as authoritative: idle at once, without the debounce.
const TURN_END_CLAUDE: &str = "its `sessions/<pid>.json` status, authoritative";
const TURN_END_CODEX: &str = "OSC 7501 `state=done`, authoritative";

impl Fake {
    /// A name for what the benchmark starts for it: the program and its
    /// input style (the same fake is measured both ways).
    pub fn key(&self) -> String {
        format!("{}-{}", self.program, self.style)
    }

    pub fn path(&self, repo: &Path) -> anyhow::Result<String> {
        let path = repo.join("tests/fakes/bin").join(self.program);
        ensure!(path.is_file(), "{} not found", path.display());
        Ok(path.display().to_string())
    }

    /// Its variables: its log, its busy time per turn, its input.
    pub fn env<'a>(&'a self, log: &'a FakeLog, turn_ms: &'a str) -> Vec<(&'a str, &'a str)> {
        let mut env = vec![("FAKE_LOG", log.path_str()), ("FAKE_BUSY_MS", turn_ms)];
        env.extend(self.vars.iter().copied());
        env
    }

    /// The adapter's debounce and Enter delay as its profile sets them,
    /// for the rows ("? ms" if the profile cannot be read).
    pub fn waits(&self, repo: &Path) -> (String, String) {
        let path = repo.join(format!("config/providers/{}.toml", self.profile));
        let profile = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| Profile::parse(&path.display().to_string(), &text).ok());
        let ms = |v: Option<u64>| v.map_or_else(|| "? ms".to_owned(), |v| format!("{v} ms"));
        (
            ms(profile
                .as_ref()
                .and_then(|p| Some(p.detect.as_ref()?.debounce_ms))),
            ms(profile
                .as_ref()
                .map(|p| p.input.enter_delay(self.style == "paste").as_millis() as u64)),
        )
    }
}

/// A fake's JSON-lines log (`FAKE_LOG`), in the scratch directory.
pub struct FakeLog {
    path: PathBuf,
    path_str: String,
}

/// One `submit` event: what the fake received on an Enter.
pub struct Submit {
    pub text: String,
    /// Unix ms.
    pub t: u64,
    pub while_busy: bool,
}

impl FakeLog {
    pub fn new(bench: &Bench, name: &str) -> anyhow::Result<Self> {
        let path = bench.private_dir("fakes")?.join(format!("{name}.log"));
        let path_str = path.display().to_string();
        Ok(Self { path, path_str })
    }

    fn path_str(&self) -> &str {
        &self.path_str
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The pids of the fakes that logged their start here.
    pub fn start_pids(&self) -> Vec<u32> {
        self.events().map_or_else(
            |_| Vec::new(),
            |events| {
                events
                    .iter()
                    .filter(|v| v["event"] == "start")
                    .filter_map(|v| v["pid"].as_u64().map(|p| p as u32))
                    .collect()
            },
        )
    }

    fn events(&self) -> anyhow::Result<Vec<Value>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e).with_context(|| self.path.display().to_string()),
        };
        // A line still being written is not whole yet; it is read next time.
        Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect())
    }

    /// How many events of one kind it logged.
    pub fn count(&self, event: &str) -> usize {
        self.events()
            .map_or(0, |e| e.iter().filter(|v| v["event"] == event).count())
    }

    pub fn submits(&self) -> anyhow::Result<Vec<Submit>> {
        Ok(self
            .events()?
            .iter()
            .filter(|v| v["event"] == "submit")
            .map(|v| Submit {
                text: v["text"].as_str().unwrap_or_default().to_owned(),
                t: v["t"].as_u64().unwrap_or_default(),
                while_busy: v["while_busy"] == true,
            })
            .collect())
    }

    /// Checks that the fake received exactly `texts`, in order, none while
    /// busy; returns its submissions.
    pub fn received_in_order(&self, texts: &[String]) -> anyhow::Result<Vec<Submit>> {
        let submits = self.submits()?;
        let got: Vec<&str> = submits.iter().map(|s| s.text.as_str()).collect();
        let expected = texts.iter().map(String::as_str);
        if let Some(i) = (0..got.len().max(texts.len()))
            .find(|&i| got.get(i).copied() != expected.clone().nth(i))
        {
            bail!(
                "the fake received {} texts, expected {}; number {i} was {:?}, expected {:?}",
                got.len(),
                texts.len(),
                got.get(i),
                texts.get(i)
            );
        }
        let busy = submits.iter().filter(|s| s.while_busy).count();
        ensure!(
            busy == 0,
            "{busy} texts were submitted while the fake was busy"
        );
        Ok(submits)
    }
}

/// A project directory (a checkout) on a host, with a store: its own
/// SQLite file, or a PostgreSQL database it shares with other checkouts;
/// removed when dropped.
pub struct Project {
    dir: tempfile::TempDir,
    host: Host,
    /// The shared database's URL, password included; None for the file.
    shared: Option<String>,
}

impl Project {
    /// A project on the benchmark's own host, with its own SQLite file.
    pub fn new(bench: &Bench, name: &str) -> anyhow::Result<Self> {
        Self::on(bench, name, bench.host(), None)
    }

    /// A project on `host` whose store is the database at `shared` (a
    /// `postgres://` URL with its password), or its own SQLite file.
    pub fn on(bench: &Bench, name: &str, host: Host, shared: Option<&str>) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("bench-project-{name}."))
            .tempdir_in(&bench.target_dir)
            .context("cannot create a project directory under target/")?;
        Ok(Self {
            dir,
            host,
            shared: shared.map(str::to_owned),
        })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Its directory's name: unique among the projects of a run.
    pub fn name(&self) -> String {
        self.dir
            .path()
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    }

    pub fn host(&self) -> &Host {
        &self.host
    }

    /// What puts an agent-comms process in this project: the project, its
    /// host, and its store when shared (over [`Bench::our_env`]).
    fn vars(&self) -> Vec<(&'static str, OsString)> {
        let mut vars = vec![(PROJECT_ENV, self.path().into())];
        vars.extend(self.host.vars());
        vars.extend(self.shared.as_ref().map(|url| (STORE_ENV, url.into())));
        vars
    }

    /// `agent-comms` acting in this project.
    pub fn agent_comms(&self, bench: &Bench) -> Command {
        let mut cmd = bench.agent_comms();
        cmd.envs(self.vars());
        cmd
    }

    /// Runs `agent-comms ARGS…` here: how long it took, and its stdout.
    pub fn run(&self, bench: &Bench, args: &[&str]) -> anyhow::Result<(Duration, String)> {
        timed(self.agent_comms(bench).args(args))
    }

    /// `--actor RECEIVER runtime configure --id RECEIVER`: the runtime is
    /// registered, not served.
    pub fn configure(&self, bench: &Bench) -> anyhow::Result<()> {
        let args = [
            "--actor",
            RECEIVER,
            "runtime",
            "configure",
            "--id",
            RECEIVER,
        ];
        self.run(bench, &args).map(drop)
    }

    /// `--actor SENDER send --to RECEIVER [--wait 60] --json TEXT`: how
    /// long it took, and the message's id.
    pub fn send(
        &self,
        bench: &Bench,
        text: &str,
        wait: bool,
    ) -> anyhow::Result<(Duration, String)> {
        let mut args = vec!["--actor", SENDER, "send", "--to", RECEIVER, "--json"];
        if wait {
            args.extend(["--wait", "60"]);
        }
        args.push(text);
        let (took, stdout) = self.run(bench, &args)?;
        let sent: Value =
            serde_json::from_str(stdout.trim()).context("`send --json` printed no message")?;
        let id = sent["id"].as_str().context("`send --json` printed no id")?;
        Ok((took, id.to_owned()))
    }

    /// `invocation list --json [ARGS…]`, parsed: how long it took, and the
    /// list.
    pub fn list(&self, bench: &Bench, args: &[&str]) -> anyhow::Result<(Duration, Vec<Value>)> {
        let (took, stdout) =
            self.run(bench, &[&["invocation", "list", "--json"], args].concat())?;
        let listed = serde_json::from_str(stdout.trim())
            .context("`invocation list --json` printed no list")?;
        Ok((took, listed))
    }

    /// Its store, opened in this process.
    pub fn store(&self) -> anyhow::Result<Box<dyn Store>> {
        Ok(match &self.shared {
            None => Box::new(SqliteStore::open_in(self.path())?),
            Some(url) => Box::new(PgStore::open(Target::parse(url, None)?, None)?),
        })
    }
}

/// Runs a command to completion and times it, spawn to exit; its stdout on
/// success.
pub fn timed(cmd: &mut Command) -> anyhow::Result<(Duration, String)> {
    let start = Instant::now();
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .context("cannot run agent-comms")?;
    let took = start.elapsed();
    let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy()).collect();
    ensure!(
        out.status.success(),
        "`agent-comms {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok((took, String::from_utf8_lossy(&out.stdout).into_owned()))
}

/// `agent-comms --actor RECEIVER runtime interactive-serve --id RECEIVER --
/// <fake>` in a terminal the benchmark opens: the person's terminal, in
/// which nobody types. Only the end of its output is kept, for error
/// messages. Ended by pid when dropped.
pub struct Served {
    child: Box<dyn Child + Send + Sync>,
    // Kept open for the child's lifetime; closing it hangs the child up.
    master: Box<dyn MasterPty + Send>,
    shown: Arc<Mutex<Vec<u8>>>,
}

/// How much of a served runtime's terminal output is kept.
const SHOWN_KEPT: usize = 2048;

impl Served {
    pub fn start(
        bench: &Bench,
        project: &Project,
        repo: &Path,
        fake: &Fake,
        log: &FakeLog,
        turn_ms: u64,
    ) -> anyhow::Result<Self> {
        let pair = crate::bare::open_pty()?;
        let mut cmd = CommandBuilder::new(bench.agent_comms_path());
        cmd.args(["--actor", RECEIVER, "runtime", "interactive-serve"]);
        cmd.args(["--id", RECEIVER, "--", &fake.path(repo)?]);
        for var in NOT_PASSED_ON {
            cmd.env_remove(var);
        }
        for (k, v) in bench.our_env().into_iter().chain(project.vars()) {
            cmd.env(k, v);
        }
        let turn_ms = turn_ms.to_string();
        for (k, v) in fake.env(log, &turn_ms) {
            cmd.env(k, v);
        }
        cmd.cwd(project.path());
        procs::before_start();
        let child = pair.slave.spawn_command(cmd)?;
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader()?;
        let shown = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&shown);
        std::thread::spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                let mut shown = keep.lock().unwrap_or_else(|p| p.into_inner());
                shown.extend_from_slice(&buf[..n]);
                let extra = shown.len().saturating_sub(SHOWN_KEPT);
                shown.drain(..extra);
            }
        });
        Ok(Self {
            child,
            master: pair.master,
            shown,
        })
    }

    /// The `interactive-serve` process: the runtime's supervisor (it runs
    /// the provider's session in the foreground).
    pub fn pid(&self) -> Option<u32> {
        self.child.process_id()
    }

    /// Resizes the serve's terminal, as a person resizing the window.
    pub fn resize(&self, rows: u16, cols: u16) -> anyhow::Result<()> {
        self.master.resize(portable_pty::PtySize {
            rows,
            cols,
            pixel_width: 0,
            pixel_height: 0,
        })
    }

    /// Fails, with what its terminal showed, once the serve has ended.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if let Ok(Some(status)) = self.child.try_wait() {
            let shown = self.shown.lock().unwrap_or_else(|p| p.into_inner());
            bail!(
                "interactive-serve ended ({status:?}); its terminal showed: {:?}",
                String::from_utf8_lossy(&shown)
            );
        }
        Ok(())
    }

    /// Until the store says the runtime is online, served by this serve:
    /// its record names the provider of this serve's session (a serve
    /// killed before it left the record ONLINE, naming its own).
    pub fn wait_online(&mut self, project: &Project) -> anyhow::Result<()> {
        let store = project.store()?;
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            self.check_running()?;
            let provider = project
                .host()
                .record(RECEIVER)
                .ok()
                .filter(|s| Some(s.supervisor_pid) == self.pid())
                .map(|s| s.pid);
            if provider.is_some()
                && store
                    .runtime(RECEIVER)?
                    .is_some_and(|r| r.status == RuntimeStatus::Online && r.pid == provider)
            {
                return Ok(());
            }
            ensure!(
                Instant::now() < deadline,
                "not online within {STEP_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Until `count` (of `what`) reaches `n`, while the serve runs; fails
    /// once it did not grow for `stall`.
    pub fn wait_for_count(
        &mut self,
        what: &str,
        n: usize,
        stall: Duration,
        mut count: impl FnMut() -> anyhow::Result<usize>,
    ) -> anyhow::Result<()> {
        let (mut seen, mut progress) = (0, Instant::now());
        while seen < n {
            self.check_running()?;
            let now = count()?;
            if now > seen {
                (seen, progress) = (now, Instant::now());
            }
            ensure!(
                progress.elapsed() < stall,
                "{seen} of {n} {what}, then none more for {stall:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(pid) = self.child.process_id() {
            procs::stop(pid, Signal::SIGTERM);
        }
        let _ = self.child.wait();
    }
}
