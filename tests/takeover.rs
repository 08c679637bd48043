//! Takeover, conversation pinning and the collision guard, end to end: an
//! ordinary provider process (a fake that keeps its conversation files the
//! way the real CLI does) runs in its own terminal, and `interactive-serve
//! --takeover-pid` hands it over from another.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::env::TestEnv;
use support::fakes::{fake, fake_events as events, serve_argv, start_argv};
use support::procs::pid_alive;
use support::run::run_bounded;
use support::term::Term;
use support::wait_until;

/// A provider started the ordinary way, in its own terminal and directory.
struct Ordinary {
    term: Term,
    log: PathBuf,
    pid: u32,
    session: String,
    cwd: PathBuf,
}

impl Ordinary {
    /// Starts `provider ARGS` in `dir` (under the test's directory, or
    /// absolute).
    fn start(env: &TestEnv, provider: &str, dir: &str, args: &str, vars: &[(&str, &str)]) -> Self {
        let cwd = env.base().join(dir);
        std::fs::create_dir_all(&cwd).unwrap();
        let n = std::fs::read_dir(env.base()).unwrap().count();
        let log = env.base().join(format!("ordinary-{n}.log"));
        let script = format!("cd '{}' && exec '{}' {args}", cwd.display(), fake(provider));
        let log_s = log.display().to_string();
        let mut all = vec![("FAKE_LOG", log_s.as_str())];
        all.extend_from_slice(vars);
        let term = env.term_with(&["sh", "-c", &script], &all, true);
        wait_until("the ordinary provider's start", || {
            events(&log, "start").len() == 1
        });
        let start = &events(&log, "start")[0];
        Self {
            pid: start["pid"].as_u64().unwrap() as u32,
            session: start["session"].as_str().unwrap().to_owned(),
            cwd: cwd.canonicalize().unwrap(),
            term,
            log,
        }
    }

    /// One turn, as a person has before there is a conversation to keep
    /// (opencode names a session in its log only with its first prompt).
    fn converse(&mut self) {
        // Pasted, then Enter on its own, as the fakes (like the real CLIs)
        // need: an Enter in the same burst as typed text does not submit.
        self.term.write(b"\x1b[200~hello there\x1b[201~");
        self.term.wait_for("hello there");
        self.term.write(b"\r");
        wait_until("the ordinary turn", || {
            !events(&self.log, "submit").is_empty()
        });
    }
}

/// `interactive-serve` of runtime `id` in a test terminal, with its own
/// fake log; `args` go before `--`, `cmd` after it (the fake's arguments).
struct Serve {
    term: Term,
    log: PathBuf,
}

impl Serve {
    fn spawn(env: &TestEnv, id: &str, provider: &str, args: &[&str], cmd: &[&str]) -> Self {
        let n = std::fs::read_dir(env.base()).unwrap().count();
        let log = env.base().join(format!("serve-{id}-{n}.log"));
        let exe = fake(provider);
        let argv = serve_argv(id, id, "200", args, &exe, cmd);
        let log_s = log.display().to_string();
        let term = env.term_with(&argv, &[("FAKE_LOG", &log_s)], true);
        Self { term, log }
    }

    fn start_event(&self) -> Value {
        wait_until("the served provider's start", || {
            events(&self.log, "start").len() == 1
        });
        events(&self.log, "start").remove(0)
    }

    /// Refused before the provider started: exit status non-zero, the
    /// message on the terminal, nothing in the log.
    fn refused(mut self, message: &str) {
        assert!(!self.term.wait_exit().success());
        self.term.wait_for(message);
        assert!(
            events(&self.log, "start").is_empty(),
            "the provider started"
        );
    }
}

fn runtime(env: &TestEnv, id: &str) -> Value {
    let run = env.run_ok(&["runtime", "show", "--id", id, "--json"]);
    serde_json::from_str(run.stdout.trim()).unwrap()
}

/// Takes an ordinary process over: afterwards exactly one provider process
/// runs, with the pinned resume, in the old directory, on the same
/// conversation.
fn takes_over(provider: &str, ordinary_args: &str, cmd: &[&str], pinned: &[&str]) {
    let env = TestEnv::new();
    let mut old = Ordinary::start(&env, provider, "work", ordinary_args, &[]);
    old.converse();
    let pid = old.pid.to_string();
    let serve = Serve::spawn(&env, "bob", provider, &["--takeover-pid", &pid], cmd);
    let start = serve.start_event();
    assert!(!pid_alive(old.pid), "the old process still runs");
    assert_eq!(start["session"], old.session.as_str());
    assert_eq!(Path::new(start["cwd"].as_str().unwrap()), old.cwd);
    let argv = start_argv(&start);
    let expected: Vec<String> = pinned
        .iter()
        .map(|a| a.replace("{id}", &old.session))
        .collect();
    assert_eq!(argv[1..], expected);
    serve
        .term
        .wait_for(&format!("taking over process {}", old.pid));
    wait_until("the runtime online", || {
        runtime(&env, "bob")["status"] == "ONLINE"
    });
    let bob = runtime(&env, "bob");
    assert_eq!(bob["conversation_id"], old.session.as_str());
    assert_eq!(
        bob["session_id"], bob["conversation_id"],
        "the old key, for one release"
    );
}

