//! The real Claude Code, Codex and opencode CLIs (tests/real_providers.rs),
//! offline, each test in a network namespace of its own that has only
//! loopback and holds the mock model server (`mock-model-server`, crate
//! `mockmodel/`).
//!
//! Layout of one test ([`World`](world::World)):
//!
//! - a [`TestEnv`](crate::support::env::TestEnv) (private runtime directory,
//!   agent-comms home, project);
//! - the mock server, started as `unshare -n sh -c 'ip link set lo up &&
//!   exec mock-model-server --port 18080 --log …'`: its process holds the
//!   namespace, and everything else of the test enters it with
//!   `nsenter --net=/proc/<its pid>/ns/net` (path-based unix sockets work
//!   across network namespaces, so the test's own `agent-comms` commands,
//!   run outside, still reach the supervisor) — [`provision`];
//! - a fresh HOME seeded with each provider's configuration (onboarding
//!   done, the mock as its model, the work directory trusted), a fresh
//!   working directory, a TMPDIR outside /tmp (Codex refuses helper
//!   binaries under /tmp) — [`provision`];
//! - test-side terminals ([`Term`](crate::support::term::Term)s) of 120x40 that
//!   answer terminal queries as xterm does (the CLIs ask at start-up, and
//!   Codex quits when nobody answers);
//! - what the test reads: the supervisor's view and the mock's log —
//!   [`observe`], [`sampler`];
//! - for `runtime acp-serve`, the provider's ACP agent: its command, the
//!   environment it needs here and the namespace wrapper — [`acp`].
//!
//! Cleanup is by pid only: the terminals' programs, Codex's `app-server`
//! daemons (the pids in `$CODEX_HOME/app-server-daemon/*.pid`), the mock
//! server, and then any process whose environment holds this test's HOME or
//! runtime directory.

pub mod acp;
mod observe;
mod provision;
pub mod sampler;
pub mod trials;
pub mod world;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::procs::cmdline;
use crate::support::BIN;

/// The variable that turns these tests on: the directory holding `claude`,
/// `codex` and `opencode` (what `scripts/install-providers` prints).
pub const ENABLE: &str = "AGENT_COMMS_REAL_PROVIDERS";
/// The mock server's port inside each test's own network namespace.
pub const PORT: u16 = 18080;
/// The dummy key; Claude Code is told to accept its last 20 characters.
pub(crate) const API_KEY: &str = "sk-ant-mock-0123456789abcdefghijklmnop";
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

    /// The name of its built-in adapter (config/providers/).
    pub fn adapter(self) -> &'static str {
        match self {
            Cli::Claude => "claude-code",
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

/// Why a test of the real CLIs is `#[ignore]`d: it runs only when asked,
/// with `--include-ignored` (as .ci/run does once the CLIs are installed).
#[macro_export]
macro_rules! needs_real_clis {
    () => {
        "needs the real CLIs: set AGENT_COMMS_REAL_PROVIDERS to what scripts/install-providers prints (docs/providers.md)"
    };
}

/// The bin dir of the real CLIs. A test that needs them is ignored unless
/// asked for; asked for without them, it fails saying what is missing
/// rather than passing having tested nothing.
pub fn enabled(test: &str) -> PathBuf {
    let dir = match std::env::var_os(ENABLE) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => panic!(
            "{test} needs the real CLIs: {ENABLE} is not set (set it to the directory scripts/install-providers prints)"
        ),
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
        panic!(
            "{test} runs the CLIs offline, in a network namespace, and cannot make one here: {why}"
        );
    }
    dir
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
pub(crate) fn mock_server_exe() -> PathBuf {
    let exe = Path::new(BIN).with_file_name("mock-model-server");
    assert!(
        exe.is_file(),
        "{} is missing: build it with `cargo build -p agent-comms-mockmodel` (the real-provider tests run the CLIs against it)",
        exe.display()
    );
    exe
}

/// Where casts and mock logs of a test are kept after it (target/tmp).
pub(crate) fn artifacts_dir(test: &str) -> PathBuf {
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
