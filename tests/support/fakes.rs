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

/// The Rust fake (crate `fake`, binary `fake-agent`) under the name of
/// the CLI it acts as, `claude` or `codex`: a link in a directory of this
/// test process, as the host and the fake both go by the program's name.
/// scripts/test builds it (`cargo build -p agent-comms-fake`).
pub fn rust_fake(face: &str) -> String {
    let exe = Path::new(BIN).with_file_name("fake-agent");
    assert!(
        exe.is_file(),
        "{} is missing: cargo build -p agent-comms-fake",
        exe.display()
    );
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("rust-fakes-{}", std::process::id()));
    let link = dir.join(face);
    if !link.exists() {
        fs::create_dir_all(&dir).expect("create the Rust fake's directory");
        // Another test of this process may have made it meanwhile.
        match std::os::unix::fs::symlink(&exe, &link) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                panic!("link {}: {e}", link.display())
            }
            _ => {}
        }
    }
    link.display().to_string()
}

/// `senders` agents (`agent0`, `agent1` …) send `each` messages at once,
/// each through `send(from, text)`, which returns the message's id: the
/// ids, per sender in the order sent.
pub fn send_at_once(
    senders: usize,
    each: usize,
    send: impl Fn(&str, &str) -> String + Sync,
) -> Vec<Vec<String>> {
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..senders)
            .map(|s| {
                let send = &send;
                scope.spawn(move || {
                    let from = format!("agent{s}");
                    (0..each)
                        .map(|m| send(&from, &format!("message {m} from {from}")))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Checks what several senders' messages did in a fake: every message
/// named exactly once in the notifications it received, each sender's in
/// the order sent, and none submitted while the fake was busy.
pub fn assert_each_once_in_order(submits: &[Value], sent: &[Vec<String>]) {
    let texts: Vec<&str> = submits
        .iter()
        .map(|s| s["text"].as_str().unwrap_or_default())
        .collect();
    let named: Vec<String> = texts.iter().flat_map(|t| named_ids(t)).collect();
    let total: usize = sent.iter().map(Vec::len).sum();
    assert_eq!(named.len(), total, "{texts:#?}");
    for (s, ids) in sent.iter().enumerate() {
        let positions: Vec<usize> = ids
            .iter()
            .map(|id| {
                assert_eq!(named.iter().filter(|n| *n == id).count(), 1, "{id}");
                named.iter().position(|n| n == id).unwrap()
            })
            .collect();
        assert!(
            positions.windows(2).all(|w| w[0] < w[1]),
            "sender {s}'s messages out of order: {texts:#?}"
        );
    }
    let busy: Vec<&Value> = submits
        .iter()
        .filter(|s| s["while_busy"] != false)
        .collect();
    assert!(busy.is_empty(), "submitted while busy: {busy:#?}");
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
    let mut argv = vec![BIN];
    argv.extend(serve_args(actor, id, heartbeat_ms, extra, program, args));
    argv
}

/// [`serve_argv`]'s arguments, for another build of agent-comms (the
/// Windows one under Wine).
pub fn serve_args<'a>(
    actor: &'a str,
    id: &'a str,
    heartbeat_ms: &'a str,
    extra: &[&'a str],
    program: &'a str,
    args: &[&'a str],
) -> Vec<&'a str> {
    let mut argv = vec![
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
