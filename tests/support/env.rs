//! One test's private world ([`TestEnv`]): an isolated runtime, the real
//! binaries run with it, and a cleanup that ends every process the test
//! started.
//!
//! Isolation: each [`TestEnv`] owns a fresh temporary directory holding its
//! own `AGENT_COMMS_RUNTIME_DIR`, `AGENT_COMMS_HOME`, `AGENT_COMMS_PROJECT`
//! and `HOME`, so tests can run in parallel and repeatedly with fixed
//! session names.
//!
//! Cleanup never kills by name. Supervisors are ended by the pid their
//! session record (`<name>.json`) gives, after checking that the pid is one
//! of ours: its environment carries this test's unique runtime directory.
//! The same check finds anything a broken supervisor may have left behind.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use portable_pty::CommandBuilder;
use serde_json::Value;

use super::procs::{describe, environ_has, pid_alive, signal, wait_gone, with_environ};
use super::run::{run_bounded, Run};
use super::term::{Term, TermOptions};
use super::{wait_until, BIN, TIMEOUT};

/// Variables of the person running the tests that must not reach what the
/// tests start: a log filter, an actor, their store, the `k` session they
/// may be in, and where providers keep their sessions.
const INHERITED_NOT: &[&str] = &[
    "AGENT_COMMS_LOG",
    "AGENT_COMMS_ACTOR",
    "AGENT_COMMS_STORE",
    "AGENT_COMMS_STORE_PASSWORD",
    "K_SESSION",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
];

/// `session new` arguments for a bash that reads no start-up files and
/// keeps no history file.
pub const BASH: &[&str] = &["--env", "HISTFILE=", "--", "bash", "--norc", "--noprofile"];

/// A session record as the CLI prints it (`session new --json`) and as the
/// supervisor writes it (`<name>.json`).
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub name: String,
    pub pid: u32,
    pub supervisor_pid: u32,
    pub socket: PathBuf,
}

impl Record {
    fn from_json(v: &Value) -> Option<Self> {
        Some(Self {
            name: v["name"].as_str()?.to_owned(),
            pid: u32::try_from(v["pid"].as_u64()?).ok()?,
            supervisor_pid: u32::try_from(v["supervisor_pid"].as_u64()?).ok()?,
            socket: PathBuf::from(v["socket"].as_str()?),
        })
    }
}

/// One test's private world.
pub struct TestEnv {
    base: tempfile::TempDir,
    /// `AGENT_COMMS_RUNTIME_DIR`; not created here, so the first command
    /// creates it (and the tests can check how).
    pub runtime: PathBuf,
    /// `AGENT_COMMS_HOME`.
    pub home: PathBuf,
    /// `AGENT_COMMS_PROJECT`: where the control-plane store lives.
    pub project: PathBuf,
    /// An empty directory of the test's own, for commands that need a
    /// current directory of their own (hooks, a provider's project).
    pub work: PathBuf,
    started: Mutex<Vec<Record>>,
}

