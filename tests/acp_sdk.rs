//! The ACP bridge (`agent-comms acp attach ID`) driven by an ACP client that
//! none of our code wrote: the official TypeScript SDK,
//! `@agentclientprotocol/sdk` (the version `scripts/install-providers`
//! pins), through `tests/sdk/attach_client.mjs`. The script configures
//! `agent-comms acp attach ID` as its agent command, exactly as an editor
//! would, so the bridge meets the SDK's framing and its schema checks of
//! every message; the runtime's agent is the fake (`tests/fakes/acp_agent.py`),
//! then the real `opencode acp`, offline against the mock model, when
//! `AGENT_COMMS_REAL_PROVIDERS` names the real CLIs (as in tests/acp_real.rs).
//!
//! They need Node.js and the SDK, so they are ignored unless asked for;
//! `.ci/run` installs the SDK and runs them:
//!
//! ```sh
//! cargo build -p agent-comms-mockmodel
//! AGENT_COMMS_REAL_PROVIDERS="$(scripts/install-providers)" \
//!     cargo test --test acp_sdk -- --include-ignored
//! ```
//!
//! The SDK is looked up in `AGENT_COMMS_ACP_SDK` (a `node_modules`
//! directory), else in `<cache>/node_modules` with the cache of
//! `scripts/install-providers`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::acp::Served;
use support::env::TestEnv;
use support::real::world::World;
use support::real::Cli;
use support::run::run_within;
use support::TIMEOUT;

const ID: &str = "acp-sdk";
const SDK: &str = "@agentclientprotocol/sdk";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `node_modules` directory holding the SDK; a clear failure without
/// it (the test only runs when asked for).
fn sdk_modules() -> PathBuf {
    let dir = match std::env::var_os("AGENT_COMMS_ACP_SDK").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => std::env::var_os("AGENT_COMMS_PROVIDERS_CACHE")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(|h| PathBuf::from(h).join(".cache/agent-comms/providers"))
            })
            .expect("no HOME: set AGENT_COMMS_ACP_SDK to a node_modules directory holding the SDK")
            .join("node_modules"),
    };
    assert!(
        dir.join(SDK).join("package.json").is_file(),
        "{} has no {SDK}: run scripts/install-providers, or set AGENT_COMMS_ACP_SDK \
         to a node_modules directory holding it",
        dir.display()
    );
    dir
}

/// Runs `tests/sdk/attach_client.mjs` (through `node`, which makes the
/// command with its arguments) in `cwd`: its summary of what it saw.
fn attach_client(
    node: impl FnOnce(&[&str]) -> Command,
    modules: &Path,
    cwd: &Path,
    prompt: &str,
    limit: Duration,
) -> Value {
    let script = repo().join("tests/sdk/attach_client.mjs");
    let cwd = cwd.to_str().unwrap();
    let mut cmd = node(&[
        script.to_str().unwrap(),
        modules.to_str().unwrap(),
        support::BIN,
        ID,
        cwd,
        prompt,
    ]);
    cmd.current_dir(cwd);
    run_within(cmd, "node tests/sdk/attach_client.mjs", limit)
        .ok()
        .json()
}

/// Replay then live, in transcript order, nothing doubled.
#[track_caller]
fn in_order(replay: &[Value], turn: &[Value]) {
    let all: Vec<u64> = seqs(replay).into_iter().chain(seqs(turn)).collect();
    assert!(
        all.windows(2).all(|w| w[0] < w[1]),
        "positions out of order: {all:?}"
    );
}

/// The text of an update of kind `kind`, if it is one.
fn text_of<'a>(params: &'a Value, kind: &str) -> Option<&'a str> {
    let update = &params["update"];
    (update["sessionUpdate"] == kind)
        .then(|| update["content"]["text"].as_str())
        .flatten()
}

fn texts<'a>(updates: &'a [Value], kind: &str) -> Vec<&'a str> {
    updates.iter().filter_map(|u| text_of(u, kind)).collect()
}

/// The transcript positions the bridge stamped on the updates.
fn seqs(updates: &[Value]) -> Vec<u64> {
    updates
        .iter()
        .map(|u| {
            u["_meta"]["agentComms"]["seq"]
                .as_u64()
                .unwrap_or_else(|| panic!("an update without its position: {u}"))
        })
        .collect()
}

