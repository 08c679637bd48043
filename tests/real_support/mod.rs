//! The harness of `tests/real_providers.rs`: the real Claude Code, Codex and
//! opencode CLIs, offline, each test in a network namespace of its own that
//! has only loopback and holds the mock model server (`mock-model-server`,
//! crate `mockmodel/`).
//!
//! Layout of one test ([`World`]):
//!
//! - a [`TestEnv`] (private runtime directory, agent-comms home, project);
//! - the mock server, started as `unshare -n sh -c 'ip link set lo up &&
//!   exec mock-model-server --port 18080 --log …'`: its process holds the
//!   namespace, and everything else of the test enters it with
//!   `nsenter --net=/proc/<its pid>/ns/net` (path-based unix sockets work
//!   across network namespaces, so the test's own `agent-comms` commands,
//!   run outside, still reach the supervisor);
//! - a fresh HOME seeded as each provider's "Offline" paragraph in
//!   `docs/providers.md` says, a
//!   fresh working directory (trusted in each provider's configuration), a
//!   TMPDIR outside /tmp (Codex refuses helper binaries under /tmp);
//! - test-side terminals ([`Tty`]): real PTYs of 120x40 whose screen is the
//!   core's screen model, which answers terminal queries as xterm does (the
//!   CLIs ask at start-up, and Codex quits when nobody answers).
//!
//! Cleanup is by pid only: the terminals' programs, Codex's `app-server`
//! daemons (the pids in `$CODEX_HOME/app-server-daemon/*.pid`), the mock
//! server, and then any process whose environment holds this test's HOME or
//! runtime directory.

#![allow(dead_code)]

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent_comms_core::screen::ScreenModel;
use portable_pty::{native_pty_system, CommandBuilder, MasterPty, PtySize};
use serde_json::Value;

use crate::common::{pid_alive, wait_pid_gone, TestEnv, BIN};

/// The variable that turns these tests on: the directory holding `claude`,
/// `codex` and `opencode` (what `scripts/install-providers` prints).
pub const ENABLE: &str = "AGENT_COMMS_REAL_PROVIDERS";
/// The mock server's port inside each test's own network namespace.
pub const PORT: u16 = 18080;
/// The dummy key; Claude Code is told to accept its last 20 characters.
const API_KEY: &str = "sk-ant-mock-0123456789abcdefghijklmnop";
pub const ROWS: u16 = 40;
pub const COLS: u16 = 120;
/// Bound for a CLI to start and show its idle prompt.
pub const START: Duration = Duration::from_secs(40);
/// Bound for a turn of a few seconds to be seen through.
pub const TURN: Duration = Duration::from_secs(30);

/// One of the three CLIs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cli {
    Claude,
    Codex,
    Opencode,
}

impl Cli {
    /// The program, as people type it (found on PATH, in the bin dir).
    pub fn program(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
            Cli::Opencode => "opencode",
        }
    }

    /// "Continue the last session", as people write it.
    pub fn continue_args(self) -> &'static [&'static str] {
        match self {
            Cli::Claude => &["--continue"],
            Cli::Codex => &["resume", "--last"],
            Cli::Opencode => &["--continue"],
        }
    }

    /// Whether `pid` is one of this CLI's interactive processes (the TUI, not
    /// a launcher script nor a background daemon).
    pub fn is_tui(self, pid: u32) -> bool {
        let exe = fs::read_link(format!("/proc/{pid}/exe"))
            .map(|p| {
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            })
            .unwrap_or_default();
        let args = cmdline(pid);
        match self {
            Cli::Claude => exe == "claude.exe" || exe == "claude",
            Cli::Codex => exe == "codex" && !args.iter().any(|a| a == "app-server"),
            Cli::Opencode => exe == "opencode.exe" || exe == "opencode",
        }
    }
}

