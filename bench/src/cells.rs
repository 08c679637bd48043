//! The cells section (issue 3): `k` next to agent-tty 0.1.5, the tmux-based
//! tool whose command line it keeps.
//!
//! Both are measured as an agent uses them: one `k` process per command,
//! timed from spawn to exit, with the output checked (a fast wrong answer
//! is not a result). Runs of the two tools alternate, so both see the same
//! machine. `k run` is timed on a warm session: a shell that has already
//! run a few cells, as in a working agent's loop.
//!
//! agent-tty is installed from PyPI into a venv under `target/` (once; later
//! runs reuse it) and called by full path, since its commands are also named
//! `k` and `km`. It runs with `TMUX_TMPDIR` and `XDG_RUNTIME_DIR` in the
//! scratch directory, so its tmux server and cell files are private to the
//! run; its sessions are ended through the pid of their pane's shell, and
//! its server by pid at the end.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use nix::sys::signal::Signal;

use crate::bench::Bench;
use crate::machine::first_line;
use crate::report::{judge, Row, Section};
use crate::stats::{self, push, Runs, Summary};
use crate::tmux::TmuxServer;
use crate::{procs, progress};

const AGENT_TTY_VERSION: &str = "0.1.5";
const AGENT_TTY_LABEL: &str = "agent-tty 0.1.5 (tmux)";
const TITLE: &str = "Cells: `k` (issue 3)";
/// The cell timed, and what its JSON result must contain.
const RUN_ARGS: &[&str] = &["run", "-j", "s", "echo hello"];
const RUN_RESULT: &str = r#""status": "done", "output": "hello""#;

/// One implementation of the `k` command line.
trait CellTool {
    fn label(&self) -> &'static str;
    /// `k`, set up to run privately.
    fn k(&self) -> Command;
    /// Ends session `name` and what runs in it, by pid.
    fn end_session(&self, name: &str);
}

/// Our `k`: `target/release/k`, as `cargo build --release` makes it.
struct Ours<'a> {
    bench: &'a Bench,
}

impl CellTool for Ours<'_> {
    fn label(&self) -> &'static str {
        "k (agent-comms)"
    }

    fn k(&self) -> Command {
        self.bench.k()
    }

    fn end_session(&self, name: &str) {
        if let Ok(record) = self.bench.record(name) {
            self.bench.end_session(&record);
        }
    }
}

struct AgentTty<'a> {
    bench: &'a Bench,
    k: PathBuf,
    /// Its `TMUX_TMPDIR` and `XDG_RUNTIME_DIR`.
    dir: PathBuf,
    /// The tmux server its sessions live in (ended when dropped).
    server: TmuxServer,
}

impl<'a> AgentTty<'a> {
    /// agent-tty from `target/bench-venv`, installed there first if needed.
    fn install(bench: &'a Bench) -> anyhow::Result<Self> {
        let venv = bench.target_dir.join("bench-venv");
        let dir = bench.private_dir("agent-tty")?;
        let tool = Self {
            bench,
            k: venv.join("bin").join("k"),
            server: TmuxServer::at(
                dir.join(format!("tmux-{}", agent_comms_core::paths::euid()))
                    .join("default"),
            ),
            dir,
        };
        if !tool.k.is_file() || !tool.has_version() {
            progress(&format!(
                "(installing agent-tty {AGENT_TTY_VERSION} from PyPI into {})",
                venv.display()
            ));
            succeed(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
            succeed(Command::new(venv.join("bin").join("pip")).args([
                "install",
                "--quiet",
                &format!("agent-tty=={AGENT_TTY_VERSION}"),
            ]))?;
            ensure!(
                tool.has_version(),
                "{} is not agent-tty {AGENT_TTY_VERSION}",
                tool.k.display()
            );
        }
        Ok(tool)
    }

    fn has_version(&self) -> bool {
        first_line(self.k().arg("--version"))
            .is_some_and(|v| v == format!("agent-tty {AGENT_TTY_VERSION}"))
    }
}

impl CellTool for AgentTty<'_> {
    fn label(&self) -> &'static str {
        AGENT_TTY_LABEL
    }

    fn k(&self) -> Command {
        procs::before_start();
        let mut cmd = Command::new(&self.k);
        cmd.env("TMUX_TMPDIR", &self.dir)
            .env("XDG_RUNTIME_DIR", &self.dir)
            .env_remove("TMUX")
            .env_remove("K_SESSION");
        self.bench.neutral_env(&mut cmd);
        cmd
    }

    fn end_session(&self, name: &str) {
        // An interactive shell ignores SIGTERM; a hang-up ends it, and the
        // tmux session with it.
        if let Ok(pid) = self.server.pane_pid(name) {
            procs::stop(pid, Signal::SIGHUP);
        }
    }
}

