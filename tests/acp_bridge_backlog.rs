//! A bridge client that reads nothing is dropped once it is `MAX_BACKLOG`
//! lines behind (core/src/acp/bridge/mod.rs): dropped while it is still
//! connected — its connection closed, its queued lines freed, the reason
//! in the transcript — not only once it goes away by itself.
//!
//! Found by the fan-out benchmark (`agent-comms-bench --section fanout`):
//! the seat's `follow` returns "dropped: …", but the connection it ran in
//! then waits for its queued lines to be written, which a client that
//! reads nothing never lets happen; the seat stays, the lines stay, and
//! the note comes only when the client closes its end, saying "Broken
//! pipe" instead of why it was dropped.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use support::env::{Record, TestEnv};
use support::run::run_within;
use support::{poll_within, TIMEOUT};

const ID: &str = "backlog";
/// Twice the bridge's MAX_BACKLOG: a client that reads none of them is
/// past the limit whatever the socket buffers hold.
const CHUNKS: u64 = 2 * agent_comms_core::acp::bridge::MAX_BACKLOG;

/// `runtime acp-serve` of the fake agent: its `--json` line.
fn serve_fake(env: &TestEnv) -> Value {
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fakes/acp_agent.py");
    let agent = agent.to_str().unwrap();
    let args = [
        "--actor",
        ID,
        "runtime",
        "acp-serve",
        "--id",
        ID,
        "--json",
        "--",
        agent,
    ];
    let mut cmd = env.command(&args);
    cmd.current_dir(&env.work);
    let started = run_within(cmd, "acp-serve of the fake", TIMEOUT)
        .ok()
        .json();
    let pid = |key: &str| started[key].as_u64().unwrap() as u32;
    env.remember(Record {
        name: ID.to_owned(),
        pid: pid("agent_pid"),
        supervisor_pid: pid("supervisor_pid"),
        socket: env.socket_path(ID),
    });
    started
}

/// Sends `request` and reads until its answer, which must be a result.
fn call(stream: &mut BufReader<UnixStream>, request: Value) {
    let mut line = format!("{request}\n");
    stream.get_mut().write_all(line.as_bytes()).unwrap();
    loop {
        line.clear();
        assert_ne!(
            stream.read_line(&mut line).unwrap(),
            0,
            "the bridge hung up"
        );
        let msg: Value = serde_json::from_str(&line).unwrap();
        if msg["id"] == request["id"] && msg.get("method").is_none() {
            assert!(msg.get("result").is_some(), "{request} → {msg}");
            return;
        }
    }
}

/// The transcript's notes.
fn notes(env: &TestEnv) -> Vec<String> {
    env.run_ok(&["acp", "log", ID, "--json"])
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["dir"] == "note")
        .filter_map(|e| e["text"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn a_client_that_reads_nothing_is_dropped_while_still_connected() {
    let env = TestEnv::new();
    let started = serve_fake(&env);
    let socket = UnixStream::connect(started["bridge"].as_str().unwrap()).unwrap();
    socket.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut client = BufReader::new(socket);
    call(
        &mut client,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
    );
    call(
        &mut client,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/resume",
               "params": {"sessionId": started["session_id"], "cwd": env.work}}),
    );

    // From here on the client reads nothing, and keeps its connection.
    let evidence = env
        .run_ok(&[
            "runtime",
            "deliver",
            "--id",
            ID,
            "--json",
            &format!("stream CHUNKS={CHUNKS}"),
        ])
        .json();
    assert_eq!(evidence["stop_reason"], "end_turn", "{evidence}");

    let note = poll_within(
        Duration::from_secs(10),
        "the supervisor's note on dropping the client that reads nothing",
        || {
            notes(&env)
                .into_iter()
                .find(|n| n.starts_with("client-1 left: "))
        },
    );
    assert!(note.starts_with("client-1 left: dropped: "), "{note}");

    // Its connection is closed: what the socket still holds, then EOF,
    // well short of the whole turn.
    let mut lines = 0u64;
    let mut line = String::new();
    while client.read_line(&mut line).expect("EOF, not a timeout") > 0 {
        lines += 1;
        line.clear();
    }
    assert!(lines < CHUNKS, "it got {lines} lines: the whole turn");
}
