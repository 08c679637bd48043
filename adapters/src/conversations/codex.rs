//! Codex: the thread a TUI is on is held by its app-server daemon, which
//! creates `$CODEX_HOME/thread-writer-locks/<id>.lock` before the first
//! turn and keeps the rollout `sessions/YYYY/MM/DD/rollout-<ts>-<id>.jsonl`
//! (first line `session_meta` with `payload.id` and `payload.cwd`). The id
//! is not in the environment, so a TUI is tied to the first lock written
//! after it started — unless another Codex started in between, when the
//! choice is the person's.

use std::path::{Path, PathBuf};

use agent_comms_core::takeover::process::my_processes;
use agent_comms_core::takeover::{
    ConversationCandidate, ConversationDiscovery, Discovery, ProcessInfo, ProviderEnv,
};

use super::{dir_from, files_ending, live_on_conversation, modified_ms, rival_started};

pub struct Codex;

/// A lock may be stamped a little before the process's start as /proc
/// rounds it (10 ms ticks) and file systems round mtimes.
const CLOCK_SLACK_MS: u64 = 50;

fn home_of(env: &ProviderEnv) -> PathBuf {
    dir_from(env, "CODEX_HOME", ".codex")
}

/// The working directory a thread's rollout records.
fn rollout_cwd(home: &Path, id: &str) -> Option<String> {
    let rollout = find_rollout(&home.join("sessions"), id)?;
    let first = std::fs::read_to_string(rollout).ok()?;
    let meta: serde_json::Value = serde_json::from_str(first.lines().next()?).ok()?;
    meta["payload"]["cwd"].as_str().map(str::to_owned)
}

fn find_rollout(dir: &Path, id: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_rollout(&path, id) {
                return Some(found);
            }
        } else if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("rollout-") && n.ends_with(&format!("-{id}.jsonl")))
        {
            return Some(path);
        }
    }
    None
}

impl Codex {
    /// Discovery with this user's process table `all` already read.
    fn discover_among(
        &self,
        proc: &ProcessInfo,
        env: &ProviderEnv,
        all: &[ProcessInfo],
    ) -> Discovery {
        let home = home_of(env);
        let locks_dir = home.join("thread-writer-locks");
        let since = proc.started_ms.saturating_sub(CLOCK_SLACK_MS);
        // `.coordination.lock` (0.171) sits beside the thread locks and is
        // written in the same millisecond: dot-files are not threads.
        let mut locks: Vec<(u64, String)> = files_ending(&locks_dir, ".lock")
            .iter()
            .filter_map(|p| {
                let at = modified_ms(p)?;
                let id = p.file_stem()?.to_str()?.to_owned();
                (at >= since && !id.starts_with('.')).then_some((at, id))
            })
            .collect();
        locks.sort();
        let Some((first_at, _)) = locks.first().cloned() else {
            return Discovery::Nothing(format!(
                "no thread lock in {} written after process {} started",
                locks_dir.display(),
                proc.pid
            ));
        };
        let candidate = |(at, id): &(u64, String)| ConversationCandidate {
            cwd: rollout_cwd(&home, id),
            detail: format!(
                "lock written {}",
                agent_comms_core::time::iso_from_unix_millis(*at)
            ),
            id: id.clone(),
        };
        // Another Codex TUI that started after this one, before the first
        // lock, may own that lock.
        let rivals = rival_started(proc, "codex", first_at, &home, home_of, all);
        if rivals {
            Discovery::Ambiguous(locks.iter().map(candidate).collect())
        } else {
            Discovery::Found(candidate(&locks[0]))
        }
    }
}

impl ConversationDiscovery for Codex {
    fn marks(&self, _proc: &ProcessInfo, _env: &ProviderEnv) -> bool {
        false
    }

    fn discover(&self, proc: &ProcessInfo, env: &ProviderEnv) -> Discovery {
        self.discover_among(proc, env, &my_processes())
    }

    fn holders(&self, id: &str, env: &ProviderEnv) -> Vec<u32> {
        live_on_conversation("codex", id, env, |p, e, all| self.discover_among(p, e, all))
    }
}
