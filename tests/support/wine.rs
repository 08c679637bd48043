//! The Windows executables under Wine, for tests/windows.rs.
//!
//! Why it is built this way:
//! - Wine 8's CreatePseudoConsole works only when Wine itself runs in a
//!   pseudo-terminal: under a plain pipe the pseudo console's program
//!   writes to Wine's own stdout instead. So every Windows command runs in
//!   a [`Term`] the test owns, and what it printed is read from that
//!   terminal's rendered screen (Wine's console draws with VT sequences).
//! - Wine 8 has no bcryptprimitives.dll, whose `ProcessPrng` Rust's
//!   standard library imports: no Rust executable starts without it.
//!   tests/wine/bcryptprimitives.c, compiled here with the MinGW compiler,
//!   goes into the private prefix's system32, and nowhere else.
//! - One private Wine prefix per test process, made once (wineboot takes
//!   seconds and the prefix holds ~700 MB of DLLs): it lives in
//!   `CARGO_TARGET_TMPDIR/wine-<pid>`, and a later run removes the prefixes
//!   of test processes that are gone.
//! - Cleanup by pid, never by name: every process Wine starts for a test
//!   carries the test's `AGENT_COMMS_RUNTIME_DIR` in its environment (Wine
//!   passes a Windows process's environment on to its Unix process), and
//!   every process of the prefix carries `WINEPREFIX`. A test ends its own;
//!   the last test using the prefix ends its wineserver (`wineserver -k`,
//!   which is by prefix) and then whatever of the prefix is left.
//!
//! The executables come from `AGENT_COMMS_WINDOWS_BIN`, the directory
//! holding `agent-comms.exe`, `k.exe`, `km.exe` and the Rust fake agent
//! `fake-agent.exe` (.ci/run builds them with `cargo build --target
//! x86_64-pc-windows-gnu`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use portable_pty::CommandBuilder;

use super::procs::{cmdline, pid_alive, signal, wait_gone, with_environ};
use super::term::{Term, TermOptions};
use super::TIMEOUT;

/// How long one Windows command may take: Wine starts its own services
/// with the first program of a prefix.
pub const WINE_TIMEOUT: Duration = Duration::from_secs(60);

/// The screen of a test-side terminal running one Windows command: wide
/// and tall enough that nothing a command prints wraps or scrolls away.
const ROWS: u16 = 60;
const COLS: u16 = 220;

/// The directory of the Windows executables, checked.
fn windows_bin() -> PathBuf {
    let dir = std::env::var_os("AGENT_COMMS_WINDOWS_BIN").map(PathBuf::from).unwrap_or_else(|| {
        panic!("AGENT_COMMS_WINDOWS_BIN is not set: point it at target/x86_64-pc-windows-gnu/debug after `cargo build --target x86_64-pc-windows-gnu --bin agent-comms --bin k --bin km` and `-p agent-comms-fake`")
    });
    // Wine runs each command in the test's work directory: a relative
    // directory (CI passes `target/…`) would name nothing there.
    let dir = fs::canonicalize(&dir)
        .unwrap_or_else(|e| panic!("AGENT_COMMS_WINDOWS_BIN={}: {e}", dir.display()));
    for exe in ["agent-comms.exe", "k.exe", "km.exe", "fake-agent.exe"] {
        assert!(
            dir.join(exe).is_file(),
            "{} is missing (AGENT_COMMS_WINDOWS_BIN={})",
            exe,
            dir.display()
        );
    }
    dir
}

/// `path` as Windows programs under Wine see it: the Unix root is drive Z:.
pub fn windows_path(path: &Path) -> String {
    format!("Z:{}", path.display()).replace('/', "\\")
}

/// Builds the test helper tests/wine/NAME.c into the prefix, once per
/// test process.
fn c_helper(name: &str) -> PathBuf {
    let exe = prefix().join(format!("{name}.exe"));
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/wine/{name}.c"));
    let built = Command::new("x86_64-w64-mingw32-gcc")
        .args(["-municode", "-O", "-o"])
        .arg(&exe)
        .arg(&source)
        .status()
        .expect("run x86_64-w64-mingw32-gcc");
    assert!(
        built.success(),
        "cannot build {}: {built}",
        source.display()
    );
    exe
}

/// A test-side terminal of `rows` × `cols` for a Windows command; it
/// answers the queries Wine's console makes at start.
fn console(rows: u16, cols: u16) -> TermOptions {
    TermOptions {
        rows,
        cols,
        answer_queries: true,
        term_grace: None,
    }
}

