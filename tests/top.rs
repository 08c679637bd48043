//! `agent-comms top` in a 80×24 terminal, read as rendered: a runtime
//! (the fake Claude Code, served in a terminal of its own) shown busy,
//! then idle, then typed into; a message sent while it is busy shown
//! PENDING, then DELIVERED, then in full with `m`, then redelivered with
//! `r`; `/` filtering; Enter attaching and the detach key coming back; `q`
//! leaving the terminal as it found it. An ACP runtime shown busy while a
//! turn runs.
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

/// Waits until the whole screen, as one text, satisfies `cond`.
#[track_caller]
fn wait_shown(top: &Term, what: &str, cond: impl Fn(&str) -> bool) {
    let shown = top.wait_screen(TIMEOUT, |lines| cond(&lines.join("\n")));
    assert!(
        shown,
        "top never showed {what}; it shows:\n{}",
        top.screen()
    );
}

/// The terminal as `top` found it: out of the alternate screen, with the
/// cursor shown, and the alternate screen left after byte `mark`.
#[track_caller]
fn assert_restored(top: &Term, mark: usize) {
    let output = top.output_bytes();
    let (rows, cols) = (NonZeroU16::new(24).unwrap(), NonZeroU16::new(80).unwrap());
    let mut parser = vt100::Parser::new(rows, cols, 0);
    parser.process(&output);
    assert!(
        !parser.screen().alternate_screen(),
        "top left the alternate screen on"
    );
    assert!(!parser.screen().hide_cursor(), "top left the cursor hidden");
    let after = String::from_utf8_lossy(&output[mark..]);
    assert!(
        after.contains("\x1b[?1049l"),
        "no leave-alternate-screen at the end: {after:?}"
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
    let served = env.term_with(
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

    // Tab to the messages, m: the message in full; Esc closes it.
    top.write(b"\tm");
    wait_shown(&top, "the message's body", |screen| {
        screen.contains("alice → bob") && screen.contains("hello from alice")
    });
    top.write(b"\x1b");
    wait_shown(&top, "the message closed", |screen| {
        !screen.contains("alice → bob")
    });

    // r: redelivered, as `message redeliver` says; it goes in a second time.
    top.write(b"r");
    wait_shown(&top, "the redeliver's answer", |screen| {
        screen.contains(&format!("{id} queued for delivery to bob again"))
    });
    wait_until("the message typed in a second time", || {
        let submits = fake_events(&log, "submit");
        let of_it = |e: &&Value| e["text"].as_str().is_some_and(|t| t.contains(id.as_str()));
        submits.iter().filter(of_it).count() == 2
    });
    wait_row(&top, &id, &["alice", "bob", "DELIVERED"]);

    // Keys typed in the terminal bob is served in: a person typing.
    served.write(b"x");
    wait_row(&top, "bob", &["typing"]);
    wait_row(&top, "bob", &["attached"]);

    // / filters the rows; Esc in the filter clears it.
    top.write(b"/nobody\r");
    wait_shown(&top, "bob filtered out", |screen| {
        screen.contains("filter: nobody") && !screen.contains("claude-code")
    });
    top.write(b"/\x1b");
    wait_row(&top, "bob", &["idle"]);

    // Back to the sessions, Enter: attached to bob in this terminal; the
    // detach key comes back to the board.
    let mark = top.mark();
    top.write(b"\t\r");
    top.wait_for_after(mark, "[attached to bob");
    // The fake's screen, redrawn once the terminal is raw: the detach key
    // now reaches attach rather than the line discipline.
    top.wait_for_after(mark, "for shortcuts");
    top.write(b"\x1c");
    wait_shown(&top, "the board again", |screen| {
        screen.contains("back from bob")
    });
    wait_row(&top, "bob", &["idle"]);

    // q: the program ends, the alternate screen is left and the cursor
    // shown again.
    let mark = top.mark();
    top.write(b"q");
    let status = top.wait_exit();
    assert!(status.success(), "top exited with {status:?}");
    assert_restored(&top, mark);
}

#[test]
fn top_shows_an_acp_runtime_busy_while_a_turn_runs() {
    let env = TestEnv::new();
    let served = support::acp::Served::start(&env, "ada", "normal", &[], &[]);
    let mut top = env.term(&["top"]);
    wait_row(&top, &served.id, &["acp", "idle"]);
    // A turn of ten chunks 300 ms apart, prompted in the background (the
    // command returns when the turn ended).
    let mut prompt = env
        .command(&[
            "runtime",
            "deliver",
            "--id",
            "ada",
            "CHUNKS=10 CHUNK_MS=300 work",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_row(&top, "ada", &["busy"]);
    wait_row(&top, "ada", &["idle"]);
    assert!(prompt.wait().unwrap().success(), "the prompt failed");
    // SIGTERM ends it as q does, the terminal put back.
    let mark = top.mark();
    support::procs::signal(top.pid(), libc::SIGTERM);
    assert!(top.wait_exit().success());
    assert_restored(&top, mark);
}

#[test]
fn top_without_a_terminal_says_what_to_use_instead() {
    let env = TestEnv::new();
    let run = env.run(&["top"]).fails_with_one_line();
    assert!(
        run.stderr.contains("top needs a terminal") && run.stderr.contains("session ls --json"),
        "{run:#?}"
    );
}
