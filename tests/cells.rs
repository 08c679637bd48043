//! End-to-end tests of `k` and `km` (issue 3), through the real binaries,
//! against real bash, python3, gdb, node, sqlite3 and dash (each where
//! installed), checked line for line against docs/cells-contract.md.
//!
//! Every test owns an [`Env`] (its own runtime directory, home and `HOME`,
//! `K_SESSION` unset), so tests run in parallel and repeatedly with fixed
//! session names; the Env's Drop ends every process the test started, by
//! pid. Waits use events where the contract has them (`k run`, `km`) and
//! bounded polling where it offers only polling (`k poll`, `k status`).

mod support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use support::cells::bg::Bg;
use support::cells::lines::*;
use support::cells::*;
use support::procs::{open_fds, vm_kib, wait_gone};

const NO_SESSION_FOUND: &str = "ERR no session found; use k ls or k new <session> bash\n";

fn no_session(s: &str) -> String {
    format!("no session '{s}'; use k new {s} bash")
}

fn status_idle(s: &str) -> String {
    format!("OK {s} pipe=ok state=idle next='k run {s} <code>'\n")
}

fn status_running(s: &str, id: &str) -> String {
    format!("OK {s} pipe=ok state=running cell={id} next='k poll {s} {id} or k int {s}'\n")
}

fn status_done(s: &str, id: &str) -> String {
    format!("OK {s} pipe=ok state=done cell={id} next='k poll {s} {id}'\n")
}

fn status_timeout(s: &str, id: &str) -> String {
    format!("OK {s} pipe=ok state=timeout cell={id} next='k int {s} or k kill {s}'\n")
}

/// `k fire S CODE`: asserts the exact fired line and returns the cell id.
#[track_caller]
fn fire(env: &Env, session: &str, code: &str) -> String {
    let out = env.k(&["fire", session, code]);
    let id = out.json()["cell_id"].as_str().expect("cell_id").to_owned();
    out.is(0, &fired_line(&id));
    assert!(is_cell_id(&id), "{id}");
    id
}

fn is_cell_id(id: &str) -> bool {
    id.len() == 12 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A cell that runs until the test creates `file` in the work directory:
/// "running" for exactly as long as the test wants, without sleeps.
fn blocked_until(file: &str, then: &str) -> String {
    format!("while [ ! -e {file} ]; do sleep 0.02; done; {then}")
}

fn release(env: &Env, file: &str) {
    fs::write(env.work.join(file), "").unwrap();
}

/// Waits (with `km S ID -1`, pushed) until the cell has completed and
/// returns km's line.
#[track_caller]
fn await_completion(env: &Env, session: &str, id: &str) -> String {
    let out = env.km(&[session, id, "-1"]);
    assert_eq!(out.code(), 0, "{out:#?}");
    out.stdout.trim_end().to_owned()
}

/// Makes sure freshly started `km`/`watch` streams are subscribed: notes
/// `[sync N]` until each stream has shown one (a subscription itself has no
/// visible acknowledgement), then reads each up to the last note sent, so
/// that no sync note shows up later in the middle of what the test reads.
fn sync_streams(env: &Env, session: &str, streams: &[&Bg]) {
    let is_sync = |bg: &Bg, line: &str| {
        assert!(line.contains("[sync "), "`{}` printed {line:?}", bg.what);
    };
    // Per stream: it has shown a note; the last note it showed.
    let mut shown: Vec<Option<String>> = vec![None; streams.len()];
    let mut last = String::new();
    for n in 0..200 {
        if shown.iter().all(Option::is_some) {
            break;
        }
        last = format!("[sync {n}]");
        env.k(&["notify", session, &last])
            .is(0, &format!("OK notified: {last}\n"));
        for (bg, shown) in streams.iter().zip(shown.iter_mut()) {
            if shown.is_none() {
                if let Some(line) = bg.try_line(Duration::from_millis(300)) {
                    is_sync(bg, &line);
                    *shown = Some(line);
                }
            }
        }
    }
    for (bg, shown) in streams.iter().zip(&shown) {
        let mut line = shown
            .clone()
            .unwrap_or_else(|| panic!("`{}` never showed a note", bg.what));
        while !line.contains(&last) {
            line = bg.line();
            is_sync(bg, &line);
        }
    }
}

/// This process's name as `k notify` reports its caller (`comm`).
fn our_comm() -> String {
    fs::read_to_string(format!("/proc/{}/comm", std::process::id()))
        .unwrap()
        .trim()
        .to_owned()
}

/// A bash no REPL profile knows (a symlink with another name): repeat
/// mode, as agent-tty framed every REPL.
fn unknown_repl(env: &Env) -> &'static str {
    let bash = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("bash"))
        .find(|p| p.is_file())
        .expect("bash on PATH");
    std::os::unix::fs::symlink(bash, env.work.join("rbash")).unwrap();
    "./rbash"
}

/// The REPLs these tests drive are what scripts/test installs and the README
/// lists; one missing fails the test saying so, rather than passing it
/// untested.
macro_rules! require {
    ($program:expr) => {
        assert!(
            installed($program),
            "{} is not installed: this test drives it (scripts/test installs it; see the README)",
            $program
        );
    };
}

// ---------------------------------------------------------------------
// new, ls, version

#[test]
fn version_flags_print_name_and_version() {
    let env = Env::new();
    let want = format!("agent-comms {}\n", env!("CARGO_PKG_VERSION"));
    for flag in ["--version", "-V", "version"] {
        env.k(&[flag]).is(0, &want);
        env.km(&[flag]).is(0, &want);
    }
}

#[test]
fn new_is_idempotent_and_ls_lists_only_k_sessions() {
    let env = Env::new();
    env.k(&["ls"]).is(0, "no sessions\n");

    // The default command is bash.
    env.k(&["new", "b"]).is(0, "OK b\n");
    env.k(&["new", "b"]).is(0, "OK b (alive)\n");
    env.k(&["new", "b", "python3"]).is(0, "OK b (alive)\n");
    env.expect_done("b", "echo $0", "bash", Some(0));

    // Command words are joined into one shell command line, and the
    // adapter sees the REPL behind `env VAR=…` (the exit code shows shell
    // integration).
    env.new_session(
        "e",
        &["env", "GREETING=hi", "bash", "--norc", "--noprofile"],
    );
    env.expect_done("e", "echo $GREETING", "hi", Some(0));
    env.new_session("e2", &["env GREETING=hey bash --norc --noprofile"]);
    env.expect_done("e2", "echo $GREETING", "hey", Some(0));

    // An empty prompt is refused; a missing program too.
    env.k(&["new", "p", "bash", "--prompt= "])
        .is(1, "ERR empty prompt\n");
    let out = env.k(&["new", "x", "no-such-repl-k-test"]);
    assert_eq!(out.code(), 1, "{out:#?}");
    assert!(out.stdout.starts_with("ERR create failed"), "{out:#?}");

    // A session that `k` did not make is not listed, and `k new` will not
    // adopt it.
    env.agent_comms(&[
        "session",
        "new",
        "other",
        "--",
        "bash",
        "--norc",
        "--noprofile",
    ]);
    assert!(env.record("other").is_some());
    env.k(&["ls"]).is(0, "b\ne\ne2\n");
    let out = env.k(&["new", "other"]);
    assert_eq!(out.code(), 1, "{out:#?}");
    assert!(
        out.stdout.starts_with("ERR ") && out.stdout.contains("not managed by k"),
        "{out:#?}"
    );

    for s in ["b", "e", "e2"] {
        env.k(&["kill", s]).is(0, &format!("OK killed {s}\n"));
    }
    env.k(&["ls"]).is(0, "no sessions\n");
}

