//! `runtime acp-serve` end to end with a FAKE ACP agent
//! (`tests/fakes/acp_agent.py`, see tests/fakes/README.md): always on, no
//! network, no real provider. The real agents are in tests/acp_real.rs;
//! here the agent misbehaves on purpose — garbage and oversized lines,
//! requests nobody knows, a write it was never allowed, a stalled input, a
//! death mid-turn — and each test checks what a user would: the runtime's
//! state, the delivery's evidence, the transcript, the files, the processes.

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use support::acp::{deliver, deliver_ok, fake_log, messages, notes, show, transcript, Served};
use support::env::TestEnv;
use support::fakes::fake_events;
use support::procs::{pid_alive, wait_gone};
use support::run::run_within;
use support::{poll_within, wait_until, TIMEOUT};

/// How long a command waits in the tests that queue many turns.
const LONG: Duration = Duration::from_secs(90);
/// The line the fake writes in its `exit-mid-turn` mode, before exit 3.
const LAST_WORDS: &str = "fake-acp-agent: out of cheese in the middle of a turn";

/// The error code of the client's answer to the agent's request `id`.
fn answered_error(entries: &[Value], id: &Value) -> Option<i64> {
    messages(entries, "to_agent")
        .into_iter()
        .find(|m| &m["id"] == id && m.get("method").is_none())
        .and_then(|m| m["error"]["code"].as_i64())
}

/// What a runtime that survived bad input still offers: ONLINE, listed by
/// `session ls` as an ACP session, and a delivery that works.
#[track_caller]
fn still_serves(env: &TestEnv, served: &Served) {
    assert_eq!(show(env, &served.id)["status"], "ONLINE");
    let entry = env
        .ls_entry(&served.id)
        .unwrap_or_else(|| panic!("{} is not in session ls", served.id));
    assert_eq!(entry["kind"], "acp", "{entry}");
    deliver_ok(env, &served.id, "and one more after that");
    assert_eq!(served.prompted().last().unwrap(), "and one more after that");
}

// --- bad input from the agent ------------------------------------------------

