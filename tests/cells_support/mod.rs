//! What the `k`/`km` end-to-end tests (tests/cells.rs) need: an isolated
//! world per test, bounded runs of the real binaries, background processes
//! read line by line, and a cleanup that ends everything a test started.
//!
//! Isolation: each [`Env`] owns a temporary directory with its own
//! `AGENT_COMMS_RUNTIME_DIR`, `AGENT_COMMS_HOME` and `HOME` (REPL history
//! files land there), and `K_SESSION` is removed, so tests run in parallel
//! and repeatedly with fixed session names.
//!
//! Cleanup never kills by name: supervisors are ended by the pid their
//! session record (`<runtime>/<name>.json`) gives, and then anything still
//! carrying this test's unique runtime directory in its environment (a REPL,
//! a hook, a `sleep` a cell started) is killed by pid.

#![allow(dead_code)]

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

pub const K: &str = env!("CARGO_BIN_EXE_k");
pub const KM: &str = env!("CARGO_BIN_EXE_km");
pub const AGENT_COMMS: &str = env!("CARGO_BIN_EXE_agent-comms");

/// Upper bound for anything a test waits for: generous, since debug builds
/// of every test run in parallel on small machines.
pub const TIMEOUT: Duration = Duration::from_secs(90);

/// bash without start-up files (the user's rc files would change prompts
/// and output).
pub const BASH: &[&str] = &["bash", "--norc", "--noprofile"];

/// What a finished command printed.
#[derive(Debug)]
pub struct Out {
    pub what: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or(-1)
    }

    /// Asserts the exit code and the whole of stdout, and an empty stderr.
    #[track_caller]
    pub fn is(&self, code: i32, stdout: &str) -> &Self {
        assert_eq!(
            (self.code(), self.stdout.as_str(), self.stderr.as_str()),
            (code, stdout, ""),
            "`{}`",
            self.what
        );
        self
    }

    /// Asserts the exit code and the whole of stderr, and an empty stdout.
    #[track_caller]
    pub fn is_err(&self, code: i32, stderr: &str) -> &Self {
        assert_eq!(
            (self.code(), self.stdout.as_str(), self.stderr.as_str()),
            (code, "", stderr),
            "`{}`",
            self.what
        );
        self
    }

    /// stdout's only line, parsed as JSON.
    #[track_caller]
    pub fn json(&self) -> Value {
        let line = self.stdout.strip_suffix('\n').unwrap_or(&self.stdout);
        assert!(
            !line.contains('\n'),
            "`{}` printed several lines: {self:#?}",
            self.what
        );
        serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("`{}` printed no JSON ({e}): {self:#?}", self.what))
    }
}

/// One test's private world.
pub struct Env {
    dir: tempfile::TempDir,
    pub runtime: PathBuf,
    pub home: PathBuf,
    /// The current directory of every command (hooks live here).
    pub work: PathBuf,
}

