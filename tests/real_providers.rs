//! End to end with the REAL provider CLIs — Claude Code 2.1.197, Codex
//! 0.171.0 and opencode 1.18.33 — offline, against the mock model server,
//! each test in a network namespace of its own (see `tests/support/real`).
//!
//! Every test is `#[ignore]`d, as it needs the three CLIs: run them with
//! `--include-ignored` and `AGENT_COMMS_REAL_PROVIDERS` naming the
//! directory that holds them (what `scripts/install-providers` prints);
//! without it each fails saying so. Needs `unshare -n` and `nsenter`
//! (root, or the capability to make network namespaces), and
//! `mock-model-server` built next to `agent-comms`
//! (`cargo build -p agent-comms-mockmodel`):
//!
//! ```sh
//! cargo build -p agent-comms-mockmodel
//! AGENT_COMMS_REAL_PROVIDERS="$(scripts/install-providers)" \
//!     cargo test --test real_providers -- --include-ignored --test-threads=2
//! ```
//!
//! Casts of the served sessions and the mock's request log stay in
//! `target/tmp/real-providers/<test>/`.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::procs::{cmdline, describe, parent, pid_alive};
use support::real::sampler::{ms, runs, Sampler};
use support::real::trials::Trials;
use support::real::world::{Served, World};
use support::real::{now_ms, Cli, START, TURN};
use support::term::Term;

/// The runtime every test serves.
const ID: &str = "alice";

/// An evidence timestamp (Unix milliseconds).
fn ev_ms(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn start_served(w: &World) -> Served {
    let served = w.serve(ID, &[], &[]);
    w.wait_activity(ID, "idle", START, "start-up");
    served
}

// --- starts and reaches its idle prompt --------------------------------------

/// Text of the input prompt, as the supervisor's screen shows it.
fn prompt_marker(cli: Cli) -> &'static str {
    match cli {
        Cli::Claude => "? for shortcuts",
        Cli::Codex => "› ",
        Cli::Opencode => "┃",
    }
}

