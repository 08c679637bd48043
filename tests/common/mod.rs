//! The harness shared by the end-to-end tests: an isolated runtime per test,
//! the real `agent-comms` binary run with it, test-side terminals (real
//! PTYs) for `attach`/`watch`, and a cleanup that ends every process the
//! test started.
//!
//! Isolation: each [`TestEnv`] owns a fresh temporary directory holding its
//! own `AGENT_COMMS_RUNTIME_DIR` and `AGENT_COMMS_HOME`, so tests can run in
//! parallel and repeatedly with fixed session names.
//!
//! Cleanup never kills by name. Supervisors are ended by the pid their
//! session record (`<name>.json`) gives, after checking that the pid is one
//! of ours: its environment carries this test's unique runtime directory.
//! The same check finds anything a broken supervisor may have left behind.

#![allow(dead_code)]

pub mod raw;

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, CommandBuilder, MasterPty, PtySize};
use serde_json::Value;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_agent-comms");
/// Upper bound for anything a test waits for. Generous: debug builds, and
/// every test runs in parallel with the others.
pub const TIMEOUT: Duration = Duration::from_secs(20);
/// The fake provider `name` (tests/fakes/bin): claude, codex or opencode.
pub fn fake(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fakes/bin")
        .join(name)
        .display()
        .to_string()
}

/// A fake's log entries of one kind (`start`, `submit` …).
pub fn fake_events(log: &Path, kind: &str) -> Vec<Value> {
    fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == kind)
        .collect()
}

/// Variables of the person running the tests that must not reach what the
/// tests start: a log filter, and where providers keep their sessions.
const INHERITED_NOT: &[&str] = &[
    "AGENT_COMMS_LOG",
    "AGENT_COMMS_ACTOR",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
];

/// A bash that reads no start-up files and keeps no history file.
pub const BASH: &[&str] = &["--env", "HISTFILE=", "--", "bash", "--norc", "--noprofile"];

/// What a finished command printed.
#[derive(Debug)]
pub struct Run {
    pub what: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// Asserts a zero exit status.
    pub fn ok(self) -> Self {
        assert!(self.status.success(), "`{}` failed: {self:#?}", self.what);
        self
    }

    /// Asserts a non-zero exit status and exactly one line on stderr, as the
    /// CLI contract says errors look.
    pub fn fails_with_one_line(self) -> Self {
        assert!(
            !self.status.success(),
            "`{}` should have failed: {self:#?}",
            self.what
        );
        assert_eq!(
            self.stderr.trim_end().lines().count(),
            1,
            "`{}` should print exactly one error line: {self:#?}",
            self.what
        );
        self
    }
}

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
        let runtime = base.path().join("run");
        let home = base.path().join("home");
        fs::create_dir(&home).expect("create AGENT_COMMS_HOME");
        let project = base.path().join("project");
        fs::create_dir(&project).expect("create AGENT_COMMS_PROJECT");
        fs::create_dir(base.path().join("user")).expect("create HOME");
        Self {
            base,
            runtime,
            home,
            project,
            started: Mutex::new(Vec::new()),
        }
    }

    /// The temporary directory holding everything of this test.
    pub fn base(&self) -> &Path {
        self.base.path()
    }

    /// The environment every process of this test gets.
    pub fn vars(&self) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("AGENT_COMMS_RUNTIME_DIR", self.runtime.clone()),
            ("AGENT_COMMS_HOME", self.home.clone()),
            ("AGENT_COMMS_PROJECT", self.project.clone()),
            // Providers (and the fakes) keep their sessions under HOME:
            // never the real one of whoever runs the tests.
            ("HOME", self.base.path().join("user")),
        ]
    }

    /// `agent-comms ARGS…` with this test's environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(args);
        for var in INHERITED_NOT {
            cmd.env_remove(var);
        }
        for (k, v) in self.vars() {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs `agent-comms ARGS…` to completion (bounded by [`TIMEOUT`]).
    pub fn run(&self, args: &[&str]) -> Run {
        run_bounded(
            self.command(args),
            &format!("agent-comms {}", args.join(" ")),
        )
    }

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

    /// The record `<name>.json` on disk, if any.
    pub fn record(&self, name: &str) -> Option<Record> {
        let bytes = fs::read(self.record_path(name)).ok()?;
        Record::from_json(&serde_json::from_slice(&bytes).ok()?)
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

    /// A test-side terminal running `agent-comms ARGS…`.
    pub fn term(&self, args: &[&str]) -> Term {
        let mut all = vec![BIN];
        all.extend_from_slice(args);
        Term::spawn(self, &all)
    }

    /// Live processes (zombies excluded) that carry this test's runtime
    /// directory in their environment: everything this test started,
    /// directly or through a supervisor.
    pub fn our_processes(&self) -> Vec<u32> {
        let Ok(entries) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&pid| pid != std::process::id() && self.is_ours(pid))
            .collect()
    }

    /// True when `pid` is alive and runs with this test's runtime directory.
    pub fn is_ours(&self, pid: u32) -> bool {
        if !pid_alive(pid) {
            return false;
        }
        let Ok(environ) = fs::read(format!("/proc/{pid}/environ")) else {
            return false;
        };
        let mut wanted = b"AGENT_COMMS_RUNTIME_DIR=".to_vec();
        wanted.extend_from_slice(self.runtime.as_os_str().as_encoded_bytes());
        environ
            .split(|&b| b == 0)
            .any(|var| var == wanted.as_slice())
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
            if !wait_pid_gone(pid, remaining) {
                left.push(describe(pid));
            }
        }
        assert!(left.is_empty(), "processes left behind: {left:#?}");
    }

    /// Sends `signal` to `pid` after checking it is one of ours.
    pub fn signal(&self, pid: u32, signal: i32) {
        assert!(
            self.is_ours(pid),
            "pid {pid} is not a live process of this test"
        );
        // SAFETY: plain kill(2) on a pid checked above.
        unsafe { libc::kill(pid as libc::pid_t, signal) };
    }

    /// Ends one session: SIGTERM to its supervisor (which ends the child),
    /// SIGKILL if that does not work, then the child's process group if the
    /// supervisor could not take it along.
    fn end_session(&self, record: &Record) {
        let sup = record.supervisor_pid;
        if self.is_ours(sup) {
            // SAFETY: kill(2) on a checked pid.
            unsafe { libc::kill(sup as libc::pid_t, libc::SIGTERM) };
            if !wait_pid_gone(sup, Duration::from_secs(6)) && self.is_ours(sup) {
                unsafe { libc::kill(sup as libc::pid_t, libc::SIGKILL) };
                wait_pid_gone(sup, Duration::from_secs(2));
            }
        }
        let child = record.pid;
        if self.is_ours(child) && !wait_pid_gone(child, Duration::from_millis(500)) {
            // The child leads its own process group (setsid in the PTY).
            unsafe { libc::killpg(child as libc::pid_t, libc::SIGKILL) };
            wait_pid_gone(child, Duration::from_secs(2));
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
        // (a broken supervisor's orphans, a hung client).
        for pid in self.our_processes() {
            if self.is_ours(pid) {
                // SAFETY: kill(2) on a pid just checked to be ours.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                wait_pid_gone(pid, Duration::from_secs(2));
            }
        }
        // A test may have loosened or tightened modes; make sure the
        // temporary directory can be removed.
        let _ = fs::set_permissions(self.base.path(), fs::Permissions::from_mode(0o700));
    }
}