/// The bin dir of the real CLIs, or `None` (after one line saying why) when
/// this test is to be skipped.
pub fn enabled(test: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os(ENABLE) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => {
            println!(
                "skipped {test}: {ENABLE} is not set (set it to the directory scripts/install-providers prints to run the real CLIs)"
            );
            return None;
        }
    };
    for program in ["claude", "codex", "opencode"] {
        let p = dir.join(program);
        assert!(
            p.is_file(),
            "{ENABLE}={} has no {program}: run scripts/install-providers and set {ENABLE} to the directory it prints",
            dir.display()
        );
    }
    if let Err(why) = netns_check() {
        println!("skipped {test}: cannot make a network namespace: {why}");
        return None;
    }
    Some(dir)
}

/// Whether `unshare -n` works here (once per test binary).
fn netns_check() -> Result<(), String> {
    static CHECK: OnceLock<Result<(), String>> = OnceLock::new();
    CHECK
        .get_or_init(|| {
            let out = Command::new("unshare")
                .args(["-n", "sh", "-c", "ip link set lo up"])
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("`unshare` cannot run: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "`unshare -n sh -c 'ip link set lo up'` failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        })
        .clone()
}

/// `mock-model-server`, built next to the binary under test.
fn mock_server_exe() -> PathBuf {
    let exe = Path::new(BIN).with_file_name("mock-model-server");
    assert!(
        exe.is_file(),
        "{} is missing: build it with `cargo build -p agent-comms-mockmodel` (the real-provider tests run the CLIs against it)",
        exe.display()
    );
    exe
}

/// Where casts and mock logs of a test are kept after it (target/tmp).
fn artifacts_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("real-providers")
        .join(test);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("create the artifacts directory");
    dir
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

/// The arguments of a process.
pub fn cmdline(pid: u32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The parent of a process.
pub fn parent(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state ppid …; comm may hold spaces: parse after the last ')'.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// When a process started, as an ISO time with milliseconds (from
/// /proc's start ticks and the boot time).
pub fn started_iso(pid: u32) -> String {
    let ticks: Option<f64> = fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(19)?
                .parse()
                .ok()
        });
    let btime: Option<f64> = fs::read_to_string("/proc/stat").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
    });
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    match (ticks, btime) {
        (Some(t), Some(b)) => {
            agent_comms_core::time::iso_from_unix_millis(((b + t / hz) * 1000.0) as u64)
        }
        _ => "?".into(),
    }
}

/// `pid args…` for messages.
pub fn describe(pid: u32) -> String {
    format!("{pid} {}", cmdline(pid).join(" "))
}

fn environ_has(pid: u32, wanted: &[Vec<u8>]) -> bool {
    let Ok(environ) = fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    environ
        .split(|&b| b == 0)
        .any(|var| wanted.iter().any(|w| var == w.as_slice()))
}

/// SIGTERM, a bounded wait, then SIGKILL.
fn terminate(pid: u32, grace: Duration) {
    if !pid_alive(pid) {
        return;
    }
    // SAFETY: kill(2) on a pid the caller checked to be ours.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    if !wait_pid_gone(pid, grace) && pid_alive(pid) {
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        wait_pid_gone(pid, Duration::from_secs(2));
    }
}

/// Runs `cmd` to completion within `timeout`; (success, stdout, stderr).
pub fn run_for(mut cmd: Command, timeout: Duration) -> (bool, String, String) {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let what = format!("{cmd:?}");
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(Ok(out)) => (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ),
        Ok(Err(e)) => panic!("{what}: {e}"),
        Err(_) => {
            // Not reaped yet, so the pid is still this child's.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            let _ = rx.recv();
            (
                false,
                String::new(),
                format!("did not finish within {timeout:?}"),
            )
        }
    }
}

// ---------------------------------------------------------------------------

#[derive(Default)]
struct TtyState {
    bytes: Vec<u8>,
    eof: bool,
}

/// A program in a real PTY on the test's side, 120x40, with a screen model
/// that answers terminal queries the way xterm does.
pub struct Tty {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    pid: u32,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    _master: Box<dyn MasterPty + Send>,
    state: Arc<(Mutex<TtyState>, Condvar)>,
    model: Arc<Mutex<ScreenModel>>,
    done: bool,
}

