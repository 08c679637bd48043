//! What the `k`/`km` end-to-end tests (tests/cells.rs) add to the harness:
//! a [`TestEnv`] whose commands run in its work directory (hooks live
//! there) the way a terminal starts them, the binaries `k` and `km`, their
//! reply lines ([`lines`]) and background processes read line by line
//! ([`bg`]).

pub mod bg;
pub mod lines;

use std::fs;
use std::ops::Deref;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::LazyLock;
use std::time::Duration;

use serde_json::Value;

use self::bg::Bg;
use self::lines::done_line;
use super::env::TestEnv;
use super::poll_within;
use super::run::{run_within, try_run_within, Run};

/// The binaries under test: cargo's, or an installed set — `scripts/install
/// --prefix P` puts them in `P/bin` — when [`INSTALLED_ENV`] names that
/// directory.
pub static K: LazyLock<String> = LazyLock::new(|| installed_or("k", env!("CARGO_BIN_EXE_k")));
pub static KM: LazyLock<String> = LazyLock::new(|| installed_or("km", env!("CARGO_BIN_EXE_km")));
pub static AGENT_COMMS: LazyLock<String> =
    LazyLock::new(|| installed_or("agent-comms", env!("CARGO_BIN_EXE_agent-comms")));

/// Names the directory of installed binaries to test instead of cargo's.
pub const INSTALLED_ENV: &str = "AGENT_COMMS_TEST_INSTALLED";

fn installed_or(name: &str, built: &str) -> String {
    match std::env::var_os(INSTALLED_ENV) {
        Some(dir) => {
            let bin = PathBuf::from(dir).join(name);
            assert!(
                bin.is_file(),
                "{INSTALLED_ENV} names no {}: run scripts/install --prefix first",
                bin.display()
            );
            bin.to_string_lossy().into_owned()
        }
        None => built.to_owned(),
    }
}

/// Upper bound for anything a cells test waits for: longer than the
/// harness's, since these start real REPLs (gdb, node …), and debug builds
/// of every test run in parallel on small machines.
pub const TIMEOUT: Duration = Duration::from_secs(90);

/// bash without start-up files (the user's rc files would change prompts
/// and output).
pub const BASH: &[&str] = &["bash", "--norc", "--noprofile"];

/// One test's private world (a [`TestEnv`], whose Drop ends everything the
/// test started), with the `k`/`km` commands.
pub struct Env {
    env: TestEnv,
}

impl Deref for Env {
    type Target = TestEnv;

    fn deref(&self) -> &TestEnv {
        &self.env
    }
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

impl Env {
    pub fn new() -> Self {
        Self {
            env: TestEnv::new(),
        }
    }

    /// `bin ARGS…` with this test's environment, in its work directory, as a
    /// terminal would start it.
    pub fn terminal_command(&self, bin: &str, args: &[&str]) -> Command {
        let mut cmd = self.env.command_of(bin, args);
        // `k` finds its project from the current directory, as a person's
        // does: the work directory, not a project named by the harness.
        cmd.current_dir(&self.work)
            .env_remove("AGENT_COMMS_PROJECT")
            .env("TERM", "xterm-256color")
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

    /// `bin ARGS…` to completion, bounded by [`TIMEOUT`].
    fn run_bin(&self, bin: &str, args: &[&str], vars: &[(&str, &str)]) -> Run {
        let mut cmd = self.terminal_command(bin, args);
        cmd.envs(vars.iter().copied());
        run_within(cmd, &format!("{} {}", short(bin), args.join(" ")), TIMEOUT)
    }

    /// `k ARGS…`, to completion.
    pub fn k(&self, args: &[&str]) -> Run {
        self.k_env(args, &[])
    }

    /// `k ARGS…` with extra environment variables.
    pub fn k_env(&self, args: &[&str], vars: &[(&str, &str)]) -> Run {
        self.run_bin(&K, args, vars)
    }

    /// `k ARGS…` for something slow (bounded by `limit`, not [`TIMEOUT`]).
    pub fn k_long(&self, args: &[&str], limit: Duration) -> Run {
        run_within(
            self.terminal_command(&K, args),
            &format!("k {}", args.join(" ")),
            limit,
        )
    }

    pub fn km(&self, args: &[&str]) -> Run {
        self.run_bin(&KM, args, &[])
    }

    pub fn agent_comms(&self, args: &[&str]) -> Run {
        self.run_bin(&AGENT_COMMS, args, &[])
    }

    /// `bin ARGS…` in the background, its stdout read line by line.
    pub fn spawn(&self, bin: &str, args: &[&str]) -> Bg {
        let mut cmd = self.terminal_command(bin, args);
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

    #[track_caller]
    pub fn supervisor_pid(&self, name: &str) -> u32 {
        self.record(name).expect("a session record").supervisor_pid
    }

    #[track_caller]
    pub fn repl_pid(&self, name: &str) -> u32 {
        self.record(name).expect("a session record").pid
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
        let cmd = self.terminal_command(&AGENT_COMMS, &["session", "snapshot", session]);
        match try_run_within(cmd, "session snapshot", TIMEOUT) {
            Ok(run) => run.stdout,
            Err(e) => format!("(no snapshot: {e})"),
        }
    }

    /// Writes an executable script into the work directory.
    pub fn script(&self, name: &str, text: &str) -> PathBuf {
        let path = self.work.join(name);
        fs::write(&path, text).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }
}

fn short(bin: &str) -> &str {
    bin.rsplit('/').next().unwrap_or(bin)
}

/// Polls `check` until it returns `Some`, for states the contract offers
/// only by polling (`k poll`, `k status`); fails the test after [`TIMEOUT`].
#[track_caller]
pub fn poll_until<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    poll_within(TIMEOUT, what, check)
}

/// A program on PATH, for tests that need an optional REPL.
pub fn installed(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}