impl Default for TestEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl TestEnv {
    pub fn new() -> Self {
        let base = tempfile::Builder::new()
            .prefix("ac-e2e-")
            .tempdir()
            .expect("create a temporary directory");
        let dir = |name: &str| {
            let path = base.path().join(name);
            fs::create_dir(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
            path
        };
        let (home, project, work) = (dir("home"), dir("project"), dir("work"));
        dir("user");
        Self {
            runtime: base.path().join("run"),
            home,
            project,
            work,
            base,
            started: Mutex::new(Vec::new()),
        }
    }

    /// The temporary directory holding everything of this test.
    pub fn base(&self) -> &Path {
        self.base.path()
    }

    /// `HOME` of every process of this test.
    pub fn user_home(&self) -> PathBuf {
        self.base.path().join("user")
    }

    /// The environment every process of this test gets.
    pub fn vars(&self) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("AGENT_COMMS_RUNTIME_DIR", self.runtime.clone()),
            ("AGENT_COMMS_HOME", self.home.clone()),
            ("AGENT_COMMS_PROJECT", self.project.clone()),
            // Providers (and the fakes) keep their sessions under HOME:
            // never the real one of whoever runs the tests.
            ("HOME", self.user_home()),
        ]
    }

    /// `program ARGS…` with this test's environment.
    pub fn command_of(&self, program: impl AsRef<OsStr>, args: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args);
        for var in INHERITED_NOT {
            cmd.env_remove(var);
        }
        for (k, v) in self.vars() {
            cmd.env(k, v);
        }
        cmd
    }

    /// `agent-comms ARGS…` with this test's environment.
    pub fn command(&self, args: &[&str]) -> Command {
        self.command_of(BIN, args)
    }

    /// Runs `agent-comms ARGS…` to completion (bounded by [`TIMEOUT`]).
    pub fn run(&self, args: &[&str]) -> Run {
        run_bounded(
            self.command(args),
            &format!("agent-comms {}", args.join(" ")),
        )
    }

    #[track_caller]
    pub fn run_ok(&self, args: &[&str]) -> Run {
        self.run(args).ok()
    }

    /// `session new NAME ARGS…` (ARGS includes `-- CMD…`); returns the record
    /// and remembers it for cleanup.
    pub fn start(&self, name: &str, args: &[&str]) -> Record {
        let mut all = vec!["session", "new", name, "--json"];
        all.extend_from_slice(args);
        let run = self.run_ok(&all);
        let v: Value = serde_json::from_str(run.stdout.trim())
            .unwrap_or_else(|e| panic!("`session new --json` printed no JSON ({e}): {run:#?}"));
        let record = Record::from_json(&v).unwrap_or_else(|| panic!("incomplete record: {v}"));
        assert_eq!(record.name, name);
        self.remember(record.clone());
        record
    }

    /// A detached bash session, with a marker on its screen so that later
    /// waits know it reads input.
    pub fn start_bash(&self, name: &str) -> Record {
        let record = self.start(name, BASH);
        self.send_line(name, "echo ready-$((2+3))");
        self.wait_screen(name, "ready-5");
        record
    }

    /// Remembers a record for cleanup (for sessions started some other way).
    pub fn remember(&self, record: Record) {
        self.started.lock().unwrap().push(record);
    }

    pub fn record_path(&self, name: &str) -> PathBuf {
        self.runtime.join(format!("{name}.json"))
    }

    pub fn socket_path(&self, name: &str) -> PathBuf {
        self.runtime.join(format!("{name}.sock"))
    }

    pub fn log(&self, name: &str) -> String {
        fs::read_to_string(self.runtime.join(format!("{name}.log"))).unwrap_or_default()
    }

    /// The record `<name>.json` on disk, as JSON, if any.
    pub fn record_json(&self, name: &str) -> Option<Value> {
        let bytes = fs::read(self.record_path(name)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// The record `<name>.json` on disk, if any.
    pub fn record(&self, name: &str) -> Option<Record> {
        Record::from_json(&self.record_json(name)?)
    }

    /// Every record on disk.
    fn records_on_disk(&self) -> Vec<Record> {
        let Ok(entries) = fs::read_dir(&self.runtime) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                self.record(name.strip_suffix(".json")?)
            })
            .collect()
    }

    /// The session's screen as `session snapshot` prints it.
    pub fn snapshot(&self, name: &str) -> String {
        self.run_ok(&["session", "snapshot", name]).stdout
    }

    /// Polls `session snapshot` until the screen contains `needle` (there is
    /// no push event for "text appeared"); returns that screen.
    pub fn wait_screen(&self, name: &str, needle: &str) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let run = self.run(&["session", "snapshot", name]);
            if run.success() && run.stdout.contains(needle) {
                return run.stdout;
            }
            if Instant::now() > deadline {
                panic!("'{needle}' did not appear on session {name}'s screen within {TIMEOUT:?}; last snapshot: {run:#?}\nlog:\n{}", self.log(name));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// `session send NAME TEXT` followed by `session send NAME --keys Enter`.
    pub fn send_line(&self, name: &str, text: &str) {
        self.run_ok(&["session", "send", name, text]);
        self.run_ok(&["session", "send", name, "--keys", "Enter"]);
    }

    /// `session ls --json`, parsed.
    pub fn ls_json(&self) -> Vec<Value> {
        let run = self.run_ok(&["session", "ls", "--json"]);
        match serde_json::from_str(run.stdout.trim()) {
            Ok(Value::Array(items)) => items,
            other => panic!("`session ls --json` is not a JSON array ({other:?}): {run:#?}"),
        }
    }

    /// The `ls --json` entry of `name`.
    pub fn ls_entry(&self, name: &str) -> Option<Value> {
        self.ls_json().into_iter().find(|v| v["name"] == name)
    }

    /// Polls `ls --json` until `name` reports `clients` attached clients
    /// (a client leaving is noticed asynchronously by the supervisor).
    pub fn wait_clients(&self, name: &str, clients: u64) {
        wait_until(
            &format!("session {name} to report {clients} clients"),
            || self.ls_entry(name).and_then(|v| v["clients"].as_u64()) == Some(clients),
        );
    }

    /// `ARGV` for a test-side terminal: this test's environment and `vars`
    /// on top of the inherited one, `TERM=xterm-256color`, in the current
    /// directory.
    pub fn pty_command(&self, argv: &[&str], vars: &[(&str, &str)]) -> CommandBuilder {
        let mut cmd = CommandBuilder::from_argv(argv.iter().map(Into::into).collect());
        cmd.env("TERM", "xterm-256color");
        for var in INHERITED_NOT {
            cmd.env_remove(var);
        }
        for (k, v) in self.vars() {
            cmd.env(k, v);
        }
        for (k, v) in vars {
            cmd.env(k, v);
        }
        if let Ok(cwd) = std::env::current_dir() {
            cmd.cwd(cwd);
        }
        cmd
    }

    /// A 24x80 test-side terminal running `agent-comms ARGS…` that answers
    /// no queries (the test answers them itself, if it wants to).
    pub fn term(&self, args: &[&str]) -> Term {
        let mut argv = vec![BIN];
        argv.extend_from_slice(args);
        self.term_with(&argv, &[], false)
    }

    /// A 24x80 test-side terminal running `argv` with more variables; with
    /// `answer_queries`, it answers terminal queries as a real one does
    /// (some programs wait for that at start-up).
    pub fn term_with(&self, argv: &[&str], vars: &[(&str, &str)], answer_queries: bool) -> Term {
        let options = TermOptions {
            answer_queries,
            ..TermOptions::default()
        };
        Term::start(self.pty_command(argv, vars), options)
    }

    /// `AGENT_COMMS_RUNTIME_DIR=<this test's>`, as it stands in an
    /// environment.
    pub fn runtime_var(&self) -> Vec<u8> {
        let mut var = b"AGENT_COMMS_RUNTIME_DIR=".to_vec();
        var.extend_from_slice(self.runtime.as_os_str().as_encoded_bytes());
        var
    }

    /// Live processes (zombies excluded) that carry this test's runtime
    /// directory in their environment: everything this test started,
    /// directly or through a supervisor.
    pub fn our_processes(&self) -> Vec<u32> {
        with_environ(&[self.runtime_var()])
    }

    /// True when `pid` is alive and runs with this test's runtime directory.
    pub fn is_ours(&self, pid: u32) -> bool {
        pid_alive(pid) && environ_has(pid, &[self.runtime_var()])
    }

    /// Asserts that nothing this test started is still running (terminals
    /// the caller still holds excepted).
    pub fn assert_nothing_left(&self, except: &[u32]) {
        let mut left = Vec::new();
        let deadline = Instant::now() + TIMEOUT;
        // A process that was just told to go may take a moment: wait for
        // each one's exit (an event), bounded.
        for pid in self.our_processes() {
            if except.contains(&pid) {
                continue;
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if !wait_gone(pid, remaining) {
                left.push(describe(pid));
            }
        }
        assert!(left.is_empty(), "processes left behind: {left:#?}");
    }

    /// Sends `sig` to `pid` after checking it is one of ours.
    pub fn signal(&self, pid: u32, sig: i32) {
        assert!(
            self.is_ours(pid),
            "pid {pid} is not a live process of this test"
        );
        signal(pid, sig);
    }

    /// Ends one session: SIGTERM to its supervisor (which ends the child),
    /// SIGKILL if that does not work, then the child's process group if the
    /// supervisor could not take it along.
    fn end_session(&self, record: &Record) {
        let sup = record.supervisor_pid;
        if self.is_ours(sup) {
            signal(sup, libc::SIGTERM);
            if !wait_gone(sup, Duration::from_secs(6)) && self.is_ours(sup) {
                signal(sup, libc::SIGKILL);
                wait_gone(sup, Duration::from_secs(2));
            }
        }
        let child = record.pid;
        if self.is_ours(child) && !wait_gone(child, Duration::from_millis(500)) {
            // The child leads its own process group (setsid in the PTY).
            // SAFETY: killpg(2) on the group of a pid just checked to be ours.
            unsafe { libc::killpg(child as libc::pid_t, libc::SIGKILL) };
            wait_gone(child, Duration::from_secs(2));
        }
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        // Sessions first, each by the supervisor pid of its record.
        let mut records = self.started.lock().map(|r| r.clone()).unwrap_or_default();
        records.extend(self.records_on_disk());
        records.sort_by_key(|r| r.supervisor_pid);
        records.dedup_by_key(|r| r.supervisor_pid);
        for record in &records {
            self.end_session(record);
        }
        // Then anything else still carrying our unique runtime directory
        // (a broken supervisor's orphans, a hung client, a REPL's children).
        for pid in self.our_processes() {
            if self.is_ours(pid) {
                signal(pid, libc::SIGKILL);
                wait_gone(pid, Duration::from_secs(2));
            }
        }
        // A test may have loosened or tightened modes; make sure the
        // temporary directory can be removed.
        let _ = fs::set_permissions(self.base.path(), fs::Permissions::from_mode(0o700));
    }
}
