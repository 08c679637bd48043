//! An ACP client as an editor runs one: `agent-comms acp attach ID` as its
//! agent command, JSON-RPC lines on the child's stdin and stdout. Written
//! here from the ACP spec, not with our crate, so that the tests see the
//! wire as any client does (string ids, raw lines, bad ones).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::env::TestEnv;
use super::TIMEOUT;

pub struct AcpClient {
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    /// Everything received so far, in order.
    pub seen: Vec<Value>,
    /// Which of `seen` [`AcpClient::wait_for`] returned already.
    taken: Vec<bool>,
    next_id: u64,
    /// How long a wait lasts: [`TIMEOUT`], longer for a real agent's turns.
    patience: Duration,
}

impl AcpClient {
    /// `acp attach ARGS…` (the runtime's id, `--read-only`, `--socket P`).
    pub fn attach(env: &TestEnv, name: &str, args: &[&str]) -> Self {
        let mut all = vec!["acp", "attach"];
        all.extend_from_slice(args);
        let cmd = env.command(&all);
        Self::spawn(cmd, name)
    }

    /// A client on the command `cmd` (an attach run some other way).
    pub fn spawn(mut cmd: std::process::Command, name: &str) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start acp attach");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        let who = name.to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let msg = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("{who} got a line that is not JSON ({e}): {line}"));
                if tx.send(msg).is_err() {
                    break;
                }
            }
        });
        Self {
            name: name.to_owned(),
            stdin: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
            taken: Vec::new(),
            next_id: 0,
            patience: TIMEOUT,
        }
    }

    /// Waits up to `patience` for each message (a real agent's turn).
    pub fn patient(mut self, patience: Duration) -> Self {
        self.patience = patience;
        self
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|_| stdin.flush())
            .expect("write to acp attach");
    }

    /// Sends request `method`; its id (a string, as some clients use).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(format!("{}-{}", self.name, self.next_id));
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&msg.to_string());
        id
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send_raw(&msg.to_string());
    }

    /// Answers the agent's request `id`.
    pub fn respond(&mut self, id: &Value, result: Value) {
        let msg = json!({"jsonrpc": "2.0", "id": id, "result": result});
        self.send_raw(&msg.to_string());
    }

    /// The first message that `matches` and that no `wait_for` returned
    /// before (received already, or still to come); fails the test after
    /// its patience ([`TIMEOUT`] unless [`AcpClient::patient`]).
    #[track_caller]
    pub fn wait_for(&mut self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let patience = self.patience;
        self.wait_within(patience, what, matches)
            .unwrap_or_else(|| {
                panic!(
                    "{}: no {what} within {patience:?}; saw {:#?}",
                    self.name, self.seen
                )
            })
    }

    /// [`AcpClient::wait_for`], `None` after `timeout`.
    pub fn wait_within(
        &mut self,
        timeout: Duration,
        _what: &str,
        matches: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        let found = (0..self.seen.len()).find(|&i| !self.taken[i] && matches(&self.seen[i]));
        if let Some(i) = found {
            self.taken[i] = true;
            return Some(self.seen[i].clone());
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(msg) => {
                    let hit = matches(&msg);
                    self.seen.push(msg.clone());
                    self.taken.push(hit);
                    if hit {
                        return Some(msg);
                    }
                }
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// The response to request `id`.
    #[track_caller]
    pub fn response(&mut self, id: &Value) -> Value {
        let id = id.clone();
        self.wait_for(&format!("response to {id}"), |m| is_response(m, &id))
    }

    /// A request's result, which must not be an error.
    #[track_caller]
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        let response = self.response(&id);
        assert!(
            response.get("error").is_none(),
            "{}: {method}: {response}",
            self.name
        );
        response["result"].clone()
    }

    /// `initialize` and `session/load` of the running session: what a
    /// client that joins does; the session's id.
    #[track_caller]
    pub fn join(&mut self) -> String {
        self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        let listed = self.call("session/list", json!({}));
        let session = listed["sessions"][0]["sessionId"]
            .as_str()
            .unwrap()
            .to_owned();
        self.call(
            "session/load",
            json!({"sessionId": session, "cwd": "/", "mcpServers": []}),
        );
        session
    }

    /// The `session/update` params received so far.
    pub fn updates(&self) -> Vec<&Value> {
        self.seen
            .iter()
            .filter(|m| m["method"] == "session/update")
            .map(|m| &m["params"])
            .collect()
    }

    /// The texts of the updates of kind `kind` received so far.
    pub fn texts(&self, kind: &str) -> Vec<String> {
        self.updates()
            .into_iter()
            .filter(|u| u["update"]["sessionUpdate"] == kind)
            .filter_map(|u| u["update"]["content"]["text"].as_str().map(str::to_owned))
            .collect()
    }

    /// Closes its input, as a client that is done does, and waits for the
    /// attach command to end.
    #[track_caller]
    pub fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        // Its output ends (the reader thread hangs up) as it exits.
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(msg) => {
                    self.seen.push(msg);
                    self.taken.push(false);
                }
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => panic!("{}: acp attach did not end", self.name),
            }
        }
        self.child.wait().expect("wait for acp attach")
    }
}

impl Drop for AcpClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn is_response(msg: &Value, id: &Value) -> bool {
    &msg["id"] == id && msg.get("method").is_none()
}

/// The transcript position an update carries.
pub fn position(update: &Value) -> u64 {
    update["_meta"]["agentComms"]["seq"]
        .as_u64()
        .expect("an update with its position")
}

/// The positions of what a client of `session` is shown, in the transcript
/// `entries` (`acp log --json`): the agent's updates and every prompt.
pub fn shown_positions(entries: &[Value], session: &str) -> Vec<u64> {
    entries
        .iter()
        .filter(|e| {
            let msg = &e["msg"];
            msg["params"]["sessionId"] == session
                && ((e["dir"] == "from_agent" && msg["method"] == "session/update")
                    || (e["dir"] == "to_agent" && msg["method"] == "session/prompt"))
        })
        .map(|e| e["seq"].as_u64().unwrap())
        .collect()
}