fn reaches_idle(cli: Cli, test: &str) {
    let w = World::new(cli, test);
    let mut served = w.serve(ID, &[], &[]);
    let t0 = Instant::now();
    w.wait_activity(ID, "idle", START, "start-up");
    let idle_at = t0.elapsed();
    let first_idle = w.report(ID);
    // Idle is only true once the prompt is on the screen.
    let deadline = Instant::now() + START;
    while !w
        .snapshot_lines(ID)
        .iter()
        .any(|l| l.contains(prompt_marker(cli)))
    {
        assert!(
            Instant::now() < deadline,
            "[{test}] idle, but the prompt ({:?}) never showed:\n{}",
            prompt_marker(cli),
            w.report(ID)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let prompt_at = t0.elapsed();
    println!(
        "{test}: idle after {:.1} s, prompt drawn after {:.1} s\n{}",
        idle_at.as_secs_f64(),
        prompt_at.as_secs_f64(),
        w.report(ID)
    );
    if prompt_at > idle_at + Duration::from_millis(300) {
        println!("{test}: NOTE: the adapter said idle before the prompt was drawn; at that moment:\n{first_idle}");
    }
    // The runtime is registered and online.
    let (ok, out, err) = w.ac(
        &["runtime", "show", "--id", ID, "--json"],
        Duration::from_secs(10),
    );
    assert!(ok, "runtime show failed: {out}{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["status"], "ONLINE", "{v}");
    w.finish(vec![&mut served.tty]);
}

#[test]
#[ignore = needs_real_clis!()]
fn claude_starts_and_reaches_its_idle_prompt() {
    reaches_idle(Cli::Claude, "claude_starts_and_reaches_its_idle_prompt");
}

#[test]
#[ignore = needs_real_clis!()]
fn codex_starts_and_reaches_its_idle_prompt() {
    reaches_idle(Cli::Codex, "codex_starts_and_reaches_its_idle_prompt");
}

#[test]
#[ignore = needs_real_clis!()]
fn opencode_starts_and_reaches_its_idle_prompt() {
    reaches_idle(Cli::Opencode, "opencode_starts_and_reaches_its_idle_prompt");
}

// --- deliver: busy during the reply, idle after, a second one waits ---------

fn delivers_and_waits_for_the_turn(cli: Cli, test: &str) {
    let w = World::new(cli, test);
    let mut served = start_served(&w);
    let first = "say hello THINK=1 SLOW=3 REPLY=pong";
    let second = "say again SLOW=1 REPLY=second";

    let sampler = Sampler::start(&w, ID);
    let ev1 = w
        .deliver(ID, first, 20)
        .unwrap_or_else(|e| panic!("[{test}] deliver failed: {e}\n{}", w.report(ID)));
    for key in ["echoed", "entered", "submitted"] {
        assert!(
            ev1[key].is_number(),
            "[{test}] evidence without {key}: {ev1}"
        );
    }
    assert!(ev1["enter_presses"].as_u64().unwrap_or(0) >= 1, "{ev1}");

    // Mid-reply (1 s of thinking, then 3 s of streaming): a second
    // delivery must wait for the end of the turn.
    let mid = ev_ms(&ev1["submitted"]) / 1000.0 + 2.0;
    let wait = mid - now_ms() / 1000.0;
    assert!(wait < 10.0, "[{test}] odd evidence: {ev1}");
    if wait > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(wait));
    }
    let issued = now_ms();
    let (ev2, r1, r2) = std::thread::scope(|s| {
        let second_delivery = s.spawn(|| w.deliver(ID, second, 30));
        let r1 = w.wait_request(first, TURN);
        let r2 = w.wait_request(second, TURN);
        (second_delivery.join().unwrap(), r1, r2)
    });
    w.wait_activity(ID, "idle", TURN, "after both turns");
    // A last sample or two after the end.
    std::thread::sleep(Duration::from_millis(300));
    let samples = sampler.stop();

    let r1 = r1.unwrap_or_else(|| {
        panic!(
            "[{test}] the mock never answered a prompt holding {first:?}:\n{}",
            w.requests_summary()
        )
    });
    let ev2 = ev2.unwrap_or_else(|e| {
        panic!(
            "[{test}] the second deliver failed: {e}\n{}\n{}",
            w.report(ID),
            w.requests_summary()
        )
    });
    let r2 = r2.unwrap_or_else(|| {
        panic!(
            "[{test}] the mock never answered a prompt holding {second:?}:\n{}",
            w.requests_summary()
        )
    });
    let (submitted1, last1) = (ev_ms(&ev1["submitted"]), ms(&r1["last_delta_at"]));
    let (arrived2, entered2) = (ms(&r2["received_at"]), ev_ms(&ev2["entered"]));
    let busy: Vec<f64> = samples
        .iter()
        .filter(|(t, a)| a == "busy" && *t >= submitted1 && *t <= last1 + 400.0)
        .map(|(t, _)| t - submitted1)
        .collect();
    let timeline = format!(
        "first: submitted {submitted1:.0}, request received +{:.0} ms, last delta +{:.0} ms; second: issued +{:.0} ms, entered +{:.0} ms, request received +{:.0} ms; busy samples at +ms {:?}; activity runs: {}",
        ms(&r1["received_at"]) - submitted1,
        last1 - submitted1,
        issued - submitted1,
        entered2 - submitted1,
        arrived2 - submitted1,
        busy.iter().map(|t| *t as i64).collect::<Vec<_>>(),
        runs(&samples)
    );
    println!("{test}: {timeline}");
    assert!(
        !busy.is_empty(),
        "[{test}] session activity never said busy during the first reply: {timeline}\n{}",
        w.report(ID)
    );
    assert!(
        issued < last1,
        "[{test}] the second delivery was issued after the first reply ended, not during it: {timeline}"
    );
    assert!(
        arrived2 > last1 && entered2 > last1,
        "[{test}] the second prompt was submitted before the first reply's last delta: {timeline}"
    );
    // Each text reached the model exactly once, as the last user message
    // of one request (title requests aside).
    for text in [first, second] {
        assert_eq!(
            w.logged_turns_with(text),
            1,
            "[{test}] {text:?} did not reach the model exactly once:\n{}",
            w.requests_summary()
        );
    }
    // Back to idle after the reply: the last sample says so.
    assert_eq!(
        samples.last().map(|(_, a)| a.as_str()),
        Some("idle"),
        "[{test}] {timeline}"
    );
    w.finish(vec![&mut served.tty]);
}

#[test]
#[ignore = needs_real_clis!()]
fn claude_delivery_sees_the_turn_busy_and_waits_for_its_end() {
    delivers_and_waits_for_the_turn(
        Cli::Claude,
        "claude_delivery_sees_the_turn_busy_and_waits_for_its_end",
    );
}

#[test]
#[ignore = needs_real_clis!()]
fn codex_delivery_sees_the_turn_busy_and_waits_for_its_end() {
    delivers_and_waits_for_the_turn(
        Cli::Codex,
        "codex_delivery_sees_the_turn_busy_and_waits_for_its_end",
    );
}

#[test]
#[ignore = needs_real_clis!()]
fn opencode_delivery_sees_the_turn_busy_and_waits_for_its_end() {
    delivers_and_waits_for_the_turn(
        Cli::Opencode,
        "opencode_delivery_sees_the_turn_busy_and_waits_for_its_end",
    );
}

// --- send --wait from another agent -----------------------------------------

fn a_message_is_announced(cli: Cli, test: &str) {
    let w = World::new(cli, test);
    let mut served = start_served(&w);
    let (ok, out, err) = w.ac(
        &[
            "--actor",
            "bob",
            "send",
            "--to",
            ID,
            "--wait",
            "25",
            "--json",
            "the API tests fail on main; can you look?",
        ],
        Duration::from_secs(40),
    );
    assert!(
        ok,
        "[{test}] send --wait failed: {out}{err}\n{}",
        w.report(ID)
    );
    let inv: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("[{test}] send --json printed no JSON ({e}): {out}"));
    let inv_id = inv["id"].as_str().unwrap_or_default().to_owned();
    assert!(inv_id.starts_with("inv_"), "[{test}] {inv}");
    let request = w
        .wait_request("[agent-comms] message inv_", TURN)
        .unwrap_or_else(|| {
            panic!(
                "[{test}] the notification never reached the model:\n{}\n{}",
                w.requests_summary(),
                w.report(ID)
            )
        });
    let prompt = request["prompt"].as_str().unwrap();
    assert!(
        prompt.contains(&format!(
            "[agent-comms] message {inv_id} from bob; read it with: agent-comms message show {inv_id}"
        )),
        "[{test}] {prompt:?}"
    );
    // The turn on it (a title request may come first, and opencode asks
    // for the turn a moment after the input line cleared), then idle.
    let note = format!(
        "[agent-comms] message {inv_id} from bob; read it with: agent-comms message show {inv_id}"
    );
    let deadline = std::time::Instant::now() + TURN;
    while w.turns_with(&note) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    w.wait_activity(ID, "idle", TURN, "after the notification's turn");
    assert_eq!(
        w.turns_with(&note),
        1,
        "[{test}] the notification did not reach the model exactly once:\n{}",
        w.requests_summary()
    );
    w.finish(vec![&mut served.tty]);
}

