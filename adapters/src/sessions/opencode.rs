//! opencode: one process holding its database, with no per-session file
//! and no pid marker. Its log (`~/.local/share/opencode/log/`) tags every
//! line with a per-process `run=<hex>` and records `session.id=ses_…` as
//! sessions are created and used; the run whose first line comes right
//! after the process started is that process's, and the last session it
//! names is the one on screen.

use std::collections::BTreeMap;
use std::path::PathBuf;

use agent_comms_core::takeover::{
    Discovery, ProcessInfo, ProviderEnv, SessionCandidate, SessionDiscovery,
};
use agent_comms_core::time::unix_millis_from_iso;

use super::{files_ending, live_on_session};

pub struct OpenCode;

/// A run's first log line comes within this long after its process started.
const START_WINDOW_MS: u64 = 10_000;
/// /proc's start time is rounded to 10 ms ticks.
const CLOCK_SLACK_MS: u64 = 50;

fn log_dir(env: &ProviderEnv) -> PathBuf {
    env.var("XDG_DATA_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| env.home().join(".local/share"))
        .join("opencode/log")
}

/// One process run in the log.
#[derive(Default)]
struct Run {
    first_ms: u64,
    /// Sessions in the order it last used them.
    sessions: Vec<String>,
}

/// Every run in every log file, by tag.
fn runs(env: &ProviderEnv) -> BTreeMap<String, Run> {
    let mut runs: BTreeMap<String, Run> = BTreeMap::new();
    for file in files_ending(&log_dir(env), ".log") {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let Some(at) = words.nth(1).and_then(unix_millis_from_iso) else {
                continue;
            };
            let (mut tag, mut session) = (None, None);
            for word in words {
                if let Some(t) = word.strip_prefix("run=") {
                    tag = Some(t);
                } else if let Some(s) = word.strip_prefix("session.id=") {
                    session = Some(s);
                }
            }
            let Some(tag) = tag else { continue };
            let run = runs.entry(tag.to_owned()).or_insert_with(|| Run {
                first_ms: at,
                ..Run::default()
            });
            run.first_ms = run.first_ms.min(at);
            if let Some(s) = session {
                run.sessions.retain(|x| x != s);
                run.sessions.push(s.to_owned());
            }
        }
    }
    runs
}

impl SessionDiscovery for OpenCode {
    fn marks(&self, _proc: &ProcessInfo, _env: &ProviderEnv) -> bool {
        false
    }

    fn discover(&self, proc: &ProcessInfo, env: &ProviderEnv) -> Discovery {
        let from = proc.started_ms.saturating_sub(CLOCK_SLACK_MS);
        let mine: Vec<(String, Run)> = runs(env)
            .into_iter()
            .filter(|(_, r)| r.first_ms >= from && r.first_ms <= from + START_WINDOW_MS)
            .collect();
        let cwd = proc.cwd.as_ref().map(|d| d.display().to_string());
        let candidate = |tag: &str, id: &str| SessionCandidate {
            id: id.to_owned(),
            cwd: cwd.clone(),
            detail: format!("log run {tag}"),
        };
        match mine.as_slice() {
            [] => Discovery::Nothing(format!(
                "no run in {} began right after process {} started",
                log_dir(env).display(),
                proc.pid
            )),
            [(tag, run)] => match run.sessions.last() {
                Some(id) => Discovery::Found(candidate(tag, id)),
                None => Discovery::Nothing(format!("log run {tag} names no session yet")),
            },
            // Two processes started together: their runs cannot be told apart.
            several => Discovery::Ambiguous(
                several
                    .iter()
                    .filter_map(|(tag, r)| Some(candidate(tag, r.sessions.last()?)))
                    .collect(),
            ),
        }
    }

    fn holders(&self, id: &str, env: &ProviderEnv) -> Vec<u32> {
        live_on_session("opencode", id, env, |p, e| self.discover(p, e))
    }
}