impl Tty {
    /// Starts `argv` with exactly `vars` as its environment, in `cwd`.
    pub fn spawn(argv: &[String], vars: &[(String, String)], cwd: &Path) -> Tty {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: ROWS,
                cols: COLS,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("open a test-side PTY");
        let mut cmd = CommandBuilder::from_argv(argv.iter().map(Into::into).collect());
        cmd.env_clear();
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd.cwd(cwd);
        let child = pair
            .slave
            .spawn_command(cmd)
            .unwrap_or_else(|e| panic!("cannot start {argv:?} in a PTY: {e}"));
        drop(pair.slave);
        let pid = child.process_id().expect("the child has a pid");
        let mut reader = pair.master.try_clone_reader().expect("PTY reader");
        let writer = Arc::new(Mutex::new(pair.master.take_writer().expect("PTY writer")));
        let state = Arc::new((Mutex::new(TtyState::default()), Condvar::new()));
        let model = Arc::new(Mutex::new(ScreenModel::new(ROWS, COLS)));
        model.lock().unwrap().set_answer_queries(true);
        let (shared, screen, answers) = (state.clone(), model.clone(), writer.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 64 * 1024];
            loop {
                let n = match reader.read(&mut buf) {
                    Ok(0) | Err(_) => 0,
                    Ok(n) => n,
                };
                let (lock, cvar) = &*shared;
                if n == 0 {
                    lock.lock().unwrap().eof = true;
                    cvar.notify_all();
                    return;
                }
                let replies = screen.lock().unwrap().feed(&buf[..n]);
                if !replies.is_empty() {
                    let mut w = answers.lock().unwrap();
                    let _ = w.write_all(&replies).and_then(|()| w.flush());
                }
                lock.lock().unwrap().bytes.extend_from_slice(&buf[..n]);
                cvar.notify_all();
            }
        });
        Tty {
            child,
            pid,
            writer,
            _master: pair.master,
            state,
            model,
            done: false,
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Types `bytes`.
    pub fn write(&self, bytes: &[u8]) {
        let mut w = self.writer.lock().unwrap();
        w.write_all(bytes).expect("write to the test-side PTY");
        w.flush().expect("flush the test-side PTY");
    }

    /// Everything shown so far, lossily decoded.
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&self.state.0.lock().unwrap().bytes).into_owned()
    }

    /// The screen as this terminal shows it, with row numbers, cursor and
    /// title (for failure messages).
    pub fn screen(&self) -> String {
        let m = self.model.lock().unwrap();
        let mut s = format!("cursor {:?}, title {:?}\n", m.cursor(), m.title());
        for (i, l) in m.lines().iter().enumerate() {
            if !l.trim().is_empty() {
                s.push_str(&format!("{i:2}|{l}\n"));
            }
        }
        s
    }

    /// Whether the screen (rendered) holds `needle`.
    pub fn shows(&self, needle: &str) -> bool {
        self.model
            .lock()
            .unwrap()
            .lines()
            .iter()
            .any(|l| l.contains(needle))
    }

    /// Waits until the raw output holds `needle`; false on timeout or EOF.
    pub fn wait_output(&self, needle: &str, timeout: Duration) -> bool {
        let (lock, cvar) = &*self.state;
        let deadline = Instant::now() + timeout;
        let mut s = lock.lock().unwrap();
        loop {
            if s.bytes
                .windows(needle.len())
                .any(|w| w == needle.as_bytes())
            {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || s.eof {
                return false;
            }
            s = cvar.wait_timeout(s, left).unwrap().0;
        }
    }

    /// Polls the rendered screen until `cond` holds; false on timeout.
    pub fn wait_screen(&self, timeout: Duration, cond: impl Fn(&[String]) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if cond(&self.model.lock().unwrap().lines()) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the program has exited.
    pub fn exited(&mut self) -> bool {
        self.done || matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Ends the program: SIGTERM (a supervisor ends its provider on it),
    /// then SIGKILL; reaps it.
    pub fn end(&mut self) {
        if self.done {
            return;
        }
        if matches!(self.child.try_wait(), Ok(None)) {
            // SAFETY: our own unreaped child, so the pid is still its.
            unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGTERM) };
            if !wait_pid_gone(self.pid, Duration::from_secs(8)) {
                unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGKILL) };
            }
        }
        let _ = self.child.wait();
        self.done = true;
    }
}