#[test]
fn garbage_lines_from_the_agent_are_noted_answered_and_the_session_goes_on() {
    let env = TestEnv::new();
    let served = Served::start(&env, "A", "garbage", &[], &[]);
    deliver_ok(&env, "A", "hello through the garbage");
    let entries = transcript(&env, "A");
    let garbage: Vec<&Value> = entries
        .iter()
        .filter(|e| {
            e["dir"] == "from_agent"
                && e["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("not JSON: this is not JSON"))
        })
        .collect();
    // Once after initialize, once during the turn.
    assert_eq!(garbage.len(), 2, "{entries:#?}");
    let arrays = messages(&entries, "from_agent")
        .into_iter()
        .filter(|m| m.is_array())
        .count();
    assert_eq!(arrays, 2, "the [1, 2, 3] lines: {entries:#?}");
    // The non-JSON line gets JSON-RPC's parse error, with no id to answer.
    assert_eq!(answered_error(&entries, &Value::Null), Some(-32700));
    still_serves(&env, &served);
}

#[test]
fn an_oversized_line_from_the_agent_is_dropped_and_the_session_goes_on() {
    let env = TestEnv::new();
    let served = Served::start(&env, "A", "huge", &[], &[]);
    deliver_ok(&env, "A", "say something long");
    let dropped: Vec<String> = notes(&transcript(&env, "A"))
        .into_iter()
        .filter(|n| n.starts_with("dropped a line of 20971520 bytes"))
        .collect();
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    assert!(dropped[0].contains("16777216-byte limit"), "{dropped:?}");
    still_serves(&env, &served);
}

#[test]
fn unknown_requests_stray_responses_and_an_undeclared_fs_write_are_refused() {
    let env = TestEnv::new();
    let served = Served::start(&env, "A", "unknown", &[], &[]);
    deliver_ok(&env, "A", "edit the file please");
    let entries = transcript(&env, "A");
    // The default policy declares no file system at initialize…
    let init = messages(&entries, "to_agent")
        .into_iter()
        .find(|m| m["method"] == "initialize")
        .unwrap();
    assert_eq!(
        init["params"]["clientCapabilities"]["fs"]["writeTextFile"],
        false
    );
    // …so the write the fake asks for anyway (its request id 1) is refused
    // with an error, noted, and the file is not there.
    assert_eq!(answered_error(&entries, &Value::from(1)), Some(-32001));
    assert!(
        notes(&entries)
            .iter()
            .any(|n| n.starts_with("refused fs/write_text_file")),
        "{entries:#?}"
    );
    assert!(!env.work.join("fake-acp-written.txt").exists());
    let answers = fake_events(&served.log, "answer");
    let write = answers
        .iter()
        .find(|a| a["method"] == "fs/write_text_file")
        .unwrap();
    assert!(write["answer"]["error"].is_object(), "{write}");
    // The unknown method (request id 0) is "method not found".
    assert_eq!(answered_error(&entries, &Value::from(0)), Some(-32601));
    // The response to an id never sent is in the transcript, and harmless.
    assert!(messages(&entries, "from_agent")
        .iter()
        .any(|m| m["id"] == "never-sent-4242"));
    still_serves(&env, &served);
}

#[test]
fn an_agent_that_stops_reading_is_reported_and_ended_not_waited_for() {
    let env = TestEnv::new();
    let served = Served::start(
        &env,
        "A",
        "deaf",
        &[("AGENT_COMMS_ACP_WRITE_DEADLINE_MS", "500")],
        &[],
    );
    // The fake's input pipe holds one page: a prompt this long fills it.
    let long = "d".repeat(4000);
    let run = deliver(&env, "A", &long).fails_with_one_line();
    assert!(
        run.stderr
            .contains("the session ended before the delivery finished"),
        "{run:#?}"
    );
    // The supervisor writes OFFLINE once the agent is ended.
    let view = poll_within(TIMEOUT, "A offline", || {
        Some(show(&env, "A")).filter(|v| v["status"] == "OFFLINE")
    });
    let reason = view["reason"].as_str().unwrap();
    assert!(reason.contains("stopped reading"), "{reason}");
    assert!(
        wait_gone(served.supervisor_pid(), TIMEOUT),
        "the supervisor lives on"
    );
    assert!(wait_gone(served.agent_pid(), TIMEOUT), "the agent lives on");
    assert!(env.run_ok(&["runtime", "list"]).stdout.contains("OFFLINE"));
    env.assert_nothing_left(&[]);
}

// --- an agent that dies mid-turn ---------------------------------------------

#[test]
fn a_delivery_into_an_agent_that_dies_mid_turn_fails_and_the_runtime_says_why() {
    let env = TestEnv::new();
    let served = Served::start(&env, "A", "exit-mid-turn", &[], &[]);
    let run = deliver(&env, "A", "this turn never ends").fails_with_one_line();
    assert!(run.stderr.contains("ended"), "{run:#?}");
    let view = poll_within(TIMEOUT, "A offline", || {
        Some(show(&env, "A")).filter(|v| v["status"] == "OFFLINE")
    });
    let reason = view["reason"].as_str().unwrap();
    assert!(reason.contains("exit status 3"), "{reason}");
    assert!(reason.contains(LAST_WORDS), "{reason}");
    assert!(wait_gone(served.supervisor_pid(), TIMEOUT));
}

#[test]
fn a_message_whose_turn_the_agent_died_in_is_delivered_once_after_the_restart() {
    let env = TestEnv::new();
    let first = Served::start(&env, "A", "exit-mid-turn", &[], &[]);
    let sent = env
        .run_ok(&[
            "--actor",
            "other",
            "send",
            "--to",
            "A",
            "--json",
            "are you there?",
        ])
        .json();
    let message = sent["id"].as_str().unwrap().to_owned();
    let prompts_of_it = || {
        first
            .prompted()
            .iter()
            .filter(|p| p.contains(&message))
            .count()
    };
    wait_until("the notification prompted", || prompts_of_it() == 1);
    wait_until("A offline", || show(&env, "A")["status"] == "OFFLINE");
    assert!(wait_gone(first.supervisor_pid(), TIMEOUT));
    let shown = || env.run_ok(&["message", "show", &message, "--json"]).json();
    let status = || shown()["status"].clone();
    // Not delivered: the turn it was prompted in never ended.
    assert_eq!(status(), "PENDING", "{}", shown());

    let again = Served::start(&env, "A", "normal", &[], &[]);
    assert_eq!(again.session_id(), first.session_id(), "{}", again.started);
    wait_until("the message delivered after the restart", || {
        status() == "DELIVERED"
    });
    assert_eq!(prompts_of_it(), 2, "once into the dead turn, once after");
    let outcomes: Vec<Value> = shown()["delivery_attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].clone())
        .collect();
    assert_eq!(outcomes.last().unwrap(), "DELIVERED", "{outcomes:?}");
    assert_eq!(outcomes.iter().filter(|o| *o == "DELIVERED").count(), 1);
    // The restart continued the session: session/resume of the first id.
    let entries = transcript(&env, "A");
    let resumed: Vec<&Value> = messages(&entries, "to_agent")
        .into_iter()
        .filter(|m| m["method"] == "session/resume")
        .collect();
    assert_eq!(resumed.len(), 1, "{entries:#?}");
    assert_eq!(
        resumed[0]["params"]["sessionId"],
        first.session_id().as_str()
    );
    let news = messages(&entries, "to_agent")
        .into_iter()
        .filter(|m| m["method"] == "session/new")
        .count();
    assert_eq!(news, 1, "only the first start opens a new session");
    assert_eq!(fake_events(&again.log, "resume").len(), 1);
}

// --- one turn at a time ------------------------------------------------------

#[test]
fn concurrent_deliveries_are_prompted_once_each_in_order_one_turn_at_a_time() {
    let env = TestEnv::new();
    let served = Served::start(&env, "A", "normal", &[("FAKE_ACP_TURN_MS", "30")], &[]);
    std::thread::scope(|s| {
        for sender in 0..8 {
            let env = &env;
            s.spawn(move || {
                for n in 0..5 {
                    let text = format!("sender {sender} message {n}");
                    let cmd = env.command(&["runtime", "deliver", "--id", "A", "--json", &text]);
                    let evidence = run_within(cmd, &text, LONG).ok().json();
                    assert_eq!(evidence["stop_reason"], "end_turn", "{evidence}");
                }
            });
        }
    });
    let prompted = served.prompted();
    assert_eq!(prompted.len(), 40, "{prompted:#?}");
    for sender in 0..8 {
        let mine: Vec<&String> = prompted
            .iter()
            .filter(|p| p.starts_with(&format!("sender {sender} ")))
            .collect();
        let expected: Vec<String> = (0..5)
            .map(|n| format!("sender {sender} message {n}"))
            .collect();
        assert_eq!(mine, expected.iter().collect::<Vec<_>>());
    }
    assert!(fake_events(&served.log, "prompt")
        .iter()
        .all(|p| p["while_busy"] == false));
    // In the transcript, no prompt goes out before the last one's answer.
    let mut open: Option<Value> = None;
    for entry in transcript(&env, "A") {
        let msg = &entry["msg"];
        if entry["dir"] == "to_agent" && msg["method"] == "session/prompt" {
            assert!(open.is_none(), "a prompt while {open:?} ran: {entry}");
            open = Some(msg["id"].clone());
        } else if entry["dir"] == "from_agent"
            && msg.get("method").is_none()
            && open.as_ref() == Some(&msg["id"])
        {
            open = None;
        }
    }
    assert!(open.is_none());
}

#[test]
fn cancel_ends_the_running_turn_and_the_next_delivery_works() {
    let env = TestEnv::new();
    let served = Served::start(&env, "A", "normal", &[], &[]);
    let none = env
        .run(&["runtime", "cancel", "--id", "A"])
        .fails_with_one_line();
    assert!(none.stderr.contains("no turn is running"), "{none:#?}");
    std::thread::scope(|s| {
        let long = s.spawn(|| deliver(&env, "A", "a long job TURN_MS=60000").ok().json());
        wait_until("the long turn running", || served.prompted().len() == 1);
        let cancel = env.run_ok(&["runtime", "cancel", "--id", "A"]);
        assert_eq!(cancel.stdout, "runtime A: the turn ended: cancelled\n");
        let evidence = long.join().unwrap();
        assert_eq!(evidence["stop_reason"], "cancelled", "{evidence}");
    });
    assert_eq!(fake_events(&served.log, "cancelled").len(), 1);
    deliver_ok(&env, "A", "a short one now");
    let none = env
        .run(&["runtime", "cancel", "--id", "A"])
        .fails_with_one_line();
    assert!(none.stderr.contains("no turn is running"), "{none:#?}");
}

// --- the policy --------------------------------------------------------------

#[test]
fn a_broken_policy_is_one_line_naming_where_and_nothing_starts() {
    let env = TestEnv::new();
    let policy = env.base().join("policy.toml");
    std::fs::write(&policy, "[fs]\nwrite = 3\n").unwrap();
    let policy_arg = policy.display().to_string();
    let run = Served::try_start(&env, "A", "normal", &[], &["--policy", &policy_arg])
        .fails_with_one_line();
    let expected = format!("agent-comms: {}:2:9: fs.write: ", policy.display());
    assert!(run.stderr.starts_with(&expected), "{run:#?}");
    assert!(env.ls_json().is_empty());
    assert!(fake_events(&fake_log(&env), "start").is_empty());
    let shown = env.run(&["runtime", "show", "--id", "A", "--json"]);
    assert!(
        !shown.success() || shown.json()["status"] != "ONLINE",
        "{shown:#?}"
    );
}

#[test]
fn a_policy_serving_writes_in_the_cwd_allows_them_there_and_nowhere_else() {
    let env = TestEnv::new();
    let policy = env.base().join("policy.toml");
    std::fs::write(&policy, "[fs]\nwrite = [\".\"]\n").unwrap();
    let inside = env.work.join("inside.txt");
    let outside = env.base().join("outside.txt");
    let paths = std::env::join_paths([&inside, &outside]).unwrap();
    let policy_arg = policy.display().to_string();
    let served = Served::start(
        &env,
        "A",
        "write",
        &[("FAKE_ACP_WRITE_PATHS", paths.to_str().unwrap())],
        &["--policy", &policy_arg],
    );
    deliver_ok(&env, "A", "write both files");
    assert_eq!(
        std::fs::read_to_string(&inside).unwrap(),
        "written by the fake ACP agent\n"
    );
    assert!(!outside.exists());
    let answers = fake_events(&served.log, "answer");
    let answer_for = |path: &Path| {
        answers
            .iter()
            .find(|a| a["path"] == path.to_str().unwrap())
            .unwrap_or_else(|| panic!("no answer for {}: {answers:#?}", path.display()))["answer"]
            .clone()
    };
    assert!(answer_for(&inside)["result"].is_object());
    assert!(answer_for(&outside)["error"].is_object());
    let init = &fake_events(&served.log, "initialize")[0];
    assert_eq!(
        init["params"]["clientCapabilities"]["fs"]["writeTextFile"],
        true
    );
}

// --- the supervisor's death --------------------------------------------------

#[test]
fn the_agent_does_not_outlive_a_killed_supervisor_and_the_transcript_stays() {
    let env = TestEnv::new();
    let served = Served::start(&env, "A", "normal", &[], &[]);
    deliver_ok(&env, "A", "remember this before the kill");
    let listed = env.ls_entry("A").unwrap();
    assert_eq!(
        listed["supervisor_pid"].as_u64(),
        Some(served.supervisor_pid() as u64)
    );
    assert!(pid_alive(served.agent_pid()));
    env.signal(served.supervisor_pid(), libc::SIGKILL);
    assert!(wait_gone(served.supervisor_pid(), TIMEOUT));
    assert!(
        wait_gone(served.agent_pid(), TIMEOUT),
        "the agent outlived its supervisor"
    );
    let log = env.run_ok(&["acp", "log", "A"]).stdout;
    assert!(log.contains("remember this before the kill"), "{log}");
    assert!(log.contains("end_turn"), "{log}");
    env.assert_nothing_left(&[]);
}