impl Env {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("k-e2e-")
            .tempdir()
            .expect("create a temporary directory");
        let runtime = dir.path().join("run");
        let home = dir.path().join("home");
        let work = dir.path().join("work");
        fs::create_dir(&home).unwrap();
        fs::create_dir(&work).unwrap();
        Self {
            dir,
            runtime,
            home,
            work,
        }
    }

    /// `bin ARGS…` with this test's environment.
    pub fn command(&self, bin: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .current_dir(&self.work)
            .env("AGENT_COMMS_RUNTIME_DIR", &self.runtime)
            .env("AGENT_COMMS_HOME", &self.home)
            .env("HOME", &self.home)
            .env("TERM", "xterm-256color")
            .env_remove("K_SESSION")
            .env_remove("AGENT_COMMS_LOG")
            .stdin(Stdio::null());
        // Ctrl-C as a terminal would deliver it: a test runner started in
        // the background by a script inherits SIGINT ignored, and ignored
        // signals stay ignored across exec.
        // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        cmd
    }

    /// `k ARGS…`, to completion.
    pub fn k(&self, args: &[&str]) -> Out {
        self.k_env(args, &[])
    }

    /// `k ARGS…` with extra environment variables.
    pub fn k_env(&self, args: &[&str], vars: &[(&str, &str)]) -> Out {
        let mut cmd = self.command(K, args);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        run_bounded(cmd, &format!("k {}", args.join(" ")))
    }

    /// `k ARGS…` for something slow (bounded by `limit`, not [`TIMEOUT`]).
    pub fn k_long(&self, args: &[&str], limit: Duration) -> Out {
        run_within(
            self.command(K, args),
            &format!("k {}", args.join(" ")),
            limit,
        )
    }

    pub fn km(&self, args: &[&str]) -> Out {
        run_bounded(self.command(KM, args), &format!("km {}", args.join(" ")))
    }

    pub fn agent_comms(&self, args: &[&str]) -> Out {
        run_bounded(
            self.command(AGENT_COMMS, args),
            &format!("agent-comms {}", args.join(" ")),
        )
    }

    /// `bin ARGS…` in the background, its stdout read line by line.
    pub fn spawn(&self, bin: &str, args: &[&str]) -> Bg {
        let mut cmd = self.command(bin, args);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        Bg::start(cmd, &format!("{} {}", short(bin), args.join(" ")))
    }

    /// `k new NAME CMD…`, asserting `OK NAME`.
    #[track_caller]
    pub fn new_session(&self, name: &str, cmd: &[&str]) {
        let mut args = vec!["new", name];
        args.extend_from_slice(cmd);
        self.k(&args).is(0, &format!("OK {name}\n"));
    }

    /// The session record `<runtime>/<name>.json`.
    pub fn record(&self, name: &str) -> Option<Value> {
        let bytes = fs::read(self.runtime.join(format!("{name}.json"))).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    #[track_caller]
    pub fn supervisor_pid(&self, name: &str) -> u32 {
        let r = self.record(name).expect("a session record");
        r["supervisor_pid"].as_u64().expect("supervisor_pid") as u32
    }

    #[track_caller]
    pub fn repl_pid(&self, name: &str) -> u32 {
        let r = self.record(name).expect("a session record");
        r["pid"].as_u64().expect("pid") as u32
    }

    /// The session's private directory for cell files.
    pub fn cells_dir(&self, name: &str) -> PathBuf {
        self.runtime.join(format!("{name}.cells"))
    }

    /// `k run -j S CODE`: the reply, after asserting exit 0 and one line.
    #[track_caller]
    pub fn run_json(&self, session: &str, code: &str) -> (Value, String) {
        let out = self.k(&["run", "-j", session, code]);
        assert_eq!(out.code(), 0, "{out:#?}");
        (out.json(), out.stdout)
    }

    /// Asserts that `k run -j S CODE` prints exactly the done line with
    /// `output` (and `exit_code` when given).
    #[track_caller]
    pub fn expect_done(&self, session: &str, code: &str, output: &str, exit_code: Option<i64>) {
        let (v, line) = self.run_json(session, code);
        let id = v["cell_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no cell_id: {line}"));
        assert_eq!(
            line,
            done_line(id, output, exit_code),
            "k run -j {session} {code:?}; the session's screen:\n{}",
            self.screen(session)
        );
    }

    /// The session's screen as text, for failure messages.
    pub fn screen(&self, session: &str) -> String {
        let mut cmd = self.command(
            env!("CARGO_BIN_EXE_agent-comms"),
            &["session", "snapshot", session],
        );
        cmd.stdin(std::process::Stdio::null());
        cmd.output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_else(|e| format!("(no snapshot: {e})"))
    }

    /// True when `pid` is alive and runs with this test's runtime directory
    /// (so it is something this test started, directly or not).
    pub fn is_ours(&self, pid: u32) -> bool {
        if !pid_alive(pid) {
            return false;
        }
        let Ok(environ) = fs::read(format!("/proc/{pid}/environ")) else {
            return false;
        };
        let mut wanted = b"AGENT_COMMS_RUNTIME_DIR=".to_vec();
        wanted.extend_from_slice(self.runtime.as_os_str().as_encoded_bytes());
        environ.split(|&b| b == 0).any(|v| v == wanted.as_slice())
    }

    fn our_processes(&self) -> Vec<u32> {
        let me = std::process::id();
        fs::read_dir("/proc")
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                    .filter(|&p| p != me && self.is_ours(p))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Writes an executable script into the work directory.
    pub fn script(&self, name: &str, text: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.work.join(name);
        fs::write(&path, text).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    pub fn base(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        // Sessions first, each by the supervisor pid of its record.
        let records: Vec<Value> = fs::read_dir(&self.runtime)
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter_map(|e| {
                        let name = e.file_name().into_string().ok()?;
                        self.record(name.strip_suffix(".json")?)
                    })
                    .collect()
            })
            .unwrap_or_default();
        for r in &records {
            let Some(sup) = r["supervisor_pid"].as_u64().map(|p| p as u32) else {
                continue;
            };
            if self.is_ours(sup) {
                signal(sup, libc::SIGTERM);
                if !wait_gone(sup, Duration::from_secs(5)) && self.is_ours(sup) {
                    signal(sup, libc::SIGKILL);
                    wait_gone(sup, Duration::from_secs(2));
                }
            }
        }
        // Then whatever else carries our runtime directory.
        for pid in self.our_processes() {
            if self.is_ours(pid) {
                signal(pid, libc::SIGKILL);
                wait_gone(pid, Duration::from_secs(2));
            }
        }
    }
}

