//! The Windows executables, run under Wine (issue 19): sessions of cmd.exe
//! in a pseudo console, driven through the binaries as a person would.
//!
//! Ignored unless asked for (`--include-ignored`): they need Wine, the
//! MinGW compiler and the Windows build (`AGENT_COMMS_WINDOWS_BIN`), which
//! .ci/run installs and builds. Each test owns a [`WineEnv`]: its own
//! runtime directory and home on a Wine prefix shared by the test process,
//! and a cleanup that ends what it started by pid.

mod support;

use support::fakes::{assert_each_once_in_order, fake_events as events, send_at_once, serve_args};
use support::poll_within;
use support::wine::{windows_path, WineEnv, WINE_TIMEOUT};

/// Polls `session snapshot NAME` until a row of the screen is `row`
/// exactly; returns the screen. A snapshot is a state, offered only by
/// asking.
#[track_caller]
fn wait_for_row(env: &WineEnv, name: &str, row: &str) -> Vec<String> {
    poll_within(
        WINE_TIMEOUT,
        &format!("a row {row:?} on {name}'s screen"),
        || {
            let shot = env.ac(&["session", "snapshot", name]).ok();
            shot.lines.iter().any(|l| l == row).then_some(shot.lines)
        },
    )
}

#[test]
#[ignore = "needs wine, x86_64-w64-mingw32-gcc and the Windows executables in AGENT_COMMS_WINDOWS_BIN (.ci/run)"]
fn version_runs() {
    let env = WineEnv::new();
    let run = env.ac(&["--version"]).ok();
    assert_eq!(
        run.text(),
        format!("agent-comms {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
#[ignore = "needs wine, x86_64-w64-mingw32-gcc and the Windows executables in AGENT_COMMS_WINDOWS_BIN (.ci/run)"]
fn a_detached_cmd_session_is_listed_typed_into_read_and_killed() {
    let env = WineEnv::new();
    let started = env.ac(&["session", "new", "wb", "--", "cmd.exe"]).ok();
    assert!(
        started.text().starts_with("started session wb (pid "),
        "{}",
        started.text()
    );

    let ls = env.ac(&["session", "ls"]).ok();
    assert!(
        ls.lines
            .iter()
            .any(|l| l.starts_with("wb ") && l.ends_with(" cmd.exe")),
        "the session is not listed:\n{}",
        ls.text()
    );

    // cmd.exe's prompt names the directory the session started in.
    let prompt = format!("{}>", windows_path(&env.work()));
    wait_for_row(&env, "wb", &prompt);

    // Typed in two steps, as a person would: the text, then Enter. The
    // command's second output row proves cmd.exe ran it (the typed line
    // holds "two" only after other text).
    env.ac(&["session", "send", "wb", "echo one& echo two"])
        .ok();
    env.ac(&["session", "send", "wb", "--keys", "Enter"]).ok();
    let screen = wait_for_row(&env, "wb", "two");
    assert!(
        screen.contains(&"one".to_owned()),
        "the first output row is missing:\n{}",
        screen.join("\n")
    );
    assert!(
        screen.contains(&format!("{prompt}echo one& echo two")),
        "the typed command is not on the screen:\n{}",
        screen.join("\n")
    );

    // Closing the pseudo console asks cmd.exe to end: it exits on its own
    // (status 0) within the grace period, before any termination.
    let killed = env.ac(&["session", "kill", "wb"]).ok();
    assert_eq!(killed.text(), "killed session wb (exit status 0)");
    let ls = env.ac(&["session", "ls"]).ok();
    assert_eq!(ls.text(), "no sessions");
    assert_eq!(
        env.session_processes(),
        Vec::<String>::new(),
        "processes of the session outlived it"
    );
}

#[test]
#[ignore = "needs wine, x86_64-w64-mingw32-gcc and the Windows executables in AGENT_COMMS_WINDOWS_BIN (.ci/run)"]
fn kill_ends_the_programs_children_too() {
    let env = WineEnv::new();
    env.ac(&["session", "new", "kids", "--", "cmd.exe"]).ok();
    let prompt = format!("{}>", windows_path(&env.work()));
    wait_for_row(&env, "kids", &prompt);
    // A second cmd.exe, started by the first: the program's child.
    env.ac(&[
        "session",
        "send",
        "kids",
        "cmd.exe /k echo nested-%ERRORLEVEL%",
    ])
    .ok();
    env.ac(&["session", "send", "kids", "--keys", "Enter"]).ok();
    wait_for_row(&env, "kids", "nested-0");
    let before = env.session_processes();
    assert_eq!(
        before.iter().filter(|p| p.contains("cmd.exe")).count(),
        2,
        "expected two cmd.exe: {before:?}"
    );

    let killed = env.ac(&["session", "kill", "kids", "--grace", "0"]).ok();
    assert!(
        killed.text().starts_with("killed session kids"),
        "{}",
        killed.text()
    );
    assert_eq!(
        env.session_processes(),
        Vec::<String>::new(),
        "the program's child outlived the session"
    );
}

#[test]
#[ignore = "needs wine, x86_64-w64-mingw32-gcc and the Windows executables in AGENT_COMMS_WINDOWS_BIN (.ci/run)"]
fn k_runs_cmd_cells_with_exact_ends_and_their_exit_status() {
    let env = WineEnv::new();
    let new = env.run("k", &["new", "c1", "cmd.exe"]).ok();
    assert_eq!(new.text(), "OK c1");

    // Output as printed, ended by the cell's end mark: no prompt, no echo
    // of the code, nothing of the machinery.
    let run = env.run("k", &["run", "c1", "echo alpha& echo beta"]).ok();
    assert_eq!(run.lines, ["alpha", "beta"], "{}", run.text());

    // State lives across cells, and a blank line inside the output is kept.
    env.run("k", &["run", "c1", "set KCELL=kept"]).ok();
    let run = env
        .run("k", &["run", "c1", "echo %KCELL%& echo.& echo end"])
        .ok();
    assert_eq!(run.lines, ["kept", "", "end"], "{}", run.text());

    // The status of the cell's last program, as %ERRORLEVEL% had it (cmd's
    // built-in commands leave it as it was, so both come from programs).
    let run = env.run("k", &["run", "-j", "c1", "cmd /c exit 3"]).ok();
    let json = run.json();
    assert_eq!(json["status"], "done", "{json}");
    assert_eq!(json["exit_code"], 3, "{json}");
    let run = env.run("k", &["run", "-j", "c1", "cmd /c exit 0"]).ok();
    let json = run.json();
    assert_eq!(json["exit_code"], 0, "{json}");

    let killed = env.run("k", &["kill", "c1"]).ok();
    assert_eq!(killed.text(), "OK killed c1");
    assert_eq!(env.session_processes(), Vec::<String>::new());
}

#[test]
#[ignore = "needs wine, x86_64-w64-mingw32-gcc and the Windows executables in AGENT_COMMS_WINDOWS_BIN (.ci/run)"]
fn without_a_pseudo_console_the_error_names_the_windows_release_needed() {
    let env = WineEnv::new();
    // Makes CreatePseudoConsole look missing, as on Windows before 1809.
    let run = env.run_with(
        &[("AGENT_COMMS_NO_CONPTY", "1")],
        "agent-comms",
        &["session", "new", "old", "--", "cmd.exe"],
    );
    assert_ne!(run.code, 0, "{}", run.text());
    assert_eq!(
        run.text(),
        "agent-comms: cannot create a pseudo console: Windows 10 1809 (build 17763) or later is required (this system's kernel32.dll has no CreatePseudoConsole)"
    );
    assert_eq!(env.ac(&["session", "ls"]).ok().text(), "no sessions");
}

#[test]
#[ignore = "needs wine, x86_64-w64-mingw32-gcc and the Windows executables in AGENT_COMMS_WINDOWS_BIN (.ci/run)"]
fn attach_types_into_the_session_shows_its_output_and_detaches() {
    let env = WineEnv::new();
    env.ac(&["session", "new", "at", "--", "cmd.exe"]).ok();
    let prompt = format!("{}>", windows_path(&env.work()));
    wait_for_row(&env, "at", &prompt);

    let mut term = env.start("agent-comms", &["session", "attach", "at"], 30, 100);
    // The banner follows the session's screen, redrawn on the person's
    // terminal, whose size the session takes.
    term.wait_for("[attached to at; detach with C-\\]");
    let shot = env.ac(&["session", "snapshot", "at", "--json"]).ok();
    let json = shot.json();
    assert_eq!(
        (&json["rows"], &json["cols"]),
        (&30.into(), &100.into()),
        "{json}"
    );
    let mark = term.mark();
    term.write(b"echo attached-%ERRORLEVEL%\r");
    term.wait_for_after(mark, "attached-0");
    // Ctrl-\ leaves; the session runs on.
    term.write(&[0x1c]);
    let status = term.wait_exit_within(WINE_TIMEOUT);
    assert!(
        status.success(),
        "attach ended with {status:?}:\n{}",
        term.output()
    );
    let screen = wait_for_row(&env, "at", "attached-0");
    assert_eq!(screen.last(), Some(&prompt), "{}", screen.join("\n"));
}

/// The person resizes their console while attached: the session and the
/// program in it follow.
#[test]
#[ignore = "needs wine, x86_64-w64-mingw32-gcc and the Windows executables in AGENT_COMMS_WINDOWS_BIN (.ci/run)"]
fn attach_follows_the_console_when_it_is_resized() {
    let env = WineEnv::new();
    let claude = windows_path(&env.rust_fake("claude"));
    env.ac(&["session", "new", "rz", "--", &claude]).ok();
    wait_for_row(&env, "rz", &"─".repeat(80));
    follows_a_resize(&env, "rz", &["session", "attach", "rz"]);
    env.ac(&["session", "kill", "rz"]).ok();
}

/// A foreground supervisor follows its own console's size too.
#[test]
#[ignore = "needs wine, x86_64-w64-mingw32-gcc and the Windows executables in AGENT_COMMS_WINDOWS_BIN (.ci/run)"]
fn a_foreground_session_follows_the_console_when_it_is_resized() {
    let env = WineEnv::new();
    let claude = windows_path(&env.rust_fake("claude"));
    follows_a_resize(&env, "fg", &["session", "run", "fg", "--", &claude]);
}

/// Runs `agent-comms ARGS…` in a 24×80 console showing session `name`,
/// whose program is the Rust fake agent as Claude Code (it draws its rules
/// the console's full width); resizes that console to 20×70 as a person
/// would; sees the session and its program follow; then leaves with
/// Ctrl-\ (attach) or Ctrl-D (the fake's own way out).
///
/// Smaller, because under Wine 8 a pseudo console made larger than it was
/// created takes the size while its program's window stays the old size
/// (docs/windows.md).
fn follows_a_resize(env: &WineEnv, name: &str, args: &[&str]) {
    let trigger = env.path("resize-now");
    let mut term = env.start_resized(&trigger, (20, 70), "agent-comms", args, 24, 80);
    let size = || {
        let run = env.ac(&["session", "snapshot", name, "--json"]);
        (run.code == 0).then(|| {
            let json = run.json();
            (json["rows"].as_u64(), json["cols"].as_u64())
        })
    };
    let attach = args[1] == "attach";
    // Resized any earlier, the session would start at the new size and
    // prove nothing: wait until the client watches its console (attach
    // starts watching before its banner; a foreground supervisor before it
    // counts the person as a client).
    if attach {
        term.wait_for("detach with C-\\]");
    } else {
        poll_within(WINE_TIMEOUT, "the person counted as a client", || {
            let run = env.ac(&["session", "ls", "--json"]);
            (run.code == 0 && run.json()[0]["clients"] == 1).then_some(())
        });
    }
    assert_eq!(size(), Some((Some(24), Some(80))));
    wait_for_row(env, name, &"─".repeat(80));

    std::fs::write(&trigger, "").expect("write the trigger");
    poll_within(WINE_TIMEOUT, &format!("{name} at 20x70"), || {
        (size() == Some((Some(20), Some(70)))).then_some(())
    });
    // The program was told: it redrew its rules at the new width.
    wait_for_row(env, name, &"─".repeat(70));

    let leave = if attach { 0x1c } else { 0x04 };
    term.write(&[leave]);
    let status = term.wait_exit_within(WINE_TIMEOUT);
    assert!(
        status.success(),
        "{} ended with {status:?}:\n{}",
        args.join(" "),
        term.output()
    );
}

#[test]
#[ignore = "needs wine, x86_64-w64-mingw32-gcc and the Windows executables in AGENT_COMMS_WINDOWS_BIN (.ci/run)"]
fn watch_shows_what_others_type_and_leaves_on_q() {
    let env = WineEnv::new();
    env.ac(&["session", "new", "wt", "--", "cmd.exe"]).ok();
    let prompt = format!("{}>", windows_path(&env.work()));
    wait_for_row(&env, "wt", &prompt);

    let mut term = env.start("agent-comms", &["session", "watch", "wt"], 24, 80);
    term.wait_for("[watching wt");
    let mark = term.mark();
    // Typed by someone else; the watcher sees the output.
    env.ac(&["session", "send", "wt", "echo watched-%ERRORLEVEL%"])
        .ok();
    env.ac(&["session", "send", "wt", "--keys", "Enter"]).ok();
    term.wait_for_after(mark, "watched-0");
    // Keys of a watcher never reach the session; q leaves.
    term.write(b"q");
    let status = term.wait_exit_within(WINE_TIMEOUT);
    assert!(
        status.success(),
        "watch ended with {status:?}:\n{}",
        term.output()
    );
    let screen = wait_for_row(&env, "wt", "watched-0");
    assert_eq!(screen.last(), Some(&prompt), "{}", screen.join("\n"));
}

#[test]
#[ignore = "needs wine, x86_64-w64-mingw32-gcc and the Windows executables in AGENT_COMMS_WINDOWS_BIN (.ci/run)"]
fn a_pipe_held_by_an_impostor_is_refused_not_joined() {
    let env = WineEnv::new();
    let new = env
        .ac(&["session", "new", "im", "--json", "--", "cmd.exe"])
        .ok();
    let record = new.json();
    let pipe = record["socket"]
        .as_str()
        .expect("the record names its pipe")
        .to_owned();
    env.ac(&["session", "kill", "im"]).ok();

    // Another program takes the name before the session comes back.
    let _impostor = env.impostor(&pipe);
    let again = env.ac(&["session", "new", "im", "--", "cmd.exe"]);
    assert_ne!(again.code, 0, "{}", again.text());
    assert_eq!(
        again.text(),
        format!("agent-comms: another program already holds the pipe {pipe} (no session of yours does); nothing was started")
    );
    assert_eq!(env.ac(&["session", "ls"]).ok().text(), "no sessions");
}

/// The Rust fake agent as Claude Code, served by `runtime
/// interactive-serve` in a pseudo console: the adapter is picked from
/// `claude.exe`; `runtime deliver` types a text in with its evidence; four
/// agents send five messages each at once and every one arrives exactly
/// once, in each sender's order, never while the agent is busy; the store
/// under the project's Windows path records them all; doctor finds nothing
/// wrong; and Ctrl-C from the person ends the agent and the runtime.
#[test]
#[ignore = "needs wine, x86_64-w64-mingw32-gcc and the Windows executables in AGENT_COMMS_WINDOWS_BIN (.ci/run)"]
fn a_served_agent_takes_deliveries_and_four_senders_messages_exactly_once() {
    let env = WineEnv::new();
    let claude = windows_path(&env.rust_fake("claude"));
    let log = env.path("claude.log");
    let mut serve = env.start_with(
        &[("FAKE_LOG", &windows_path(&log)), ("FAKE_BUSY_MS", "300")],
        "agent-comms",
        &serve_args("bob", "bob", "200", &[], &claude, &[]),
        40,
        120,
    );
    let shown = poll_within(WINE_TIMEOUT, "runtime bob online", || {
        let run = env.ac(&["runtime", "show", "--id", "bob", "--json"]);
        (run.code == 0)
            .then(|| run.json())
            .filter(|shown| shown["status"] == "ONLINE")
    });
    assert_eq!(shown["provider"], "claude-code", "{shown}");

    let evidence = env
        .ac(&[
            "runtime",
            "deliver",
            "--id",
            "bob",
            "--json",
            "hello from Wine ✓",
        ])
        .ok()
        .json();
    assert_eq!(evidence["style"], "typed", "{evidence}");
    assert!(
        evidence["echoed"].as_u64() <= evidence["entered"].as_u64()
            && evidence["entered"].as_u64() <= evidence["submitted"].as_u64(),
        "{evidence}"
    );
    let submits = || events(&log, "submit");
    assert_eq!(submits()[0]["text"], "hello from Wine ✓");

    let ids = send_at_once(4, 5, |from, text| {
        let sent = env
            .ac(&["--actor", from, "send", "--to", "bob", "--json", text])
            .ok();
        sent.json()["id"].as_str().unwrap().to_owned()
    });
    let db = env.project().join(".agent-comms/state.db");
    poll_within(WINE_TIMEOUT, "20 messages recorded as delivered", || {
        let conn =
            rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .ok()?;
        let delivered: i64 = conn
            .query_row(
                "SELECT count(*) FROM invocations WHERE status = 'DELIVERED'",
                [],
                |row| row.get(0),
            )
            .ok()?;
        (delivered == 20).then_some(())
    });
    assert_each_once_in_order(&submits()[1..], &ids);

    let doctor = env.ac(&["doctor"]);
    assert_eq!(doctor.code, 0, "doctor found something:\n{}", doctor.text());

    serve.write(b"\x04");
    let status = serve.wait_exit_within(WINE_TIMEOUT);
    assert!(status.success(), "the serve ended with {status:?}");
    let exit = events(&log, "exit");
    assert_eq!(
        exit.first().map(|e| &e["reason"]),
        Some(&"ctrl-d".into()),
        "the agent's log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}