impl Drop for Tty {
    fn drop(&mut self) {
        self.end();
    }
}

// ---------------------------------------------------------------------------

/// A served runtime: `interactive-serve` in a test terminal, in the
/// namespace.
pub struct Served {
    pub tty: Tty,
    pub id: String,
    pub cast: PathBuf,
}

/// A CLI started the ordinary way (no agent-comms), in the namespace.
pub struct Ordinary {
    pub tty: Tty,
}

/// One test's world: see the module documentation.
pub struct World {
    pub cli: Cli,
    pub test: String,
    pub bins: PathBuf,
    pub user_home: PathBuf,
    pub work: PathBuf,
    pub tmp: PathBuf,
    pub artifacts: PathBuf,
    pub mock_log: PathBuf,
    holder: Option<Child>,
    pub started: Instant,
    pub env: TestEnv,
}

impl World {
    /// Sets up the world of `test` for `cli`, or `None` (after one line) when
    /// the real-provider tests are off here.
    pub fn new(cli: Cli, test: &str) -> Option<World> {
        let bins = enabled(test)?;
        let mock = mock_server_exe();
        let env = TestEnv::new();
        let user_home = env.base().join("user");
        let work = env.base().join("work");
        fs::create_dir_all(&work).unwrap();
        let work = work.canonicalize().unwrap();
        // TMPDIR outside /tmp, for Codex: next to the provider cache's
        // convention, /var/tmp, when it is writable.
        let tmp = tempfile::Builder::new()
            .prefix("ac-real-")
            .tempdir_in("/var/tmp")
            .or_else(|_| {
                tempfile::Builder::new()
                    .prefix("ac-real-tmp-")
                    .tempdir_in(env.base())
            })
            .expect("create TMPDIR")
            .keep();
        let artifacts = artifacts_dir(test);
        let mock_log = artifacts.join("mock.jsonl");
        let mut world = World {
            cli,
            test: test.to_owned(),
            bins,
            user_home,
            work,
            tmp,
            artifacts,
            mock_log,
            holder: None,
            started: Instant::now(),
            env,
        };
        world.seed();
        world.start_mock(&mock);
        Some(world)
    }