// ---------------------------------------------------------------------
// run, JSON

#[test]
fn run_prints_the_output_or_the_json_object() {
    let env = Env::new();
    env.new_session("b", BASH);

    env.k(&["run", "b", "echo hi"]).is(0, "hi\n");
    env.k(&["await", "b", "echo hi"]).is(0, "hi\n");
    env.expect_done("b", "echo hi", "hi", Some(0));
    let out = env.k(&["await", "-j", "-t", "5", "b", "echo there"]);
    let id = out.json()["cell_id"].as_str().unwrap().to_owned();
    out.is(0, &done_line(&id, "there", Some(0)));

    // Exit codes of failing commands; the run itself is done (exit 0).
    env.expect_done("b", "false", "", Some(1));
    env.expect_done("b", "(exit 3)", "", Some(3));
    env.expect_done("b", "echo oops >&2; bash -c 'exit 4'", "oops", Some(4));
    env.k(&["run", "b", "false"]).is(0, "\n");

    // JSON as json.dumps writes it: quotes, backslashes and tabs escaped,
    // non-ASCII kept; carriage returns and ANSI sequences removed.
    env.expect_done(
        "b",
        r#"printf '%s\n' 'ü "q" \ x'; printf 'tab\there\n'; printf '\033[31mred\033[0m\r\n'"#,
        "ü \"q\" \\ x\ntab\there\nred",
        Some(0),
    );
    let (_, line) = env.run_json("b", "echo 'ü'");
    assert!(line.contains("\"output\": \"ü\""), "{line}");

    // State persists between cells.
    env.k(&["run", "b", "X=42"]).is(0, "\n");
    env.k(&["run", "b", "echo $X"]).is(0, "42\n");

    // Errors: JSON with -j, the bare message in text mode, exit 1.
    env.k(&["run", "-j", "nosuch", "echo"])
        .is(1, &error_line(&no_session("nosuch")));
    env.k(&["run", "nosuch", "echo"])
        .is(1, &format!("{}\n", no_session("nosuch")));
}

#[test]
fn bash_integration_keeps_output_exactly() {
    let env = Env::new();
    env.new_session("b", BASH);

    // Blank lines, indentation and repeated lines are kept as printed;
    // five (or seven) identical lines never end a frame early.
    env.expect_done(
        "b",
        "printf 'a\\n\\n  indented\\n\\n'; for i in 1 2 3 4 5 6 7; do echo same; done; echo end",
        "a\n\n  indented\n\nsame\nsame\nsame\nsame\nsame\nsame\nsame\nend",
        Some(0),
    );
    env.expect_done(
        "b",
        "for i in 1 2 3 4 5; do echo x; done; sleep 0.3; echo later",
        "x\nx\nx\nx\nx\nlater",
        Some(0),
    );
    // Multi-line code with a blank line inside a function; no echo of the
    // code (nor of the `. file` that runs it) in the output.
    env.expect_done(
        "b",
        "f() {\n  echo \"in f\"\n\n  echo \"  after blank\"\n}\nf\nf | wc -l",
        "in f\n  after blank\n2",
        Some(0),
    );
    // A cell's status is its last command's.
    env.expect_done("b", "echo a\nfalse", "a", Some(1));
    env.expect_done("b", "echo $?", "1", Some(0));
    // Lines that run no command still make a cell, and a syntax error is
    // output, not lost.
    env.expect_done("b", "# just a comment", "", Some(0));
    env.expect_done("b", "   ", "", Some(0));
    let (v, _) = env.run_json("b", "fi");
    assert_eq!(v["exit_code"], 2, "{v}");
    let out = v["output"].as_str().unwrap();
    assert!(
        out.contains("syntax error near unexpected token `fi'"),
        "{v}"
    );
}

#[test]
fn multi_line_bash_code_runs_from_a_private_file_that_is_removed() {
    let env = Env::new();
    env.new_session("b", BASH);
    let code = format!("echo one\n{}", blocked_until("go", "echo two"));
    let id = fire(&env, "b", &code);

    let dir = env.cells_dir("b");
    let file = dir.join(format!("{id}.sh"));
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&file), 0o600, "{}", file.display());
    assert_eq!(fs::read_to_string(&file).unwrap(), format!("{code}\n"));

    release(&env, "go");
    await_completion(&env, "b", &id);
    env.k(&["poll", "b", &id])
        .is(0, &done_line(&id, "one\ntwo", Some(0)));
    assert!(!file.exists(), "{} is still there", file.display());
    let left: Vec<_> = fs::read_dir(&dir).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn read_p_in_a_cell_gets_no_stray_enters() {
    let env = Env::new();
    env.new_session("b", BASH);
    let id = fire(&env, "b", "read -p 'name? ' x; echo \"hello $x\"");
    // Wait until the question is on the screen: any Enter sent with the
    // code would have answered it by now.
    poll_until("the read prompt on the screen", || {
        let snap = env.agent_comms(&["session", "snapshot", "b"]);
        // (The snapshot trims the line's trailing blank.)
        snap.stdout
            .lines()
            .any(|l| l.trim_end() == "name?")
            .then_some(())
    });
    env.k(&["poll", "b"]).is(0, &running_line(&id));
    env.k(&["status", "b"]).is(0, &status_running("b", &id));

    env.agent_comms(&["session", "send", "b", "bob"]);
    env.agent_comms(&["session", "send", "b", "--keys", "Enter"]);
    await_completion(&env, "b", &id);
    env.k(&["poll", "b", &id])
        .is(0, &done_line(&id, "name? bob\nhello bob", Some(0)));
}

// ---------------------------------------------------------------------
// fire, poll, status, int, timeout

#[test]
fn fire_poll_and_status_follow_a_cell() {
    let env = Env::new();
    env.new_session("b", BASH);
    env.k(&["status", "b"]).is(0, &status_idle("b"));
    env.k(&["poll", "b"])
        .is(1, &error_line("no active cell on 'b'"));

    let id = fire(&env, "b", &blocked_until("go", "echo finished"));
    env.k(&["poll", "b"]).is(0, &running_line(&id));
    env.k(&["poll", "b", &id]).is(0, &running_line(&id));
    env.k(&["status", "b"]).is(0, &status_running("b", &id));

    // One cell at a time.
    let busy = error_line(&format!("active cell '{id}'"));
    env.k(&["fire", "b", "echo no"]).is(1, &busy);
    env.k(&["run", "-j", "b", "echo no"]).is(1, &busy);
    env.k(&["run", "b", "echo no"])
        .is(1, &format!("active cell '{id}'\n"));

    release(&env, "go");
    let ev = await_completion(&env, "b", &id);
    assert_eq!(ev, km_cell(&id, "b", "done", &ts_of(&ev)));
    env.k(&["status", "b"]).is(0, &status_done("b", &id));

    // A done result is handed out once, and the lock goes with it.
    env.k(&["poll", "b"])
        .is(0, &done_line(&id, "finished", Some(0)));
    env.k(&["poll", "b"])
        .is(1, &error_line("no active cell on 'b'"));
    env.k(&["poll", "b", &id])
        .is(1, &cell_error_line(&id, "unknown cell"));
    env.k(&["status", "b"]).is(0, &status_idle("b"));

    for bad in ["xyz", "0123456789AB", "0123456789abc", "0123456789a"] {
        env.k(&["poll", "b", bad])
            .is(1, &error_line("invalid cell_id"));
    }
    env.k(&["poll", "b", "0123456789ab"])
        .is(1, &cell_error_line("0123456789ab", "unknown cell"));
    env.k(&["poll", "nosuch"])
        .is(1, &error_line(&no_session("nosuch")));

    // A finished but never-polled cell does not block the next one, and
    // can still be polled afterwards.
    let id2 = fire(&env, "b", "echo unpolled");
    await_completion(&env, "b", &id2);
    env.k(&["run", "b", "echo next"]).is(0, "next\n");
    env.k(&["poll", "b", &id2])
        .is(0, &done_line(&id2, "unpolled", Some(0)));
}

