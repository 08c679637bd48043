//! The bridge end to end (`acp attach`), with the FAKE ACP agent
//! (`tests/fakes/acp_agent.py`): several clients on one running session,
//! controllers and observers, permission requests put to people, joining
//! late, reconnecting, bad input from clients, who may attach, and the
//! session's life with clients. The real agents do the same in
//! tests/acp_real.rs.

mod support;

use serde_json::{json, Value};
use support::acp::{assert_noted, deliver, messages, notes, show, transcript, Served};
use support::acp_client::{is_response, position, shown_positions, AcpClient};
use support::env::TestEnv;
use support::fakes::fake_events;
use support::wait_until;

/// A policy that leaves edits to the people attached.
fn ask_policy(env: &TestEnv, extra: &str) -> String {
    let path = env.base().join("policy.toml");
    let text = format!(
        "[permissions]\nask_timeout = \"20s\"\nask_fallback = \"reject_once\"\n[[permissions.rule]]\ntool_kind = \"edit\"\nanswer = \"ask\"\n{extra}"
    );
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn prompt_params(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

fn is_update_with(msg: &Value, text: &str) -> bool {
    msg["method"] == "session/update"
        && msg["params"]["update"]["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains(text))
}

fn error_code(response: &Value) -> Option<i64> {
    response["error"]["code"].as_i64()
}

#[test]
fn two_controllers_and_an_observer_see_one_turn_and_only_one_prompt_runs() {
    let env = TestEnv::new();
    let served = Served::start(&env, "rt", "normal", &[], &[]);
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    let mut b = AcpClient::attach(&env, "b", &["rt"]);
    let mut o = AcpClient::attach(&env, "o", &["rt", "--read-only"]);
    let session = a.join();
    assert_eq!(session, served.session_id());
    b.join();
    o.join();
    let shown = show(&env, "rt");
    let mut roles: Vec<&str> = shown["acp"]["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    roles.sort();
    assert_eq!(roles, ["controller", "controller", "observer"], "{shown}");

    let asked = a.request(
        "session/prompt",
        prompt_params(&session, "from a TURN_MS=1500"),
    );
    // Everyone sees the turn start…
    for client in [&mut a, &mut b, &mut o] {
        client.wait_for("the turn's first update", |m| {
            is_update_with(m, "working on: from a")
        });
    }
    // …and, while it runs, the other controller's prompt and the
    // observer's are refused, and never reach the agent.
    let refused = b.request("session/prompt", prompt_params(&session, "from b"));
    assert_eq!(error_code(&b.response(&refused)), Some(-32001));
    let refused = o.request("session/prompt", prompt_params(&session, "from o"));
    let answer = o.response(&refused);
    assert_eq!(error_code(&answer), Some(-32001));
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("read-only"),
        "{answer}"
    );
    o.notify("session/cancel", json!({"sessionId": session}));

    let ended = a.response(&asked);
    assert_eq!(ended["result"]["stopReason"], "end_turn", "{ended}");
    for client in [&mut b, &mut o] {
        client.wait_for("the turn's last update", |m| is_update_with(m, "done"));
        // The others see the prompt itself, as the agent's replay would.
        assert_eq!(client.texts("user_message_chunk"), ["from a TURN_MS=1500"]);
    }
    a.wait_for("the turn's last update", |m| is_update_with(m, "done"));
    assert!(
        a.texts("user_message_chunk").is_empty(),
        "its own prompt is not echoed live"
    );
    assert_eq!(served.prompted(), ["from a TURN_MS=1500"]);
    // The log says whose prompt it was.
    let log = env.run_ok(&["acp", "log", "rt"]).stdout;
    assert!(
        log.lines()
            .any(|l| l.contains("user       (client-") && l.ends_with(") from a TURN_MS=1500")),
        "{log}"
    );
    assert!(
        fake_events(&served.log, "cancel").is_empty(),
        "the observer's cancel reached the agent"
    );
    // The three saw the same updates.
    let agent_said = |c: &AcpClient| c.texts("agent_message_chunk");
    assert_eq!(agent_said(&a), agent_said(&b));
    assert_eq!(agent_said(&b), agent_said(&o));
}

#[test]
fn a_permission_ask_goes_to_every_controller_and_the_first_valid_answer_wins() {
    let env = TestEnv::new();
    let policy = ask_policy(&env, "");
    let served = Served::start(&env, "rt", "permission", &[], &["--policy", &policy]);
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    let mut b = AcpClient::attach(&env, "b", &["rt"]);
    let mut c = AcpClient::attach(&env, "c", &["rt"]);
    let mut o = AcpClient::attach(&env, "o", &["rt", "--read-only"]);
    let session = a.join();
    for client in [&mut b, &mut c, &mut o] {
        client.join();
    }
    let asked = a.request("session/prompt", prompt_params(&session, "edit the notes"));
    let is_ask = |m: &Value| m["method"] == "session/request_permission";
    let to_a = a.wait_for("the permission request", is_ask);
    let to_b = b.wait_for("the permission request", is_ask);
    let to_c = c.wait_for("the permission request", is_ask);
    assert_eq!(to_a["params"]["toolCall"]["title"], "Edit notes.txt");
    // An answer the agent did not offer is no answer…
    a.respond(
        &to_a["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "yes-to-everything"}}),
    );
    wait_until("the invalid answer noted", || {
        notes(&transcript(&env, "rt"))
            .iter()
            .any(|n| n.contains("which the agent did not offer: ignored"))
    });
    // …the first valid one wins…
    b.respond(
        &to_b["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow"}}),
    );
    assert_eq!(a.response(&asked)["result"]["stopReason"], "end_turn");
    // …and the others are told; one still asked has the question withdrawn.
    for client in [&mut a, &mut c] {
        let resolved = client.wait_for("the resolution", |m| {
            m["method"] == "_agent_comms/permission_resolved"
        });
        assert_eq!(resolved["params"]["optionId"], "allow", "{resolved}");
        assert_eq!(resolved["params"]["toolCallId"], "call_fake_1");
    }
    c.wait_for("the withdrawal", |m| {
        m["method"] == "$/cancel_request" && m["params"]["requestId"] == to_c["id"]
    });
    // A late answer changes nothing.
    c.respond(
        &to_c["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "reject"}}),
    );
    let answers = fake_events(&served.log, "answer");
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(
        answers[0]["answer"]["result"]["outcome"]["optionId"],
        "allow"
    );
    // The observer watched but was never asked.
    o.wait_for("the turn's end", |m| is_update_with(m, "permission: allow"));
    assert!(!o.seen.iter().any(is_ask));
    let notes = notes(&transcript(&env, "rt"));
    assert_noted(&notes, "which the agent did not offer: ignored");
    assert_noted(&notes, "answered the permission request: allow");
}

#[test]
fn the_last_controller_leaving_with_a_permission_pending_gets_the_fallback() {
    let env = TestEnv::new();
    let policy = ask_policy(&env, "");
    let served = Served::start(&env, "rt", "permission", &[], &["--policy", &policy]);
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    let mut o = AcpClient::attach(&env, "o", &["rt", "--read-only"]);
    let session = a.join();
    o.join();
    a.request("session/prompt", prompt_params(&session, "edit the notes"));
    a.wait_for("the permission request", |m| {
        m["method"] == "session/request_permission"
    });
    assert!(a.close().success());
    // The policy's fallback (reject_once) answers at once; the turn goes on.
    o.wait_for("the turn's end", |m| {
        is_update_with(m, "permission: reject")
    });
    let answers = fake_events(&served.log, "answer");
    assert_eq!(
        answers[0]["answer"]["result"]["outcome"]["optionId"], "reject",
        "{answers:?}"
    );
    let notes = notes(&transcript(&env, "rt"));
    assert_noted(
        &notes,
        "the last controller left: the policy's fallback answers",
    );
}

#[test]
fn nobody_answering_in_time_gets_the_fallback_and_nobody_attached_gets_it_at_once() {
    let env = TestEnv::new();
    let policy = env.base().join("quick.toml");
    std::fs::write(
        &policy,
        "[permissions]\ndefault = \"ask\"\nask_timeout = \"1s\"\nask_fallback = \"allow_once\"\n",
    )
    .unwrap();
    let policy = policy.display().to_string();
    let served = Served::start(&env, "rt", "permission", &[], &["--policy", &policy]);
    // Nobody attached: answered at once by the fallback.
    let evidence = deliver(&env, "rt", "edit alone").ok().json();
    assert_eq!(evidence["stop_reason"], "end_turn");
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    let session = a.join();
    let asked = a.request("session/prompt", prompt_params(&session, "edit again"));
    a.wait_for("the permission request", |m| {
        m["method"] == "session/request_permission"
    });
    // Not answered: after the timeout the fallback does, and the
    // question is withdrawn.
    a.wait_for("the withdrawal", |m| m["method"] == "$/cancel_request");
    assert_eq!(a.response(&asked)["result"]["stopReason"], "end_turn");
    let chosen: Vec<Value> = fake_events(&served.log, "answer")
        .iter()
        .map(|a| a["answer"]["result"]["outcome"]["optionId"].clone())
        .collect();
    assert_eq!(chosen, [json!("allow"), json!("allow")]);
    let notes = notes(&transcript(&env, "rt"));
    assert_noted(&notes, "no controller is attached");
    assert_noted(&notes, "nobody answered within 1 s");
}

/// What a client of `session` must have been shown from position `from`
/// on, as the tap holds it.
fn shown_from(env: &TestEnv, session: &str, from: u64) -> Vec<u64> {
    let shown = shown_positions(&transcript(env, "rt"), session);
    shown.into_iter().filter(|&p| p >= from).collect()
}

#[test]
fn a_client_joining_mid_turn_gets_the_replay_then_live_with_nothing_missed_or_doubled() {
    let env = TestEnv::new();
    let served = Served::start(&env, "rt", "normal", &[], &[]);
    let session = served.session_id();
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    a.join();
    a.call("session/prompt", prompt_params(&session, "the first turn"));
    let asked = a.request(
        "session/prompt",
        prompt_params(&session, "the second TURN_MS=1500"),
    );
    a.wait_for("the second turn's start", |m| {
        is_update_with(m, "working on: the second")
    });
    let mut late = AcpClient::attach(&env, "late", &["rt"]);
    late.join();
    a.response(&asked);
    late.wait_for("the second turn's end", |m| {
        is_update_with(m, "done")
            && position(&m["params"]) > 0
            && m["params"]["update"]["content"]["text"] == " — done."
    });
    // Wait for the last one, then compare with the tap.
    let last = *shown_from(&env, &session, 0).last().unwrap();
    late.wait_for("the last update", |m| {
        m["method"] == "session/update" && position(&m["params"]) == last
    });
    let got: Vec<u64> = late.updates().iter().map(|u| position(u)).collect();
    assert_eq!(got, shown_from(&env, &session, 0));
    assert_eq!(
        late.texts("user_message_chunk"),
        ["the first turn", "the second TURN_MS=1500"]
    );
}

#[test]
fn a_client_reconnecting_from_its_position_gets_exactly_what_it_missed() {
    let env = TestEnv::new();
    let served = Served::start(&env, "rt", "normal", &[], &[]);
    let session = served.session_id();
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    a.join();
    a.call("session/prompt", prompt_params(&session, "before the drop"));
    let last_seen = a.updates().iter().map(|u| position(u)).max().unwrap();
    drop(a); // the link drops
    deliver(&env, "rt", "while it was away").ok();
    let mut again = AcpClient::attach(&env, "again", &["rt"]);
    again.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let joined = again.call(
        "_agent_comms/attach",
        json!({"sessionId": session, "after": last_seen}),
    );
    assert_eq!(joined["role"], "controller");
    let got: Vec<u64> = again.updates().iter().map(|u| position(u)).collect();
    assert_eq!(got, shown_from(&env, &session, last_seen + 1));
    assert_eq!(again.texts("user_message_chunk"), ["while it was away"]);
    assert!(joined["position"].as_u64().unwrap() > last_seen);
}

#[test]
fn pending_only_history_shows_just_the_running_turn() {
    let env = TestEnv::new();
    let served = Served::start(&env, "rt", "normal", &[], &[]);
    let session = served.session_id();
    deliver(&env, "rt", "an old turn").ok();
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    a.join();
    let asked = a.request(
        "session/prompt",
        prompt_params(&session, "the running one TURN_MS=1500"),
    );
    a.wait_for("the turn's start", |m| {
        is_update_with(m, "working on: the running")
    });
    let mut p = AcpClient::attach(&env, "p", &["rt"]);
    p.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    p.call(
        "_agent_comms/attach",
        json!({"history": "pending_only", "role": "observer"}),
    );
    assert_eq!(
        p.texts("user_message_chunk"),
        ["the running one TURN_MS=1500"]
    );
    assert!(p
        .texts("agent_message_chunk")
        .iter()
        .all(|t| !t.contains("an old turn")));
    let refused = p.request("session/prompt", prompt_params(&session, "may I?"));
    assert_eq!(error_code(&p.response(&refused)), Some(-32001));
    // Once it chose to observe, it cannot take control back.
    let widen = p.request("_agent_comms/attach", json!({"role": "controller"}));
    assert_eq!(error_code(&p.response(&widen)), Some(-32001));
    a.response(&asked);
}

#[test]
fn bad_json_unknown_methods_and_settings_get_errors_and_never_reach_the_agent() {
    let env = TestEnv::new();
    let served = Served::start(&env, "rt", "normal", &[], &[]);
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    let session = a.join();
    let before = messages(&transcript(&env, "rt"), "to_agent").len();
    a.send_raw("{this is not json");
    let parse = a.wait_for("the parse error", |m| m["error"]["code"] == -32700);
    assert!(parse["id"].is_null(), "{parse}");
    let unknown = a.request(
        "fs/read_text_file",
        json!({"sessionId": session, "path": "/etc/passwd"}),
    );
    assert_eq!(error_code(&a.response(&unknown)), Some(-32601));
    let mode = a.request(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "yolo"}),
    );
    assert_eq!(error_code(&a.response(&mode)), Some(-32001));
    let other = a.request("session/prompt", prompt_params("not-this-session", "hi"));
    assert_eq!(error_code(&a.response(&other)), Some(-32602));
    let load = a.request(
        "session/load",
        json!({"sessionId": "nope", "cwd": "/", "mcpServers": []}),
    );
    assert_eq!(error_code(&a.response(&load)), Some(-32602));
    assert_eq!(messages(&transcript(&env, "rt"), "to_agent").len(), before);
    // And the connection goes on.
    a.call("session/prompt", prompt_params(&session, "still here"));
    assert_eq!(served.prompted(), ["still here"]);
}

#[test]
fn a_client_asking_for_protocol_2_is_answered_with_1_and_new_session_joins() {
    let env = TestEnv::new();
    let served = Served::start(&env, "rt", "normal", &[], &[]);
    deliver(&env, "rt", "earlier").ok();
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    let init = a.call(
        "initialize",
        json!({"protocolVersion": 2, "clientCapabilities": {}}),
    );
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(init["agentInfo"]["name"], "fake-acp-agent");
    let new = a.call("session/new", json!({"cwd": "/", "mcpServers": []}));
    assert_eq!(new["sessionId"], served.session_id().as_str());
    assert_eq!(
        a.texts("user_message_chunk"),
        ["earlier"],
        "replayed before the answer"
    );
    let resumed = AcpClient::attach(&env, "r", &["rt"]);
    let mut r = resumed;
    r.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    r.call(
        "session/resume",
        json!({"sessionId": served.session_id(), "cwd": "/"}),
    );
    assert!(r.updates().is_empty(), "resume replays nothing");
}

#[test]
fn the_policy_can_end_the_run_when_the_last_client_leaves() {
    let env = TestEnv::new();
    let policy = env.base().join("end.toml");
    std::fs::write(&policy, "[end]\nwhen = \"last-client-left\"\n").unwrap();
    let served = Served::start(
        &env,
        "rt",
        "normal",
        &[],
        &["--policy", &policy.display().to_string()],
    );
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    a.join();
    assert!(a.close().success());
    wait_until("the runtime to end", || {
        show(&env, "rt")["status"] == "OFFLINE"
    });
    let reason = show(&env, "rt")["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(reason.contains("the last client left"), "{reason}");
    let _ = served;
}

#[test]
fn wait_for_client_holds_the_first_prompt_until_a_controller_attaches() {
    let env = TestEnv::new();
    let served = Served::start(
        &env,
        "rt",
        "normal",
        &[],
        &["--wait-for-client", "--prompt", "the held prompt"],
    );
    let mut o = AcpClient::attach(&env, "o", &["rt", "--read-only"]);
    o.join();
    // It waits (it says so), and an observer does not release it.
    wait_until("the held prompt's note", || {
        notes(&transcript(&env, "rt"))
            .iter()
            .any(|n| n.starts_with("the first prompt waits for a controller"))
    });
    assert_eq!(show(&env, "rt")["acp"]["turns"], 0);
    assert!(served.prompted().is_empty());
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    a.join();
    a.wait_for("the held prompt's turn", |m| {
        is_update_with(m, "working on: the held prompt")
    });
    assert_eq!(served.prompted(), ["the held prompt"]);
    assert_eq!(a.texts("user_message_chunk"), ["the held prompt"]);
}

#[test]
fn the_policy_can_end_the_run_after_a_while_with_no_client() {
    let env = TestEnv::new();
    let policy = env.base().join("end.toml");
    std::fs::write(&policy, "[end]\nwhen = \"no-client\"\nno_client = \"1s\"\n").unwrap();
    let policy = policy.display().to_string();
    let _served = Served::start(&env, "rt", "normal", &[], &["--policy", &policy]);
    wait_until("the runtime to end", || {
        show(&env, "rt")["status"] == "OFFLINE"
    });
    let reason = show(&env, "rt")["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(reason.contains("no client attached"), "{reason}");
}

#[test]
fn a_policy_can_give_each_new_client_a_session_of_its_own() {
    let env = TestEnv::new();
    let policy = env.base().join("fresh.toml");
    std::fs::write(&policy, "[clients]\nnew_session = \"fresh\"\n").unwrap();
    let policy = policy.display().to_string();
    let served = Served::start(&env, "rt", "normal", &[], &["--policy", &policy]);
    let mut main = AcpClient::attach(&env, "main", &["rt"]);
    main.join();
    let mut own = AcpClient::attach(&env, "own", &["rt"]);
    own.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let opened = own.call(
        "session/new",
        json!({"cwd": "/elsewhere", "mcpServers": [
            {"name": "sneaky", "command": "/bin/sh", "args": [], "env": []}
        ]}),
    );
    let fresh = opened["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(fresh, served.session_id());
    let ended = own.call("session/prompt", prompt_params(&fresh, "in my own session"));
    assert_eq!(ended["stopReason"], "end_turn");
    own.wait_for("its reply", |m| {
        is_update_with(m, "working on: in my own session")
    });
    // Its turn ran in its session, with the runtime's cwd and no MCP server
    // of the client's; the main session's client saw none of it.
    let new = fake_events(&served.log, "new");
    assert_eq!(new.last().unwrap()["session"], fresh.as_str());
    assert_eq!(
        new.last().unwrap()["cwd"],
        env.work.display().to_string().as_str()
    );
    let entries = transcript(&env, "rt");
    let asked = messages(&entries, "to_agent")
        .into_iter()
        .rfind(|m| m["method"] == "session/new")
        .unwrap()
        .clone();
    assert_eq!(asked["params"]["mcpServers"], json!([]), "{asked}");
    deliver(&env, "rt", "in the main session").ok();
    main.wait_for("the main turn", |m| {
        is_update_with(m, "working on: in the main session")
    });
    assert!(main
        .texts("agent_message_chunk")
        .iter()
        .all(|t| !t.contains("my own")));
    assert!(own
        .texts("agent_message_chunk")
        .iter()
        .all(|t| !t.contains("main session")));
    let listed = main.call("session/list", json!({}));
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [served.session_id().as_str(), fresh.as_str()]);
}

#[test]
fn a_clients_cancel_request_reaches_the_agent_under_the_agents_id() {
    let env = TestEnv::new();
    let served = Served::start(&env, "rt", "normal", &[], &[]);
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    let session = a.join();
    let asked = a.request(
        "session/prompt",
        prompt_params(&session, "long TURN_MS=1500"),
    );
    a.wait_for("the turn's start", |m| {
        is_update_with(m, "working on: long")
    });
    a.notify("$/cancel_request", json!({"requestId": asked}));
    // The fake ignores it (as the agents may) and the turn ends as usual.
    a.response(&asked);
    let to_agent = messages(&transcript(&env, "rt"), "to_agent")
        .into_iter()
        .cloned()
        .collect::<Vec<Value>>();
    let prompt = to_agent
        .iter()
        .find(|m| m["method"] == "session/prompt")
        .unwrap();
    let cancel = to_agent
        .iter()
        .find(|m| m["method"] == "$/cancel_request")
        .unwrap_or_else(|| panic!("no $/cancel_request reached the agent: {to_agent:#?}"));
    assert_eq!(cancel["params"]["requestId"], prompt["id"], "{cancel}");
    assert_ne!(prompt["id"], asked, "the agent's ids are its own");
    let _ = served;
}

/// A client that reads nothing (found by the fan-out benchmark): it is
/// dropped while still connected — its connection closed, its queued lines
/// freed, the reason noted — and the others go on.
#[test]
fn a_client_that_reads_nothing_is_dropped_while_still_connected() {
    use std::io::{BufRead, BufReader, Write};
    let chunks = 2 * agent_comms_core::acp::bridge::MAX_BACKLOG;
    let env = TestEnv::new();
    let served = Served::start(&env, "rt", "normal", &[], &[]);
    let mut reader = AcpClient::attach(&env, "reader", &["rt"]);
    reader.join();
    let bridge = served.started["bridge"].as_str().unwrap();
    let mut stuck = BufReader::new(std::os::unix::net::UnixStream::connect(bridge).unwrap());
    stuck
        .get_ref()
        .set_read_timeout(Some(support::TIMEOUT))
        .unwrap();
    for request in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/resume",
               "params": {"sessionId": served.session_id(), "cwd": "/"}}),
    ] {
        writeln!(stuck.get_mut(), "{request}").unwrap();
        let mut line = String::new();
        stuck.read_line(&mut line).unwrap();
        assert!(line.contains("\"result\""), "{line}");
    }
    // From here on it reads nothing, and keeps its connection.
    let evidence = deliver(&env, "rt", &format!("stream CHUNKS={chunks}"))
        .ok()
        .json();
    assert_eq!(evidence["stop_reason"], "end_turn", "{evidence}");
    wait_until("the note on dropping it", || {
        notes(&transcript(&env, "rt"))
            .iter()
            .any(|n| n.starts_with("client-2 left: dropped: ") && n.contains("lines behind"))
    });
    // Its connection is closed: what the socket still held, then EOF,
    // well short of the whole turn.
    let mut lines = 0;
    let mut line = String::new();
    while stuck.read_line(&mut line).expect("EOF, not a timeout") > 0 {
        lines += 1;
        line.clear();
    }
    assert!(lines < chunks, "it got {lines} lines: the whole turn");
    // The reader got every chunk, in order.
    let last = format!("chunk {} ", chunks - 1);
    reader.wait_for("the last chunk", |m| is_update_with(m, &last));
    let got = reader
        .texts("agent_message_chunk")
        .iter()
        .filter(|t| t.starts_with("chunk "))
        .count() as u64;
    assert_eq!(got, chunks);
}

