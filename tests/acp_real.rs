//! `runtime acp-serve` end to end with the REAL ACP agents — `opencode acp`
//! (opencode 1.18.33), `claude-agent-acp` 0.101.0 (with the pinned Claude
//! Code) and `codex-acp` 2.6.0 (with the pinned Codex) — offline, against the
//! mock model server, each test in a network namespace of its own (see
//! `tests/support/real`).
//!
//! Every test is `#[ignore]`d, as it needs the real CLIs: run them with
//! `--include-ignored` and `AGENT_COMMS_REAL_PROVIDERS` naming the
//! directory `scripts/install-providers` prints:
//!
//! ```sh
//! cargo build -p agent-comms-mockmodel
//! AGENT_COMMS_REAL_PROVIDERS="$(scripts/install-providers)" \
//!     cargo test --test acp_real -- --include-ignored --test-threads=2
//! ```
//!
//! The mock's request log and the agents' logs stay in
//! `target/tmp/real-providers/<test>/`.

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::acp_client::{position, shown_positions, AcpClient};
use support::real::world::World;
use support::real::Cli;

const ID: &str = "acp-a";

/// One test per agent for `check(cli, test)`: `NAME::opencode`,
/// `NAME::claude`, `NAME::codex` (filter by agent or by check).
macro_rules! each_agent {
    ($($name:ident => $check:ident;)*) => {$(
        mod $name {
            use super::*;

            #[test]
            #[ignore = needs_real_clis!()]
            fn opencode() {
                $check(Cli::Opencode, concat!("opencode_acp_", stringify!($name)));
            }

            #[test]
            #[ignore = needs_real_clis!()]
            fn claude() {
                $check(Cli::Claude, concat!("claude_acp_", stringify!($name)));
            }

            #[test]
            #[ignore = needs_real_clis!()]
            fn codex() {
                $check(Cli::Codex, concat!("codex_acp_", stringify!($name)));
            }
        }
    )*};
}

each_agent! {
    starts => starts_with_a_first_turn;
    deliveries => deliveries_are_prompts_one_turn_at_a_time;
    messages_and_cancel => messages_and_cancel;
    agent_killed => survives_the_agent_killed_mid_turn;
    supervisor_killed => the_agent_does_not_outlive_its_supervisor;
    permissions => permissions_follow_the_policy;
    bridge => clients_share_the_session_through_the_bridge;
}
/// How long one turn against the mock may take.
const TURN: Duration = Duration::from_secs(120);

/// `runtime show --id ID --json`.
fn show(w: &World, id: &str) -> Value {
    let (ok, out, err) = w.ac(
        &["runtime", "show", "--id", id, "--json"],
        Duration::from_secs(10),
    );
    assert!(ok, "runtime show: {err}");
    serde_json::from_str(out.trim()).unwrap()
}

fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

// --- starts, registers ONLINE, and --prompt runs a first turn ----------------

fn starts_with_a_first_turn(cli: Cli, test: &str) {
    let w = World::new(cli, test);
    let started = w
        .acp_serve(ID, &["--prompt", "say hello FIRSTTURN"])
        .unwrap();
    let session = started["session_id"].as_str().unwrap().to_owned();
    assert!(!session.is_empty(), "{started}");
    let view = show(&w, ID);
    assert_eq!(view["status"], "ONLINE", "{view}");
    assert_eq!(view["kind"], "ACP");
    assert_eq!(view["connector"], "ACP");
    assert_eq!(view["conversation_id"], session.as_str());
    assert_eq!(view["acp"]["session_id"], session.as_str(), "{view}");
    assert_eq!(view["acp"]["agent_name"], started["agent_name"], "{view}");
    let (ok, listed, err) = w.ac(&["session", "ls", "--json"], Duration::from_secs(10));
    assert!(ok, "{err}");
    let listed: Value = serde_json::from_str(listed.trim()).unwrap();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == ID && s["kind"] == "acp"),
        "{listed}"
    );
    wait_for("the first turn's request", TURN, || {
        w.turns_with("say hello FIRSTTURN") == 1
    });
    let (ok, log, err) = w.ac(&["acp", "log", ID], Duration::from_secs(10));
    assert!(ok, "{err}");
    assert!(log.contains("say hello FIRSTTURN"), "{log}");
    let (ok, _, err) = w.ac(&["session", "kill", ID], Duration::from_secs(30));
    assert!(ok, "{err}");
    let view = show(&w, ID);
    assert_eq!(view["status"], "OFFLINE", "{view}");
    w.finish(vec![]);
}

