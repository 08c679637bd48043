//! The `mock-model-server` program: its first line, its log file, and its
//! ways of exiting.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

fn spawn(args: &[&str]) -> (Child, u16) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mock-model-server"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim_end()
        .strip_prefix("listening on http://127.0.0.1:")
        .unwrap_or_else(|| panic!("first line: {line:?}"))
        .parse()
        .unwrap();
    (child, port)
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn serves_logs_and_exits_on_stdin_eof() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.jsonl");
    let (mut child, port) = spawn(&[
        "--port",
        "0",
        "--log",
        log.to_str().unwrap(),
        "--exit-on-stdin-eof",
        "--deltas",
        "2",
    ]);
    let body = json!({"model": "m", "stream": true,
        "messages": [{"role": "user", "content": "REPLY=fromthebinary"}]});
    let resp = common::post(port, "/v1/chat/completions", &body);
    let pieces: Vec<String> = resp
        .events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .filter_map(|e| {
            e.json()["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect();
    assert_eq!(pieces, ["fromth", "ebinary"]);
    drop(child.stdin.take());
    assert!(wait_exit(&mut child).success());
    let text = std::fs::read_to_string(&log).unwrap();
    let entry: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(entry["api"], "openai_chat");
    assert_eq!(entry["reply"], "fromthebinary");
    assert_eq!(entry["pacing"]["deltas"], 2);
}

#[cfg(unix)]
#[test]
fn exits_on_sigterm() {
    let (mut child, port) = spawn(&[]);
    assert_eq!(
        common::Client::connect(port)
            .request("HEAD", "/", None)
            .status,
        200
    );
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    assert!(wait_exit(&mut child).success());
}

#[test]
fn refuses_non_loopback() {
    let out = Command::new(env!("CARGO_BIN_EXE_mock-model-server"))
        .args(["--host", "0.0.0.0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));
    assert!(out.stdout.is_empty());
}