/// Issue 32, finding 2: an observer's refused calls flooded the live
/// stream every controller reads (a note each), and controllers reading at
/// an editor's pace were dropped. Now each costs a counter, one note a
/// minute says how many, and a connection that keeps asking is let go.
#[test]
fn an_observers_refused_calls_cost_a_counter_not_the_shared_stream() {
    let limit = agent_comms_core::acp::bridge::bounds::MAX_REFUSED_PER_CONNECTION;
    let env = TestEnv::new();
    let served = Served::start(&env, "rt", "normal", &[], &[]);
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    let mut o = AcpClient::attach(&env, "o", &["rt", "--read-only"]);
    let session = a.join();
    o.join();
    let before = transcript(&env, "rt").len();
    // Short of the bound, the observer is only refused.
    for _ in 0..limit - 2 {
        o.notify("session/cancel", json!({"sessionId": session}));
    }
    let id = o.request("session/prompt", prompt_params(&session, "from o"));
    assert_eq!(error_code(&o.response(&id)), Some(-32001));
    let entries = transcript(&env, "rt");
    let refusals: Vec<String> = notes(&entries)
        .into_iter()
        .filter(|n| n.starts_with("refused"))
        .collect();
    assert_eq!(
        refusals.len(),
        1,
        "{:?}",
        &refusals[..refusals.len().min(3)]
    );
    assert!(
        entries.len() - before < 5,
        "the refusals grew the transcript by {} entries",
        entries.len() - before
    );
    // Past the bound, it goes: a flood costs it its connection. (One
    // write: `acp attach` ends once the bridge closed its connection.)
    let cancel =
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}});
    let flood = vec![cancel.to_string(); 200].join("\n");
    o.send_raw(&flood);
    // (Which of the two is `client-2` is the order they connected in; the
    // controller's prompt below says it was not the one let go.)
    wait_until("the observer let go", || {
        notes(&transcript(&env, "rt")).iter().any(|n| {
            n.contains(" left: dropped: ")
                && n.ends_with(&format!("{limit} of its calls were refused"))
        })
    });
    let entries = transcript(&env, "rt");
    assert!(
        entries.len() - before < 10,
        "{} entries",
        entries.len() - before
    );
    // The controller is still there and works.
    let ended = a.call("session/prompt", prompt_params(&session, "still here"));
    assert_eq!(ended["stopReason"], "end_turn", "{ended}");
    assert!(fake_events(&served.log, "cancel").is_empty());
}