#[test]
#[ignore = needs_real_clis!()]
fn claude_gets_a_message_from_another_agent() {
    a_message_is_announced(Cli::Claude, "claude_gets_a_message_from_another_agent");
}

#[test]
#[ignore = needs_real_clis!()]
fn codex_gets_a_message_from_another_agent() {
    a_message_is_announced(Cli::Codex, "codex_gets_a_message_from_another_agent");
}

#[test]
#[ignore = needs_real_clis!()]
fn opencode_gets_a_message_from_another_agent() {
    a_message_is_announced(Cli::Opencode, "opencode_gets_a_message_from_another_agent");
}

/// Twenty deliveries in a row with the profile's own Enter delay: each is
/// submitted (by its first Enter) and reaches the model exactly once. The
/// experiment behind the delays is tests/enter_delay.rs.
fn twenty_deliveries_land_once(cli: Cli, test: &str) {
    let w = World::new(cli, test);
    let mut served = start_served(&w);
    let trials = Trials::run(&w, ID, "in a row", 20);
    assert!(trials.lost.is_empty(), "[{test}] {:#?}", trials.lost);
    assert_eq!(
        trials.at_model(&w).not_once,
        Vec::<&str>::new(),
        "[{test}] not exactly once at the model:\n{}",
        w.requests_summary()
    );
    assert_eq!(
        trials.at_once, 20,
        "[{test}] {} needed another Enter",
        trials.pressed_again
    );
    w.finish(vec![&mut served.tty]);
}

#[test]
#[ignore = needs_real_clis!()]
fn claude_takes_twenty_deliveries_each_once() {
    twenty_deliveries_land_once(Cli::Claude, "claude_takes_twenty_deliveries_each_once");
}

#[test]
#[ignore = needs_real_clis!()]
fn codex_takes_twenty_deliveries_each_once() {
    twenty_deliveries_land_once(Cli::Codex, "codex_takes_twenty_deliveries_each_once");
}

#[test]
#[ignore = needs_real_clis!()]
fn opencode_takes_twenty_deliveries_each_once() {
    twenty_deliveries_land_once(Cli::Opencode, "opencode_takes_twenty_deliveries_each_once");
}