fn wine_vars(prefix: &Path) -> [(&'static str, String); 3] {
    [
        ("WINEPREFIX", prefix.display().to_string()),
        // Wine's own fixme and err lines would mix into what is shown.
        ("WINEDEBUG", "-all".into()),
        // No Gecko or Mono installer dialogs in a fresh prefix.
        ("WINEDLLOVERRIDES", "mscoree,mshtml=".into()),
    ]
}

/// The prefix of this test process, made on first use.
fn prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        remove_stale_prefixes(tmp);
        let prefix = tmp.join(format!("wine-{}", std::process::id()));
        let _ = fs::remove_dir_all(&prefix);
        let booted = Command::new("wineboot")
            .arg("-i")
            .envs(wine_vars(&prefix))
            .env_remove("DISPLAY")
            .stdin(Stdio::null())
            .output()
            .expect("run wineboot (is wine installed?)");
        assert!(
            booted.status.success(),
            "wineboot -i failed ({}): {}{}",
            booted.status,
            String::from_utf8_lossy(&booted.stdout),
            String::from_utf8_lossy(&booted.stderr)
        );
        let dll = prefix.join("drive_c/windows/system32/bcryptprimitives.dll");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wine/bcryptprimitives.c");
        let built = Command::new("x86_64-w64-mingw32-gcc")
            .args(["-shared", "-O2", "-o"])
            .arg(&dll)
            .arg(&source)
            .args(["-ladvapi32", "-Wl,--kill-at"])
            .status()
            .expect("run x86_64-w64-mingw32-gcc (is gcc-mingw-w64-x86-64 installed?)");
        assert!(
            built.success(),
            "cannot build the ProcessPrng shim: {built}"
        );
        // wineboot leaves its wineserver running for a few seconds; the
        // first test starts its own.
        end_wineserver(&prefix);
        prefix
    })
}

/// Removes the prefixes of earlier test processes that are gone.
fn remove_stale_prefixes(tmp: &Path) {
    let Ok(entries) = fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("wine-")) else {
            continue;
        };
        if pid.parse::<u32>().is_ok_and(|pid| !pid_alive(pid)) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// `wineserver -k` for `prefix` (it ends every process of the prefix and
/// then itself), then SIGKILL by pid for anything of the prefix still
/// alive.
fn end_wineserver(prefix: &Path) {
    let _ = Command::new("wineserver")
        .arg("-k")
        .envs(wine_vars(prefix))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let mark = [format!("WINEPREFIX={}", prefix.display()).into_bytes()];
    for pid in with_environ(&mark) {
        if !wait_gone(pid, Duration::from_secs(5)) {
            signal(pid, libc::SIGKILL);
            wait_gone(pid, Duration::from_secs(2));
        }
    }
    let left = with_environ(&mark);
    assert!(
        left.is_empty(),
        "Wine processes outlived their prefix: {left:?}"
    );
}

/// The tests using the prefix now, and the keeper: a cmd.exe started
/// with the prefix's variables alone before any test's command, so that
/// Wine's own services (started with the first program of a wineserver)
/// inherit none of a test's variables, and live as long as any test runs.
/// The last test to leave ends the keeper and the wineserver.
static USERS: Mutex<(usize, Option<Term>)> = Mutex::new((0, None));

fn start_keeper(prefix: &Path) -> Term {
    let mut cmd = CommandBuilder::new("wine");
    cmd.arg("cmd.exe");
    cmd.env_clear();
    for var in ["PATH", "HOME", "USER", "LANG"] {
        if let Some(v) = std::env::var_os(var) {
            cmd.env(var, v);
        }
    }
    for (k, v) in wine_vars(prefix) {
        cmd.env(k, v);
    }
    let keeper = Term::start(cmd, TermOptions::default());
    assert!(
        keeper.wait_output(">", WINE_TIMEOUT),
        "the keeper cmd.exe did not start under Wine; it showed:\n{}",
        keeper.output()
    );
    keeper
}

/// One test's private world under Wine: its own runtime directory, home
/// and project (as Windows paths), on the shared prefix.
pub struct WineEnv {
    base: tempfile::TempDir,
    bin: PathBuf,
    /// `AGENT_COMMS_RUNTIME_DIR`, as a Unix path.
    pub runtime: PathBuf,
}

/// What one Windows command showed and how it ended.
#[derive(Debug)]
pub struct WinRun {
    pub what: String,
    pub code: u32,
    /// The rendered screen's rows, trailing blanks and empty rows at the
    /// end removed.
    pub lines: Vec<String>,
    /// Whether the terminal closed (every writer gone) before it was read.
    pub closed: bool,
    /// The bytes the terminal received, for failure messages.
    pub raw: String,
}