/// Issue 32, findings 3 and 4: refused connections appended a note and a
/// log line each, unthrottled, and an observer's idle connections held
/// every descriptor. Now each uid holds at most its share, a refusal is
/// counted, and the owner's controller works on.
#[test]
fn each_uid_holds_a_bounded_share_of_connections_and_refusals_are_counted() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    let per_uid = agent_comms_core::acp::bridge::bounds::MAX_PER_UID;
    let env = TestEnv::new();
    let served = Served::start(&env, "rt", "normal", &[], &[]);
    let bridge = served.started["bridge"].as_str().unwrap().to_owned();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}});
    // The owner's controller first; the uid's other places then taken.
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    let session = a.join();
    let held: Vec<BufReader<UnixStream>> = (1..per_uid)
        .map(|_| {
            let mut c = BufReader::new(UnixStream::connect(&bridge).unwrap());
            c.get_ref()
                .set_read_timeout(Some(support::TIMEOUT))
                .unwrap();
            writeln!(c.get_mut(), "{initialize}").unwrap();
            let mut line = String::new();
            c.read_line(&mut line).unwrap();
            assert!(line.contains("\"result\""), "{line}");
            c
        })
        .collect();
    let before = transcript(&env, "rt").len();
    for _ in 0..500 {
        let mut c = BufReader::new(UnixStream::connect(&bridge).unwrap());
        c.get_ref()
            .set_read_timeout(Some(support::TIMEOUT))
            .unwrap();
        let mut line = String::new();
        c.read_line(&mut line).unwrap();
        let error: Value = serde_json::from_str(&line).unwrap();
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!(
                "holds {per_uid} connections to this runtime, the most one uid may"
            )),
            "{message}"
        );
    }
    let entries = transcript(&env, "rt");
    let refusals = notes(&entries)
        .into_iter()
        .filter(|n| n.starts_with("refused"))
        .count();
    assert_eq!(refusals, 1, "one note for the flood");
    assert!(
        entries.len() - before < 5,
        "{} entries",
        entries.len() - before
    );
    // The owner's controller works on through it.
    let ended = a.call("session/prompt", prompt_params(&session, "still here"));
    assert_eq!(ended["stopReason"], "end_turn", "{ended}");
    drop(held);
}

