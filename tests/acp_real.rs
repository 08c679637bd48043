//! `runtime acp-serve` end to end with the REAL ACP agents — `opencode acp`
//! (opencode 1.18.33), `claude-agent-acp` 0.101.0 (with the pinned Claude
//! Code) and `codex-acp` 2.6.0 (with the pinned Codex) — offline, against the
//! mock model server, each test in a network namespace of its own (see
//! `tests/support/real`).
//!
//! Off unless `AGENT_COMMS_REAL_PROVIDERS` names the directory
//! `scripts/install-providers` prints (then each test prints one line saying
//! it is skipped):
//!
//! ```sh
//! cargo build -p agent-comms-mockmodel
//! AGENT_COMMS_REAL_PROVIDERS="$(scripts/install-providers)" \
//!     cargo test --test acp_real -- --test-threads=2
//! ```
//!
//! The mock's request log and the agents' logs stay in
//! `target/tmp/real-providers/<test>/`.

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::real::world::World;
use support::real::Cli;

const ID: &str = "acp-a";
/// How long an agent may take to start (initialize and session/new).
const START: Duration = Duration::from_secs(120);
/// How long one turn against the mock may take.
const TURN: Duration = Duration::from_secs(120);

/// `runtime acp-serve --id ID EXTRA… -- <the agent>` in the world's
/// namespace; the JSON of what started, or the error.
fn acp_serve(w: &World, id: &str, extra: &[&str]) -> Result<Value, String> {
    let acp = w.acp_agent();
    let mut args = vec!["--actor", id, "runtime", "acp-serve", "--id", id, "--json"];
    args.extend_from_slice(extra);
    args.push("--");
    let mut cmd = acp.command(support::BIN, &args);
    cmd.args(&acp.argv);
    let out = support::run::try_run_within(cmd, "acp-serve", START).map_err(|e| e.to_string())?;
    if !out.success() {
        return Err(format!("{}{}", out.stdout, out.stderr));
    }
    serde_json::from_str(out.stdout.trim()).map_err(|e| format!("{e}: {}", out.stdout))
}

/// `runtime show --id ID --json`.
fn show(w: &World, id: &str) -> Value {
    let (ok, out, err) = w.ac(
        &["runtime", "show", "--id", id, "--json"],
        Duration::from_secs(10),
    );
    assert!(ok, "runtime show: {err}");
    serde_json::from_str(out.trim()).unwrap()
}

/// Model requests (not title, suggestion or count requests) whose last user
/// message holds `needle`.
fn prompts_with(w: &World, needle: &str) -> Vec<Value> {
    w.requests()
        .into_iter()
        .filter(|r| r["structured"] == false)
        .filter(|r| r["prompt"].as_str().is_some_and(|p| p.contains(needle)))
        .collect()
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
    let Some(mut w) = World::new(cli, test) else {
        return;
    };
    let started = acp_serve(&w, ID, &["--prompt", "say hello FIRSTTURN"]).unwrap();
    let session = started["session_id"].as_str().unwrap().to_owned();
    assert!(!session.is_empty(), "{started}");
    let view = show(&w, ID);
    assert_eq!(view["status"], "ONLINE", "{view}");
    assert_eq!(view["kind"], "ACP");
    assert_eq!(view["connector"], "ACP");
    assert_eq!(view["conversation_id"], session.as_str());
    wait_for("the first turn's request", TURN, || {
        !prompts_with(&w, "FIRSTTURN").is_empty()
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

#[test]
fn opencode_acp_starts_registers_and_runs_a_first_turn() {
    starts_with_a_first_turn(Cli::Opencode, "opencode_acp_starts");
}

#[test]
fn claude_acp_starts_registers_and_runs_a_first_turn() {
    starts_with_a_first_turn(Cli::Claude, "claude_acp_starts");
}

#[test]
fn codex_acp_starts_registers_and_runs_a_first_turn() {
    starts_with_a_first_turn(Cli::Codex, "codex_acp_starts");
}