/// Ten messages waiting for the real CLI reach it as one notification
/// naming all ten — one turn of the model, not ten — though the line is
/// longer than the CLI's input box is wide (it wraps, and the echo check
/// still holds), and each message is DELIVERED. They are queued while the
/// runtime is offline, so the batch does not depend on how fast ten sends
/// run; that nothing is taken while the agent works is the fakes' test
/// (tests/interactive.rs).
fn a_burst_is_one_turn(cli: Cli, test: &str) {
    let w = World::new(cli, test);
    let (ok, out, err) = w.ac(
        &["--actor", ID, "runtime", "configure", "--id", ID],
        Duration::from_secs(20),
    );
    assert!(ok, "[{test}] runtime configure failed: {out}{err}");
    let ids: Vec<String> = (0..10)
        .map(|i| {
            let text = format!("burst message {i}");
            let (ok, out, err) = w.ac(
                &["--actor", "bob", "send", "--to", ID, "--json", &text],
                Duration::from_secs(20),
            );
            assert!(ok, "[{test}] send failed: {out}{err}");
            let inv: Value = serde_json::from_str(out.trim())
                .unwrap_or_else(|e| panic!("[{test}] send --json printed no JSON ({e}): {out}"));
            inv["id"].as_str().unwrap_or_default().to_owned()
        })
        .collect();
    let mut served = w.serve(ID, &[], &[]);
    let note = format!(
        "[agent-comms] 10 messages from bob; read them with: agent-comms message show {}",
        ids.join(" ")
    );
    assert!(
        w.wait_turn(&note, TURN * 2),
        "[{test}] the batch's notification never reached the model as a turn:\n{}\n{}",
        w.requests_summary(),
        w.report(ID)
    );
    w.wait_activity(ID, "idle", TURN, "after the notification's turn");
    // The CLI may ask the model before the supervisor has seen the text
    // leave its input line and marked the batch: wait for the marks.
    let delivered_ids = || {
        let (ok, out, err) = w.ac(
            &["message", "list", "--status", "DELIVERED", "--json"],
            Duration::from_secs(20),
        );
        assert!(ok, "[{test}] message list failed: {out}{err}");
        let listed: Value = serde_json::from_str(out.trim()).unwrap();
        listed
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["id"].as_str().map(str::to_owned))
            .collect::<Vec<_>>()
    };
    let deadline = Instant::now() + TURN;
    let mut delivered = delivered_ids();
    while !ids.iter().all(|id| delivered.contains(id)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        delivered = delivered_ids();
    }
    for id in &ids {
        assert!(delivered.contains(id), "[{test}] {id} not DELIVERED");
    }
    assert_eq!(
        w.logged_turns_with(&note),
        1,
        "[{test}] the batch did not reach the model exactly once:\n{}",
        w.requests_summary()
    );
    for id in &ids {
        let alone = format!(
            "[agent-comms] message {id} from bob; read it with: agent-comms message show {id}"
        );
        assert_eq!(
            w.turns_with(&alone),
            0,
            "[{test}] {id} was also announced alone:\n{}",
            w.requests_summary()
        );
    }
    w.finish(vec![&mut served.tty]);
}

#[test]
#[ignore = needs_real_clis!()]
fn claude_gets_a_burst_in_one_turn() {
    a_burst_is_one_turn(Cli::Claude, "claude_gets_a_burst_in_one_turn");
}

#[test]
#[ignore = needs_real_clis!()]
fn codex_gets_a_burst_in_one_turn() {
    a_burst_is_one_turn(Cli::Codex, "codex_gets_a_burst_in_one_turn");
}

#[test]
#[ignore = needs_real_clis!()]
fn opencode_gets_a_burst_in_one_turn() {
    a_burst_is_one_turn(Cli::Opencode, "opencode_gets_a_burst_in_one_turn");
}

// --- takeover ---------------------------------------------------------------

/// Where the ordinary CLI shows its idle prompt, as a person sees it.
fn ordinary_ready(cli: Cli) -> &'static str {
    match cli {
        Cli::Claude => "? for shortcuts",
        Cli::Codex => "? for shortcuts",
        Cli::Opencode => "ctrl+p commands",
    }
}

/// The session the ordinary CLI `pid` is on, read from the CLI's own files.
fn provider_session(w: &World, pid: u32) -> Option<String> {
    match w.cli {
        Cli::Claude => {
            let p = w
                .user_home
                .join(".claude/sessions")
                .join(format!("{pid}.json"));
            let v: Value = serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()?;
            v["sessionId"].as_str().map(str::to_owned)
        }
        Cli::Codex => {
            let ids: Vec<String> = codex_rollouts(w).into_iter().map(|(id, _)| id).collect();
            (ids.len() == 1).then(|| ids[0].clone())
        }
        Cli::Opencode => opencode_sessions(w).last().cloned(),
    }
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Codex's rollouts: (thread id from the `session_meta` line, path).
fn codex_rollouts(w: &World) -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    files_under(&w.codex_home().join("sessions"), &mut files);
    files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|p| {
            let text = std::fs::read_to_string(&p).ok()?;
            let first: Value = serde_json::from_str(text.lines().next()?).ok()?;
            let id = first["payload"]["id"].as_str()?.to_owned();
            Some((id, p))
        })
        .collect()
}

