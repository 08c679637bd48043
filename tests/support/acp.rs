//! ACP runtimes served by the fake agent (`tests/fakes/acp_agent.py`), and
//! what the tests read of them: the transcript, `runtime show`, the fake's
//! log. Shared by tests/acp.rs and the bridge's tests.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::env::{Record, TestEnv};
use super::fakes::fake_events;
use super::run::{run_within, Run};
use super::TIMEOUT;

pub fn fake_agent() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fakes/acp_agent.py")
        .display()
        .to_string()
}

/// One runtime served over ACP by the fake, in `env.work`.
pub struct Served {
    pub id: String,
    pub started: Value,
    /// The fake's log (FAKE_ACP_LOG), shared by every start of this test.
    pub log: PathBuf,
}

impl Served {
    /// `runtime acp-serve --id ID --json EXTRA… -- acp_agent.py` with
    /// `FAKE_ACP_MODE=mode` and `vars`, as agent ID unless EXTRA has
    /// `--actor A`; the command's run, whatever it did.
    pub fn try_start(
        env: &TestEnv,
        id: &str,
        mode: &str,
        vars: &[(&str, &str)],
        extra: &[&str],
    ) -> Run {
        let (actor, extra) = match extra.iter().position(|a| *a == "--actor") {
            Some(i) => (extra[i + 1], [&extra[..i], &extra[i + 2..]].concat()),
            None => (id, extra.to_vec()),
        };
        let mut args = vec![
            "--actor",
            actor,
            "runtime",
            "acp-serve",
            "--id",
            id,
            "--json",
        ];
        args.extend_from_slice(&extra);
        args.push("--");
        let agent = fake_agent();
        args.push(&agent);
        let mut cmd = env.command(&args);
        cmd.current_dir(&env.work)
            .env("FAKE_ACP_MODE", mode)
            .env("FAKE_ACP_LOG", fake_log(env));
        for (k, v) in vars {
            cmd.env(k, v);
        }
        run_within(cmd, &format!("acp-serve {id} ({mode})"), TIMEOUT)
    }

    /// [`Served::try_start`], which must succeed; remembered for cleanup.
    pub fn start(
        env: &TestEnv,
        id: &str,
        mode: &str,
        vars: &[(&str, &str)],
        extra: &[&str],
    ) -> Self {
        let run = Self::try_start(env, id, mode, vars, extra).ok();
        let started = run.json();
        let pid = |key: &str| {
            started[key]
                .as_u64()
                .unwrap_or_else(|| panic!("{key}: {started}")) as u32
        };
        env.remember(Record {
            name: id.to_owned(),
            pid: pid("agent_pid"),
            supervisor_pid: pid("supervisor_pid"),
            socket: env.socket_path(id),
        });
        Self {
            id: id.to_owned(),
            log: fake_log(env),
            started,
        }
    }

    pub fn agent_pid(&self) -> u32 {
        self.started["agent_pid"].as_u64().unwrap() as u32
    }

    pub fn supervisor_pid(&self) -> u32 {
        self.started["supervisor_pid"].as_u64().unwrap() as u32
    }

    pub fn session_id(&self) -> String {
        self.started["session_id"].as_str().unwrap().to_owned()
    }

    /// The prompts' texts the fake received, in order, over all starts.
    pub fn prompted(&self) -> Vec<String> {
        fake_events(&self.log, "prompt")
            .iter()
            .map(|p| p["text"].as_str().unwrap().to_owned())
            .collect()
    }
}

pub fn fake_log(env: &TestEnv) -> PathBuf {
    env.base().join("fake-acp.log")
}

pub fn deliver(env: &TestEnv, id: &str, text: &str) -> Run {
    env.run(&["runtime", "deliver", "--id", id, "--json", text])
}

/// A delivery that must work: its evidence, which must say the turn
/// ended normally.
#[track_caller]
pub fn deliver_ok(env: &TestEnv, id: &str, text: &str) -> Value {
    let evidence = deliver(env, id, text).ok().json();
    assert_eq!(evidence["style"], "prompt", "{evidence}");
    assert_eq!(evidence["stop_reason"], "end_turn", "{evidence}");
    evidence
}

pub fn show(env: &TestEnv, id: &str) -> Value {
    env.run_ok(&["runtime", "show", "--id", id, "--json"])
        .json()
}

/// The raw transcript (`acp log ID --json`), one entry per line.
pub fn transcript(env: &TestEnv, id: &str) -> Vec<Value> {
    env.run_ok(&["acp", "log", id, "--json"])
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The supervisor's notes in the transcript.
pub fn notes(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e["dir"] == "note")
        .map(|e| e["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The JSON-RPC messages of the transcript in direction `dir`.
pub fn messages<'a>(entries: &'a [Value], dir: &str) -> Vec<&'a Value> {
    entries
        .iter()
        .filter(|e| e["dir"] == dir)
        .filter_map(|e| e.get("msg"))
        .collect()
}

/// Fails unless a note of the transcript holds `needle`.
#[track_caller]
pub fn assert_noted(notes: &[String], needle: &str) {
    assert!(
        notes.iter().any(|n| n.contains(needle)),
        "no note holds {needle:?}: {notes:#?}"
    );
}
