//! The Windows executables, run under Wine (issue 19): sessions of cmd.exe
//! in a pseudo console, driven through the binaries as a person would.
//!
//! Ignored unless asked for (`--include-ignored`): they need Wine, the
//! MinGW compiler and the Windows build (`AGENT_COMMS_WINDOWS_BIN`), which
//! .ci/run installs and builds. Each test owns a [`WineEnv`]: its own
//! runtime directory and home on a Wine prefix shared by the test process,
//! and a cleanup that ends what it started by pid.

mod support;

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
