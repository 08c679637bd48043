//! The fake providers (tests/fakes/bin) and what they log, and the
//! `interactive-serve` command line that serves a provider in a test-side
//! terminal (fake or real).

use std::fs;
use std::path::Path;

use serde_json::Value;

use super::BIN;

/// The fake provider `name` (tests/fakes/bin): claude, codex or opencode.
pub fn fake(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fakes/bin")
        .join(name)
        .display()
        .to_string()
}

/// A fake's log entries of one kind (`start`, `submit` …).
pub fn fake_events(log: &Path, kind: &str) -> Vec<Value> {
    fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == kind)
        .collect()
}

/// The message ids a notification a fake received names, in its order.
pub fn named_ids(notification: &str) -> Vec<String> {
    agent_comms_core::control::messages::named_ids(notification)
        .unwrap_or_else(|| panic!("not a notification: {notification:?}"))
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// The command line a fake's `start` event says it was started with.
pub fn start_argv(start: &Value) -> Vec<&str> {
    start["argv"]
        .as_array()
        .unwrap_or_else(|| panic!("a start event without argv: {start}"))
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect()
}

/// `agent-comms --actor ACTOR runtime interactive-serve --id ID
/// --heartbeat-ms MS EXTRA… -- PROGRAM ARGS…`: the runtime `id` served by
/// agent `actor`, with a short heartbeat (the default is for people).
pub fn serve_argv<'a>(
    actor: &'a str,
    id: &'a str,
    heartbeat_ms: &'a str,
    extra: &[&'a str],
    program: &'a str,
    args: &[&'a str],
) -> Vec<&'a str> {
    let mut argv = vec![
        BIN,
        "--actor",
        actor,
        "runtime",
        "interactive-serve",
        "--id",
        id,
        "--heartbeat-ms",
        heartbeat_ms,
    ];
    argv.extend_from_slice(extra);
    argv.push("--");
    argv.push(program);
    argv.extend_from_slice(args);
    argv
}