pub fn section(bench: &Bench) -> Section {
    progress("cells: is `k` ready?");
    let ours = Ours { bench };
    if let Err(e) = probe(&ours) {
        return Section {
            title: TITLE.to_owned(),
            intro: format!("Not measured yet: `k` is not ready ({e:#})."),
            rows: Vec::new(),
            method: Vec::new(),
        };
    }
    let agent_tty = AgentTty::install(bench).map_err(|e| format!("agent-tty unavailable: {e:#}"));
    let mut tools: Vec<Result<&dyn CellTool, String>> = vec![Ok(&ours)];
    let mut labels = vec![ours.label()];
    tools.push(
        agent_tty
            .as_ref()
            .map(|t| t as &dyn CellTool)
            .map_err(Clone::clone),
    );
    labels.push(AGENT_TTY_LABEL);
    let plan = &bench.plan;

    progress("cells: k run");
    let run = cell_runs(&tools, plan.cell_warmup, plan.cell_runs);
    progress("cells: k new");
    let new = interleaved(&tools, plan.cell_news, |tool, i| {
        let name = format!("new-{i}");
        let took = k(tool, &["new", &name, "bash"], "OK ");
        tool.end_session(&name);
        took
    });
    progress("cells: k --version");
    let version = interleaved(&tools, plan.versions, |tool, _| {
        k(tool, &["--version"], " ")
    });
    progress("cells: true");
    let mut floor = Ok(Vec::new());
    for _ in 0..plan.versions {
        push(
            &mut floor,
            spawned(Command::new("true").stdin(Stdio::null())),
        );
    }

    let mut rows = Vec::new();
    rows.extend(compare(
        "`k run -j s 'echo hello'`, warm bash",
        &labels,
        run,
        "median under 2 ms and ≤ 1/20 of agent-tty's",
        |o, theirs| {
            let theirs = theirs.as_ref().ok()?;
            Some(o.median.value() <= theirs.median.value() / 20.0 && o.median.value() < 2.0)
        },
    ));
    rows.extend(compare(
        "`k new s bash` → accepts cells",
        &labels,
        new,
        "median under 100 ms",
        |o, _| Some(o.median.value() < 100.0),
    ));
    rows.extend(compare(
        "`k --version`",
        &labels,
        version,
        "median under 5 ms",
        |o, _| Some(o.median.value() < 5.0),
    ));
    rows.push(Row::new(
        "`true`, a program that does nothing",
        "the floor: spawn to exit",
        floor.map(|r| stats::latencies(&r)),
    ));
    Section {
        title: TITLE.to_owned(),
        intro: format!(
            "`k` on the agent-comms supervisor next to agent-tty {AGENT_TTY_VERSION} (installed \
             with `pip install agent-tty=={AGENT_TTY_VERSION}` into a private venv; it drives \
             tmux)."
        ),
        rows,
        method: vec![
            format!(
                "Every row is one `k` process per sample, timed from spawn to exit, its output \
                 checked; the tools take turns, {TURN} samples at a time (one at a time, \
                 the work agent-tty's tmux and Python still do after its `k` returns fell into \
                 our next sample). `HOME` is an empty directory, so `bash` \
                 reads no `~/.bashrc`. **run**: `k run -j s 'echo hello'` on a session started \
                 with `k new s bash`, after {} untimed cells. **new**: `k new new-N bash` until \
                 the command returns (both return once the session accepts cells); each session \
                 is ended afterwards.",
                plan.cell_warmup
            ),
            "`--version` is the cost of starting the program at all: the floor under every \
             other command. `true` (coreutils, C), timed the same way, is the floor under \
             that: what spawning, running and reaping any process costs on this machine."
                .to_owned(),
        ],
    }
}