fn short(bin: &str) -> &str {
    bin.rsplit('/').next().unwrap_or(bin)
}

/// Runs `cmd` with piped output; kills it (and fails) after [`TIMEOUT`].
pub fn run_bounded(cmd: Command, what: &str) -> Out {
    run_within(cmd, what, TIMEOUT)
}

pub fn run_within(mut cmd: Command, what: &str, limit: Duration) -> Out {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{what}`: {e}"));
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(out)) => Out {
            what: what.to_owned(),
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        },
        Ok(Err(e)) => panic!("`{what}`: {e}"),
        Err(_) => {
            // Not reaped yet (the waiter would have sent), so the pid is
            // still this child's.
            signal(pid, libc::SIGKILL);
            panic!("`{what}` did not finish within {limit:?}");
        }
    }
}

/// A background process whose stdout is read line by line.
pub struct Bg {
    pub what: String,
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    status: Option<ExitStatus>,
}

impl Bg {
    fn start(mut cmd: Command, what: &str) -> Self {
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{what}`: {e}"));
        let lines = reader(child.stdout.take().expect("piped"));
        let stderr = reader(child.stderr.take().expect("piped"));
        Self {
            what: what.to_owned(),
            child,
            lines,
            stderr,
            status: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line, waiting at most `within`; `None` on timeout or end.
    pub fn try_line(&self, within: Duration) -> Option<String> {
        self.lines.recv_timeout(within).ok()
    }

    /// The next line (fails the test after [`TIMEOUT`] or at the end).
    #[track_caller]
    pub fn line(&self) -> String {
        match self.lines.recv_timeout(TIMEOUT) {
            Ok(l) => l,
            Err(e) => panic!(
                "`{}` printed no further line ({e:?}); stderr: {:?}",
                self.what,
                self.stderr.try_iter().collect::<Vec<_>>()
            ),
        }
    }

    /// The next line that `keep` accepts (others are skipped).
    #[track_caller]
    pub fn line_where(&self, keep: impl Fn(&str) -> bool) -> String {
        loop {
            let l = self.line();
            if keep(&l) {
                return l;
            }
        }
    }

    /// Lines printed so far and not read yet.
    pub fn pending(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    pub fn stderr(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }

    pub fn signal(&self, sig: i32) {
        if self.status.is_none() {
            // Our own unreaped child: the pid is still its.
            signal(self.pid(), sig);
        }
    }

    /// Waits (bounded) for the exit and returns its status.
    #[track_caller]
    pub fn wait(&mut self) -> ExitStatus {
        if let Some(s) = self.status {
            return s;
        }
        // Its exit is an event (a pidfd); then reaping it does not block.
        assert!(
            wait_gone(self.child.id(), TIMEOUT),
            "`{}` did not exit within {TIMEOUT:?}",
            self.what
        );
        let s = self.child.wait().expect("wait");
        self.status = Some(s);
        s
    }

    /// Everything it printed after the lines already read, once it exited.
    #[track_caller]
    pub fn rest(&mut self) -> Vec<String> {
        self.wait();
        // The reader thread ends at EOF; collect until then.
        let mut out = Vec::new();
        while let Ok(l) = self.lines.recv_timeout(TIMEOUT) {
            out.push(l);
        }
        out
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        if self.status.is_none() {
            signal(self.pid(), libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

fn reader(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(l) = line else { return };
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    rx
}

pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a pid the caller checked to be ours.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// True when `pid` has not exited (a zombie has), and the wait for it to be
/// gone (a pidfd event): both from core.
pub use agent_comms_core::session::{pid_alive, wait_gone};

/// Polls `check` until it returns `Some`, for states the contract offers
/// only by polling; fails the test after [`TIMEOUT`].
#[track_caller]
pub fn poll_until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `"…"` as `json.dumps` writes a string.
pub fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

pub fn done_line(id: &str, output: &str, exit_code: Option<i64>) -> String {
    let exit = exit_code.map_or(String::new(), |c| format!(", \"exit_code\": {c}"));
    format!(
        "{{\"cell_id\": \"{id}\", \"status\": \"done\", \"output\": {}{exit}}}\n",
        js(output)
    )
}

pub fn fired_line(id: &str) -> String {
    format!("{{\"cell_id\": \"{id}\", \"status\": \"fired\"}}\n")
}

pub fn running_line(id: &str) -> String {
    format!("{{\"cell_id\": \"{id}\", \"status\": \"running\"}}\n")
}

pub fn timeout_line(id: &str, output: &str) -> String {
    format!(
        "{{\"cell_id\": \"{id}\", \"status\": \"timeout\", \"output\": {}}}\n",
        js(output)
    )
}

pub fn error_line(message: &str) -> String {
    format!("{{\"status\": \"error\", \"output\": {}}}\n", js(message))
}

pub fn cell_error_line(id: &str, message: &str) -> String {
    format!(
        "{{\"cell_id\": \"{id}\", \"status\": \"error\", \"output\": {}}}\n",
        js(message)
    )
}

/// True for `YYYY-MM-DDTHH:MM:SS[.fff…](Z|+00:00)`: UTC ISO 8601.
pub fn is_utc_iso8601(ts: &str) -> bool {
    let b = ts.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    if b.len() < 20
        || !(digits(0..4) && digits(5..7) && digits(8..10))
        || !(digits(11..13) && digits(14..16) && digits(17..19))
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return false;
    }
    let mut rest = &ts[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    rest == "Z" || rest == "+00:00"
}

/// The `ts` of a km line, checked to be UTC ISO 8601.
#[track_caller]
pub fn ts_of(line: &str) -> String {
    let v: Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("km printed no JSON ({e}): {line}"));
    let ts = v["ts"].as_str().unwrap_or_else(|| panic!("no ts: {line}"));
    assert!(is_utc_iso8601(ts), "ts is not UTC ISO 8601: {line}");
    ts.to_owned()
}

/// A km cell event line, exactly.
pub fn km_cell(id: &str, session: &str, status: &str, ts: &str) -> String {
    format!(
        "{{\"cell_id\": \"{id}\", \"session\": \"{session}\", \"status\": \"{status}\", \"ts\": \"{ts}\"}}"
    )
}

pub fn km_notify(session: &str, from: &str, message: &str, ts: &str) -> String {
    format!(
        "{{\"session\": \"{session}\", \"status\": \"notify\", \"from\": {}, \"message\": {}, \"ts\": \"{ts}\"}}",
        js(from),
        js(message)
    )
}

pub fn km_closed(session: &str, ts: &str) -> String {
    format!("{{\"session\": \"{session}\", \"status\": \"closed\", \"ts\": \"{ts}\"}}")
}

/// Resident memory of `pid` (VmRSS or VmHWM), in KiB.
pub fn vm_kib(pid: u32, field: &str) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("process status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

pub fn open_fds(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd dir")
        .count()
}

/// A program on PATH, for tests that need an optional REPL.
pub fn installed(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}