#[test]
fn an_ordinary_claude_is_taken_over_on_its_session() {
    takes_over("claude", "", &["--continue"], &["--resume", "{id}"]);
}

#[test]
fn an_ordinary_codex_is_taken_over_on_its_thread() {
    takes_over("codex", "", &["resume", "--last"], &["resume", "{id}"]);
}

#[test]
fn an_ordinary_opencode_is_taken_over_on_its_session() {
    takes_over("opencode", "", &[], &["--session", "{id}"]);
}

#[test]
fn a_provider_that_ignores_sigterm_is_killed_before_the_new_one_starts() {
    let env = TestEnv::new();
    let old = Ordinary::start(&env, "claude", "stubborn", "", &[("FAKE_IGNORE_TERM", "1")]);
    let pid = old.pid.to_string();
    let serve = Serve::spawn(&env, "bob", "claude", &["--takeover-pid", &pid], &[]);
    let start = serve.start_event();
    assert!(!pid_alive(old.pid));
    serve.term.wait_for("it needed SIGKILL");
    assert_eq!(start["session"], old.session.as_str());
}

#[test]
fn taking_over_an_ancestor_is_refused() {
    let env = TestEnv::new();
    let log = env.base().join("never.log");
    // The shell is the serve's parent: `$$` is a pid we descend from.
    let script = format!(
        "FAKE_LOG='{}' '{}' runtime interactive-serve --id bob --takeover-pid $$ -- '{}'; echo shell-still-here",
        log.display(),
        support::BIN,
        fake("claude")
    );
    let term = env.term_with(&["sh", "-c", &script], &[], true);
    term.wait_for("one of its parents");
    term.wait_for("--launch-terminal");
    term.wait_for("shell-still-here");
    assert!(events(&log, "start").is_empty());
}

