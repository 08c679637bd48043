//! One real-provider test's world: its [`TestEnv`], the namespace, the
//! served and ordinary CLIs in test-side terminals, and its cleanup.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use portable_pty::CommandBuilder;

use super::{artifacts_dir, enabled, mock_server_exe, Cli, API_KEY, COLS, PORT, ROWS};
use crate::support::env::TestEnv;
use crate::support::fakes::serve_argv;
use crate::support::procs::{
    cmdline, describe, parent, signal, started_iso, terminate, with_environ,
};
use crate::support::term::{Term, TermOptions};
use crate::support::BIN;
use serde_json::Value;

// ---------------------------------------------------------------------------

/// A served runtime: `interactive-serve` in a test terminal, in the
/// namespace.
pub struct Served {
    pub tty: Term,
    pub id: String,
    pub cast: PathBuf,
}

/// A CLI started the ordinary way (no agent-comms), in the namespace.
pub struct Ordinary {
    pub tty: Term,
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
    pub(super) holder: Option<Child>,
    pub started: Instant,
    pub env: TestEnv,
}

impl World {
    /// Sets up the world of `test` for `cli`, or `None` (after one line) when
    /// the real-provider tests are off here.
    pub fn new(cli: Cli, test: &str) -> World {
        let bins = enabled(test);
        let mock = mock_server_exe();
        let env = TestEnv::new();
        let user_home = env.user_home();
        let work = env.work.canonicalize().unwrap();
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
        world
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

    /// The pid whose network namespace this test uses.
    pub fn ns_pid(&self) -> u32 {
        self.holder.as_ref().unwrap().id()
    }

    /// `nsenter --net=… -- ARGV`, in a test terminal, in the work directory.
    /// Its environment is exactly [`World::vars`]; the terminal is 120x40,
    /// answers queries as xterm does, and ends its program with SIGTERM (a
    /// supervisor then ends its provider).
    pub fn spawn_in_ns(&self, argv: &[&str]) -> Term {
        let mut cmd = CommandBuilder::new("nsenter");
        cmd.arg(format!("--net=/proc/{}/ns/net", self.ns_pid()));
        cmd.arg("--");
        cmd.args(argv);
        cmd.env_clear();
        for (k, v) in self.vars() {
            cmd.env(k, v);
        }
        cmd.cwd(&self.work);
        let options = TermOptions {
            rows: ROWS,
            cols: COLS,
            answer_queries: true,
            term_grace: Some(Duration::from_secs(8)),
        };
        Term::start(cmd, options)
    }

    /// `interactive-serve --id ID EXTRA… -- <cli> ARGS…`, recorded.
    pub fn serve(&self, id: &str, extra: &[&str], args: &[&str]) -> Served {
        let cast = self.artifacts.join(format!("{id}.cast"));
        let cast_s = cast.display().to_string();
        let mut before = vec!["--keyboard-quiet-ms", "500", "--record", &cast_s];
        before.extend_from_slice(extra);
        let argv = serve_argv(id, id, "500", &before, self.cli.program(), args);
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

    /// Processes of this test: their environment holds its HOME or its
    /// runtime directory.
    pub fn our_processes(&self) -> Vec<u32> {
        let wanted = [
            format!("HOME={}", self.user_home.display()).into_bytes(),
            self.env.runtime_var(),
        ];
        with_environ(&wanted)
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
            signal(pid, libc::SIGKILL);
        }
        left
    }

    /// Cleans up and asserts that nothing had to be killed by force at the
    /// end; prints the test's duration.
    pub fn finish(mut self, served: Vec<&mut Term>) {
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