    /// The environment of everything this test runs in the namespace:
    /// nothing inherited but PATH's tail, USER and LOGNAME.
    pub fn vars(&self) -> Vec<(String, String)> {
        let bin_dir = Path::new(BIN).parent().unwrap();
        let path = format!(
            "{}:{}:{}",
            self.bins.display(),
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into())
        );
        let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
        let mut v: Vec<(String, String)> = vec![
            ("PATH".into(), path),
            ("TERM".into(), "xterm-256color".into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("USER".into(), user.clone()),
            ("LOGNAME".into(), user),
            ("SHELL".into(), "/bin/bash".into()),
            ("TMPDIR".into(), self.tmp.display().to_string()),
        ];
        for (k, p) in self.env.vars() {
            v.push((k.into(), p.display().to_string()));
        }
        let port = PORT;
        let more: Vec<(&str, String)> = match self.cli {
            Cli::Claude => vec![
                ("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}")),
                ("ANTHROPIC_API_KEY", API_KEY.into()),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
                ("DISABLE_TELEMETRY", "1".into()),
                ("DISABLE_AUTOUPDATER", "1".into()),
            ],
            Cli::Codex => vec![
                ("CODEX_HOME", self.codex_home().display().to_string()),
                ("MOCK_API_KEY", "dummy".into()),
            ],
            Cli::Opencode => vec![
                ("OPENCODE_DISABLE_AUTOUPDATE", "1".into()),
                ("OPENCODE_DISABLE_MODELS_FETCH", "1".into()),
                ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1".into()),
                ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1".into()),
                ("OPENCODE_DISABLE_SHARE", "1".into()),
            ],
        };
        v.extend(more.into_iter().map(|(k, val)| (k.to_owned(), val)));
        v
    }

    pub fn codex_home(&self) -> PathBuf {
        self.user_home.join(".codex")
    }

    /// Writes the provider's configuration into the fresh HOME.
    fn seed(&self) {
        let work = self.work.display().to_string();
        let base = format!("http://127.0.0.1:{PORT}");
        match self.cli {
            Cli::Claude => {
                let approved = &API_KEY[API_KEY.len() - 20..];
                let config = serde_json::json!({
                    "hasCompletedOnboarding": true,
                    "numStartups": 1,
                    "lastReleaseNotesSeen": "2.1.197",
                    "customApiKeyResponses": {"approved": [approved], "rejected": []},
                    "projects": {work: {"hasTrustDialogAccepted": true}},
                });
                fs::write(self.user_home.join(".claude.json"), config.to_string()).unwrap();
            }
            Cli::Codex => {
                let home = self.codex_home();
                fs::create_dir_all(&home).unwrap();
                let config = format!(
                    r#"model = "mock-1"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.mock]
name = "mock"
base_url = "{base}/v1"
wire_api = "responses"
env_key = "MOCK_API_KEY"

[projects."{work}"]
trust_level = "trusted"
"#
                );
                fs::write(home.join("config.toml"), config).unwrap();
                // Codex copies itself (~420 MB) into $CODEX_HOME/packages on
                // a first start; scripts/install-providers prepares that
                // directory once, hard-linked to the npm install.
                let warm = self.bins.join("..").join("codex-home-packages");
                if warm.join("app-server-daemon/current/bin/codex").is_file() {
                    std::os::unix::fs::symlink(warm.canonicalize().unwrap(), home.join("packages"))
                        .unwrap();
                } else {
                    println!(
                        "{}: no prepared {} (scripts/install-providers makes it): Codex copies ~420 MB into this test's CODEX_HOME",
                        self.test,
                        warm.display()
                    );
                }
            }
            Cli::Opencode => {
                let dir = self.user_home.join(".config/opencode");
                fs::create_dir_all(&dir).unwrap();
                let config = serde_json::json!({
                    "$schema": "https://opencode.ai/config.json",
                    "autoupdate": false,
                    "share": "disabled",
                    "model": "mock/mock-1",
                    "small_model": "mock/mock-1",
                    "provider": {"mock": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "Mock",
                        "options": {"baseURL": format!("{base}/v1"), "apiKey": "dummy"},
                        "models": {"mock-1": {"name": "Mock 1"}},
                    }},
                });
                fs::write(dir.join("opencode.json"), config.to_string()).unwrap();
            }
        }
    }

    /// Makes the namespace: the mock server, started inside it, holds it.
    fn start_mock(&mut self, exe: &Path) {
        let mut cmd = Command::new("unshare");
        cmd.args([
            "-n",
            "sh",
            "-c",
            r#"ip link set lo up && exec "$0" --port "$1" --log "$2""#,
        ])
        .arg(exe)
        .arg(PORT.to_string())
        .arg(&self.mock_log);
        cmd.env_clear();
        for (k, v) in self.vars() {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start the mock server in a namespace");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
        if !line.starts_with("listening on") {
            let _ = child.kill();
            let out = child.wait_with_output().ok();
            panic!(
                "the mock server did not start in its namespace (first line {line:?}): {:?}",
                out.map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
            );
        }
        self.holder = Some(child);
    }

    /// The pid whose network namespace this test uses.
    pub fn ns_pid(&self) -> u32 {
        self.holder.as_ref().unwrap().id()
    }

    /// `nsenter --net=… -- ARGV`, in a test terminal, in the work directory.
    pub fn spawn_in_ns(&self, argv: &[&str]) -> Tty {
        let mut all: Vec<String> = vec![
            "nsenter".into(),
            format!("--net=/proc/{}/ns/net", self.ns_pid()),
            "--".into(),
        ];
        all.extend(argv.iter().map(|s| s.to_string()));
        Tty::spawn(&all, &self.vars(), &self.work)
    }

    /// `interactive-serve --id ID EXTRA… -- <cli> ARGS…`, recorded.
    pub fn serve(&self, id: &str, extra: &[&str], args: &[&str]) -> Served {
        let cast = self.artifacts.join(format!("{id}.cast"));
        let cast_s = cast.display().to_string();
        let mut argv = vec![
            BIN,
            "--actor",
            id,
            "runtime",
            "interactive-serve",
            "--id",
            id,
            "--heartbeat-ms",
            "500",
            "--keyboard-quiet-ms",
            "500",
            "--record",
            &cast_s,
        ];
        argv.extend_from_slice(extra);
        argv.push("--");
        argv.push(self.cli.program());
        argv.extend_from_slice(args);
        Served {
            tty: self.spawn_in_ns(&argv),
            id: id.to_owned(),
            cast,
        }
    }

    /// The CLI started the ordinary way, with `args`.
    pub fn ordinary(&self, args: &[&str]) -> Ordinary {
        let mut argv = vec![self.cli.program()];
        argv.extend_from_slice(args);
        Ordinary {
            tty: self.spawn_in_ns(&argv),
        }
    }

    /// `agent-comms ARGS…` outside the namespace (the test's side), bounded.
    pub fn ac(&self, args: &[&str], timeout: Duration) -> (bool, String, String) {
        run_for(self.env.command(args), timeout)
    }

    /// `session activity NAME --json`, parsed (`Value::Null` when it fails).
    pub fn activity(&self, name: &str) -> Value {
        let (ok, out, _) = self.ac(
            &["session", "activity", name, "--json"],
            Duration::from_secs(10),
        );
        if ok {
            serde_json::from_str(out.trim()).unwrap_or(Value::Null)
        } else {
            Value::Null
        }
    }

    /// What the supervisor sees: `session activity --json` and
    /// `session snapshot --json` (cursor, title, rows), for reports.
    pub fn report(&self, name: &str) -> String {
        let activity = self.activity(name);
        let (_, snap, err) = self.ac(
            &["session", "snapshot", name, "--json"],
            Duration::from_secs(10),
        );
        let mut s = format!("session activity --json: {activity}\n");
        match serde_json::from_str::<Value>(snap.trim()) {
            Ok(v) => {
                s.push_str(&format!(
                    "session snapshot --json: cursor {}, title {}, alternate_screen {}\n",
                    v["cursor"], v["title"], v["alternate_screen"]
                ));
                for (i, l) in v["lines"].as_array().into_iter().flatten().enumerate() {
                    let l = l.as_str().unwrap_or_default();
                    if !l.trim().is_empty() {
                        s.push_str(&format!("{i:2}|{l}\n"));
                    }
                }
            }
            Err(_) => s.push_str(&format!("session snapshot failed: {snap}{err}\n")),
        }
        s
    }

    /// The rows of `session snapshot --json` (empty when it fails).
    pub fn snapshot_lines(&self, name: &str) -> Vec<String> {
        let (_, snap, _) = self.ac(
            &["session", "snapshot", name, "--json"],
            Duration::from_secs(10),
        );
        serde_json::from_str::<Value>(snap.trim())
            .ok()
            .and_then(|v| {
                v["lines"].as_array().map(|a| {
                    a.iter()
                        .map(|l| l.as_str().unwrap_or_default().to_owned())
                        .collect()
                })
            })
            .unwrap_or_default()
    }

    /// Polls `session activity` until it says `want`; on timeout, fails
    /// the test with the screen.
    pub fn wait_activity(&self, name: &str, want: &str, timeout: Duration, what: &str) {
        let deadline = Instant::now() + timeout;
        loop {
            if self.activity(name)["activity"] == want {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "[{}] {what}: session {name} did not read {want} within {timeout:?}\n{}",
                    self.test,
                    self.report(name)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `runtime deliver --id ID --json --timeout SECS TEXT`: the evidence, or
    /// the error line.
    pub fn deliver(&self, id: &str, text: &str, timeout_s: u64) -> Result<Value, String> {
        let secs = timeout_s.to_string();
        let (ok, out, err) = self.ac(
            &[
                "runtime",
                "deliver",
                "--id",
                id,
                "--json",
                "--timeout",
                &secs,
                text,
            ],
            Duration::from_secs(timeout_s + 15),
        );
        if ok {
            serde_json::from_str(out.trim()).map_err(|e| format!("no JSON ({e}): {out}{err}"))
        } else {
            Err(format!("{}{}", out, err.trim()))
        }
    }

    /// Every request the mock server answered so far (its log file).
    pub fn requests(&self) -> Vec<Value> {
        fs::read_to_string(&self.mock_log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The first answered model request (not a title request) whose prompt
    /// holds `needle`, waited for.
    pub fn wait_request(&self, needle: &str, timeout: Duration) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self.requests().into_iter().find(|r| {
                r["structured"] == false && r["prompt"].as_str().is_some_and(|p| p.contains(needle))
            });
            if found.is_some() || Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A summary of the mock's log, for failure messages.
    pub fn requests_summary(&self) -> String {
        self.requests()
            .iter()
            .map(|r| {
                let p = r["prompt"].as_str().unwrap_or_default();
                let tail: String = p
                    .chars()
                    .rev()
                    .take(90)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                format!(
                    "  #{} {} {} structured={} received={} last_delta={} prompt=…{:?}\n",
                    r["id"],
                    r["method"],
                    r["path"],
                    r["structured"],
                    r["received_at"],
                    r["last_delta_at"],
                    tail
                )
            })
            .collect()
    }

    /// Processes of this test: their environment holds its HOME or its
    /// runtime directory.
    pub fn our_processes(&self) -> Vec<u32> {
        let wanted = [
            format!("HOME={}", self.user_home.display()).into_bytes(),
            format!("AGENT_COMMS_RUNTIME_DIR={}", self.env.runtime.display()).into_bytes(),
        ];
        let me = std::process::id();
        fs::read_dir("/proc")
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                    .filter(|&pid| pid != me && pid_alive(pid) && environ_has(pid, &wanted))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// This test's processes running the CLI's TUI (not counting a TUI's
    /// own children: helpers it runs are not a second TUI).
    pub fn tuis(&self) -> Vec<u32> {
        self.our_processes()
            .into_iter()
            .filter(|&p| self.cli.is_tui(p) && !parent(p).is_some_and(|pp| self.cli.is_tui(pp)))
            .collect()
    }

    /// This test's processes as `pid ppid started-at args`, for reports.
    pub fn process_table(&self) -> String {
        let mut pids = self.our_processes();
        pids.sort();
        pids.into_iter()
            .map(|p| {
                format!(
                    "  {p} ppid {} started {} {}\n",
                    parent(p).unwrap_or(0),
                    started_iso(p),
                    cmdline(p).join(" ")
                )
            })
            .collect()
    }

    /// The pids Codex's daemons wrote (`$CODEX_HOME/app-server-daemon/*.pid`).
    pub fn codex_daemon_pids(&self) -> Vec<u32> {
        let dir = self.codex_home().join("app-server-daemon");
        let Ok(entries) = fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "pid"))
            .filter_map(|e| {
                let text = fs::read_to_string(e.path()).ok()?;
                let v: Value = serde_json::from_str(&text).ok()?;
                u32::try_from(v["pid"].as_u64()?).ok()
            })
            .collect()
    }

    /// Ends everything this test started (by pid) and returns what would
    /// not go.
    pub fn cleanup(&mut self) -> Vec<String> {
        let ours = |w: &World, pid: u32| w.our_processes().contains(&pid);
        // Codex's daemons, by their pid files (checked to be ours).
        for pid in self.codex_daemon_pids() {
            if ours(self, pid) {
                terminate(pid, Duration::from_secs(3));
            }
        }
        // Then anything else of ours, the mock server last.
        let holder = self.holder.as_ref().map(Child::id);
        for _ in 0..3 {
            let left: Vec<u32> = self
                .our_processes()
                .into_iter()
                .filter(|&p| Some(p) != holder)
                .collect();
            if left.is_empty() {
                break;
            }
            for pid in left {
                terminate(pid, Duration::from_secs(3));
            }
        }
        if let Some(mut holder) = self.holder.take() {
            let _ = holder.kill();
            let _ = holder.wait();
        }
        let left: Vec<String> = self.our_processes().into_iter().map(describe).collect();
        for pid in self.our_processes() {
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
        left
    }

    /// Cleans up and asserts that nothing had to be killed by force at the
    /// end; prints the test's duration.
    pub fn finish(mut self, served: Vec<&mut Tty>) {
        for tty in served {
            tty.end();
        }
        let left = self.cleanup();
        println!(
            "{}: {:.1} s (casts and mock log in {})",
            self.test,
            self.started.elapsed().as_secs_f64(),
            self.artifacts.display()
        );
        assert!(left.is_empty(), "processes left behind: {left:#?}");
    }
}

/// Copies `from` into `to`: regular files up to 4 MB, no symlinks.
fn copy_small_tree(from: &Path, to: &Path) {
    let Ok(entries) = fs::read_dir(from) else {
        return;
    };
    let _ = fs::create_dir_all(to);
    for e in entries.flatten() {
        let Ok(meta) = fs::symlink_metadata(e.path()) else {
            continue;
        };
        let dest = to.join(e.file_name());
        if meta.is_dir() {
            copy_small_tree(&e.path(), &dest);
        } else if meta.is_file() && meta.len() <= 4 << 20 {
            let _ = fs::copy(e.path(), dest);
        }
    }
}

impl World {
    /// After a failure: what runs, and the provider's own files (HOME,
    /// without Codex's packages), kept with the artifacts.
    fn preserve(&self) {
        let procs: Vec<String> = self.our_processes().into_iter().map(describe).collect();
        let _ = fs::write(self.artifacts.join("processes.txt"), procs.join("\n"));
        copy_small_tree(&self.user_home, &self.artifacts.join("home"));
        eprintln!(
            "[{}] processes at the failure: {procs:#?}\n[{}] the provider's files are kept in {}",
            self.test,
            self.test,
            self.artifacts.join("home").display()
        );
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.preserve();
        }
        self.cleanup();
        let _ = fs::remove_dir_all(&self.tmp);
    }
}

/// Samples `session activity` every ~100 ms on a thread until stopped.
pub struct Sampler {
    stop: Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<Vec<(f64, String)>>>,
}

impl Sampler {
    pub fn start(world: &World, name: &str) -> Sampler {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let cmd_env: Vec<(&'static str, PathBuf)> = world.env.vars();
        let name = name.to_owned();
        let handle = std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let mut cmd = Command::new(BIN);
                cmd.args(["session", "activity", &name, "--json"]);
                for (k, v) in &cmd_env {
                    cmd.env(k, v);
                }
                let (_, out, _) = run_for(cmd, Duration::from_secs(10));
                let v: Value = serde_json::from_str(out.trim()).unwrap_or(Value::Null);
                samples.push((
                    now_ms(),
                    v["activity"].as_str().unwrap_or("error").to_owned(),
                ));
                std::thread::sleep(Duration::from_millis(100));
            }
            samples
        });
        Sampler {
            stop,
            handle: Some(handle),
        }
    }

    /// Stops sampling; (Unix ms, activity) pairs.
    pub fn stop(mut self) -> Vec<(f64, String)> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A mock log time field (Unix seconds, f64) as Unix milliseconds.
pub fn ms(v: &Value) -> f64 {
    v.as_f64().map(|s| s * 1000.0).unwrap_or(f64::NAN)
}

/// The samples as runs: `idle×3 busy×12 idle×20`.
pub fn runs(samples: &[(f64, String)]) -> String {
    let mut out: Vec<(String, usize)> = Vec::new();
    for (_, a) in samples {
        match out.last_mut() {
            Some((last, n)) if last == a => *n += 1,
            _ => out.push((a.clone(), 1)),
        }
    }
    out.iter()
        .map(|(a, n)| format!("{a}×{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}