#[test]
fn a_timed_out_cell_keeps_the_lock_until_int() {
    let env = Env::new();
    env.new_session("b", BASH);

    let out = env.k(&["run", "-j", "-t", "1", "b", "sleep 60"]);
    let id = out.json()["cell_id"].as_str().unwrap().to_owned();
    out.is(0, &timeout_line(&id, ""));
    env.k(&["status", "b"]).is(0, &status_timeout("b", &id));
    env.k(&["poll", "b"]).is(0, &timeout_line(&id, ""));
    env.k(&["poll", "b"])
        .is(1, &timeout_line(&id, "use k int or k kill"));
    env.k(&["poll", "b", &id])
        .is(1, &timeout_line(&id, "use k int or k kill"));
    env.k(&["fire", "b", "echo no"])
        .is(1, &error_line(&format!("active cell '{id}'")));

    env.k(&["int", "b"]).is(0, "OK\n");
    env.k(&["status", "b"]).is(0, &status_idle("b"));
    env.k(&["poll", "b", &id])
        .is(0, &cell_error_line(&id, "interrupted"));
    env.k(&["poll", "b"])
        .is(1, &error_line("no active cell on 'b'"));
    env.k(&["run", "b", "echo back"]).is(0, "back\n");

    // Text mode prints the empty output; fire's timeout shows in poll.
    env.k(&["run", "-t", "1", "b", "sleep 60"]).is(0, "\n");
    env.k(&["int", "b"]).is(0, "OK\n");
    let out = env.k(&["fire", "-t", "1", "b", "sleep 60"]);
    let id = out.json()["cell_id"].as_str().unwrap().to_owned();
    out.is(0, &fired_line(&id));
    let first = poll_until("the fired cell to time out", || {
        let out = env.k(&["poll", "b", &id]);
        (out.stdout != running_line(&id)).then_some(out)
    });
    first.is(0, &timeout_line(&id, ""));
    env.k(&["poll", "b", &id])
        .is(1, &timeout_line(&id, "use k int or k kill"));
    env.k(&["int", "b"]).is(0, "OK\n");
    env.k(&["run", "b", "echo free"]).is(0, "free\n");
}

#[test]
fn int_interrupts_the_running_cell() {
    let env = Env::new();
    env.new_session("b", BASH);
    let km = env.spawn(&KM, &["b"]);
    sync_streams(&env, "b", &[&km]);

    // With no active cell: OK, and the session stays usable.
    env.k(&["int", "b"]).is(0, "OK\n");
    env.k(&["status", "b"]).is(0, &status_idle("b"));
    env.k(&["run", "b", "echo fine"]).is(0, "fine\n");
    km.line();
    km.line();

    let id = fire(&env, "b", "sleep 60");
    let ev = km.line();
    assert_eq!(ev, km_cell(&id, "b", "fired", &ts_of(&ev)));
    env.k(&["int", "b"]).is(0, "OK\n");
    let ev = km.line();
    assert_eq!(ev, km_cell(&id, "b", "interrupted", &ts_of(&ev)));
    env.k(&["poll", "b", &id])
        .is(0, &cell_error_line(&id, "interrupted"));
    env.k(&["status", "b"]).is(0, &status_idle("b"));
    env.k(&["run", "b", "echo still here"])
        .is(0, "still here\n");
}

/// Finding 9 of issue 32: a Ctrl-C that meets bash between forking the
/// cell's command and handing it the terminal made bash read EIO and exit
/// (status 130). `k` starts too slowly to hit that window often, so the
/// fire and the interrupt go over one connection, the interrupt 0–400 µs
/// after the fire: the span where a bare PTY lost bash in 15 of 100 tries
/// (core/src/cells/hold.rs).
#[test]
fn an_interrupt_while_bash_starts_the_command_never_ends_it() {
    use agent_comms_core::client::Client;
    use agent_comms_core::socket::protocol::{Request, Response};
    let env = Env::new();
    env.new_session("b", BASH);
    let mut client = Client::connect(&env.socket_path("b")).unwrap();
    for i in 0..24u64 {
        let fired = client.request(Request::CellRun {
            code: "sleep 60".into(),
            timeout_ms: 60_000,
            wait: false,
        });
        assert!(matches!(fired, Ok(Response::Cell(_))), "{fired:?}");
        let delay = Duration::from_micros((i % 8) * 50);
        let start = std::time::Instant::now();
        while start.elapsed() < delay {
            std::hint::spin_loop();
        }
        let interrupted = client.request(Request::CellInterrupt);
        assert!(matches!(interrupted, Ok(Response::Ok)), "{interrupted:?}");
        env.expect_done(
            "b",
            &format!("echo alive-{i}"),
            &format!("alive-{i}"),
            Some(0),
        );
    }
}

#[test]
fn int_right_after_fire_leaves_the_session_usable() {
    // However the Ctrl-C meets bash (before it read the line, while it
    // starts the command, while the command runs; once or twice), it draws
    // no prompt, one or two: the next cell must neither wait forever nor
    // be ended by one of them.
    let env = Env::new();
    env.new_session("b", BASH);
    for i in 0..25 {
        let id = fire(&env, "b", "sleep 60");
        env.k(&["int", "b"]).is(0, "OK\n");
        if i % 3 == 0 {
            env.k(&["int", "b"]).is(0, "OK\n");
        }
        env.k(&["poll", "b", &id])
            .is(0, &cell_error_line(&id, "interrupted"));
        env.expect_done(
            "b",
            &format!("echo cell-{i}"),
            &format!("cell-{i}"),
            Some(0),
        );
    }
}

