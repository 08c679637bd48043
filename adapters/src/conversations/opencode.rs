//! opencode: one process holding its database, with no per-session file
//! and no pid marker. Its log (`~/.local/share/opencode/log/opencode.log`
//! in 1.18: `timestamp=… level=INFO run=<hex> message=… session.id=ses_…`)
//! tags every line with a per-process run and names sessions as they are
//! used; the run whose first line comes right after the process started is
//! that process's, and the last session it names is the one on screen. A
//! session appears in the log with its first prompt: before one, there is
//! no conversation to keep.

use std::collections::BTreeMap;
use std::path::PathBuf;

use agent_comms_core::takeover::process::my_processes;
use agent_comms_core::takeover::{
    ConversationCandidate, ConversationDiscovery, Discovery, ProcessInfo, ProviderEnv,
};
use agent_comms_core::time::unix_millis_from_iso;

use super::{files_ending, live_on_conversation, rival_started};

pub struct OpenCode;

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
    /// Conversations (opencode's sessions) in the order it last used them.
    conversations: Vec<String>,
}

/// Every run in every log file, by tag.
fn runs(env: &ProviderEnv) -> BTreeMap<String, Run> {
    let mut runs: BTreeMap<String, Run> = BTreeMap::new();
    for file in files_ending(&log_dir(env), ".log") {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for line in text.lines() {
            let (mut at, mut tag, mut conversation) = (None, None, None);
            for word in line.split_whitespace() {
                if let Some(t) = word.strip_prefix("timestamp=") {
                    at = unix_millis_from_iso(t);
                } else if let Some(t) = word.strip_prefix("run=") {
                    tag = Some(t);
                } else if let Some(s) = word.strip_prefix("session.id=") {
                    conversation = Some(s);
                }
            }
            let (Some(at), Some(tag)) = (at, tag) else {
                continue;
            };
            let run = runs.entry(tag.to_owned()).or_insert_with(|| Run {
                first_ms: at,
                ..Run::default()
            });
            run.first_ms = run.first_ms.min(at);
            if let Some(s) = conversation {
                run.conversations.retain(|x| x != s);
                run.conversations.push(s.to_owned());
            }
        }
    }
    runs
}

impl OpenCode {
    /// Discovery with this user's process table `all` already read.
    fn discover_among(
        &self,
        proc: &ProcessInfo,
        env: &ProviderEnv,
        all: &[ProcessInfo],
    ) -> Discovery {
        let from = proc.started_ms.saturating_sub(CLOCK_SLACK_MS);
        let mut after: Vec<(String, Run)> = runs(env)
            .into_iter()
            .filter(|(_, r)| r.first_ms >= from)
            .collect();
        after.sort_by_key(|(_, r)| r.first_ms);
        let cwd = proc.cwd.as_ref().map(|d| d.display().to_string());
        let candidate = |tag: &str, id: &str| ConversationCandidate {
            id: id.to_owned(),
            cwd: cwd.clone(),
            detail: format!("log run {tag}"),
        };
        let Some((tag, run)) = after.first() else {
            return Discovery::Nothing(format!(
                "no run in {} began after process {} started",
                log_dir(env).display(),
                proc.pid
            ));
        };
        // The first run after the start is this process's — unless another
        // opencode started in between (it starts slowly: seconds).
        if rival_started(proc, "opencode", run.first_ms, &log_dir(env), log_dir, all) {
            return Discovery::Ambiguous(
                after
                    .iter()
                    .filter_map(|(tag, r)| Some(candidate(tag, r.conversations.last()?)))
                    .collect(),
            );
        }
        match run.conversations.last() {
            Some(id) => Discovery::Found(candidate(tag, id)),
            None => Discovery::Nothing(format!(
                "log run {tag} names no conversation yet (opencode names one with its first prompt)"
            )),
        }
    }
}

impl ConversationDiscovery for OpenCode {
    fn marks(&self, _proc: &ProcessInfo, _env: &ProviderEnv) -> bool {
        false
    }

    fn discover(&self, proc: &ProcessInfo, env: &ProviderEnv) -> Discovery {
        self.discover_among(proc, env, &my_processes())
    }

    fn holders(&self, id: &str, env: &ProviderEnv) -> Vec<u32> {
        live_on_conversation("opencode", id, env, |p, e, all| {
            self.discover_among(p, e, all)
        })
    }
}