/// Issue 32, finding 4: a connection that never sends `initialize` held
/// its place for good. It is let go after the deadline.
#[test]
fn a_connection_that_never_initializes_is_let_go() {
    use std::io::Read;
    let env = TestEnv::new();
    let served = Served::start(&env, "rt", "normal", &[], &[]);
    let bridge = served.started["bridge"].as_str().unwrap();
    let mut silent = std::os::unix::net::UnixStream::connect(bridge).unwrap();
    let deadline = agent_comms_core::acp::bridge::bounds::INITIALIZE_DEADLINE;
    silent
        .set_read_timeout(Some(deadline + support::TIMEOUT))
        .unwrap();
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    silent
        .read_to_end(&mut rest)
        .expect("closed, not a timeout");
    assert!(started.elapsed() >= deadline - std::time::Duration::from_millis(500));
    // It never said anything, so it is counted, not announced.
    let notes = notes(&transcript(&env, "rt"));
    assert!(!notes.iter().any(|n| n.contains("attached")), "{notes:?}");
    assert_noted(&notes, "sent no initialize within 10 s");
}

/// Issue 32, finding 3: each late join read the whole transcript into
/// memory (20 joins of a large one: 2.1 GB). Joins now stream it from disk.
#[test]
fn joins_stream_a_large_transcript_with_bounded_memory() {
    let env = TestEnv::new();
    // A long-lived runtime's transcript: 60 MB of past entries.
    use std::os::unix::fs::PermissionsExt;
    let state = env.project.join(".agent-comms");
    let dir = state.join("acp");
    std::fs::create_dir_all(&dir).unwrap();
    for private in [&state, &dir] {
        std::fs::set_permissions(private, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let mut past = String::new();
    let filler = "x".repeat(1000);
    for seq in 0..60_000 {
        past.push_str(
            &json!({"seq": seq, "ts": "2026-01-01T00:00:00Z", "dir": "note", "text": filler})
                .to_string(),
        );
        past.push('\n');
    }
    let path = dir.join("rt.jsonl");
    std::fs::write(&path, past).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let served = Served::start(&env, "rt", "normal", &[], &[]);
    assert!(
        transcript(&env, "rt").len() > 60_000,
        "the runtime goes on from the past"
    );
    let mut clients: Vec<AcpClient> = (0..10)
        .map(|i| AcpClient::attach(&env, &format!("c{i}"), &["rt"]))
        .collect();
    let loads: Vec<Value> = clients
        .iter_mut()
        .map(|c| {
            c.call(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": {}}),
            );
            c.request(
                "session/load",
                json!({"sessionId": served.session_id(), "cwd": "/", "mcpServers": []}),
            )
        })
        .collect();
    for (c, id) in clients.iter_mut().zip(&loads) {
        let loaded = c.response(id);
        assert!(loaded.get("result").is_some(), "{loaded}");
    }
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", served.supervisor_pid())).unwrap();
    let peak_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(
        peak_kb < 100 * 1024,
        "10 joins of a 60 MB transcript peaked at {} MB",
        peak_kb / 1024
    );
}

/// Issue 32, finding 8: observers opened sessions without limit, ended the
/// owner's run by leaving, and answered permission requests after
/// narrowing themselves.
#[test]
fn an_observer_opens_no_session_and_its_leaving_ends_no_run() {
    let env = TestEnv::new();
    let policy = env.base().join("p.toml");
    std::fs::write(
        &policy,
        "[clients]\nnew_session = \"fresh\"\n[end]\nwhen = \"last-client-left\"\n",
    )
    .unwrap();
    let policy = policy.display().to_string();
    let _served = Served::start(&env, "rt", "normal", &[], &["--policy", &policy]);
    let mut o = AcpClient::attach(&env, "o", &["rt", "--read-only"]);
    o.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let id = o.request("session/new", json!({"cwd": "/", "mcpServers": []}));
    let refused = o.response(&id);
    assert_eq!(error_code(&refused), Some(-32001), "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("it cannot open a session"),
        "{refused}"
    );
    assert!(o.close().success());
    wait_until("the observer's leaving noted", || {
        notes(&transcript(&env, "rt"))
            .iter()
            .any(|n| n.starts_with("client-1 left"))
    });
    // The observer came and went; the run goes on until a controller's
    // leaving ends it.
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    a.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(show(&env, "rt")["status"], "ONLINE");
    a.call("session/new", json!({"cwd": "/", "mcpServers": []}));
    assert!(a.close().success());
    wait_until("the runtime to end", || {
        show(&env, "rt")["status"] == "OFFLINE"
    });
}

#[test]
fn a_seat_that_narrowed_itself_to_observer_answers_no_permission_request() {
    let env = TestEnv::new();
    let policy = ask_policy(&env, "");
    let served = Served::start(&env, "rt", "permission", &[], &["--policy", &policy]);
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    let mut b = AcpClient::attach(&env, "b", &["rt"]);
    let session = a.join();
    b.join();
    let asked = a.request("session/prompt", prompt_params(&session, "edit the notes"));
    let is_ask = |m: &Value| m["method"] == "session/request_permission";
    let to_a = a.wait_for("the permission request", is_ask);
    let to_b = b.wait_for("the permission request", is_ask);
    b.notify("_agent_comms/observe", json!({}));
    wait_until("b to observe", || {
        show(&env, "rt")["acp"]["clients"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["role"] == "observer")
    });
    b.respond(
        &to_b["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow"}}),
    );
    wait_until("the narrowed answer noted", || {
        notes(&transcript(&env, "rt"))
            .iter()
            .any(|n| n.contains("after it stopped controlling: ignored"))
    });
    a.respond(
        &to_a["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "reject"}}),
    );
    assert_eq!(a.response(&asked)["result"]["stopReason"], "end_turn");
    let answers = fake_events(&served.log, "answer");
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(
        answers[0]["answer"]["result"]["outcome"]["optionId"],
        "reject"
    );
}

/// Issue 32, finding 5: with 1,500 chunks in one turn, hundreds of updates
/// (the last chunk among them) reached the prompting client after its
/// `session/prompt` response. An editor closes the turn on the response.
#[test]
fn a_turns_updates_all_come_before_its_prompt_response() {
    let chunks = 1500;
    let env = TestEnv::new();
    let _served = Served::start(&env, "rt", "normal", &[], &[]);
    let mut a = AcpClient::attach(&env, "a", &["rt"]);
    let session = a.join();
    let mut from = 0;
    for turn in 0..3 {
        let asked = a.request(
            "session/prompt",
            prompt_params(&session, &format!("stream CHUNKS={chunks} turn {turn}")),
        );
        let ended = a.response(&asked);
        assert_eq!(ended["result"]["stopReason"], "end_turn", "{ended}");
        let last = format!("chunk {} ", chunks - 1);
        let at = a.seen.iter().position(|m| is_response(m, &asked)).unwrap();
        let before = &a.seen[from..at];
        assert!(
            before.iter().any(|m| is_update_with(m, &last)),
            "turn {turn}: the last chunk came after the response ({} updates before it)",
            before.len()
        );
        from = at + 1;
    }
}