impl WinRun {
    pub fn text(&self) -> String {
        self.lines.join("\n")
    }

    /// What a `--json` command printed, read off the screen it was drawn
    /// on (rows wrap the one line; joined, they are that line again).
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.lines.concat()).unwrap_or_else(|e| {
            panic!(
                "`{}` printed no JSON ({e}):\n{}\n{}",
                self.what,
                self.text(),
                self.received()
            )
        })
    }

    #[track_caller]
    pub fn ok(self) -> Self {
        assert_eq!(
            self.code,
            0,
            "`{}` failed:\n{}\n{}",
            self.what,
            self.text(),
            self.received()
        );
        self
    }

    /// What the terminal received and whether it closed: a screen that
    /// lacks what the program printed says no more than that.
    fn received(&self) -> String {
        format!(
            "(the terminal {}; it received {:?})",
            if self.closed {
                "closed"
            } else {
                "had not closed"
            },
            self.raw
        )
    }
}

impl WineEnv {
    pub fn new() -> Self {
        let bin = windows_bin();
        let mut users = USERS.lock().unwrap();
        if users.0 == 0 {
            users.1 = Some(start_keeper(prefix()));
        }
        users.0 += 1;
        drop(users);
        let base = tempfile::Builder::new()
            .prefix("ac-wine-")
            .tempdir()
            .expect("create a temporary directory");
        for dir in ["home", "project", "work"] {
            fs::create_dir(base.path().join(dir)).expect("create a test directory");
        }
        Self {
            runtime: base.path().join("run"),
            base,
            bin,
        }
    }

    /// The directory commands start in (a Windows program's current
    /// directory is where its session starts).
    pub fn work(&self) -> PathBuf {
        self.base.path().join("work")
    }

    /// `name` in this test's temporary directory, as a Unix path.
    pub fn path(&self, name: &str) -> PathBuf {
        self.base.path().join(name)
    }

    /// The project directory, whose `.agent-comms` holds the store.
    pub fn project(&self) -> PathBuf {
        self.path("project")
    }

    /// The Rust fake agent (crate `fake`) as `FACE.exe` (`claude`,
    /// `codex`): the host picks its adapter by the program's name, and so
    /// does the fake. A copy in this test's directory, as a Unix path.
    pub fn rust_fake(&self, face: &str) -> PathBuf {
        let dir = self.path("bin");
        fs::create_dir_all(&dir).expect("create the test's bin directory");
        let exe = dir.join(format!("{face}.exe"));
        fs::copy(self.bin.join("fake-agent.exe"), &exe).expect("copy fake-agent.exe");
        exe
    }

    fn vars(&self) -> Vec<(String, String)> {
        let mut vars: Vec<(String, String)> = wine_vars(prefix())
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        for (name, dir) in [
            ("AGENT_COMMS_RUNTIME_DIR", self.runtime.clone()),
            ("AGENT_COMMS_HOME", self.base.path().join("home")),
            ("AGENT_COMMS_PROJECT", self.base.path().join("project")),
        ] {
            vars.push((name.to_owned(), windows_path(&dir)));
        }
        vars
    }

    /// `wine EXE ARGS…` with this test's environment, in its work
    /// directory.
    pub fn command(&self, exe: &str, args: &[&str]) -> CommandBuilder {
        let mut cmd = CommandBuilder::new("wine");
        cmd.arg(self.bin.join(format!("{exe}.exe")));
        cmd.args(args);
        cmd.cwd(self.work());
        for var in ["DISPLAY", "WAYLAND_DISPLAY", "AGENT_COMMS_LOG", "K_SESSION"] {
            cmd.env_remove(var);
        }
        for (k, v) in self.vars() {
            cmd.env(k, v);
        }
        cmd
    }

    /// Starts `wine EXE ARGS…` in a test-side terminal of its own, for
    /// commands that stay (attach, watch, a foreground supervisor).
    pub fn start(&self, exe: &str, args: &[&str], rows: u16, cols: u16) -> Term {
        self.start_with(&[], exe, args, rows, cols)
    }

    /// [`WineEnv::start`] with more variables set.
    pub fn start_with(
        &self,
        vars: &[(&str, &str)],
        exe: &str,
        args: &[&str],
        rows: u16,
        cols: u16,
    ) -> Term {
        let mut cmd = self.command(exe, args);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        Term::start(cmd, console(rows, cols))
    }