#[test]
fn ctrl_c_of_a_synchronous_run_interrupts_the_cell() {
    let env = Env::new();
    env.new_session("b", BASH);
    for json in [true, false] {
        let args: &[&str] = if json {
            &["run", "-j", "b", "sleep 60"]
        } else {
            &["run", "b", "sleep 60"]
        };
        let mut run = env.spawn(&K, args);
        // `k run` installs its SIGINT handler before it sends the code, so
        // once the cell runs, Ctrl-C reaches it.
        let id = poll_until("the cell to run", || {
            let out = env.k(&["status", "b"]);
            let id = out
                .stdout
                .split("cell=")
                .nth(1)?
                .split(' ')
                .next()?
                .to_owned();
            (out.stdout == status_running("b", &id)).then_some(id)
        });
        run.signal(libc::SIGINT);
        assert_eq!(run.wait().code(), Some(1));
        let want = if json {
            cell_error_line(&id, "interrupted")
        } else {
            "interrupted\n".into()
        };
        assert_eq!(run.rest().join("\n") + "\n", want);
        // The sleep was interrupted: the session answers at once.
        env.k(&["run", "b", "echo after"]).is(0, "after\n");
        env.k(&["status", "b"]).is(0, &status_idle("b"));
    }
}

// ---------------------------------------------------------------------
// kill, the REPL exiting

#[test]
fn kill_during_a_running_cell_ends_everything() {
    let env = Env::new();
    env.new_session("b", BASH);
    let sup = env.supervisor_pid("b");
    let repl = env.repl_pid("b");
    let mut km = env.spawn(&KM, &["b"]);
    sync_streams(&env, "b", &[&km]);

    let pidfile = env.work.join("sleeper.pid");
    fire(
        &env,
        "b",
        &format!(
            "sh -c 'echo $$ > {}.tmp; mv {0}.tmp {0}; exec sleep 60'",
            pidfile.display()
        ),
    );
    let sleeper: u32 = poll_until("the cell's sleep to start", || {
        fs::read_to_string(&pidfile).ok()?.trim().parse().ok()
    });
    assert!(env.is_ours(sleeper));

    env.k(&["kill", "b"]).is(0, "OK killed b\n");
    // Gone when k says so: a `k new b` right after must not find it.
    assert!(
        wait_gone(sup, Duration::ZERO),
        "k kill returned while the supervisor ({sup}) still ran"
    );
    for (what, pid) in [("REPL", repl), ("cell's sleep", sleeper)] {
        assert!(
            wait_gone(pid, TIMEOUT),
            "the {what} ({pid}) survived k kill"
        );
    }
    // km saw the cell start and the session close, then exited 1.
    km.line();
    let ev = km.line();
    assert_eq!(ev, km_closed("b", &ts_of(&ev)));
    assert_eq!(km.wait().code(), Some(1));

    env.k(&["ls"]).is(0, "no sessions\n");
    env.k(&["status", "b"])
        .is(1, &format!("ERR {}\n", no_session("b")));
    env.k(&["poll", "b"]).is(1, &error_line(&no_session("b")));
    env.k(&["kill", "b"]).is(0, "OK killed b\n");
    for leftover in ["b.json", "b.sock", "b.cells"] {
        assert!(!env.runtime.join(leftover).exists(), "{leftover} is left");
    }
}

#[test]
fn the_repl_exiting_during_a_cell_is_an_error_and_km_sees_closed() {
    let env = Env::new();
    env.new_session("b", BASH);
    let mut km = env.spawn(&KM, &["b"]);
    sync_streams(&env, "b", &[&km]);

    let out = env.k(&["run", "-j", "b", "exit 7"]);
    assert_eq!(out.code(), 1, "{out:#?}");
    let v = out.json();
    assert_eq!(v["status"], "error", "{out:#?}");
    // The reply names the exit, with the cell's id. (A race in the
    // supervisor's connection code sometimes answers a bare
    // `session exited` instead: see the ignored test below.)
    if v.get("cell_id").is_some() {
        let id = v["cell_id"].as_str().unwrap();
        out.is(1, &cell_error_line(id, "session exited (exit status 7)"));
    } else {
        out.is(1, &error_line("session exited"));
    }

    let ev = km.line();
    assert!(ev.contains("\"status\": \"fired\""), "{ev}");
    let ev = km.line();
    assert_eq!(ev, km_closed("b", &ts_of(&ev)));
    assert_eq!(km.wait().code(), Some(1));
    env.k(&["ls"]).is(0, "no sessions\n");
}

/// The exact reply, every time: the cell's own reply (with its id and the
/// exit) and the session's exit are ready at once, and the cell's must win.
#[test]
fn the_repl_exiting_is_always_reported_with_the_cell_and_the_exit() {
    let env = Env::new();
    for i in 0..12 {
        let s = format!("b{i}");
        env.new_session(&s, BASH);
        let out = env.k(&["run", "-j", &s, "exit 7"]);
        let id = out.json()["cell_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no cell_id: {out:#?}"))
            .to_owned();
        out.is(1, &cell_error_line(&id, "session exited (exit status 7)"));
    }
}

// ---------------------------------------------------------------------
// bounded output, parallel sessions, many cells