/// The opencode session ids its logs name (`session.id=ses_…`), in order.
fn opencode_sessions(w: &World) -> Vec<String> {
    let mut files = Vec::new();
    files_under(&w.user_home.join(".local/share/opencode/log"), &mut files);
    files.sort();
    let mut ids: Vec<String> = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for (i, _) in text.match_indices("ses_") {
            let id: String = text[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if ids.last() != Some(&id) {
                ids.retain(|x| x != &id);
                ids.push(id);
            }
        }
    }
    ids
}

/// Types a prompt into a plain terminal the way a person pastes it.
fn paste_and_enter(tty: &Term, text: &str) {
    tty.write(format!("\x1b[200~{text}\x1b[201~").as_bytes());
    std::thread::sleep(Duration::from_millis(400));
    tty.write(b"\r");
}

fn is_descendant(pid: u32, ancestor: u32) -> bool {
    let mut p = pid;
    for _ in 0..32 {
        if p == ancestor {
            return true;
        }
        match parent(p) {
            Some(pp) if pp > 1 => p = pp,
            _ => return false,
        }
    }
    false
}

fn takes_over(cli: Cli, test: &str) {
    let w = World::new(cli, test);
    // An ordinary session, one turn on it.
    let mut ordinary = w.ordinary(&[]);
    assert!(
        ordinary.tty.wait_screen(START, |lines| lines
            .iter()
            .any(|l| l.contains(ordinary_ready(cli)))),
        "[{test}] the ordinary {} did not show its prompt:\n{}",
        cli.program(),
        ordinary.tty.screen()
    );
    std::thread::sleep(Duration::from_millis(500));
    let before = "first turn before the takeover REPLY=zebra";
    paste_and_enter(&ordinary.tty, before);
    assert!(
        w.wait_request(before, TURN).is_some(),
        "[{test}] the ordinary session's turn never reached the model:\n{}\n{}",
        w.requests_summary(),
        ordinary.tty.screen()
    );
    // The turn ends (its reply is on the screen), and the CLI has noted
    // its session.
    let tuis = w.tuis();
    assert_eq!(
        tuis.len(),
        1,
        "[{test}] expected one {} TUI: {:?}",
        cli.program(),
        tuis.iter().map(|&p| describe(p)).collect::<Vec<_>>()
    );
    let tty_pid = ordinary.tty.pid();
    assert!(
        ordinary.tty.wait_screen(TURN, |lines| lines
            .iter()
            .any(|l| l.contains("zebra") && !l.contains("REPLY="))),
        "[{test}] the reply never showed:\n{}",
        ordinary.tty.screen()
    );
    std::thread::sleep(Duration::from_secs(2));
    // The pid a person would name: the process they started (for Codex,
    // the `node …/codex` launcher; the TUI is its child).
    let old_pid = tty_pid;
    let old_tui = tuis[0];
    let mut old_session = None;
    let deadline = Instant::now() + Duration::from_secs(10);
    while old_session.is_none() && Instant::now() < deadline {
        old_session = provider_session(&w, old_tui);
        std::thread::sleep(Duration::from_millis(200));
    }
    let old_session = old_session.unwrap_or_else(|| {
        panic!(
            "[{test}] cannot find the ordinary session's id in the CLI's own files (HOME {})",
            w.user_home.display()
        )
    });
    println!(
        "{test}: ordinary pid {old_pid} (TUI {old_tui}) on session {old_session}; processes:\n{}",
        w.process_table()
    );

    // Take it over.
    let pid_s = old_pid.to_string();
    let mut served = w.serve(ID, &["--takeover-pid", &pid_s], cli.continue_args());
    let taking = format!("taking over process {old_pid}");
    let said = served.tty.wait_output(&taking, Duration::from_secs(20));
    assert!(
        said,
        "[{test}] interactive-serve never said {taking:?}; its terminal:\n{}\n{}",
        served.tty.output(),
        served.tty.screen()
    );
    w.wait_activity(ID, "idle", START, "after the takeover");
    assert!(
        !pid_alive(old_tui),
        "[{test}] the old TUI {old_tui} still runs"
    );
    assert!(
        !pid_alive(old_pid),
        "[{test}] the old process {old_pid} still runs"
    );

    // Exactly one TUI, the served one, on the same session.
    let tuis = w.tuis();
    let described: Vec<String> = tuis.iter().map(|&p| describe(p)).collect();
    assert_eq!(tuis.len(), 1, "[{test}] TUIs running: {described:#?}");
    let new_tui = tuis[0];
    assert!(
        is_descendant(new_tui, served.tty.pid()),
        "[{test}] the one TUI is not the served one: {described:?}"
    );
    let args = cmdline(new_tui);
    println!("{test}: new TUI {}", args.join(" "));
    let (ok, out, _) = w.ac(
        &["runtime", "show", "--id", ID, "--json"],
        Duration::from_secs(10),
    );
    assert!(ok);
    let rt: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        rt["conversation_id"],
        old_session.as_str(),
        "[{test}] runtime show: {rt}"
    );
    match cli {
        Cli::Claude => {
            let mut now = None;
            let deadline = Instant::now() + Duration::from_secs(10);
            while now.is_none() && Instant::now() < deadline {
                now = provider_session(&w, new_tui);
                std::thread::sleep(Duration::from_millis(200));
            }
            assert_eq!(
                now.as_deref(),
                Some(old_session.as_str()),
                "[{test}] ~/.claude/sessions/{new_tui}.json names another session"
            );
        }
        Cli::Codex | Cli::Opencode => assert!(
            args.iter().any(|a| a == &old_session),
            "[{test}] the new TUI's arguments do not name {old_session}: {args:?}"
        ),
    }

    // A delivered message works, and lands in that session.
    let after = "after the takeover REPLY=yak";
    let ev = w.deliver(ID, after, 30).unwrap_or_else(|e| {
        panic!(
            "[{test}] deliver after the takeover failed: {e}\n{}",
            w.report(ID)
        )
    });
    assert!(ev["submitted"].is_number(), "{ev}");
    let r = w.wait_request(after, TURN).unwrap_or_else(|| {
        panic!(
            "[{test}] the delivered prompt never reached the model:\n{}",
            w.requests_summary()
        )
    });
    // The resumed conversation went with it: the request carries the turn
    // before the takeover.
    let body = r["body"].to_string();
    assert!(
        body.contains("first turn before the takeover"),
        "[{test}] the request after the takeover does not carry the earlier turn: the CLI did not resume the session"
    );
    match cli {
        Cli::Codex => {
            let holding: Vec<String> = codex_rollouts(&w)
                .into_iter()
                .filter(|(_, p)| {
                    std::fs::read_to_string(p)
                        .unwrap_or_default()
                        .contains("after the takeover")
                })
                .map(|(id, _)| id)
                .collect();
            assert_eq!(
                holding,
                vec![old_session.clone()],
                "[{test}] rollouts holding the new turn"
            );
        }
        Cli::Opencode => {
            let ids = opencode_sessions(&w);
            assert_eq!(
                ids,
                vec![old_session.clone()],
                "[{test}] sessions in opencode's logs"
            );
        }
        Cli::Claude => {}
    }
    w.wait_activity(ID, "idle", TURN, "after the delivered turn");
    w.finish(vec![&mut served.tty, &mut ordinary.tty]);
}

