//! Claude Code: from start-up it keeps `~/.claude/sessions/<pid>.json`
//! (`pid`, `sessionId`, `cwd`, `status`), removed on exit — an exact tie
//! from pid to conversation, the provider's own pid marker, and, in
//! `status` (`busy`/`idle`), its own word on whether a turn runs.

use std::path::PathBuf;

use agent_comms_core::adapter::Activity;
use agent_comms_core::session::pid_alive;
use agent_comms_core::takeover::{
    ConversationCandidate, ConversationDiscovery, Discovery, ProcessInfo, ProviderEnv,
};

use super::{dir_from, files_ending};

pub struct Claude;

fn sessions_dir(env: &ProviderEnv) -> PathBuf {
    dir_from(env, "CLAUDE_CONFIG_DIR", ".claude").join("sessions")
}

/// `(pid, sessionId, cwd)` from one pid file.
fn read(path: &std::path::Path) -> Option<(u32, String, Option<String>)> {
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let pid = u32::try_from(v["pid"].as_u64()?).ok()?;
    let id = v["sessionId"].as_str()?.to_owned();
    Some((pid, id, v["cwd"].as_str().map(str::to_owned)))
}

impl ConversationDiscovery for Claude {
    fn marks(&self, proc: &ProcessInfo, env: &ProviderEnv) -> bool {
        sessions_dir(env)
            .join(format!("{}.json", proc.pid))
            .is_file()
    }

    fn discover(&self, proc: &ProcessInfo, env: &ProviderEnv) -> Discovery {
        let path = sessions_dir(env).join(format!("{}.json", proc.pid));
        match read(&path) {
            Some((pid, id, cwd)) if pid == proc.pid => Discovery::Found(ConversationCandidate {
                id,
                cwd,
                detail: path.display().to_string(),
            }),
            _ => Discovery::Nothing(format!(
                "no readable {} (Claude Code writes it at start-up)",
                path.display()
            )),
        }
    }

    fn reported_activity(&self, pid: u32, env: &ProviderEnv) -> Option<Activity> {
        let path = sessions_dir(env).join(format!("{pid}.json"));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
        // A file another process left behind says nothing about this one.
        if v["pid"].as_u64() != Some(u64::from(pid)) {
            return None;
        }
        match v["status"].as_str()? {
            "busy" => Some(Activity::Busy),
            "idle" => Some(Activity::Idle),
            _ => None,
        }
    }

    fn holders(&self, id: &str, env: &ProviderEnv) -> Vec<u32> {
        files_ending(&sessions_dir(env), ".json")
            .iter()
            .filter_map(|p| read(p))
            .filter(|(pid, sid, _)| sid == id && pid_alive(*pid))
            .map(|(pid, _, _)| pid)
            .collect()
    }
}
