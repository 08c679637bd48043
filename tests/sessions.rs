//! End-to-end tests of supervised PTY sessions (issue 2): the real
//! `agent-comms` binary against real bash and python3 in real PTYs.
//!
//! Every test owns a [`TestEnv`] (its own runtime directory and home), so the
//! tests run in parallel and repeatedly with fixed session names; the
//! environment's Drop ends whatever a test started.

mod support;

use std::fs;
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::env::{TestEnv, BASH};
use support::procs::{pid_alive, wait_gone};
use support::raw::{
    connect, expect_error, frame, read_frame, TAG_INPUT, TAG_OUTPUT, TAG_REQUEST, TAG_RESPONSE,
};
use support::run::run_bounded;
use support::term::Term;
use support::{poll_within, BIN, TIMEOUT};

/// Detach from `attach`: Ctrl-\.
const CTRL_BACKSLASH: u8 = 0x1c;
/// Leave `watch`: Ctrl-C.
const CTRL_C: u8 = 0x03;

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
}

fn euid() -> u32 {
    // SAFETY: geteuid(2) cannot fail.
    unsafe { libc::geteuid() }
}

/// Asserts that `name` left nothing in the runtime directory but its log.
fn assert_gone(env: &TestEnv, name: &str) {
    assert!(
        !env.record_path(name).exists(),
        "{name}.json is still there"
    );
    assert!(
        !env.socket_path(name).exists(),
        "{name}.sock is still there"
    );
    assert!(
        env.ls_entry(name).is_none(),
        "session ls still lists {name}"
    );
}

// 1. start, ls, snapshot, send, kill ------------------------------------