/// `k run -j S CODE` for a cell printing about `total` bytes ending in
/// `last`: it completes, the reply keeps the last 4 MiB under a line saying
/// how much was left out, and the session goes on working.
fn run_huge_cell(env: &Env, s: &str, code: &str, total: usize, last: &str) -> Value {
    let out = env.k_long(
        &["run", "-j", "-t", "600", s, code],
        Duration::from_secs(600),
    );
    assert_eq!(
        out.code(),
        0,
        "{}",
        &out.stdout[..out.stdout.len().min(300)]
    );
    let v = out.json();
    assert_eq!(v["status"], "done");
    let output = v["output"].as_str().unwrap();
    let (first, rest) = output.split_once('\n').unwrap();
    let omitted: usize = first
        .strip_prefix("[agent-comms: ")
        .and_then(|s| s.strip_suffix(" earlier bytes of output omitted]"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no omitted line: {first:?}"));
    assert!(omitted > total - (5 << 20), "{omitted}");
    assert!(rest.len() <= 4 << 20, "{} bytes kept", rest.len());
    assert!(rest.ends_with(last), "{:?}", &rest[rest.len() - 100..]);
    env.k(&["run", s, "echo ok"]).is(0, "ok\n");
    v
}

const FLOOD_LINE: &str = "0123456789012345678901234567890123456789";

fn flood(total: usize) -> String {
    format!("yes {FLOOD_LINE} | head -c {total}; echo; echo end")
}

#[test]
fn tens_of_megabytes_in_one_cell_are_bounded() {
    let env = Env::new();
    env.new_session("b", BASH);
    // 20 MB of identical lines (which also must not end the frame).
    let v = run_huge_cell(&env, "b", &flood(20_000_000), 20_000_000, "\nend");
    // Kept from a line boundary, and the exit status is still known.
    assert_eq!(v["exit_code"], 0);
    let output = v["output"].as_str().unwrap();
    assert!(
        output.split('\n').nth(1) == Some(FLOOD_LINE),
        "{}",
        &output[..200]
    );
}

/// A single line longer than the limit: the reply keeps its tail, and the
/// note counts exactly what is not there (it once kept only `END`, with
/// 4 MB more left out than the note said).
#[test]
fn a_line_over_the_limit_keeps_the_tail_the_note_counts() {
    let env = Env::new();
    env.new_session("kb", BASH);
    let long = 5_000_000;
    let code = format!("head -c {long} /dev/zero | tr '\\0' x; echo; echo END");
    let out = env.k_long(&["run", "-j", "kb", &code], Duration::from_secs(600));
    let v = out.json();
    assert_eq!((out.code(), &v["status"]), (0, &Value::from("done")));
    let output = v["output"].as_str().unwrap();
    let (note, kept) = output.split_once('\n').unwrap();
    let omitted: usize = note
        .strip_prefix("[agent-comms: ")
        .and_then(|s| s.split_once(' '))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap();
    // Everything printed: the x's, a line break, END and its line break
    // (the reply leaves the final line break out).
    let total = long + "\nEND\n".len();
    assert_eq!(omitted + kept.len() + 1, total, "{note}");
    assert_eq!(kept.len(), (4 << 20) - 1, "the kept tail is the last 4 MiB");
    let xs = kept.strip_suffix("\nEND").unwrap();
    assert!(xs.bytes().all(|b| b == b'x'), "{:?}", &xs[..80]);
}

#[test]
fn tens_of_megabytes_in_repeat_mode_are_bounded() {
    let env = Env::new();
    let repl = unknown_repl(&env);
    env.new_session("r", &["env", "PS1=R:", repl, "--norc", "--noprofile"]);
    // 20 MB of distinct lines (identical ones would end a repeat frame).
    let tail = "-abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij";
    let code = format!("seq -f '%.0f{tail}' 1 300000");
    let v = run_huge_cell(&env, "r", &code, 300_000 * 67, &format!("\n300000{tail}"));
    let output = v["output"].as_str().unwrap();
    let second = output.split('\n').nth(1).unwrap();
    assert!(second.ends_with(tail) && second.len() == 67, "{second:?}");
}

/// What "bounded memory" means to a user: the supervisor's peak does not
/// grow with a cell's output (the PTY queue, the cell's output and the view
/// are all bounded).
#[test]
fn supervisor_memory_does_not_grow_with_cell_output() {
    let env = Env::new();
    env.new_session("b", BASH);
    let sup = env.supervisor_pid("b");
    run_huge_cell(&env, "b", &flood(20_000_000), 20_000_000, "\nend");
    let after_20 = vm_kib(sup, "VmHWM");
    run_huge_cell(&env, "b", &flood(40_000_000), 40_000_000, "\nend");
    let grown = vm_kib(sup, "VmHWM").saturating_sub(after_20);
    assert!(
        grown < 8 << 10,
        "the peak grew by {grown} KiB from a 20 MB cell to a 40 MB one"
    );
}

#[test]
fn two_sessions_run_cells_at_the_same_time() {
    let env = Env::new();
    env.new_session("a", BASH);
    env.new_session("b", BASH);
    // Each cell waits for the other to have started: both finish only if
    // both run at once.
    let run = |me: &'static str, other: &'static str| {
        let code = format!(
            "touch {me}-started; {}",
            blocked_until(&format!("{other}-started"), &format!("echo {me}-done"))
        );
        let env = &env;
        move || env.k(&["run", "-j", me, &code])
    };
    std::thread::scope(|s| {
        let a = s.spawn(run("a", "b"));
        let b = s.spawn(run("b", "a"));
        for (name, out) in [("a", a.join().unwrap()), ("b", b.join().unwrap())] {
            let id = out.json()["cell_id"].as_str().unwrap().to_owned();
            out.is(0, &done_line(&id, &format!("{name}-done"), Some(0)));
        }
    });
}

#[test]
fn two_hundred_cells_do_not_grow_the_supervisor() {
    let env = Env::new();
    env.new_session("b", BASH);
    let sup = env.supervisor_pid("b");
    // Warm up: fill the bounded stores (scrollback, view, event history).
    env.k(&["run", "b", "seq 6000"]);
    for i in 0..20 {
        env.k(&["run", "b", &format!("echo warm-{i}")]);
    }
    let rss = vm_kib(sup, "VmRSS");
    let fds = open_fds(sup);

    for i in 0..200 {
        env.expect_done(
            "b",
            &format!("echo cell-{i}"),
            &format!("cell-{i}"),
            Some(0),
        );
    }

    // No more open files than before (connections close asynchronously
    // after each `k` exits, so this waits for that, bounded).
    poll_until(
        &format!("the supervisor's open files to drop to {fds}"),
        || (open_fds(sup) <= fds).then_some(()),
    );
    let grown = vm_kib(sup, "VmRSS").saturating_sub(rss);
    assert!(grown <= 1024, "VmRSS grew by {grown} KiB over 200 cells");
}

// ---------------------------------------------------------------------
// resolution, names, bad values

#[test]
fn session_resolution_explicit_then_k_session_then_the_only_one() {
    let env = Env::new();
    for args in [
        &["run", "echo x"][..],
        &["fire", "echo x"],
        &["poll"],
        &["int"],
        &["status"],
        &["history"],
        &["watch"],
        &["notify", "hello"],
    ] {
        env.k(args).is(1, NO_SESSION_FOUND);
    }

    env.new_session("a", BASH);
    env.k(&["run", "a", "WHO=a"]).is(0, "\n");
    // The only live session.
    env.k(&["run", "echo only-$WHO"]).is(0, "only-a\n");
    env.k(&["status"]).is(0, &status_idle("a"));

    env.new_session("b", BASH);
    env.k(&["run", "b", "WHO=b"]).is(0, "\n");
    env.k(&["run", "echo $WHO"]).is(1, NO_SESSION_FOUND);
    env.k(&["status"]).is(1, NO_SESSION_FOUND);

    // K_SESSION, and an explicit name before it.
    env.k_env(&["run", "echo $WHO"], &[("K_SESSION", "b")])
        .is(0, "b\n");
    env.k_env(&["run", "a", "echo $WHO"], &[("K_SESSION", "b")])
        .is(0, "a\n");
    env.k_env(&["status"], &[("K_SESSION", "b")])
        .is(0, &status_idle("b"));
    env.k_env(&["run", "echo"], &[("K_SESSION", "gone")])
        .is(1, &format!("{}\n", no_session("gone")));
    env.k_env(&["run", "-j", "echo"], &[("K_SESSION", "gone")])
        .is(1, &error_line(&no_session("gone")));
    env.k_env(&["status"], &[("K_SESSION", "gone")])
        .is(1, &format!("ERR {}\n", no_session("gone")));
    env.k_env(&["status"], &[("K_SESSION", "bad name")])
        .is_err(1, "ERR invalid session name: 'bad name'\n");

    // Only live sessions count.
    env.k(&["kill", "b"]).is(0, "OK killed b\n");
    env.k(&["run", "echo $WHO"]).is(0, "a\n");
}

#[test]
fn invalid_session_names_are_refused_on_stderr() {
    let env = Env::new();
    for (name, shown) in [
        ("a b", "'a b'"),
        ("../x", "'../x'"),
        (".", "'.'"),
        ("a..b", "'a..b'"),
        ("x/y", "'x/y'"),
        ("it's", "\"it's\""),
        ("tab\there", "'tab\\there'"),
        // (An empty name given where a name is optional means "none", as
        // in agent-tty; where one is required it is invalid.)
        ("", "''"),
    ] {
        let err = format!("ERR invalid session name: {shown}\n");
        let optional: &[&[&str]] = &[
            &["status", name],
            &["poll", name],
            &["int", name],
            &["history", name],
            &["watch", name],
        ];
        for args in optional.iter().filter(|_| !name.is_empty()) {
            env.k(args).is_err(1, &err);
        }
        for args in [
            &["new", name][..],
            &["kill", name],
            &["attach", name],
            &["run", name, "echo"],
            &["fire", name, "echo"],
            &["run", "-j", name, "echo"],
        ] {
            env.k(args).is_err(1, &err);
        }
        env.km(&[name])
            .is_err(1, &format!("km: invalid session name: {shown}\n"));
    }
    // km's other argument errors go to stderr too.
    let out = env.km(&["b", "not-a-cell"]);
    assert_eq!((out.code(), out.stdout.as_str()), (1, ""), "{out:#?}");
    assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
    assert!(!env.runtime.join("a b.json").exists());
    env.k(&["ls"]).is(0, "no sessions\n");
}

#[test]
fn bad_t_and_n_values_print_the_error_and_the_usage() {
    let env = Env::new();
    env.new_session("b", BASH);
    let run_usage = "usage: k run [-j] [-t N] [session] <code>\n";
    let fire_usage = "usage: k fire [-t N] [session] <code>\n";
    let history_usage = "usage: k history [-n N] [session]\n";
    for v in ["0", "-5", "abc", "1.5", ""] {
        env.k(&["run", "-t", v, "b", "echo"]).is(
            1,
            &format!("ERR -t must be a positive integer\n{run_usage}"),
        );
        env.k(&["await", "-j", "-t", v, "b", "echo"]).is(
            1,
            &format!("ERR -t must be a positive integer\n{run_usage}"),
        );
        env.k(&["fire", "-t", v, "b", "echo"]).is(
            1,
            &format!("ERR -t must be a positive integer\n{fire_usage}"),
        );
        env.k(&["history", "-n", v, "b"]).is(
            1,
            &format!("ERR -n must be a positive integer\n{history_usage}"),
        );
    }
    // A flag without its value, or no code, prints the usage line.
    env.k(&["run", "-t"]).is(1, run_usage);
    env.k(&["run"]).is(1, run_usage);
    env.k(&["run", "-j"]).is(1, run_usage);
    env.k(&["fire"]).is(1, fire_usage);
    env.k(&["fire", "-t", "5"]).is(1, fire_usage);
    env.k(&["history", "-n"]).is(1, history_usage);
    // Nothing ran.
    env.k(&["status", "b"]).is(0, &status_idle("b"));
    env.k(&["history", "b"]).is(0, "");
}

// ---------------------------------------------------------------------
// notify, watch, history, km

#[test]
fn notify_shows_in_km_watch_and_history_but_not_in_the_repl() {
    let env = Env::new();
    env.new_session("b", BASH);
    let km = env.spawn(&KM, &["b"]);
    let watch = env.spawn(&K, &["watch", "b"]);
    assert_eq!(watch.line(), "\x1b[2mwatching b (ctrl-c to stop)\x1b[0m");
    assert_eq!(watch.line(), "");
    sync_streams(&env, "b", &[&km, &watch]);

    let mut note = env.spawn(&K, &["notify", "b", "hello world"]);
    assert_eq!(note.wait().code(), Some(0));
    assert_eq!(note.rest(), ["OK notified: hello world"]);
    let from = format!("{}@k:{}", our_comm(), note.pid());

    let ev = km.line();
    assert_eq!(ev, km_notify("b", &from, "hello world", &ts_of(&ev)));
    assert_eq!(watch.line(), format!("📢 hello world ({from})"));
    let history = env.k(&["history", "b"]);
    assert_eq!(
        history.stdout.lines().last(),
        Some(format!("📢 hello world ({from})").as_str())
    );

    // Words after a live session's name are the message; otherwise the
    // whole rest is, for the resolved session.
    env.k(&["notify", "b", "two", "words"])
        .is(0, "OK notified: two words\n");
    env.k(&["notify", "not-a-session", "x"])
        .is(0, "OK notified: not-a-session x\n");
    assert!(km.line().contains("\"message\": \"two words\""));
    assert!(km.line().contains("\"message\": \"not-a-session x\""));

    // Notes are not typed into the REPL.
    let screen = env.agent_comms(&["session", "snapshot", "b"]).stdout;
    assert!(!screen.contains("hello world"), "{screen}");
    env.k(&["run", "b", "echo clean"]).is(0, "clean\n");
}

#[test]
fn watch_shows_cells_and_hides_frame_noise() {
    let env = Env::new();
    let repl = unknown_repl(&env);
    env.new_session("r", &["env", "PS1=R:", repl, "--norc", "--noprofile"]);
    let mut watch = env.spawn(&K, &["watch", "r"]);
    assert_eq!(watch.line(), "\x1b[2mwatching r (ctrl-c to stop)\x1b[0m");
    assert_eq!(watch.line(), "");
    sync_streams(&env, "r", &[&watch]);

    let (v, _) = env.run_json("r", "echo hi");
    let id = v["cell_id"].as_str().unwrap();
    // The marker, the prompt with the code, the output, the tick: the five
    // prompts the frame Enters drew are hidden.
    assert_eq!(watch.line(), format!("── {} ──", &id[..8]));
    assert_eq!(watch.line(), "R:echo hi");
    assert_eq!(watch.line(), "hi");
    assert_eq!(watch.line(), "── ✓ ──");

    // Ctrl-C ends it.
    watch.signal(libc::SIGINT);
    watch.wait();
    let rest = watch.rest();
    assert!(rest.iter().all(|l| !l.starts_with("R:")), "{rest:?}");
}

#[test]
fn history_prints_the_last_n_times_five_view_lines() {
    let env = Env::new();
    env.new_session("b", BASH);
    let (v, _) = env.run_json("b", "seq 1 12");
    let id = v["cell_id"].as_str().unwrap();
    let lines =
        |range: std::ops::RangeInclusive<u32>| range.map(|i| format!("{i}\n")).collect::<String>();
    env.k(&["history", "-n", "1", "b"])
        .is(0, &format!("{}── ✓ ──\n", lines(9..=12)));
    env.k(&["history", "-n", "2", "b"])
        .is(0, &format!("{}── ✓ ──\n", lines(4..=12)));
    // (The ` . file` line that runs the cell is machinery, not shown.)
    let all = format!("── {} ──\n{}── ✓ ──\n", &id[..8], lines(1..=12));
    env.k(&["history", "b"]).is(0, &all);
    env.k(&["history"]).is(0, &all);
    env.k(&["history", "nosuch"])
        .is(1, &format!("ERR {}\n", no_session("nosuch")));
}

#[test]
fn km_pushes_cell_events() {
    let env = Env::new();
    env.new_session("b", BASH);
    let km = env.spawn(&KM, &["b"]);
    sync_streams(&env, "b", &[&km]);

    let id = fire(&env, "b", "echo one");
    let ev = km.line();
    assert_eq!(ev, km_cell(&id, "b", "fired", &ts_of(&ev)));
    let ev = km.line();
    assert_eq!(ev, km_cell(&id, "b", "done", &ts_of(&ev)));

    let (v, _) = env.run_json("b", "echo two");
    let id2 = v["cell_id"].as_str().unwrap().to_owned();
    let ev = km.line();
    assert_eq!(ev, km_cell(&id2, "b", "fired", &ts_of(&ev)));
    let ev = km.line();
    assert_eq!(ev, km_cell(&id2, "b", "done", &ts_of(&ev)));

    // A timeout is an event too.
    let out = env.k(&["run", "-j", "-t", "1", "b", "sleep 60"]);
    let id3 = out.json()["cell_id"].as_str().unwrap().to_owned();
    km.line();
    let ev = km.line();
    assert_eq!(ev, km_cell(&id3, "b", "timeout", &ts_of(&ev)));
    env.k(&["int", "b"]).is(0, "OK\n");
    let ev = km.line();
    assert_eq!(ev, km_cell(&id3, "b", "interrupted", &ts_of(&ev)));
    assert_eq!(km.pending(), Vec::<String>::new());
}

#[test]
fn km_one_shot_counts_completions_that_already_happened() {
    let env = Env::new();
    env.new_session("b", BASH);
    let (v, _) = env.run_json("b", "echo x");
    let id = v["cell_id"].as_str().unwrap().to_owned();

    // With the cell's id, and without: the latest completed cell.
    for args in [
        &["b", id.as_str(), "-1"][..],
        &["b", "-1"],
        &["b", "-1", id.as_str()],
    ] {
        let out = env.km(args);
        let line = out.stdout.trim_end();
        out.is(0, &format!("{}\n", km_cell(&id, "b", "done", &ts_of(line))));
    }

    // A completion still to come is waited for.
    let id2 = fire(&env, "b", &blocked_until("go", "echo y"));
    let mut waiter = env.spawn(&KM, &["b", &id2, "-1"]);
    // It has nothing to print before the cell completes.
    assert!(waiter.try_line(Duration::from_millis(300)).is_none());
    release(&env, "go");
    let ev = waiter.line();
    assert_eq!(ev, km_cell(&id2, "b", "done", &ts_of(&ev)));
    assert_eq!(waiter.wait().code(), Some(0));
    assert!(waiter.rest().is_empty());

    // A missing session is an error event.
    let out = env.km(&["nosuch"]);
    let line = out.stdout.trim_end();
    out.is(
        1,
        &format!(
            "{{\"session\": \"nosuch\", \"status\": \"error\", \"message\": {}, \"ts\": \"{}\"}}\n",
            js(&no_session("nosuch")),
            ts_of(line)
        ),
    );
}

#[test]
fn km_exits_0_on_sigterm_and_sigint() {
    let env = Env::new();
    env.new_session("b", BASH);
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let mut km = env.spawn(&KM, &["b"]);
        sync_streams(&env, "b", &[&km]);
        km.signal(sig);
        assert_eq!(km.wait().code(), Some(0), "after signal {sig}");
    }
}

// ---------------------------------------------------------------------
// frame modes

#[test]
fn repeat_mode_frames_an_unknown_repl() {
    let env = Env::new();
    let repl = unknown_repl(&env);
    env.new_session("r", &["env", "PS1=R:", repl, "--norc", "--noprofile"]);
    // No exit code: repeat mode does not know one.
    env.expect_done("r", "echo hi", "hi", None);
    // Lines are trimmed, blank ones dropped, continuation prompts (`...`)
    // dropped, as agent-tty did.
    env.expect_done(
        "r",
        "printf '  lead\\n\\n'; echo ...; echo '... x'; echo '  tail  '",
        "lead\ntail",
        None,
    );
    env.expect_done("r", "false", "", None);
}

#[test]
fn exact_prompt_mode_with_gdb() {
    require!("gdb");
    let env = Env::new();
    env.k(&["new", "g", "gdb", "-q", "--prompt=(gdb)"])
        .is(0, "OK g prompt='(gdb)'\n");
    // The first cell right after `k new` (the REPL has started by then).
    env.expect_done("g", "p 1+2", "$1 = 3", None);
    env.expect_done("g", "p 6*7", "$2 = 42", None);
    env.expect_done("g", "echo a\\n\\n  b\\n", "a\nb", None);
    // `--prompt` may stand before the command.
    env.k(&["new", "g2", "--prompt= (gdb) ", "gdb", "-q"])
        .is(0, "OK g2 prompt='(gdb)'\n");
    env.expect_done("g2", "p 2", "$1 = 2", None);
}

/// A hook that records what it reads and exits with `code` on the prompt.
fn prompt_hook(env: &Env, name: &str, code: i32) -> std::path::PathBuf {
    let seen = env.work.join(format!("{name}.seen"));
    env.script(
        name,
        &format!(
            "#!/bin/sh\nwhile IFS= read -r line; do\n  printf '%s\\n' \"$line\" >> '{}'\n  [ \"$line\" = R: ] && exit {code}\ndone\n",
            seen.display()
        ),
    );
    seen
}

#[test]
fn hook_mode_ends_the_frame_when_the_hook_exits() {
    let env = Env::new();
    let repl = unknown_repl(&env);
    let seen = prompt_hook(&env, "hook", 0);
    let hook = env.work.join("hook");
    env.k(&[
        "new",
        "h",
        "env",
        "PS1=R:",
        repl,
        "--norc",
        "--noprofile",
        "--prompt=./hook",
    ])
    .is(0, &format!("OK h prompt='{}'\n", hook.display()));
    env.expect_done("h", "echo hi; echo there", "hi\nthere", None);
    assert_eq!(fs::read_to_string(&seen).unwrap(), "hi\nthere\nR:\n");
    env.expect_done("h", "seq 3", "1\n2\n3", None);

    // A hook that exits non-zero ends the frame all the same (given by
    // absolute path this time).
    let _ = prompt_hook(&env, "hook3", 3);
    let abs = env.work.join("hook3");
    env.k(&[
        "new",
        "h3",
        "env",
        "PS1=R:",
        repl,
        "--norc",
        "--noprofile",
        &format!("--prompt={}", abs.display()),
    ])
    .is(0, &format!("OK h3 prompt='{}'\n", abs.display()));
    env.expect_done("h3", "echo three", "three", None);
    env.expect_done("h3", "echo again", "again", None);
}

#[test]
fn a_hook_that_never_exits_times_out_and_is_killed() {
    let env = Env::new();
    let repl = unknown_repl(&env);
    let pidfile = env.work.join("hook.pid");
    env.script(
        "stuck",
        &format!(
            "#!/bin/sh\necho $$ > '{0}.tmp'; mv '{0}.tmp' '{0}'\nwhile read -r line; do :; done\n",
            pidfile.display()
        ),
    );
    env.k(&[
        "new",
        "n",
        "env",
        "PS1=R:",
        repl,
        "--norc",
        "--noprofile",
        "--prompt=./stuck",
    ]);
    let out = env.k(&["run", "-j", "-t", "2", "n", "echo x"]);
    let id = out.json()["cell_id"].as_str().unwrap().to_owned();
    out.is(0, &timeout_line(&id, ""));
    let hook: u32 = fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(wait_gone(hook, TIMEOUT), "the hook ({hook}) still runs");
    env.k(&["status", "n"]).is(0, &status_timeout("n", &id));
    env.k(&["int", "n"]).is(0, "OK\n");
    env.k(&["status", "n"]).is(0, &status_idle("n"));
}

#[test]
fn a_hook_must_exist_and_be_executable() {
    let env = Env::new();
    let missing = env.work.join("missing");
    env.k(&["new", "h", "bash", "--prompt=./missing"])
        .is(1, &format!("ERR hook not found: {}\n", missing.display()));
    let dir = env.work.join("adir");
    fs::create_dir(&dir).unwrap();
    env.k(&["new", "h", "bash", "--prompt=adir/"])
        .is(1, &format!("ERR hook not found: {}\n", dir.display()));
    let plain = env.script("plain", "#!/bin/sh\nexit 0\n");
    fs::set_permissions(&plain, fs::Permissions::from_mode(0o644)).unwrap();
    env.k(&["new", "h", "bash", &format!("--prompt={}", plain.display())])
        .is(
            1,
            &format!("ERR hook not executable: {}\n", plain.display()),
        );
    env.k(&["ls"]).is(0, "no sessions\n");
}

// ---------------------------------------------------------------------
// shell integration for other REPLs

/// python's set-up is one long line of base64 (its script), which carries
/// neither the token nor the cells directory: `k history` hides it too.
#[test]
fn python_history_shows_the_cells_not_the_set_up() {
    require!("python3");
    let env = Env::new();
    env.new_session("py", &["python3"]);
    env.expect_done("py", "print(6 * 7)", "42", Some(0));
    let history = env.k(&["history", "py"]).stdout;
    assert!(history.contains("42"), "{history}");
    assert!(!history.contains("b64decode"), "{history}");
}

#[test]
fn python_integration_runs_blocks_with_blank_lines() {
    require!("python3");
    let env = Env::new();
    env.new_session("py", &["python3"]);
    env.expect_done("py", "1+1", "2", Some(0));
    env.expect_done(
        "py",
        "def f(x):\n    y = x + 1\n\n    return y * 2\n\n\nclass C:\n    a = 1\n\n    def m(self):\n\n        return self.a + 41\n\nprint(f(1))\nC().m()",
        "4\n42",
        Some(0),
    );
    env.expect_done(
        "py",
        "for i in range(2):\n    print(i)\n\n    print(-i)",
        "0\n0\n1\n-1",
        Some(0),
    );
    env.expect_done(
        "py",
        "print('a\\n\\n  b\\n' + 'same\\n' * 6 + 'end')",
        "a\n\n  b\nsame\nsame\nsame\nsame\nsame\nsame\nend",
        Some(0),
    );
    env.k(&["run", "py", "x = 5"]).is(0, "\n");
    env.expect_done("py", "x * 2", "10", Some(0));

    // An exception: the traceback, exit code 1.
    let (v, _) = env.run_json("py", "1/0");
    assert_eq!(
        (&v["status"], &v["exit_code"]),
        (&Value::from("done"), &Value::from(1))
    );
    let out = v["output"].as_str().unwrap();
    assert!(
        out.starts_with("Traceback (most recent call last):\n"),
        "{out}"
    );
    assert!(
        out.ends_with("\nZeroDivisionError: division by zero"),
        "{out}"
    );
    assert!(!out.contains("__k"), "our helper shows in {out}");

    // The contract's other spelling of a python session.
    env.new_session("py2", &["env PYTHON_BASIC_REPL=1 python3 -i"]);
    env.expect_done("py2", "print('basic')", "basic", Some(0));
}

#[test]
fn gdb_integration() {
    require!("gdb");
    let env = Env::new();
    env.new_session("g", &["gdb", "-q"]);
    // gdb has no command status: no exit_code.
    env.expect_done("g", "p 1+2", "$1 = 3", None);
    env.expect_done("g", "p 6*7\n\np 2", "$2 = 42\n$3 = 2", None);
    env.expect_done("g", "echo a\\n\\n  b\\n", "a\n\n  b", None);
}

#[test]
fn node_integration() {
    require!("node");
    let env = Env::new();
    env.new_session("n", &["node"]);
    env.expect_done("n", "1+2", "3", Some(0));
    env.expect_done("n", "let x = 5;\n\nx * 2", "10", Some(0));
    env.expect_done("n", "console.log('a\\n\\n  b')", "a\n\n  b", Some(0));
    let (v, _) = env.run_json("n", "throw new Error('boom')");
    assert_eq!(v["exit_code"], 1, "{v}");
    assert!(v["output"].as_str().unwrap().contains("Error: boom"), "{v}");
}

#[test]
fn sqlite3_integration() {
    require!("sqlite3");
    let env = Env::new();
    env.new_session("q", &["sqlite3"]);
    env.expect_done("q", "select 1+1;", "2", None);
    env.expect_done(
        "q",
        "create table t(a);\ninsert into t values (1), (2);\n\nselect * from t;",
        "1\n2",
        None,
    );
    let (v, _) = env.run_json("q", "select * from nope;");
    assert!(
        v["output"]
            .as_str()
            .unwrap()
            .contains("no such table: nope"),
        "{v}"
    );
}

#[test]
fn sh_integration_with_dash() {
    require!("dash");
    let env = Env::new();
    env.new_session("d", &["dash"]);
    env.expect_done("d", "echo hi; false", "hi", Some(1));
    env.expect_done("d", "(exit 3)", "", Some(3));
    env.expect_done("d", "echo a\n\necho '  b'", "a\n  b", Some(0));
}

/// `session logs` prints what a cell printed as plain text (no escape
/// sequences), `-n` only the last lines, and `--follow` what comes after.
#[test]
fn session_logs_prints_a_cells_output_as_plain_text() {
    let env = Env::new();
    env.new_session("s", BASH);
    env.k(&["run", "s", "printf 'first-%s\\nsecond-%s\\n' one two"])
        .is(0, "first-one\nsecond-two\n");
    let logs = env.agent_comms(&["session", "logs", "s"]).ok();
    assert!(logs.stdout.contains("first-one\nsecond-two\n"), "{logs:#?}");
    assert!(!logs.stdout.contains('\u{1b}'), "{logs:#?}");
    let last = env.agent_comms(&["session", "logs", "s", "-n", "1"]).ok();
    assert_eq!(last.stdout.lines().count(), 1, "{last:#?}");
    let follow = env.spawn(&AGENT_COMMS, &["session", "logs", "s", "--follow"]);
    follow.line_where(|l| l == "second-two");
    env.k(&["run", "s", "echo later-$((40+2))"])
        .is(0, "later-42\n");
    follow.line_where(|l| l == "later-42");
}

/// A session whose adapter loads no plugin, started by the `k` that
/// `scripts/install` installs (through the `agent-comms` beside it), runs
/// under the `agent-comms-supervisor` installed beside them: the layout
/// `supervisor::launch::supervisor_image` looks for.
#[cfg(target_os = "linux")]
#[test]
#[ignore = "needs the binaries scripts/install installs: AGENT_COMMS_TEST_INSTALLED=<prefix>/bin (.ci/run sets it)"]
fn installed_sessions_run_under_the_installed_supervisor_image() {
    let dir = std::env::var_os(INSTALLED_ENV).unwrap_or_else(|| {
        panic!("set {INSTALLED_ENV} to the bin directory scripts/install filled")
    });
    let image = Path::new(&dir).join("agent-comms-supervisor");
    let env = Env::new();
    env.new_session("b", BASH);
    let running = fs::read_link(format!("/proc/{}/exe", env.supervisor_pid("b"))).unwrap();
    assert_eq!(running, fs::canonicalize(&image).unwrap());
    env.k(&["run", "b", "echo installed"]).is(0, "installed\n");
}