#[test]
fn a_process_that_is_not_the_provider_is_refused() {
    let env = TestEnv::new();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let pid = sleeper.id().to_string();
    Serve::spawn(&env, "bob", "claude", &["--takeover-pid", &pid], &[])
        .refused("runs sleep, not claude-code");
    // --force skips that check only; nothing ties a sleep to a conversation.
    Serve::spawn(
        &env,
        "bob",
        "claude",
        &["--takeover-pid", &pid, "--force"],
        &[],
    )
    .refused("cannot tell which claude-code conversation");
    assert!(pid_alive(sleeper.id()), "the process was touched");
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[test]
fn another_users_process_is_refused() {
    let env = TestEnv::new();
    // As root, make a process of another user; otherwise init is one.
    let mut other = None;
    let pid = if agent_comms_core::paths::euid() == 0 {
        let child = std::process::Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sleep",
                "60",
            ])
            .spawn()
            .unwrap();
        let pid = child.id();
        other = Some(child);
        wait_until("the other user's process", || {
            std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
                s.lines()
                    .any(|l| l.starts_with("Uid:") && l.contains("65534"))
            })
        });
        pid
    } else {
        1
    };
    Serve::spawn(
        &env,
        "bob",
        "claude",
        &["--takeover-pid", &pid.to_string()],
        &[],
    )
    .refused("belongs to another user");
    if let Some(mut child) = other {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

#[test]
fn the_collision_guard_refuses_a_second_process_on_a_claude_session() {
    let env = TestEnv::new();
    let old = Ordinary::start(&env, "claude", "work", "", &[]);
    let pid = old.pid.to_string();
    Serve::spawn(&env, "bob", "claude", &[], &["--resume", &old.session]).refused(&format!(
        "conversation {} is in use by process {pid}; to move it here safely: agent-comms --actor bob runtime interactive-serve bob --takeover-pid {pid} -- ",
        old.session
    ));
    let shared = Serve::spawn(
        &env,
        "bob",
        "claude",
        &["--allow-shared-conversation"],
        &["--resume", &old.session],
    );
    assert_eq!(shared.start_event()["session"], old.session.as_str());
    shared.term.wait_for("--allow-shared-conversation");
    assert!(
        pid_alive(old.pid),
        "the guard's override must not end the other process"
    );
}

#[test]
fn two_codex_tuis_on_one_thread_are_allowed_and_said() {
    let env = TestEnv::new();
    let old = Ordinary::start(&env, "codex", "work", "", &[]);
    let serve = Serve::spawn(&env, "bob", "codex", &[], &["resume", &old.session]);
    assert_eq!(serve.start_event()["session"], old.session.as_str());
    serve.term.wait_for("live clients");
    assert!(pid_alive(old.pid));
}

/// A runtime remembers its conversation: a later "continue" resumes exactly
/// it, not whichever conversation was used last in the directory.
#[test]
fn a_bound_conversation_is_what_continue_resumes() {
    let env = TestEnv::new();
    let mut first = Serve::spawn(&env, "bob", "claude", &[], &[]);
    let s1 = first.start_event()["session"].as_str().unwrap().to_owned();
    wait_until("the conversation bound", || {
        runtime(&env, "bob")["conversation_id"] == s1.as_str()
    });
    first.term.write(b"\x04");
    assert!(first.term.wait_exit().success());
    // Someone else works in the same directory: theirs is now the latest.
    let cwd = std::env::current_dir().unwrap();
    let other = Ordinary::start(&env, "claude", cwd.to_str().unwrap(), "", &[]);
    assert_ne!(other.session, s1);
    drop(other);
    let again = Serve::spawn(&env, "bob", "claude", &[], &["--continue"]);
    let start = again.start_event();
    assert_eq!(start["session"], s1.as_str());
    again.term.wait_for("continuing conversation");
    drop(again);
    // An explicit binding wins from then on; under the command's and the
    // flag's old names (bind-conversation --conversation), which still work.
    let bound = env.run_ok(&[
        "runtime",
        "bind-session",
        "--id",
        "bob",
        "--session",
        "chosen-one",
        "--json",
    ]);
    let bound: Value = serde_json::from_str(bound.stdout.trim()).unwrap();
    assert_eq!(bound["conversation_id"], "chosen-one");
    assert_eq!(
        bound["session_id"], "chosen-one",
        "the old key, for one release"
    );
    wait_until("bob offline", || {
        runtime(&env, "bob")["status"] == "OFFLINE"
    });
    let third = Serve::spawn(&env, "bob", "claude", &[], &["-c"]);
    assert_eq!(third.start_event()["session"], "chosen-one");
}

#[test]
fn launch_terminal_reruns_the_command_in_a_new_window() {
    let env = TestEnv::new();
    let record = env.base().join("terminal-argv");
    let script = env.base().join("fake-terminal");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\n",
            record.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let args = [
        "runtime",
        "interactive-serve",
        "--id",
        "bob",
        "--takeover-pid",
        "4242",
        "--launch-terminal",
        "--",
        "claude",
        "-c",
    ];
    let mut cmd = env.command(&args);
    cmd.env("AGENT_COMMS_TERMINAL", &script);
    let run = run_bounded(cmd, "launch-terminal").ok();
    assert!(run.stderr.contains("started in a new terminal"), "{run:#?}");
    wait_until("the terminal ran", || {
        record.exists() && std::fs::read_to_string(&record).unwrap().ends_with("-c\n")
    });
    let ran: Vec<String> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let exe = Path::new(support::BIN)
        .canonicalize()
        .unwrap()
        .display()
        .to_string();
    let mut expected = vec![exe];
    expected.extend(
        args.iter()
            .filter(|a| **a != "--launch-terminal")
            .map(|a| a.to_string()),
    );
    assert_eq!(ran, expected);
    // No emulator anywhere: one clear line.
    let mut cmd = env.command(&args);
    cmd.env("PATH", "/nonexistent").env_remove("TERMINAL");
    let run = run_bounded(cmd, "launch-terminal without one").fails_with_one_line();
    assert!(
        run.stderr.contains("no terminal emulator found"),
        "{run:#?}"
    );
}

#[test]
fn a_conversation_id_outside_the_id_rule_is_not_taken_over() {
    let env = TestEnv::new();
    // The provider's own files name the conversation; one that is no id
    // would be typed into the resume command line.
    let old = Ordinary::start(&env, "claude", "odd", "--resume 'ev;il'", &[]);
    assert_eq!(old.session, "ev;il");
    let pid = old.pid.to_string();
    Serve::spawn(&env, "bob", "claude", &["--takeover-pid", &pid], &[])
        .refused("unusable conversation: invalid conversation id 'ev;il'");
    assert!(pid_alive(old.pid), "nothing was ended");
}