#[test]
#[ignore = "needs Node.js and @agentclientprotocol/sdk (scripts/install-providers); .ci/run runs it"]
fn the_official_sdk_loads_the_session_and_runs_a_turn() {
    let modules = sdk_modules();
    let env = TestEnv::new();
    let served = Served::start(&env, ID, "normal", &[], &[]);

    // History to replay: a delivery of the runtime's own, before any client.
    let earlier = "the earlier delivery";
    let evidence = env
        .run_ok(&["runtime", "deliver", "--id", ID, "--json", earlier])
        .json();
    assert_eq!(evidence["stop_reason"], "end_turn", "{evidence}");

    let prompt = "a prompt from the SDK client";
    let node = |args: &[&str]| env.command_of("node", args);
    let seen = attach_client(node, &modules, &env.work, prompt, TIMEOUT);

    // initialize was answered with the agent's own answer.
    assert_eq!(seen["initialize"]["protocolVersion"], 1, "{seen}");
    assert_eq!(
        seen["initialize"]["agentInfo"]["name"], "fake-acp-agent",
        "{seen}"
    );
    assert_eq!(seen["sessions"].as_array().map(Vec::len), Some(1), "{seen}");
    assert_eq!(
        seen["beforeLoad"], 0,
        "updates came before session/load: {seen}"
    );

    // The replay: the earlier prompt as the user's message, then the
    // agent's reply to it, as the fake streamed it.
    let replay = seen["replay"].as_array().expect("replay").clone();
    assert_eq!(texts(&replay, "user_message_chunk"), [earlier], "{seen}");
    assert_eq!(
        texts(&replay, "agent_message_chunk"),
        [format!("working on: {earlier}").as_str(), " — done."],
        "{seen}"
    );

    // The turn: the fake's reply streamed live, then end_turn.
    let turn = seen["turn"].as_array().expect("turn").clone();
    assert_eq!(seen["stopReason"], "end_turn", "{seen}");
    assert_eq!(
        texts(&turn, "agent_message_chunk"),
        [format!("working on: {prompt}").as_str(), " — done."],
        "{seen}"
    );

    in_order(&replay, &turn);

    // The agent received exactly the two prompts, in order.
    assert_eq!(served.prompted(), [earlier, prompt]);
}

/// The same client against the real `opencode acp` (offline, against the
/// mock model: tests/support/real), with the real CLIs that
/// `AGENT_COMMS_REAL_PROVIDERS` names.
#[test]
#[ignore = "needs Node.js, @agentclientprotocol/sdk and the real CLIs (scripts/install-providers); .ci/run runs it"]
fn the_official_sdk_with_real_opencode() {
    let modules = sdk_modules();
    let w = World::new(Cli::Opencode, "acp_sdk_opencode");
    let started = w.acp_serve(ID, &[]).unwrap();
    let earlier = "say hello EARLIER REPLY=pong";
    let evidence = w.deliver(ID, earlier, 120).unwrap();
    assert_eq!(evidence["stop_reason"], "end_turn", "{evidence}");

    let prompt = "say hello FROMSDK REPLY=pang";
    let acp = w.acp_agent();
    let node = |args: &[&str]| acp.command("node", args);
    let seen = attach_client(node, &modules, &w.work, prompt, Duration::from_secs(180));

    // initialize was answered with the agent's own answer.
    assert_eq!(
        seen["initialize"]["agentInfo"]["name"], started["agent_name"],
        "{seen}"
    );
    let replay = seen["replay"].as_array().expect("replay").clone();
    assert_eq!(texts(&replay, "user_message_chunk"), [earlier], "{seen}");
    let replied = texts(&replay, "agent_message_chunk").concat();
    assert!(replied.contains("pong"), "{seen}");
    let turn = seen["turn"].as_array().expect("turn").clone();
    assert_eq!(seen["stopReason"], "end_turn", "{seen}");
    let replied = texts(&turn, "agent_message_chunk").concat();
    assert!(replied.contains("pang"), "{seen}");
    in_order(&replay, &turn);
    // The model got each prompt once.
    assert_eq!(w.logged_turns_with(earlier), 1, "{}", w.requests_summary());
    assert_eq!(w.logged_turns_with(prompt), 1, "{}", w.requests_summary());
    w.finish(vec![]);
}