/// Runs `cmd` with piped output, killing it (and failing the test) if it
/// does not finish within [`TIMEOUT`].
pub fn run_bounded(mut cmd: Command, what: &str) -> Run {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{what}`: {e}"));
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(TIMEOUT) {
        Ok(Ok(out)) => Run {
            what: what.to_owned(),
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        },
        Ok(Err(e)) => panic!("`{what}`: {e}"),
        Err(_) => {
            // Not reaped yet (the waiter thread would have sent), so the
            // pid is still this child's.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            let out = rx.recv().ok().and_then(Result::ok);
            panic!("`{what}` did not finish within {TIMEOUT:?}; output so far: {out:?}");
        }
    }
}

/// Polls `done` until it holds, for conditions that have no event to wait
/// on; fails the test after [`TIMEOUT`].
pub fn wait_until(what: &str, done: impl FnMut() -> bool) {
    wait_until_within(TIMEOUT, what, done);
}

/// [`wait_until`] with a longer bound, for work that takes long by design.
pub fn wait_until_within(timeout: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// True when `pid` names a process that has not exited (zombies count as
/// exited: they only wait to be reaped).
pub use agent_comms_core::session::pid_alive;

/// Waits until `pid` has exited, at most `timeout`; true if it has (a
/// pidfd event, from core).
pub use agent_comms_core::session::wait_gone as wait_pid_gone;

/// `pid (comm) state` plus its command line, for failure messages.
fn describe(pid: u32) -> String {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let cmdline = fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default();
    format!(
        "{} | {}",
        stat.split(' ').take(5).collect::<Vec<_>>().join(" "),
        cmdline.trim()
    )
}

/// Everything a test-side terminal has shown so far.
#[derive(Default)]
struct Screen {
    bytes: Vec<u8>,
    eof: bool,
}

/// A program in a real PTY on the test's side: the "person's terminal" for
/// `attach`, `watch` and `session run`.
pub struct Term {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    pid: u32,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    _master: Box<dyn MasterPty + Send>,
    screen: Arc<(Mutex<Screen>, Condvar)>,
    status: Option<portable_pty::ExitStatus>,
}

impl Term {
    /// Starts `argv` in a new 24x80 PTY with `env`'s environment.
    /// The test answers terminal queries itself, if it wants to.
    pub fn spawn(env: &TestEnv, argv: &[&str]) -> Self {
        Self::spawn_with(env, argv, &[], false)
    }

    /// [`Term::spawn`] with more variables. With `answer`, like a real
    /// terminal it answers cursor-position queries (`ESC[6n`), which some
    /// programs wait for at start-up.
    pub fn spawn_with(env: &TestEnv, argv: &[&str], vars: &[(&str, &str)], answer: bool) -> Self {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 24,
                cols: 80,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("open a test-side PTY");
        let mut cmd = CommandBuilder::from_argv(argv.iter().map(Into::into).collect());
        cmd.env("TERM", "xterm-256color");
        for var in INHERITED_NOT {
            cmd.env_remove(var);
        }
        for (k, v) in env.vars() {
            cmd.env(k, v);
        }
        for (k, v) in vars {
            cmd.env(k, v);
        }
        if let Ok(cwd) = std::env::current_dir() {
            cmd.cwd(cwd);
        }
        let child = pair
            .slave
            .spawn_command(cmd)
            .unwrap_or_else(|e| panic!("cannot start {argv:?} in a PTY: {e}"));
        drop(pair.slave);
        let pid = child.process_id().expect("the child has a pid");
        let mut reader = pair.master.try_clone_reader().expect("PTY reader");
        let writer = Arc::new(Mutex::new(pair.master.take_writer().expect("PTY writer")));
        let screen = Arc::new((Mutex::new(Screen::default()), Condvar::new()));
        let shared = Arc::clone(&screen);
        let answers = Arc::clone(&writer);
        std::thread::spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            loop {
                let n = match reader.read(&mut buf) {
                    Ok(0) | Err(_) => 0,
                    Ok(n) => n,
                };
                let (lock, cvar) = &*shared;
                let mut s = lock.lock().unwrap();
                if n == 0 {
                    s.eof = true;
                    cvar.notify_all();
                    return;
                }
                s.bytes.extend_from_slice(&buf[..n]);
                cvar.notify_all();
                drop(s);
                let queries = buf[..n].windows(4).filter(|w| w == b"\x1b[6n").count();
                for _ in 0..if answer { queries } else { 0 } {
                    let mut w = answers.lock().unwrap();
                    let _ = w.write_all(b"\x1b[1;1R").and_then(|()| w.flush());
                }
            }
        });
        Self {
            child,
            pid,
            writer,
            _master: pair.master,
            screen,
            status: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Types `bytes`.
    pub fn write(&mut self, bytes: &[u8]) {
        let mut writer = self.writer.lock().unwrap();
        writer.write_all(bytes).expect("write to the test-side PTY");
        writer.flush().expect("flush the test-side PTY");
    }

    /// Everything shown so far, lossily decoded.
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&self.screen.0.lock().unwrap().bytes).into_owned()
    }

    /// How many bytes were shown so far (a mark for [`Term::wait_for_after`]).
    pub fn mark(&self) -> usize {
        self.screen.0.lock().unwrap().bytes.len()
    }

    /// Waits until the output contains `needle` (woken by every chunk read).
    pub fn wait_for(&self, needle: &str) {
        self.wait_for_after(0, needle);
    }

    /// Waits until the output after byte `mark` contains `needle`.
    pub fn wait_for_after(&self, mark: usize, needle: &str) {
        let (lock, cvar) = &*self.screen;
        let deadline = Instant::now() + TIMEOUT;
        let mut s = lock.lock().unwrap();
        loop {
            let tail = &s.bytes[mark.min(s.bytes.len())..];
            if tail.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || s.eof {
                let shown = String::from_utf8_lossy(&s.bytes).into_owned();
                let why = if s.eof {
                    "the terminal closed"
                } else {
                    "timed out"
                };
                drop(s);
                panic!("{why} waiting for {needle:?} on the test terminal (pid {}); it showed:\n{shown:?}", self.pid);
            }
            s = cvar.wait_timeout(s, left).unwrap().0;
        }
    }

    /// Waits (bounded) for the program to exit and returns its status.
    pub fn wait_exit(&mut self) -> portable_pty::ExitStatus {
        if let Some(status) = &self.status {
            return status.clone();
        }
        assert!(
            wait_pid_gone(self.pid, TIMEOUT),
            "the program in the test terminal (pid {}) did not exit within {TIMEOUT:?}; it showed:\n{:?}",
            self.pid,
            self.output()
        );
        let status = self.child.wait().expect("reap the test terminal's program");
        self.status = Some(status.clone());
        status
    }

    /// SIGKILLs the program (a client that vanishes mid-stream) and reaps it.
    pub fn kill(&mut self) {
        if self.status.is_none() {
            // SAFETY: our own unreaped child, so the pid is still its.
            unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGKILL) };
            self.status = Some(self.child.wait().expect("reap the test terminal's program"));
        }
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        self.kill();
    }
}