/// Our rows (every tool but the last), each judged by `met`, which also
/// sees agent-tty's result (the last), then agent-tty's.
fn compare(
    what: &str,
    labels: &[&str],
    runs: Vec<Runs>,
    target: &str,
    met: impl Fn(&Summary, &Result<Summary, String>) -> Option<bool>,
) -> Vec<Row> {
    let mut results: Vec<_> = runs
        .into_iter()
        .map(|r| r.map(|r| stats::latencies(&r)))
        .collect();
    let theirs = results.pop().expect("agent-tty is the last tool");
    let mut rows: Vec<Row> = results
        .into_iter()
        .zip(labels)
        .map(|(ours, label)| {
            let mut row = Row::new(what, label, ours);
            row.target = judge(
                target,
                row.result.as_ref().ok().and_then(|o| met(o, &theirs)),
            );
            row
        })
        .collect();
    rows.push(Row::new(what, labels[labels.len() - 1], theirs));
    rows
}

/// `k new` and one cell: does our `k` work at all?
fn probe(ours: &Ours) -> anyhow::Result<()> {
    let setup = k(ours, &["new", "probe", "bash"], "OK ");
    let cell = setup.and_then(|_| k(ours, &["run", "-j", "probe", "echo hello"], RUN_RESULT));
    ours.end_session("probe");
    cell.map(drop)
}

/// `k run` on one warm session per tool.
fn cell_runs(tools: &[Result<&dyn CellTool, String>], warmup: usize, runs: usize) -> Vec<Runs> {
    let session = RUN_ARGS[2];
    let warm: Vec<_> = tools
        .iter()
        .map(|tool| {
            let tool = *tool.as_ref()?;
            let ready = k(tool, &["new", session, "bash"], "OK ").and_then(|_| {
                (0..warmup).try_for_each(|_| k(tool, RUN_ARGS, RUN_RESULT).map(drop))
            });
            ready.map(|_| tool).map_err(|e| format!("{e:#}"))
        })
        .collect();
    let timed = interleaved(&warm, runs, |tool, _| k(tool, RUN_ARGS, RUN_RESULT));
    for tool in tools.iter().flatten() {
        tool.end_session(session);
    }
    timed
}

/// How many samples a tool takes in a row before the other's turn.
///
/// Not one: agent-tty's tmux server and Python are still finishing when its
/// `k` has returned, and on a two-core machine that work landed in the
/// sample of ours that followed each of theirs (`k --version` measured
/// 1.53 ms taking turns one by one, 0.9 ms over `true`, where `perf stat`
/// alone gives 0.25 ms over `true`). Blocks keep drift between the tools
/// even while only the first sample of each block follows the other tool.
const TURN: usize = 25;

/// `each(tool, i)` n times per tool, the tools taking turns in blocks of
/// [`TURN`]; `i` is never the same twice, across tools too (sessions are
/// named by it, and two of our `k`s share the runtime directory). A tool
/// that could not be set up, or failed once, is not asked again.
fn interleaved(
    tools: &[Result<&dyn CellTool, String>],
    n: usize,
    each: impl Fn(&dyn CellTool, usize) -> anyhow::Result<Duration>,
) -> Vec<Runs> {
    let mut runs: Vec<Runs> = tools
        .iter()
        .map(|t| t.as_ref().map(|_| Vec::new()).map_err(Clone::clone))
        .collect();
    for block in (0..n).step_by(TURN) {
        for (t, (tool, runs)) in tools.iter().zip(&mut runs).enumerate() {
            for i in block..n.min(block + TURN) {
                if let (Ok(tool), Ok(_)) = (tool, &runs) {
                    push(runs, each(*tool, t * n + i));
                }
            }
        }
    }
    runs
}

/// Runs `cmd` to its exit with its output captured, as [`k`] does, and
/// times it; it must succeed.
fn spawned(cmd: &mut Command) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    let took = start.elapsed();
    ensure!(out.status.success(), "{cmd:?} failed: {}", out.status);
    Ok(took)
}

/// Runs `k ARGS…` and times it; its stdout must contain `expect`.
fn k(tool: &dyn CellTool, args: &[&str], expect: &str) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let out = tool
        .k()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", tool.label()))?;
    let took = start.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success() && stdout.contains(expect),
        "`k {}` ({}) printed {:?} {:?}",
        args.join(" "),
        tool.label(),
        stdout.trim(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(took)
}

/// Runs a set-up command to completion; its stderr on failure.
fn succeed(cmd: &mut Command) -> anyhow::Result<()> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    ensure!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}
