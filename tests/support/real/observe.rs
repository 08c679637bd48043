//! What a real-provider test reads: the supervisor's view of the session
//! (`session activity`, `session snapshot`), deliveries, and the mock
//! server's request log.

use std::fs;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::world::World;
use crate::support::run::try_run_within;

impl World {
    /// `agent-comms ARGS…` outside the namespace (the test's side), bounded.
    pub fn ac(&self, args: &[&str], timeout: Duration) -> (bool, String, String) {
        let what = format!("agent-comms {}", args.join(" "));
        match try_run_within(self.env.command(args), &what, timeout) {
            Ok(run) => (run.success(), run.stdout, run.stderr),
            Err(unfinished) => (false, String::new(), unfinished.to_string()),
        }
    }

    /// `session activity NAME --json`, parsed (`Value::Null` when it fails).
    pub fn activity(&self, name: &str) -> Value {
        let (ok, out, _) = self.ac(
            &["session", "activity", name, "--json"],
            Duration::from_secs(10),
        );
        if ok {
            serde_json::from_str(out.trim()).unwrap_or(Value::Null)
        } else {
            Value::Null
        }
    }

    /// What the supervisor sees: `session activity --json` and
    /// `session snapshot --json` (cursor, title, rows), for reports.
    pub fn report(&self, name: &str) -> String {
        let activity = self.activity(name);
        let (_, snap, err) = self.ac(
            &["session", "snapshot", name, "--json"],
            Duration::from_secs(10),
        );
        let mut s = format!("session activity --json: {activity}\n");
        match serde_json::from_str::<Value>(snap.trim()) {
            Ok(v) => {
                s.push_str(&format!(
                    "session snapshot --json: cursor {}, title {}, alternate_screen {}\n",
                    v["cursor"], v["title"], v["alternate_screen"]
                ));
                for (i, l) in v["lines"].as_array().into_iter().flatten().enumerate() {
                    let l = l.as_str().unwrap_or_default();
                    if !l.trim().is_empty() {
                        s.push_str(&format!("{i:2}|{l}\n"));
                    }
                }
            }
            Err(_) => s.push_str(&format!("session snapshot failed: {snap}{err}\n")),
        }
        s
    }

    /// The rows of `session snapshot --json` (empty when it fails).
    pub fn snapshot_lines(&self, name: &str) -> Vec<String> {
        let (_, snap, _) = self.ac(
            &["session", "snapshot", name, "--json"],
            Duration::from_secs(10),
        );
        serde_json::from_str::<Value>(snap.trim())
            .ok()
            .and_then(|v| {
                v["lines"].as_array().map(|a| {
                    a.iter()
                        .map(|l| l.as_str().unwrap_or_default().to_owned())
                        .collect()
                })
            })
            .unwrap_or_default()
    }

    /// Polls `session activity` until it says `want`; on timeout, fails
    /// the test with the screen.
    pub fn wait_activity(&self, name: &str, want: &str, timeout: Duration, what: &str) {
        let deadline = Instant::now() + timeout;
        loop {
            if self.activity(name)["activity"] == want {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "[{}] {what}: session {name} did not read {want} within {timeout:?}\n{}",
                    self.test,
                    self.report(name)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `runtime deliver --id ID --json --timeout SECS TEXT`: the evidence, or
    /// the error line.
    pub fn deliver(&self, id: &str, text: &str, timeout_s: u64) -> Result<Value, String> {
        let secs = timeout_s.to_string();
        let (ok, out, err) = self.ac(
            &[
                "runtime",
                "deliver",
                "--id",
                id,
                "--json",
                "--timeout",
                &secs,
                text,
            ],
            Duration::from_secs(timeout_s + 15),
        );
        if ok {
            serde_json::from_str(out.trim()).map_err(|e| format!("no JSON ({e}): {out}{err}"))
        } else {
            Err(format!("{}{}", out, err.trim()))
        }
    }

    /// The mock server's log as it is now.
    pub fn mock_log_text(&self) -> String {
        fs::read_to_string(&self.mock_log).unwrap_or_default()
    }

    /// Every request the mock server answered so far (its log file).
    pub fn requests(&self) -> Vec<Value> {
        requests_in(&self.mock_log_text())
    }

    /// The first answered model request (not a title request) whose prompt
    /// holds `needle`, waited for.
    pub fn wait_request(&self, needle: &str, timeout: Duration) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self.requests().into_iter().find(|r| {
                r["structured"] == false && r["prompt"].as_str().is_some_and(|p| p.contains(needle))
            });
            if found.is_some() || Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether, within `timeout`, a turn's request (not a title's, which
    /// opencode asks for first with the same text) ends with `text`.
    pub fn wait_turn(&self, text: &str, timeout: Duration) -> bool {
        self.turns_within(text, timeout) > 0
    }

    /// [`World::turns_with`] once at least one such turn is in the log
    /// (waited for up to 10 s). The mock logs a request when its answer is
    /// finished, which can be just after the client has read the answer's
    /// end and so after the turn ended for the test: a count read at once
    /// may miss it.
    pub fn logged_turns_with(&self, text: &str) -> usize {
        self.turns_within(text, Duration::from_secs(10))
    }

    /// [`World::turns_with`] as soon as it is not 0, or at `timeout`.
    fn turns_within(&self, text: &str, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            let turns = self.turns_with(text);
            if turns > 0 || Instant::now() > deadline {
                return turns;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// How many model requests of a turn (with tools: not titles, token
    /// counts or suggestions; not the continuation that brings a tool's
    /// result) end with `text`: each turn started with it makes one.
    pub fn turns_with(&self, text: &str) -> usize {
        self.turn_prompts()
            .iter()
            .filter(|p| p.trim().ends_with(text))
            .count()
    }

    fn turn_prompts(&self) -> Vec<String> {
        turn_prompts_in(&self.mock_log_text())
    }

    /// A summary of the mock's log, for failure messages.
    pub fn requests_summary(&self) -> String {
        self.requests()
            .iter()
            .map(|r| {
                let p = r["prompt"].as_str().unwrap_or_default();
                let tail: String = p
                    .chars()
                    .rev()
                    .take(90)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                format!(
                    "  #{} {} {} structured={} tools={} tool_result={} received={} last_delta={} finished={} prompt=…{:?}\n",
                    r["id"],
                    r["method"],
                    r["path"],
                    r["structured"],
                    r["body"]["tools"].as_array().map_or(0, Vec::len),
                    !r["tool_result"].is_null(),
                    r["received_at"],
                    r["last_delta_at"],
                    r["finished_at"],
                    tail
                )
            })
            .collect()
    }
}

/// The requests in the mock's log text.
pub fn requests_in(log: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The prompts of the model requests in `log` that start a turn (see
/// [`World::turns_with`]).
pub fn turn_prompts_in(log: &str) -> Vec<String> {
    requests_in(log)
        .into_iter()
        .filter(|r| {
            r["body"]["tools"].as_array().is_some_and(|t| !t.is_empty())
                && r["tool_result"].is_null()
        })
        .filter_map(|r| r["prompt"].as_str().map(str::to_owned))
        .collect()
}