#[test]
#[ignore = needs_real_clis!()]
fn an_ordinary_claude_is_taken_over_on_its_session() {
    takes_over(
        Cli::Claude,
        "an_ordinary_claude_is_taken_over_on_its_session",
    );
}

#[test]
#[ignore = needs_real_clis!()]
fn an_ordinary_codex_is_taken_over_on_its_thread() {
    takes_over(Cli::Codex, "an_ordinary_codex_is_taken_over_on_its_thread");
}

#[test]
#[ignore = needs_real_clis!()]
fn an_ordinary_opencode_is_taken_over_on_its_session() {
    takes_over(
        Cli::Opencode,
        "an_ordinary_opencode_is_taken_over_on_its_session",
    );
}

// --- a tool call the model asks for -----------------------------------------

/// The file the model's tool call writes, and its content.
const TOOL_FILE: &str = "m.txt";
const TOOL_CONTENT: &str = "from the model";
/// opencode shows a paste longer than this as `[Pasted ~1 lines]`, which
/// a delivery cannot see echoed (1.18: unless the configuration sets
/// `experimental.disable_paste_summary`).
const OPENCODE_PASTE_SUMMARY_OVER: usize = 150;

/// The tool that writes `file` (its name in this CLI's request, and its
/// arguments), and the CLI arguments that let it run without asking.
fn writing_tool(cli: Cli, file: &Path) -> (&'static str, Value, &'static [&'static str]) {
    match cli {
        Cli::Claude => (
            "Write",
            serde_json::json!({"file_path": file, "content": TOOL_CONTENT}),
            &["--permission-mode", "acceptEdits"],
        ),
        Cli::Codex => (
            "exec_command",
            serde_json::json!({"cmd": format!("printf '{TOOL_CONTENT}' > '{}'", file.display())}),
            &["--sandbox", "workspace-write"],
        ),
        Cli::Opencode => (
            "write",
            serde_json::json!({"filePath": file, "content": TOOL_CONTENT}),
            &[],
        ),
    }
}

/// Delivers `verb` and the knob that calls `tool` with `args`, and waits
/// for the request that brings the tool's result back and the turn's end;
/// asserts that the turn made exactly that one call (no other request,
/// titles or Claude's side requests, was answered with one). Returns the
/// request with the result.
fn call_through_the_model(w: &World, verb: &str, tool: &str, args: &Value) -> Value {
    let test = &w.test;
    let text = format!("{verb} {}", agent_comms_mockmodel::tools::knob(tool, args));
    assert!(
        text.len() <= OPENCODE_PASTE_SUMMARY_OVER,
        "[{test}] the prompt is {} characters (a long work directory?); opencode would summarize it: {text}",
        text.len()
    );
    // Only this turn's requests count: an earlier turn's are in the log.
    let before = w.requests().len();
    w.deliver(ID, &text, 20)
        .unwrap_or_else(|e| panic!("[{test}] deliver failed: {e}\n{}", w.report(ID)));
    let deadline = Instant::now() + TURN;
    let follow_up = loop {
        let found = w
            .requests()
            .into_iter()
            .skip(before)
            .find(|r| r["tool_result"].is_string());
        if let Some(r) = found {
            break r;
        }
        assert!(
            Instant::now() < deadline,
            "[{test}] no request carried the tool's result:\n{}\n{}",
            w.requests_summary(),
            w.report(ID)
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    w.wait_activity(ID, "idle", TURN, "after the tool turn");
    let calls: Vec<Value> = w
        .requests()
        .into_iter()
        .skip(before)
        .filter(|r| !r["tool_call"].is_null())
        .collect();
    assert_eq!(calls.len(), 1, "[{test}] {calls:#?}");
    assert_eq!(calls[0]["tool_call"]["name"], tool);
    assert_eq!(&calls[0]["tool_call"]["arguments"], args);
    follow_up
}

/// The mock's `TOOL=`/`ARGS64=` knob makes the model call a tool: the CLI
/// runs it, the model's next request carries its result, the reply to that
/// is on the screen, and no other request (titles, Claude's side requests)
/// was answered with a call.
fn runs_a_tool_the_model_asks_for(cli: Cli, test: &str) {
    let w = World::new(cli, test);
    let file = w.work.join(TOOL_FILE);
    let (tool, args, cli_args) = writing_tool(cli, &file);
    let mut served = w.serve(ID, &[], cli_args);
    w.wait_activity(ID, "idle", START, "start-up");
    let follow_up = call_through_the_model(&w, "write", tool, &args);
    assert_eq!(
        std::fs::read_to_string(&file).ok().as_deref(),
        Some(TOOL_CONTENT),
        "[{test}] the tool did not write {}",
        file.display()
    );
    let reply = follow_up["reply"].as_str().unwrap_or_default().to_owned();
    assert!(
        reply.starts_with("tool result received: "),
        "[{test}] {follow_up}"
    );
    let deadline = Instant::now() + TURN;
    while !w
        .snapshot_lines(ID)
        .iter()
        .any(|l| l.contains("tool result received"))
    {
        assert!(
            Instant::now() < deadline,
            "[{test}] the reply after the tool's result never showed:\n{}",
            w.report(ID)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "{test}: the tool's result as the model got it: {:?}",
        follow_up["tool_result"]
    );
    w.finish(vec![&mut served.tty]);
}

#[test]
#[ignore = needs_real_clis!()]
fn claude_runs_a_tool_the_model_asks_for() {
    runs_a_tool_the_model_asks_for(Cli::Claude, "claude_runs_a_tool_the_model_asks_for");
}

#[test]
#[ignore = needs_real_clis!()]
fn codex_runs_a_tool_the_model_asks_for() {
    runs_a_tool_the_model_asks_for(Cli::Codex, "codex_runs_a_tool_the_model_asks_for");
}

#[test]
#[ignore = needs_real_clis!()]
fn opencode_runs_a_tool_the_model_asks_for() {
    runs_a_tool_the_model_asks_for(Cli::Opencode, "opencode_runs_a_tool_the_model_asks_for");
}

// --- agent-comms' own tools, over MCP -----------------------------------------

/// The cell session the model's `cell_run` call runs code in.
const CELL_SESSION: &str = "py";

/// The name this CLI gives agent-comms' `cell_run` when the server is
/// registered as `agent-comms` (Codex offers it as `cell_run` in the
/// namespace `mcp__agent_comms`, which the mock spells so).
/// The name `cli` gives agent-comms' MCP tool `tool` (docs/providers.md).
fn mcp_tool(cli: Cli, tool: &str) -> String {
    match cli {
        Cli::Claude => format!("mcp__agent-comms__{tool}"),
        Cli::Codex => format!("mcp__agent_comms__{tool}"),
        Cli::Opencode => format!("agent-comms_{tool}"),
    }
}

/// `k ARGS…` on the test's side, bounded; fails the test unless it exits 0.
fn k(w: &World, args: &[&str]) -> String {
    let what = format!("k {}", args.join(" "));
    let mut cmd = w.env.command_of(support::cells::K.as_str(), args);
    cmd.current_dir(&w.work);
    let run = support::run::try_run_within(cmd, &what, Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("[{}] {e}", w.test));
    assert!(run.success(), "[{}] {what}: {run:#?}", w.test);
    run.stdout
}

/// The CLI, given agent-comms through `interactive-serve --mcp` (the
/// user's way), calls agent-comms' tools when the model asks, each turn's
/// next request carrying the tool's real result: `cell_run` twice in a
/// python session started beforehand with `k new` (the second reads what
/// the first defined), `session_snapshot` of that session's screen, and
/// `message_send` to another agent, stored as sent by this runtime's agent.
/// Until a turn's request offers the model `tool`: Claude Code takes
/// prompts before its MCP servers are connected, and then offers
/// `WaitForMcpServers` instead of their tools (seen on a loaded machine).
/// Each look is a greeting turn of its own.
fn wait_until_offered(w: &World, tool: &str) {
    let deadline = Instant::now() + START;
    for n in 0.. {
        let text = format!("hello {n}");
        let before = w.requests().len();
        w.deliver(ID, &text, 20)
            .unwrap_or_else(|e| panic!("[{}] deliver failed: {e}", w.test));
        w.wait_request(&text, TURN);
        w.wait_activity(ID, "idle", TURN, "after the greeting");
        let offered = w.requests().into_iter().skip(before).any(|r| {
            r["body"]["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["name"] == tool))
        });
        if offered {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "[{}] no request offered {tool}:\n{}",
            w.test,
            w.requests_summary()
        );
    }
}

fn runs_a_cell_over_mcp(cli: Cli, test: &str) {
    let w = World::new(cli, test);
    assert_eq!(
        k(&w, &["new", CELL_SESSION, "python3"]),
        format!("OK {CELL_SESSION}\n")
    );
    let mut served = w.serve(ID, &["--mcp"], &[]);
    w.wait_activity(ID, "idle", START, "start-up");
    if cli == Cli::Claude {
        wait_until_offered(&w, &mcp_tool(cli, "cell_run"));
    }
    let result = |tool: &str, args: Value| {
        let follow_up = call_through_the_model(&w, "use", &mcp_tool(cli, tool), &args);
        follow_up["tool_result"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let set = result(
        "cell_run",
        serde_json::json!({"session": CELL_SESSION, "code": "x = 6*7"}),
    );
    assert!(set.contains("done"), "[{test}] {set:?}");
    // The output is computed from the first cell: the REPL kept `x`, and
    // the call's arguments do not hold the answer.
    let cell = serde_json::json!({"session": CELL_SESSION, "code": "print('answer', x)"});
    let ran = result("cell_run", cell);
    assert!(
        ran.contains("answer 42"),
        "[{test}] the tool's result is not the cell's output: {ran:?}"
    );
    println!("{test}: the tool's result as the model got it: {ran:?}");
    let screen = result(
        "session_snapshot",
        serde_json::json!({"session": CELL_SESSION, "rows": 5}),
    );
    assert!(
        screen.contains("answer 42"),
        "[{test}] the screen: {screen:?}"
    );
    w.env
        .run_ok(&["--actor", "peer", "runtime", "configure", "--id", "peer"]);
    let sent = result(
        "message_send",
        serde_json::json!({"to": "peer", "text": "cell done"}),
    );
    assert!(sent.contains("inv_"), "[{test}] {sent:?}");
    let inbox = w
        .env
        .run_ok(&["message", "list", "--to", "peer", "--json"])
        .stdout;
    assert!(
        inbox.contains(&format!("\"from\":\"{ID}\"")),
        "[{test}] {inbox}"
    );
    k(&w, &["kill", CELL_SESSION]);
    w.finish(vec![&mut served.tty]);
}

#[test]
#[ignore = needs_real_clis!()]
fn claude_runs_a_cell_over_mcp() {
    runs_a_cell_over_mcp(Cli::Claude, "claude_runs_a_cell_over_mcp");
}

#[test]
#[ignore = needs_real_clis!()]
fn codex_runs_a_cell_over_mcp() {
    runs_a_cell_over_mcp(Cli::Codex, "codex_runs_a_cell_over_mcp");
}

#[test]
#[ignore = needs_real_clis!()]
fn opencode_runs_a_cell_over_mcp() {
    runs_a_cell_over_mcp(Cli::Opencode, "opencode_runs_a_cell_over_mcp");
}
