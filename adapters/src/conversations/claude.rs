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

/// One pid file, `sessions/<pid>.json`.
struct PidFile {
    pid: u32,
    session_id: String,
    cwd: Option<String>,
    /// `busy` or `idle`, when it says.
    status: Option<String>,
}

fn pid_file(env: &ProviderEnv, pid: u32) -> PathBuf {
    sessions_dir(env).join(format!("{pid}.json"))
}

fn read(path: &std::path::Path) -> Option<PidFile> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    Some(PidFile {
        pid: u32::try_from(v["pid"].as_u64()?).ok()?,
        session_id: v["sessionId"].as_str()?.to_owned(),
        cwd: v["cwd"].as_str().map(str::to_owned),
        status: v["status"].as_str().map(str::to_owned),
    })
}

impl ConversationDiscovery for Claude {
    fn marks(&self, proc: &ProcessInfo, env: &ProviderEnv) -> bool {
        pid_file(env, proc.pid).is_file()
    }

    fn discover(&self, proc: &ProcessInfo, env: &ProviderEnv) -> Discovery {
        let path = pid_file(env, proc.pid);
        match read(&path) {
            Some(file) if file.pid == proc.pid => Discovery::Found(ConversationCandidate {
                id: file.session_id,
                cwd: file.cwd,
                detail: path.display().to_string(),
            }),
            _ => Discovery::Nothing(format!(
                "no readable {} (Claude Code writes it at start-up)",
                path.display()
            )),
        }
    }

    fn reported_activity(&self, pid: u32, env: &ProviderEnv) -> Option<Activity> {
        let file = read(&pid_file(env, pid))?;
        // A file another process left behind says nothing about this one.
        if file.pid != pid {
            return None;
        }
        match file.status.as_deref()? {
            "busy" => Some(Activity::Busy),
            "idle" => Some(Activity::Idle),
            _ => None,
        }
    }

    fn holders(&self, id: &str, env: &ProviderEnv) -> Vec<u32> {
        files_ending(&sessions_dir(env), ".json")
            .iter()
            .filter_map(|p| read(p))
            .filter(|file| file.session_id == id && pid_alive(file.pid))
            .map(|file| file.pid)
            .collect()
    }
}
