//! `agent-comms top` in a 80×24 terminal, read as rendered: a runtime
//! (the fake Claude Code, served in a terminal of its own) shown busy,
//! then idle; a message sent while it is busy shown PENDING, then
//! DELIVERED; `q` leaving the terminal as it found it.
//!
//! Every wait is for the screen to show something, with a deadline.

mod support;

use std::num::NonZeroU16;

use serde_json::Value;
use support::env::TestEnv;
use support::fakes::{fake, fake_events, serve_argv};
use support::term::Term;
use support::{wait_until, TIMEOUT};

/// The screen row that starts with `name`, if `top` shows one.
fn row_of(lines: &[String], name: &str) -> Option<String> {
    lines
        .iter()
        .find(|l| l.split_whitespace().next() == Some(name))
        .cloned()
}

/// Waits until `top` shows a row for `name` that has every word of
/// `words`.
#[track_caller]
fn wait_row(top: &Term, name: &str, words: &[&str]) {
    let shown = top.wait_screen(TIMEOUT, |lines| {
        row_of(lines, name).is_some_and(|row| {
            let cells: Vec<&str> = row.split_whitespace().collect();
            words.iter().all(|w| cells.contains(w))
        })
    });
    assert!(
        shown,
        "top never showed {name} with {words:?}; it shows:\n{}",
        top.screen()
    );
}

#[test]
fn top_shows_a_runtime_turn_and_a_message_live_and_q_restores_the_terminal() {
    let env = TestEnv::new();
    let log = env.base().join("bob-claude.log");
    let log_s = log.display().to_string();
    let claude = fake("claude");
    let argv = serve_argv(
        "bob",
        "bob",
        "200",
        &["--keyboard-quiet-ms", "400"],
        &claude,
        &[],
    );
    let _served = env.term_with(
        &argv,
        &[("FAKE_LOG", &log_s), ("FAKE_BUSY_MS", "1500")],
        true,
    );
    wait_until("bob's fake to start", || {
        fake_events(&log, "start").len() == 1
    });
    wait_until("runtime bob online", || {
        let run = env.run(&["runtime", "show", "--id", "bob", "--json"]);
        run.success()
            && serde_json::from_str::<Value>(run.stdout.trim())
                .is_ok_and(|v| v["status"] == "ONLINE")
    });

    let mut top = env.term(&["top"]);
    // The runtime, idle, in the terminal it is served in.
    wait_row(
        &top,
        "bob",
        &["interactive", "claude-code", "idle", "attached"],
    );

    // A long turn: busy.
    env.run_ok(&["runtime", "deliver", "--id", "bob", "work BUSY=4000"]);
    wait_row(&top, "bob", &["busy"]);

    // A message while it works waits.
    let sent = env.run_ok(&[
        "--actor",
        "alice",
        "send",
        "--to",
        "bob",
        "--json",
        "hello from alice",
    ]);
    let id = serde_json::from_str::<Value>(sent.stdout.trim()).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_row(&top, &id, &["alice", "bob", "PENDING"]);
    wait_row(&top, "bob", &["busy"]);

    // The turn ends, the message goes in, its own turn ends: idle again
    // and the message DELIVERED, with a latency in the bob row.
    wait_row(&top, &id, &["alice", "bob", "DELIVERED"]);
    wait_row(&top, "bob", &["idle"]);
    let row = row_of(&top.lines(), "bob").unwrap();
    assert!(
        row.split_whitespace()
            .any(|c| c.ends_with('s') && c.contains('.')),
        "no delivery latency in {row:?}"
    );

    // q: the program ends, the alternate screen is left and the cursor
    // shown again.
    let mark = top.mark();
    top.write(b"q");
    let status = top.wait_exit();
    assert!(status.success(), "top exited with {status:?}");
    let output = top.output_bytes();
    let mut parser = vt100::Parser::new(
        NonZeroU16::new(24).unwrap(),
        NonZeroU16::new(80).unwrap(),
        0,
    );
    parser.process(&output);
    assert!(
        !parser.screen().alternate_screen(),
        "top left the alternate screen on"
    );
    assert!(!parser.screen().hide_cursor(), "top left the cursor hidden");
    let after = String::from_utf8_lossy(&output[mark..]);
    assert!(
        after.contains("\x1b[?1049l"),
        "no leave-alternate-screen after q: {after:?}"
    );
}