    /// Runs `EXE ARGS…` to its end in a terminal of its own and returns
    /// what it showed.
    #[track_caller]
    pub fn run(&self, exe: &str, args: &[&str]) -> WinRun {
        self.run_with(&[], exe, args)
    }

    /// [`WineEnv::run`] with more variables set.
    #[track_caller]
    pub fn run_with(&self, vars: &[(&str, &str)], exe: &str, args: &[&str]) -> WinRun {
        let what = format!("{exe} {}", args.join(" "));
        let mut cmd = self.command(exe, args);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let mut term = Term::start(cmd, console(ROWS, COLS));
        let status = term.wait_exit_within(WINE_TIMEOUT);
        // Everything the command wrote was read once the terminal closed;
        // a detached supervisor holds none of it (it has no console).
        let closed = term.wait_closed(TIMEOUT);
        let mut lines: Vec<String> = term
            .lines()
            .iter()
            .map(|l| l.trim_end().to_owned())
            .collect();
        while lines.last().is_some_and(String::is_empty) {
            lines.pop();
        }
        WinRun {
            what,
            code: status.exit_code(),
            lines,
            closed,
            raw: term.output(),
        }
    }

    /// An impostor holding the named pipe `pipe` (tests/wine/impostor.c),
    /// in a terminal of its own, once it holds it.
    pub fn impostor(&self, pipe: &str) -> Term {
        static IMPOSTOR: OnceLock<PathBuf> = OnceLock::new();
        let exe = IMPOSTOR.get_or_init(|| c_helper("impostor"));
        let mut cmd = self.command("agent-comms", &[]);
        *cmd.get_argv_mut() = vec!["wine".into(), exe.into(), pipe.into()];
        let term = Term::start(cmd, TermOptions::default());
        // Wine's console draws printf's output a character at a time:
        // read the rendered screen, not the bytes.
        let holding = format!("holding {pipe}");
        assert!(
            term.wait_screen(WINE_TIMEOUT, |rows| rows
                .iter()
                .any(|r| r.trim_end() == holding)),
            "the impostor did not take {pipe}:\n{}",
            term.screen()
        );
        term
    }

    /// Starts `EXE ARGS…` like [`WineEnv::start`], under a person who
    /// resizes the console to `to` (rows, columns) once the file `trigger`
    /// exists (tests/wine/resize.c).
    pub fn start_resized(
        &self,
        trigger: &Path,
        to: (u16, u16),
        exe: &str,
        args: &[&str],
        rows: u16,
        cols: u16,
    ) -> Term {
        static RESIZE: OnceLock<PathBuf> = OnceLock::new();
        let resize = RESIZE.get_or_init(|| c_helper("resize"));
        let mut line = format!("\"{}\"", windows_path(&self.bin.join(format!("{exe}.exe"))));
        for arg in args {
            line.push_str(&format!(" \"{arg}\""));
        }
        let mut cmd = self.command(exe, &[]);
        *cmd.get_argv_mut() = vec![
            "wine".into(),
            resize.into(),
            windows_path(trigger).into(),
            to.0.to_string().into(),
            to.1.to_string().into(),
            line.into(),
        ];
        Term::start(cmd, console(rows, cols))
    }

    /// `agent-comms ARGS…`.
    #[track_caller]
    pub fn ac(&self, args: &[&str]) -> WinRun {
        self.run("agent-comms", args)
    }

    /// The live processes this test started, as `pid command line` (found
    /// by its runtime directory): supervisors, their programs and consoles.
    pub fn session_processes(&self) -> Vec<String> {
        self.own_processes()
            .into_iter()
            .map(|pid| format!("{pid} {}", cmdline(pid).join(" ")))
            .collect()
    }

    /// The processes this test started (found by its runtime directory).
    fn own_processes(&self) -> Vec<u32> {
        let mark = format!("AGENT_COMMS_RUNTIME_DIR={}", windows_path(&self.runtime));
        with_environ(&[mark.into_bytes()])
    }
}

impl Default for WineEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for WineEnv {
    fn drop(&mut self) {
        for pid in self.own_processes() {
            signal(pid, libc::SIGKILL);
            wait_gone(pid, Duration::from_secs(2));
        }
        let mut users = USERS.lock().unwrap();
        users.0 -= 1;
        if users.0 == 0 {
            // Killed by pid (its own unreaped child); the wineserver then
            // ends what it ran.
            drop(users.1.take());
            end_wineserver(prefix());
        }
    }
}