#[test]
fn start_list_snapshot_send_and_kill() {
    let env = TestEnv::new();
    let rec = env.start("work", BASH);
    assert!(pid_alive(rec.pid) && pid_alive(rec.supervisor_pid));
    assert_eq!(rec.socket, env.socket_path("work"));
    assert!(env.record_path("work").exists());

    // Human listing.
    let ls = env.run_ok(&["session", "ls"]);
    let row = ls
        .stdout
        .lines()
        .find(|l| l.starts_with("work "))
        .unwrap_or_else(|| panic!("no row for 'work' in:\n{}", ls.stdout));
    assert!(row.contains("bash --norc --noprofile"), "{row}");
    assert!(row.contains(&rec.pid.to_string()), "{row}");

    // JSON listing: the contract keys.
    let items = env.ls_json();
    assert_eq!(items.len(), 1, "{items:?}");
    let item = &items[0];
    for key in [
        "name",
        "kind",
        "pid",
        "supervisor_pid",
        "command",
        "started",
        "clients",
    ] {
        assert!(item.get(key).is_some(), "ls --json lacks '{key}': {item}");
    }
    assert_eq!(item["name"], "work");
    assert_eq!(item["kind"], "session");
    assert_eq!(item["pid"], rec.pid);
    assert_eq!(item["supervisor_pid"], rec.supervisor_pid);
    assert_eq!(item["command"], "bash --norc --noprofile");
    assert_eq!(item["clients"], 0);
    let started = item["started"].as_str().unwrap();
    assert!(
        started.len() >= 20 && started.ends_with('Z') && started.contains('T'),
        "started is not UTC ISO 8601: {started}"
    );

    // send writes text as is: no Enter yet, so no output yet.
    env.run_ok(&["session", "send", "work", "echo hi-$((6*7))"]);
    env.wait_screen("work", "echo hi-$((6*7))");
    assert!(!env.snapshot("work").contains("hi-42"));
    env.run_ok(&["session", "send", "work", "--keys", "Enter"]);
    let screen = env.wait_screen("work", "hi-42");
    assert!(screen.lines().any(|l| l == "hi-42"), "{screen}");

    // Named keys: C-c interrupts a running job (without it, the next line
    // would wait 300 s behind the sleep).
    env.send_line(
        "work",
        "echo started-$((1+2)); sleep 300; echo not-interrupted",
    );
    env.wait_screen("work", "started-3");
    env.run_ok(&["session", "send", "work", "--keys", "C-c"]);
    env.send_line("work", "echo back-$((1+1))");
    let screen = env.wait_screen("work", "back-2");
    assert!(!screen.lines().any(|l| l == "not-interrupted"), "{screen}");

    // snapshot --json.
    let snap: Value = serde_json::from_str(
        &env.run_ok(&["session", "snapshot", "work", "--json"])
            .stdout,
    )
    .unwrap();
    assert_eq!(snap["rows"], 24);
    assert_eq!(snap["cols"], 80);
    let lines = snap["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 24);
    assert!(lines.iter().any(|l| l == "back-2"), "{snap}");

    // kill: returns once the session is gone.
    let kill = env.run_ok(&["session", "kill", "work"]);
    assert!(kill.stdout.contains("killed session work"), "{kill:#?}");
    assert!(
        !pid_alive(rec.supervisor_pid),
        "the supervisor outlived kill"
    );
    assert!(
        wait_gone(rec.pid, TIMEOUT),
        "the child outlived its supervisor"
    );
    assert_gone(&env, "work");
    assert_eq!(env.run_ok(&["session", "ls"]).stdout.trim(), "no sessions");
    env.assert_nothing_left(&[]);
}

// 2. attach, detach, re-attach, several clients ---------------------------

/// The session's size, as `snapshot --json` says it.
fn size(env: &TestEnv, name: &str) -> (u64, u64) {
    let shot = env.run_ok(&["session", "snapshot", name, "--json"]).json();
    (
        shot["rows"].as_u64().unwrap(),
        shot["cols"].as_u64().unwrap(),
    )
}

/// The person resizes the terminal: the session takes the new size, and
/// bash (`checkwinsize`) knows it. `term` shows session `name` and already
/// follows resizes.
fn follows_a_resize(env: &TestEnv, term: &Term, name: &str) {
    assert_eq!(size(env, name), (24, 80));
    term.resize(30, 100);
    poll_within(TIMEOUT, "the session at 30x100", || {
        (size(env, name) == (30, 100)).then_some(())
    });
    let mark = term.mark();
    term.write(b"echo cols-$COLUMNS\r");
    term.wait_for_after(mark, "cols-100");
}

#[test]
fn attach_follows_the_terminal_when_it_is_resized() {
    let env = TestEnv::new();
    env.start_bash("rz");
    let mut term = env.term(&["session", "attach", "rz"]);
    // The banner comes once the client watches for resizes.
    term.wait_for("[attached to rz;");
    follows_a_resize(&env, &term, "rz");
    term.write(&[CTRL_BACKSLASH]);
    assert!(term.wait_exit().success(), "{:?}", term.output());
}

#[test]
fn a_foreground_session_follows_the_terminal_when_it_is_resized() {
    let env = TestEnv::new();
    let mut argv = vec![BIN, "session", "run", "fg"];
    argv.extend_from_slice(BASH);
    let mut term = env.term_with(&argv, &[], false);
    // Counted as a client once the supervisor follows the terminal.
    env.wait_clients("fg", 1);
    follows_a_resize(&env, &term, "fg");
    term.write(b"exit\r");
    assert!(term.wait_exit().success(), "{:?}", term.output());
}

#[test]
fn attach_types_detaches_and_reattaches_with_the_screen_redrawn() {
    let env = TestEnv::new();
    env.start_bash("at");

    let mut first = env.term(&["session", "attach", "at"]);
    // The redraw shows the screen as it is: raw mode is on from here.
    first.wait_for("ready-5");
    first.write(b"echo attached-$((40+2))\r");
    first.wait_for("attached-42");
    assert!(env.snapshot("at").lines().any(|l| l == "attached-42"));

    first.write(&[CTRL_BACKSLASH]);
    let status = first.wait_exit();
    assert!(
        status.success(),
        "attach exited with {status:?} on detach; it showed:\n{:?}",
        first.output()
    );
    first.wait_for("[detached from at; it keeps running]");
    env.wait_clients("at", 0);

    // Still running, and still taking input.
    env.send_line("at", "echo still-$((1+1))");
    env.wait_screen("at", "still-2");

    // Re-attach: the earlier text is drawn without typing anything.
    let mut second = env.term(&["session", "attach", "at"]);
    second.wait_for("attached-42");
    second.wait_for("still-2");

    // A second client at once: both see the same screen.
    let mut third = env.term(&["session", "attach", "at"]);
    third.wait_for("attached-42");
    let entry = env.ls_entry("at").unwrap();
    assert_eq!(entry["clients"], 2, "{entry}");
    let (m2, m3) = (second.mark(), third.mark());
    second.write(b"echo shared-$((5*5))\r");
    third.wait_for_after(m3, "shared-25");
    second.wait_for_after(m2, "shared-25");

    for term in [&mut second, &mut third] {
        term.write(&[CTRL_BACKSLASH]);
        assert!(term.wait_exit().success(), "{:?}", term.output());
    }
    env.wait_clients("at", 0);
    assert!(env.snapshot("at").contains("shared-25"));
}

#[test]
fn attach_takes_a_configured_detach_key() {
    let env = TestEnv::new();
    env.start_bash("dk");
    let mut term = env.term(&["session", "attach", "dk", "--detach-key", "C-]"]);
    term.wait_for("ready-5");
    // Ctrl-\ is now an ordinary key for the session: bash ignores it.
    term.write(&[CTRL_BACKSLASH]);
    term.write(b"echo typed-$((9*9))\r");
    term.wait_for("typed-81");
    term.write(&[0x1d]);
    assert!(term.wait_exit().success(), "{:?}", term.output());
    env.snapshot("dk");
}

// 3. watch ---------------------------------------------------------------

#[test]
fn watch_follows_output_is_read_only_and_ctrl_c_ends_it() {
    let env = TestEnv::new();
    env.start_bash("w");
    let mut watch = env.term(&["session", "watch", "w"]);
    watch.wait_for("ready-5");
    assert_eq!(env.ls_entry("w").unwrap()["clients"], 1);

    env.send_line("w", "echo watched-$((2*3))");
    watch.wait_for("watched-6");

    // Keys typed into a watch never reach the session; Ctrl-C ends it.
    watch.write(b"echo typed-$((7*7))\r");
    watch.write(&[CTRL_C]);
    let status = watch.wait_exit();
    assert!(status.success(), "watch exited with {status:?}");
    env.send_line("w", "echo after-$((4*4))");
    let screen = env.wait_screen("w", "after-16");
    assert!(
        !screen.contains("typed"),
        "a watch client's keys reached the session:\n{screen}"
    );
    env.wait_clients("w", 0);
}

// 4. child exit ----------------------------------------------------------

#[test]
fn a_child_that_exits_at_once_leaves_nothing_behind() {
    let env = TestEnv::new();
    let rec = env.start("quick", &["--", "sh", "-c", "exit 3"]);
    assert!(
        wait_gone(rec.supervisor_pid, TIMEOUT),
        "the supervisor outlived its child"
    );
    assert_gone(&env, "quick");
    assert_eq!(env.run_ok(&["session", "ls"]).stdout.trim(), "no sessions");
    assert!(
        env.log("quick").contains("exit status 3"),
        "the log does not record the exit status:\n{}",
        env.log("quick")
    );
    // The name is free again.
    env.start("quick", &["--", "sh", "-c", "exit 0"]);
    env.assert_nothing_left(&[]);
}

#[test]
fn an_attached_client_sees_the_child_exit() {
    let env = TestEnv::new();
    let rec = env.start_bash("ex");
    let mut term = env.term(&["session", "attach", "ex"]);
    term.wait_for("ready-5");
    env.send_line("ex", "exit 7");
    term.wait_for("[session ex ended: exit status 7]");
    assert!(term.wait_exit().success(), "{:?}", term.output());
    assert!(wait_gone(rec.supervisor_pid, TIMEOUT));
    assert_gone(&env, "ex");
    env.assert_nothing_left(&[]);
}

// 5. stale sockets -------------------------------------------------------

/// Starts `name`, then SIGKILLs its supervisor: the socket and record stay.
fn start_and_crash(env: &TestEnv, name: &str) -> support::env::Record {
    let rec = env.start_bash(name);
    env.signal(rec.supervisor_pid, libc::SIGKILL);
    assert!(wait_gone(rec.supervisor_pid, TIMEOUT));
    // The child loses its terminal (SIGHUP); make sure it is gone too.
    if !wait_gone(rec.pid, Duration::from_secs(5)) {
        env.signal(rec.pid, libc::SIGKILL);
    }
    let sock = fs::symlink_metadata(env.socket_path(name)).expect("the stale socket stays");
    assert!(sock.file_type().is_socket());
    assert!(env.record_path(name).exists(), "the stale record stays");
    rec
}

#[test]
fn a_sigkilled_supervisor_leaves_a_stale_socket_that_the_next_command_removes() {
    let env = TestEnv::new();
    let rec = start_and_crash(&env, "st");

    let ls = env.run_ok(&["session", "ls"]);
    assert!(
        ls.stderr.contains("removed stale session 'st'")
            && ls.stderr.contains(&rec.supervisor_pid.to_string()),
        "no stale-removal line: {ls:#?}"
    );
    assert_eq!(ls.stdout.trim(), "no sessions");
    assert!(!env.socket_path("st").exists());
    assert!(!env.record_path("st").exists());
    // Said once: the next listing is quiet.
    let again = env.run_ok(&["session", "ls", "--json"]);
    assert_eq!(again.stdout.trim(), "[]");
    assert!(again.stderr.is_empty(), "{again:#?}");

    // The name works again.
    env.start_bash("st");
    env.run_ok(&["session", "kill", "st"]);
    env.assert_nothing_left(&[]);
}

#[test]
fn a_stale_session_is_reported_by_snapshot_and_replaced_by_new() {
    let env = TestEnv::new();
    start_and_crash(&env, "st2");
    let snap = env
        .run(&["session", "snapshot", "st2"])
        .fails_with_one_line();
    assert!(snap.stderr.contains("stale"), "{snap:#?}");
    assert!(!env.socket_path("st2").exists());

    // `session new` straight over a stale socket.
    start_and_crash(&env, "st3");
    env.start_bash("st3");
    assert!(
        env.log("st3").contains("stale"),
        "the supervisor did not say it replaced a stale socket:\n{}",
        env.log("st3")
    );
}

// 6. the terminal query responder ----------------------------------------

/// A program that asks the terminal for the cursor position in raw mode
/// and prints the answer as `reply=ESC[<row>;<col>R|`.
const ASK_CURSOR: &str = r#"
import os, select, sys, termios, tty
fd = sys.stdin.fileno()
saved = termios.tcgetattr(fd)
tty.setraw(fd)
reply = b""
try:
    os.write(1, b"pos-test\x1b[6n")
    while not reply.endswith(b"R"):
        ready, _, _ = select.select([fd], [], [], 10)
        if not ready:
            reply += b"<no reply>"
            break
        reply += os.read(fd, 1)
finally:
    termios.tcsetattr(fd, termios.TCSADRAIN, saved)
text = reply.decode("ascii", "replace").replace("\x1b", "ESC")
os.write(1, ("\r\nreply=" + text + "|\r\n").encode())
if sys.argv[1:] == ["--stay"]:
    sys.stdin.readline()
"#;

fn ask_cursor_script(env: &TestEnv) -> PathBuf {
    let path = env.base().join("ask_cursor.py");
    fs::write(&path, ASK_CURSOR).unwrap();
    path
}

/// The (row, col) of the `reply=ESC[row;colR|` line on `screen`.
fn cursor_reply(screen: &str) -> Option<(u32, u32)> {
    let rest = screen.split("reply=ESC[").nth(1)?;
    let (pos, _) = rest.split_once("R|")?;
    let (row, col) = pos.split_once(';')?;
    Some((row.parse().ok()?, col.parse().ok()?))
}

#[test]
fn the_supervisor_answers_cursor_queries_while_detached() {
    let env = TestEnv::new();
    let script = ask_cursor_script(&env);
    env.start(
        "resp",
        &["--", "python3", script.to_str().unwrap(), "--stay"],
    );
    let screen = env.wait_screen("resp", "reply=");
    // "pos-test" leaves the cursor on row 1, column 9.
    assert_eq!(
        cursor_reply(&screen),
        Some((1, 9)),
        "no cursor-position report:\n{screen}"
    );
}

#[test]
fn the_supervisor_stays_silent_while_a_terminal_is_attached() {
    let env = TestEnv::new();
    let script = ask_cursor_script(&env);
    env.start_bash("quiet");
    let mut term = env.term(&["session", "attach", "quiet"]);
    term.wait_for("ready-5");
    let mark = term.mark();
    term.write(format!("python3 {}\r", script.display()).as_bytes());
    // The query reaches the attached terminal, which answers it itself.
    term.wait_for_after(mark, "\x1b[6n");
    term.write(b"\x1b[7;7R");
    term.wait_for_after(mark, "reply=");
    let screen = env.wait_screen("quiet", "reply=");
    assert_eq!(
        cursor_reply(&screen),
        Some((7, 7)),
        "the program got an answer other than the attached terminal's:\n{screen}"
    );
    term.write(&[CTRL_BACKSLASH]);
    assert!(term.wait_exit().success());
}

// 7. permissions ---------------------------------------------------------

#[test]
fn the_runtime_dir_is_0700_and_the_socket_0600() {
    let env = TestEnv::new();
    assert!(!env.runtime.exists());
    let rec = env.start("perm", &["--", "sleep", "300"]);
    assert_eq!(mode(&env.runtime), 0o700, "runtime dir mode");
    assert_eq!(mode(&rec.socket), 0o600, "socket mode");
    assert_eq!(mode(&env.record_path("perm")), 0o600, "record mode");
}

#[test]
fn a_group_or_world_accessible_runtime_dir_is_refused() {
    let env = TestEnv::new();
    fs::create_dir(&env.runtime).unwrap();
    fs::set_permissions(&env.runtime, fs::Permissions::from_mode(0o755)).unwrap();
    let ls = env.run(&["session", "ls"]).fails_with_one_line();
    assert!(
        ls.stderr.contains(env.runtime.to_str().unwrap()) && ls.stderr.contains("chmod 700"),
        "{ls:#?}"
    );
    let new = env
        .run(&["session", "new", "p", "--", "sleep", "300"])
        .fails_with_one_line();
    assert!(new.stderr.contains("open to other users"), "{new:#?}");
    // Refused, not repaired behind the user's back; nothing started.
    assert_eq!(mode(&env.runtime), 0o755);
    assert_eq!(fs::read_dir(&env.runtime).unwrap().count(), 0);
}

#[test]
fn a_symlinked_runtime_dir_is_refused() {
    let env = TestEnv::new();
    let real = env.base().join("real");
    fs::create_dir(&real).unwrap();
    fs::set_permissions(&real, fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&real, &env.runtime).unwrap();
    for args in [
        &["session", "ls"][..],
        &["session", "new", "p", "--", "sleep", "300"][..],
    ] {
        let run = env.run(args).fails_with_one_line();
        assert!(run.stderr.contains("is a symlink"), "{run:#?}");
    }
    assert_eq!(fs::read_dir(&real).unwrap().count(), 0);
}

#[test]
fn a_runtime_dir_owned_by_someone_else_is_refused() {
    if euid() != 0 {
        eprintln!("SKIPPED a_runtime_dir_owned_by_someone_else_is_refused: needs root to chown");
        return;
    }
    let env = TestEnv::new();
    fs::create_dir(&env.runtime).unwrap();
    fs::set_permissions(&env.runtime, fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&env.runtime, Some(65534), Some(65534)).unwrap();
    let run = env.run(&["session", "ls"]).fails_with_one_line();
    assert!(run.stderr.contains("belongs to uid 65534"), "{run:#?}");
}

// 8. bad input -----------------------------------------------------------

#[test]
fn invalid_session_names_are_refused() {
    let env = TestEnv::new();
    for name in ["a/b", "..", "x y", "", "../escape", "a\nb"] {
        let run = env
            .run(&["session", "new", name, "--", "sleep", "300"])
            .fails_with_one_line();
        assert!(
            run.stderr.contains("invalid session name"),
            "{name:?}: {run:#?}"
        );
    }
    // Nothing was created for any of them, and no file escaped the root.
    let left: Vec<_> = fs::read_dir(&env.runtime)
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    assert!(!env.base().join("escape.json").exists());
    for cmd in ["snapshot", "attach", "watch", "kill"] {
        let run = env.run(&["session", cmd, "a/b"]).fails_with_one_line();
        assert!(run.stderr.contains("invalid session name"), "{run:#?}");
    }
}

#[test]
fn a_name_over_the_length_limit_is_refused_with_the_limit() {
    let env = TestEnv::new();
    let name = "n".repeat(201);
    let run = env
        .run(&["session", "new", &name, "--", "sleep", "300"])
        .fails_with_one_line();
    assert!(
        run.stderr.contains("invalid session name")
            && run.stderr.contains("at most 200 characters"),
        "{run:#?}"
    );
}

#[test]
fn a_terminal_size_beyond_the_bounds_is_refused_and_nothing_starts() {
    let env = TestEnv::new();
    for (rows, cols) in [("65535", "65535"), ("0", "80"), ("24", "1001")] {
        let run = env
            .run(&[
                "session", "new", "big", "--rows", rows, "--cols", cols, "--", "sleep", "300",
            ])
            .fails_with_one_line();
        assert!(
            run.stderr.contains(&format!("{rows} × {cols}"))
                && run.stderr.contains("1 to 1000 rows and 1 to 1000 columns"),
            "{run:#?}"
        );
        assert!(!run.stderr.contains(".log"), "no log to point at: {run:#?}");
    }
    assert!(env.ls_json().is_empty());
    env.assert_nothing_left(&[]);
}

#[test]
fn a_name_in_use_is_refused_and_the_running_session_is_untouched() {
    let env = TestEnv::new();
    let rec = env.start_bash("dup");
    let run = env.run(&["session", "new", "dup", "--", "sleep", "300"]);
    let run = run.fails_with_one_line();
    assert!(run.stderr.contains("already exists"), "{run:#?}");
    assert_eq!(env.record("dup").unwrap(), rec);
    env.send_line("dup", "echo same-$((2*2))");
    env.wait_screen("dup", "same-4");
    assert_eq!(env.ls_json().len(), 1);
}

#[test]
fn a_command_that_does_not_exist_is_a_clear_error_and_leaves_nothing() {
    let env = TestEnv::new();
    let run = env
        .run(&["session", "new", "nx", "--", "no-such-command-ac-e2e"])
        .fails_with_one_line();
    assert!(
        run.stderr.contains("cannot start no-such-command-ac-e2e"),
        "{run:#?}"
    );
    assert!(!env.record_path("nx").exists());
    assert!(!env.socket_path("nx").exists());
    assert_eq!(env.run_ok(&["session", "ls"]).stdout.trim(), "no sessions");
    env.assert_nothing_left(&[]);

    // A working directory that does not exist, likewise.
    let run = env
        .run(&[
            "session",
            "new",
            "nx",
            "--cwd",
            "/no/such/dir",
            "--",
            "true",
        ])
        .fails_with_one_line();
    assert!(run.stderr.contains("/no/such/dir"), "{run:#?}");
    assert!(!env.socket_path("nx").exists());
}

#[test]
fn commands_on_an_unknown_session_are_clear_errors() {
    let env = TestEnv::new();
    for cmd in ["kill", "snapshot", "attach", "watch"] {
        let run = env.run(&["session", cmd, "nope"]).fails_with_one_line();
        assert!(
            run.stderr.contains("no session 'nope'") && run.stderr.contains("session ls"),
            "{run:#?}"
        );
    }
    let run = env
        .run(&["session", "send", "nope", "hello"])
        .fails_with_one_line();
    assert!(run.stderr.contains("no session 'nope'"), "{run:#?}");
}

// 9. garbage and vanishing clients ---------------------------------------

/// Deterministic noise.
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

#[test]
fn garbage_on_the_socket_gets_an_error_reply_and_the_supervisor_lives_on() {
    let env = TestEnv::new();
    let rec = env.start_bash("g");

    // Text where frames belong: answered once, then closed.
    let mut s = connect(&rec.socket);
    let mut junk = b"hello supervisor\n".to_vec();
    junk.extend(noise(4096, 0x9e37_79b9_7f4a_7c15));
    let _ = s.write_all(&junk); // the supervisor may hang up mid-write
    let message = expect_error(&mut s, 0);
    assert!(message.contains("malformed"), "{message}");
    assert!(read_frame(&mut s).is_none(), "the connection stays open");

    // Well-delimited frames that make no sense: each gets an error reply
    // with its own id, and the connection stays usable.
    let mut s = connect(&rec.socket);
    s.write_all(&frame(1, TAG_REQUEST, 7, b"{not json"))
        .unwrap();
    assert!(expect_error(&mut s, 7).contains("malformed"));
    s.write_all(&frame(1, TAG_REQUEST, 8, br#"{"type":"no_such_request"}"#))
        .unwrap();
    expect_error(&mut s, 8);
    s.write_all(&frame(9, TAG_REQUEST, 9, br#"{"type":"info"}"#))
        .unwrap();
    assert!(expect_error(&mut s, 9).contains("version"));
    s.write_all(&frame(1, 99, 10, b"x")).unwrap();
    assert!(expect_error(&mut s, 10).contains("tag"));
    s.write_all(&frame(1, TAG_INPUT, 11, b"echo sneaked-$((3*3))\r"))
        .unwrap();
    assert!(expect_error(&mut s, 11).contains("attach before input"));
    s.write_all(&[0, 0, 0, 2, 1, 0]).unwrap(); // shorter than a header
    expect_error(&mut s, 0);
    s.write_all(&frame(1, TAG_REQUEST, 12, br#"{"type":"info"}"#))
        .unwrap();
    let info = read_frame(&mut s).unwrap();
    assert_eq!((info.tag, info.id), (TAG_RESPONSE, 12));
    assert_eq!(info.json()["type"], "info");
    assert_eq!(info.json()["name"], "g");
    drop(s);

    // Noise and a hang-up; a connection that says nothing at all.
    let mut s = connect(&rec.socket);
    let _ = s.write_all(&noise(64 * 1024, 42));
    drop(s);
    drop(connect(&rec.socket));

    // Still serving, and the input frame never reached the PTY.
    assert!(pid_alive(rec.supervisor_pid));
    env.send_line("g", "echo alive-$((3+4))");
    let screen = env.wait_screen("g", "alive-7");
    assert!(!screen.contains("sneaked"), "{screen}");
    assert_eq!(env.ls_entry("g").unwrap()["clients"], 0);
}

#[test]
fn a_client_that_vanishes_mid_stream_leaves_the_session_working() {
    let env = TestEnv::new();
    let script = ask_cursor_script(&env);
    let rec = env.start_bash("mid");

    // An interactive stream over the raw protocol, abandoned while output
    // is flowing.
    let mut s = connect(&rec.socket);
    s.write_all(&frame(
        1,
        TAG_REQUEST,
        1,
        br#"{"type":"attach","mode":"interactive","rows":24,"cols":80}"#,
    ))
    .unwrap();
    let ok = read_frame(&mut s).unwrap();
    assert_eq!(
        (ok.tag, ok.id, ok.json()["type"].as_str()),
        (TAG_RESPONSE, 1, Some("ok"))
    );
    let redraw = read_frame(&mut s).unwrap();
    assert_eq!(redraw.tag, TAG_OUTPUT);
    assert!(String::from_utf8_lossy(&redraw.payload).contains("ready-5"));
    env.wait_clients("mid", 1);
    s.write_all(&frame(1, TAG_INPUT, 0, b"seq 1 30000\r"))
        .unwrap();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("\n100") {
        let f = read_frame(&mut s).expect("output is streaming");
        seen.extend(f.payload);
    }
    drop(s);
    env.wait_clients("mid", 0);
    env.send_line("mid", "echo after-$((8*8))");
    env.wait_screen("mid", "after-64");
    // With no interactive client left, the supervisor answers queries again.
    env.send_line("mid", &format!("python3 {}", script.display()));
    let screen = env.wait_screen("mid", "reply=");
    assert!(
        cursor_reply(&screen).is_some_and(|(_, col)| col == 9),
        "no answer after the client vanished:\n{screen}"
    );

    // The attach binary, SIGKILLed while attached.
    let mut term = env.term(&["session", "attach", "mid"]);
    term.wait_for("after-64");
    env.wait_clients("mid", 1);
    term.kill();
    env.wait_clients("mid", 0);
    env.send_line("mid", "echo survived-$((6+6))");
    env.wait_screen("mid", "survived-12");
    assert!(pid_alive(rec.supervisor_pid));
}

// 10. a child that ignores SIGTERM ---------------------------------------

#[test]
fn a_child_ignoring_sigterm_is_killed_after_the_grace_period() {
    let env = TestEnv::new();
    let rec = env.start(
        "stubborn",
        &[
            "--",
            "sh",
            "-c",
            "trap '' TERM HUP; echo trap-$((1+1)); while :; do sleep 1; done",
        ],
    );
    // Ask it to end only once the trap is set.
    env.wait_screen("stubborn", "trap-2");
    let started = Instant::now();
    let kill = env.run_ok(&["session", "kill", "stubborn", "--grace", "0.5", "--json"]);
    let took = started.elapsed();
    let v: Value = serde_json::from_str(kill.stdout.trim()).unwrap();
    assert_eq!(v["name"], "stubborn");
    assert!(
        v["signal"].is_string() && v["exit_code"].is_null(),
        "not ended by a signal: {v}"
    );
    assert!(
        took >= Duration::from_millis(500),
        "kill returned after {took:?}, before the grace period ended"
    );
    assert!(took < TIMEOUT, "kill took {took:?}");
    assert!(!pid_alive(rec.supervisor_pid));
    assert!(wait_gone(rec.pid, TIMEOUT));
    assert_gone(&env, "stubborn");
    // The loop's `sleep` was in the same process group: gone as well.
    env.assert_nothing_left(&[]);
}

#[test]
fn a_grace_period_that_is_not_a_finite_bounded_number_is_refused() {
    let env = TestEnv::new();
    let rec = env.start_bash("graceful");
    for grace in ["inf", "nan", "-1", "3601"] {
        let run = env
            .run(&["session", "kill", "graceful", &format!("--grace={grace}")])
            .fails_with_one_line();
        assert!(
            run.stderr.contains("--grace") && run.stderr.contains("0 to 3600 seconds"),
            "{grace}: {run:#?}"
        );
    }
    // None of them touched the session.
    assert!(pid_alive(rec.pid));
    env.send_line("graceful", "echo still-$((3*3))");
    env.wait_screen("graceful", "still-9");
}

// 11. a connection from another uid --------------------------------------

#[test]
fn a_connection_from_another_uid_is_refused() {
    if euid() != 0 {
        eprintln!(
            "SKIPPED a_connection_from_another_uid_is_refused: needs root to run a client as uid 65534"
        );
        return;
    }
    const OTHER: u32 = 65534;
    let env = TestEnv::new();
    let rec = env.start_bash("own");
    // Loosened permissions, as a mistake might leave them: another user can
    // now reach the socket.
    fs::set_permissions(env.base(), fs::Permissions::from_mode(0o711)).unwrap();
    fs::set_permissions(&env.runtime, fs::Permissions::from_mode(0o711)).unwrap();
    fs::set_permissions(&rec.socket, fs::Permissions::from_mode(0o666)).unwrap();
    let as_other = |runtime: &Path, args: &[&str]| {
        let mut cmd = env.command(args);
        cmd.env("AGENT_COMMS_RUNTIME_DIR", runtime)
            .uid(OTHER)
            .gid(OTHER);
        run_bounded(
            cmd,
            &format!("agent-comms {} (as uid {OTHER})", args.join(" ")),
        )
    };

    // Through the shared root, the client itself refuses a root that is not
    // the user's.
    let run = as_other(&env.runtime, &["session", "snapshot", "own"]).fails_with_one_line();
    assert!(
        run.stderr.contains(&format!("belongs to uid {}", euid())),
        "{run:#?}"
    );

    // Through a root of its own holding a record that points at our socket,
    // the connection reaches the supervisor; the client sees whose it is
    // and sends nothing.
    let other_root = env.base().join("other");
    fs::create_dir(&other_root).unwrap();
    let record = other_root.join("own.json");
    fs::copy(env.record_path("own"), &record).unwrap();
    for path in [&other_root, &record] {
        std::os::unix::fs::chown(path, Some(OTHER), Some(OTHER)).unwrap();
    }
    fs::set_permissions(&other_root, fs::Permissions::from_mode(0o700)).unwrap();
    let not_theirs = format!("served by uid {}, not by you (uid {OTHER})", euid());
    for args in [
        &["session", "snapshot", "own"][..],
        &["session", "send", "own", "echo intruder-$((5+5))\r"][..],
    ] {
        let run = as_other(&other_root, args).fails_with_one_line();
        assert!(run.stderr.contains(&not_theirs), "{run:#?}");
    }
    // A client that does not check (made by hand) meets the supervisor's
    // own check of the peer's uid.
    let input = frame(1, TAG_INPUT, 1, b"echo intruder-$((5+5))\r");
    let mut raw = Command::new("python3");
    raw.args([
        "-c",
        // The supervisor may hang up before all is sent or read: a reset
        // is its answer too.
        "import socket, sys\n\
         s = socket.socket(socket.AF_UNIX); s.settimeout(20); s.connect(sys.argv[1])\n\
         try:\n  s.sendall(sys.stdin.buffer.read())\n  while s.recv(65536): pass\n\
         except (BrokenPipeError, ConnectionResetError): pass",
    ])
    .arg(&rec.socket)
    .env("PATH", "/usr/local/bin:/usr/bin:/bin")
    .uid(OTHER)
    .gid(OTHER)
    .stdin(Stdio::piped());
    let mut child = raw.spawn().expect("start python3 as another uid");
    child.stdin.take().unwrap().write_all(&input).unwrap();
    assert!(
        child.wait().unwrap().success(),
        "the hand-made client failed"
    );
    let refused = format!("peer uid {OTHER} is not the session owner");
    assert!(
        env.log("own").contains(&refused),
        "the supervisor log does not say it refused the peer:\n{}",
        env.log("own")
    );

    // Permissions restored, the owner is still served and nothing got in.
    fs::set_permissions(&env.runtime, fs::Permissions::from_mode(0o700)).unwrap();
    env.send_line("own", "echo owner-$((1+2))");
    let screen = env.wait_screen("own", "owner-3");
    assert!(!screen.contains("intruder"), "{screen}");
    assert!(pid_alive(rec.supervisor_pid));
}

// Foreground mode --------------------------------------------------------

#[test]
fn session_run_passes_the_terminal_through_and_serves_the_socket() {
    let env = TestEnv::new();
    let mut term = env.term(&[
        "session",
        "run",
        "fg",
        "--env",
        "HISTFILE=",
        "--",
        "bash",
        "--norc",
        "--noprofile",
    ]);
    support::wait_until("the foreground session's record", || {
        env.record("fg").is_some()
    });
    let rec = env.record("fg").unwrap();
    env.remember(rec.clone());
    assert_eq!(rec.supervisor_pid, term.pid());

    // Typed in the terminal, seen by a snapshot.
    term.write(b"echo typed-$((2+2))\r");
    term.wait_for("typed-4");
    env.wait_screen("fg", "typed-4");
    // Sent from elsewhere, seen in the terminal.
    let mark = term.mark();
    env.send_line("fg", "echo sent-$((3*3))");
    term.wait_for_after(mark, "sent-9");
    assert_eq!(env.ls_entry("fg").unwrap()["kind"], "session");

    term.write(b"exit 5\r");
    let status = term.wait_exit();
    assert_eq!(status.exit_code(), 5, "{:?}", term.output());
    assert_gone(&env, "fg");
    env.assert_nothing_left(&[]);
}

// Where you are ------------------------------------------------------------

/// The attach banner is drawn after the session's redraw (which would wipe
/// it), on the last row; `--no-banner` draws none. `watch` shows its own.
#[test]
fn attach_and_watch_show_where_you_are_after_the_redraw() {
    let env = TestEnv::new();
    env.start_bash("here");
    let last_row_says = |term: &support::term::Term, text: &str| {
        let shown = term.wait_screen(TIMEOUT, |lines| {
            lines.last().is_some_and(|l| l.contains(text))
        });
        assert!(shown, "no {text:?} on the last row:\n{}", term.screen());
    };
    let mut attach = env.term(&["session", "attach", "here"]);
    attach.wait_for("ready-5");
    last_row_says(&attach, "[attached to here; detach with C-\\]");
    assert!(attach.shows("ready-5"), "{}", attach.screen());
    attach.write(&[CTRL_BACKSLASH]);
    assert!(attach.wait_exit().success(), "{:?}", attach.output());

    let mut plain = env.term(&["session", "attach", "here", "--no-banner"]);
    plain.wait_for("ready-5");
    plain.write(&[CTRL_BACKSLASH]);
    assert!(plain.wait_exit().success(), "{:?}", plain.output());
    plain.wait_for("[detached from here");
    assert!(
        !plain.output().contains("[attached to"),
        "{:?}",
        plain.output()
    );

    let mut watch = env.term(&["session", "watch", "here"]);
    watch.wait_for("ready-5");
    last_row_says(&watch, "[watching here, read-only; q or Ctrl-C to stop]");
    watch.write(b"q");
    assert!(watch.wait_exit().success(), "{:?}", watch.output());
}

/// A session run in this terminal has a person at it: `session ls`
/// counts that terminal as a client, and an attach as one more.
#[test]
fn session_ls_counts_the_terminal_a_session_runs_in() {
    let env = TestEnv::new();
    let mut fg = env.term(&[
        "session",
        "run",
        "fg",
        "--",
        "bash",
        "--norc",
        "--noprofile",
    ]);
    env.wait_clients("fg", 1);
    let mut attach = env.term(&["session", "attach", "fg"]);
    env.wait_clients("fg", 2);
    attach.write(&[CTRL_BACKSLASH]);
    assert!(attach.wait_exit().success(), "{:?}", attach.output());
    env.wait_clients("fg", 1);
    fg.write(b"exit\r");
    assert!(fg.wait_exit().success(), "{:?}", fg.output());
}