/// `runtime deliver --id ID TEXT` as evidence JSON (its error otherwise).
fn deliver(w: &World, id: &str, text: &str) -> Result<Value, String> {
    w.deliver(id, text, TURN.as_secs())
}

fn stop_reason(evidence: &Value) -> &str {
    evidence["stop_reason"].as_str().unwrap_or_default()
}

/// `message show ID --json`.
fn message(w: &World, id: &str) -> Value {
    let (ok, out, err) = w.ac(&["message", "show", id, "--json"], Duration::from_secs(10));
    assert!(ok, "message show: {err}");
    serde_json::from_str(out.trim()).unwrap()
}

/// `--actor other send --to ID [--wait SECS] TEXT`: the message's id.
fn send(w: &World, wait: Option<&str>, text: &str) -> String {
    let mut args = vec!["--actor", "other", "send", "--to", ID, "--json"];
    if let Some(secs) = wait {
        args.extend(["--wait", secs]);
    }
    args.push(text);
    let (ok, out, err) = w.ac(&args, TURN);
    assert!(ok, "send: {out}{err}");
    let sent: Value = serde_json::from_str(out.trim()).unwrap();
    sent["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{out}"))
        .to_owned()
}

/// The notification a message `inv` from `other` is delivered as.
fn notification(inv: &str) -> String {
    format!("[agent-comms] message {inv} from other; read it with: agent-comms message show {inv}")
}

/// The transcript of runtime `id`, as JSON entries.
fn transcript(w: &World, id: &str) -> Vec<Value> {
    let (ok, out, err) = w.ac(&["acp", "log", id, "--json"], Duration::from_secs(10));
    assert!(ok, "acp log: {err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Waits until the turn that `text` started is under way: the agent sent
/// an update after the prompt (the mock logs a request only once it is
/// answered, so its log cannot tell).
fn wait_turn_started(w: &World, id: &str, text: &str) {
    wait_for(&format!("the turn of {text:?} to start"), TURN, || {
        let entries = transcript(w, id);
        let Some(at) = entries.iter().position(|e| {
            e["msg"]["method"] == "session/prompt" && e["msg"].to_string().contains(text)
        }) else {
            return false;
        };
        entries[at..]
            .iter()
            .any(|e| e["dir"] == "from_agent" && e["msg"]["method"] == "session/update")
    });
}

/// The session/prompt requests and their responses in the transcript, in
/// order: `true` for a request, `false` for its response.
fn prompt_traffic(w: &World, id: &str) -> Vec<bool> {
    let entries = transcript(w, id);
    let mut prompts = std::collections::HashSet::new();
    let mut traffic = Vec::new();
    for e in &entries {
        let msg = &e["msg"];
        if e["dir"] == "to_agent" && msg["method"] == "session/prompt" {
            prompts.insert(msg["id"].to_string());
            traffic.push(true);
        } else if e["dir"] == "from_agent"
            && msg.get("method").is_none()
            && prompts.remove(&msg["id"].to_string())
        {
            traffic.push(false);
        }
    }
    traffic
}

// --- deliveries become prompts, one turn at a time --------------------------

fn deliveries_are_prompts_one_turn_at_a_time(cli: Cli, test: &str) {
    let w = World::new(cli, test);
    w.acp_serve(ID, &[]).unwrap();
    // A second delivery issued mid-turn is sent after the first turn's end.
    let first = std::thread::scope(|s| {
        let first = s.spawn(|| deliver(&w, ID, "say hello ONE SLOW=3"));
        wait_turn_started(&w, ID, "say hello ONE SLOW=3");
        let second = deliver(&w, ID, "say hello TWO").unwrap();
        let first = first.join().unwrap().unwrap();
        assert!(
            second["entered"].as_u64() >= first["submitted"].as_u64(),
            "the second prompt went out before the first turn ended: {first} {second}"
        );
        assert_eq!(stop_reason(&second), "end_turn", "{second}");
        first
    });
    assert_eq!(first["style"], "prompt", "{first}");
    assert_eq!(stop_reason(&first), "end_turn", "{first}");
    assert!(
        first["echoed"].as_u64() >= first["entered"].as_u64(),
        "{first}"
    );
    assert_eq!(
        w.logged_turns_with("say hello ONE SLOW=3"),
        1,
        "{}",
        w.requests_summary()
    );
    assert_eq!(
        w.logged_turns_with("say hello TWO"),
        1,
        "{}",
        w.requests_summary()
    );

    // 8 senders × 5 deliveries: each once, in per-sender order, never two
    // turns at once.
    let evidence: Vec<Vec<Value>> = std::thread::scope(|s| {
        let senders: Vec<_> = (0..8)
            .map(|i| {
                let w = &w;
                s.spawn(move || {
                    (0..5)
                        .map(|j| deliver(w, ID, &format!("say hello S{i}M{j}")).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        senders.into_iter().map(|t| t.join().unwrap()).collect()
    });
    for (i, sent) in evidence.iter().enumerate() {
        for j in 0..5 {
            assert_eq!(
                w.logged_turns_with(&format!("say hello S{i}M{j}")),
                1,
                "S{i}M{j}"
            );
        }
        for pair in sent.windows(2) {
            assert!(pair[0]["submitted"].as_u64() <= pair[1]["entered"].as_u64());
        }
    }
    let mut all: Vec<&Value> = evidence.iter().flatten().collect();
    all.sort_by_key(|e| e["entered"].as_u64());
    for pair in all.windows(2) {
        assert!(
            pair[0]["submitted"].as_u64() <= pair[1]["entered"].as_u64(),
            "two turns at once: {} {}",
            pair[0],
            pair[1]
        );
    }
    let traffic = prompt_traffic(&w, ID);
    assert_eq!(traffic.len(), 2 * 42, "{traffic:?}");
    assert!(
        traffic.chunks(2).all(|p| p == [true, false]),
        "a prompt went out before the previous one's response: {traffic:?}"
    );
    w.finish(vec![]);
}

// --- a message from another agent, and cancel --------------------------------

fn messages_and_cancel(cli: Cli, test: &str) {
    let w = World::new(cli, test);
    w.acp_serve(ID, &[]).unwrap();
    let inv = send(&w, Some("120"), "the build is green");
    let shown = message(&w, &inv);
    assert_eq!(shown["status"], "DELIVERED", "{shown}");
    let note = notification(&inv);
    assert_eq!(w.logged_turns_with(&note), 1, "{}", w.requests_summary());
    let attempts = shown["delivery_attempts"].as_array().unwrap();
    let evidence = &attempts.last().unwrap()["evidence"];
    assert_eq!(evidence["style"], "prompt", "{shown}");
    assert_eq!(stop_reason(evidence), "end_turn", "{shown}");

    // Cancel mid-turn: the stop reason is cancelled, and the next delivery works.
    std::thread::scope(|s| {
        let long = s.spawn(|| deliver(&w, ID, "say hello LONG SLOW=60"));
        wait_turn_started(&w, ID, "say hello LONG SLOW=60");
        let (ok, out, err) = w.ac(&["runtime", "cancel", "--id", ID, "--json"], TURN);
        assert!(ok, "cancel: {out}{err}");
        let cancelled: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(cancelled["stop_reason"], "cancelled", "{cancelled}");
        let long = long.join().unwrap().unwrap();
        assert_eq!(stop_reason(&long), "cancelled", "{long}");
    });
    let after = deliver(&w, ID, "say hello AFTER").unwrap();
    assert_eq!(stop_reason(&after), "end_turn", "{after}");
    let (ok, _, err) = w.ac(&["runtime", "cancel", "--id", ID], Duration::from_secs(10));
    assert!(!ok && err.contains("no turn is running"), "{err}");
    w.finish(vec![]);
}

// --- the agent killed mid-turn, the runtime started again --------------------

fn survives_the_agent_killed_mid_turn(cli: Cli, test: &str) {
    let w = World::new(cli, test);
    let started = w.acp_serve(ID, &[]).unwrap();
    let session = started["session_id"].as_str().unwrap().to_owned();
    let earlier = deliver(&w, ID, "say hello EARLIER").unwrap();
    assert_eq!(stop_reason(&earlier), "end_turn");
    let agent = started["agent_pid"].as_u64().unwrap() as u32;
    let inv = std::thread::scope(|s| {
        let killed = s.spawn(|| deliver(&w, ID, "say hello KILLED SLOW=60"));
        wait_turn_started(&w, ID, "say hello KILLED SLOW=60");
        // A message waits behind the running turn.
        let inv = send(&w, None, "after the restart");
        support::procs::signal(agent, libc::SIGKILL);
        let failed = killed.join().unwrap();
        assert!(failed.is_err(), "{failed:?}");
        inv
    });
    wait_for("OFFLINE", Duration::from_secs(30), || {
        show(&w, ID)["status"] == "OFFLINE"
    });
    let view = show(&w, ID);
    assert!(
        view["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("SIGKILL"),
        "{view}"
    );
    assert_ne!(message(&w, &inv)["status"], "DELIVERED");
    let note = notification(&inv);
    assert_eq!(w.turns_with(&note), 0);

    // Started again with the same id: the same session, continued, and the
    // waiting message delivered once.
    let again = w.acp_serve(ID, &[]).unwrap();
    assert_eq!(again["session_id"], session.as_str(), "{again}");
    wait_for("the message", TURN, || {
        message(&w, &inv)["status"] == "DELIVERED"
    });
    assert_eq!(w.logged_turns_with(&note), 1, "{}", w.requests_summary());
    let request = w
        .requests()
        .into_iter()
        .find(|r| {
            r["prompt"]
                .as_str()
                .is_some_and(|p| p.trim().ends_with(&note))
        })
        .unwrap();
    assert!(
        request["body"].to_string().contains("say hello EARLIER"),
        "the model's request after the restart lacks the earlier turn"
    );
    w.finish(vec![]);
}

// --- the supervisor killed ----------------------------------------------------

fn the_agent_does_not_outlive_its_supervisor(cli: Cli, test: &str) {
    let w = World::new(cli, test);
    let started = w.acp_serve(ID, &[]).unwrap();
    deliver(&w, ID, "say hello BEFORE").unwrap();
    let mock = Some(w.ns_pid());
    let supervisor = started["supervisor_pid"].as_u64().unwrap() as u32;
    let agent = started["agent_pid"].as_u64().unwrap() as u32;
    support::procs::signal(supervisor, libc::SIGKILL);
    wait_for(
        "the agent and its helpers to end",
        Duration::from_secs(30),
        || w.our_processes().iter().all(|&p| Some(p) == mock),
    );
    assert!(!support::procs::pid_alive(agent));
    let (ok, log, err) = w.ac(&["acp", "log", ID], Duration::from_secs(10));
    assert!(ok, "{err}");
    assert!(log.contains("say hello BEFORE"), "{log}");
    w.finish(vec![]);
}

// --- permissions answered by the policy ---------------------------------------

/// The tool that writes `file` for `cli`, the kind of tool call it asks
/// permission for, and what makes the agent ask (docs/providers.md, "Tool
/// calls on demand"): Claude's `default` mode, Codex's `read-only` mode with
/// an escalation, opencode's `"permission": {"edit": "ask"}`.
fn asking_tool(
    w: &World,
    file: &std::path::Path,
) -> (&'static str, Value, &'static str, &'static str) {
    let path = file.display().to_string();
    match w.cli {
        Cli::Claude => (
            "Write",
            serde_json::json!({"file_path": path, "content": "written"}),
            "edit",
            "[session]\nmode = \"default\"\n",
        ),
        Cli::Codex => (
            "exec_command",
            serde_json::json!({
                "cmd": format!("touch {path}"),
                "sandbox_permissions": "require_escalated",
                "justification": "the test asks for it"
            }),
            "execute",
            "[session]\nmode = \"read-only\"\n",
        ),
        Cli::Opencode => {
            let config = w.user_home.join(".config/opencode/opencode.json");
            let mut json: Value =
                serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
            json["permission"] = serde_json::json!({"edit": "ask"});
            std::fs::write(&config, json.to_string()).unwrap();
            (
                "write",
                serde_json::json!({"filePath": path, "content": "written"}),
                "edit",
                "",
            )
        }
    }
}

fn permissions_follow_the_policy(cli: Cli, test: &str) {
    let w = World::new(cli, test);
    for (id, allow) in [("acp-allow", true), ("acp-reject", false)] {
        let file = w.work.join(format!("{id}.txt"));
        let (tool, args, kind, extra) = asking_tool(&w, &file);
        let policy = w.work.join(format!("{id}.toml"));
        let rule = if allow { "allow_once" } else { "reject_once" };
        std::fs::write(
            &policy,
            format!(
                "[permissions]\ndefault = \"reject_always\"\n[[permissions.rule]]\ntool_kind = \"{kind}\"\nanswer = \"{rule}\"\n{extra}"
            ),
        )
        .unwrap();
        w.acp_serve(id, &["--policy", policy.to_str().unwrap()])
            .unwrap();
        let text = format!("write {}", agent_comms_mockmodel::tools::knob(tool, &args));
        let results_before = w
            .requests()
            .iter()
            .filter(|r| r["tool_result"].is_string())
            .count();
        let evidence = deliver(&w, id, &text).unwrap();
        let notes: Vec<String> = transcript(&w, id)
            .iter()
            .filter_map(|e| e["text"].as_str().map(str::to_owned))
            .filter(|t| t.starts_with("policy answered"))
            .collect();
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with(&format!("policy answered {rule}"))),
            "[{test}] {id}: no permission request was answered {rule}: {notes:?} {evidence}"
        );
        let results = w
            .requests()
            .iter()
            .filter(|r| r["tool_result"].is_string())
            .count();
        if allow {
            assert!(file.exists(), "[{test}] the allowed tool did not run");
            assert!(
                results > results_before,
                "[{test}] the model never got the tool's result"
            );
        } else {
            assert!(!file.exists(), "[{test}] the rejected tool ran");
        }
        let (ok, _, err) = w.ac(&["session", "kill", id], Duration::from_secs(30));
        assert!(ok, "{err}");
    }
    w.finish(vec![]);
}

// --- clients attached through the bridge -------------------------------------

fn client(w: &World, name: &str, args: &[&str]) -> AcpClient {
    AcpClient::attach(&w.env, name, args).patient(TURN)
}

fn prompt_params(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

fn is_agent_text(msg: &Value) -> bool {
    msg["method"] == "session/update"
        && msg["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
}

fn is_ask(msg: &Value) -> bool {
    msg["method"] == "session/request_permission"
}

/// The id of the option of `kind` the agent offers in permission request
/// `ask`.
fn option_of(ask: &Value, kind: &str) -> Value {
    ask["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} option in {ask}"))["optionId"]
        .clone()
}

/// The positions of what a client of `session` is shown, as the tap holds
/// them.
fn shown(w: &World, session: &str) -> Vec<u64> {
    shown_positions(&transcript(w, ID), session)
}

// Long: one scenario, in the order a team would live it; apart, each step
// would start its own agent (a minute each with the real ones).
fn clients_share_the_session_through_the_bridge(cli: Cli, test: &str) {
    let w = World::new(cli, test);
    let allowed = w.work.join("allowed.txt");
    let (tool, args, kind, extra) = asking_tool(&w, &allowed);
    let policy = w.work.join("ask.toml");
    std::fs::write(
        &policy,
        format!(
            "[permissions]\ndefault = \"reject_always\"\nask_timeout = \"60s\"\nask_fallback = \"reject_once\"\n[[permissions.rule]]\ntool_kind = \"{kind}\"\nanswer = \"ask\"\n{extra}"
        ),
    )
    .unwrap();
    let started = w
        .acp_serve(ID, &["--policy", policy.to_str().unwrap()])
        .unwrap();
    let session = started["session_id"].as_str().unwrap().to_owned();
    let (mut a, mut b, mut o) = (
        client(&w, "a", &[ID]),
        client(&w, "b", &[ID]),
        client(&w, "o", &[ID, "--read-only"]),
    );
    for c in [&mut a, &mut b, &mut o] {
        assert_eq!(c.join(), session);
    }

    // One turn from a: everyone sees it; b's and o's prompts are refused
    // meanwhile and never reach the model.
    let text = "say hello BRIDGED SLOW=3";
    let asked = a.request("session/prompt", prompt_params(&session, text));
    for c in [&mut a, &mut b, &mut o] {
        c.wait_for("the agent's reply", is_agent_text);
    }
    let mut late = client(&w, "late", &[ID]);
    late.join();
    for c in [&mut b, &mut o] {
        let refused = c.request(
            "session/prompt",
            prompt_params(&session, "say hello INTRUDER"),
        );
        assert_eq!(
            c.response(&refused)["error"]["code"],
            -32001,
            "[{test}] {}",
            c.name
        );
    }
    o.notify("session/cancel", json!({"sessionId": session}));
    b.send_raw("{not json");
    b.wait_for("the parse error", |m| m["error"]["code"] == -32700);
    let unknown = b.request(
        "terminal/create",
        json!({"sessionId": session, "command": "id"}),
    );
    assert_eq!(b.response(&unknown)["error"]["code"], -32601);
    let ended = a.response(&asked);
    assert_eq!(
        ended["result"]["stopReason"], "end_turn",
        "[{test}] {ended}"
    );
    assert_eq!(
        w.logged_turns_with(text),
        1,
        "[{test}] {}",
        w.requests_summary()
    );
    assert_eq!(
        w.turns_with("say hello INTRUDER"),
        0,
        "[{test}] {}",
        w.requests_summary()
    );
    for c in [&b, &o, &late] {
        assert_eq!(c.texts("user_message_chunk"), [text], "[{test}] {}", c.name);
    }
    // The late one: the replay, then live, as the tap has it.
    let tap = shown(&w, &session);
    let last = *tap.last().unwrap();
    late.wait_for("the tap's last update", |m| {
        m["method"] == "session/update" && position(&m["params"]) == last
    });
    let got: Vec<u64> = late
        .updates()
        .iter()
        .map(|u| position(u))
        .filter(|&p| p <= last)
        .collect();
    assert_eq!(
        got, tap,
        "[{test}] the late client's view differs from the tap"
    );
    drop(late); // its link drops

    // A permission the policy leaves to people: both controllers are
    // asked, b's answer wins, a is told.
    let knob = agent_comms_mockmodel::tools::knob(tool, &args);
    let asked = a.request(
        "session/prompt",
        prompt_params(&session, &format!("write {knob}")),
    );
    let to_a = a.wait_for("the permission request", is_ask);
    let to_b = b.wait_for("the permission request", is_ask);
    b.respond(
        &to_b["id"],
        json!({"outcome": {"outcome": "selected", "optionId": option_of(&to_b, "allow_once")}}),
    );
    a.wait_for("the resolution", |m| {
        m["method"] == "_agent_comms/permission_resolved"
    });
    a.wait_for("the withdrawal", |m| {
        m["method"] == "$/cancel_request" && m["params"]["requestId"] == to_a["id"]
    });
    a.response(&asked);
    assert!(allowed.exists(), "[{test}] the tool b allowed did not run");
    assert!(
        !o.seen.iter().any(is_ask),
        "[{test}] the observer was asked"
    );

    // Reconnecting from the last position seen gets exactly what it missed.
    let mut again = client(&w, "again", &[ID]);
    again.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let joined = again.call("_agent_comms/attach", json!({"after": last}));
    let missed: Vec<u64> = again.updates().iter().map(|u| position(u)).collect();
    let tap: Vec<u64> = shown(&w, &session)
        .into_iter()
        .filter(|&p| p > last && p < joined["position"].as_u64().unwrap())
        .collect();
    assert_eq!(missed, tap, "[{test}] the reconnect's replay");
    drop(again);

    // The last controller leaving with a question pending: the fallback
    // (reject_once) answers, and the tool does not run.
    let rejected = w.work.join("rejected.txt");
    let (tool, args, _, _) = asking_tool(&w, &rejected);
    let knob = agent_comms_mockmodel::tools::knob(tool, &args);
    a.request(
        "session/prompt",
        prompt_params(&session, &format!("write {knob}")),
    );
    a.wait_for("the permission request", is_ask);
    b.wait_for("the permission request", is_ask);
    assert!(b.close().success());
    assert!(a.close().success());
    wait_for("the fallback's answer", TURN, || {
        transcript(&w, ID).iter().any(|e| {
            e["text"].as_str().is_some_and(|t| {
                t.contains("the last controller left: the policy's fallback answers")
            })
        })
    });
    wait_for("the turn's end", TURN, || {
        show(&w, ID)["acp"]["turn_started"].is_null()
    });
    assert!(
        !rejected.exists(),
        "[{test}] the tool ran though nobody allowed it"
    );
    assert_eq!(
        show(&w, ID)["acp"]["clients"].as_array().unwrap().len(),
        1,
        "only the observer is left"
    );
    drop(o);
    let (ok, _, err) = w.ac(&["session", "kill", ID], Duration::from_secs(30));
    assert!(ok, "{err}");
    w.finish(vec![]);
}
