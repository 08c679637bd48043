//! Conversation discovery for the real provider CLIs: code, because no profile
//! can say "read `~/.claude/sessions/<pid>.json`" or "match a log's run tag
//! to a process's start time".
//!
//! A *conversation* is the provider's own session or thread (what its
//! `--resume ID` names), not one of our supervised sessions. Each
//! discoverer ties a live process to the one conversation it is on from
//! files the provider itself keeps (docs/providers.md says which), and
//! finds the live processes holding a conversation (for the collision
//! guard). None of them ever picks "the most recently used" one: another
//! process may have used the same directory since.

mod claude;
mod codex;
mod opencode;

use std::path::{Path, PathBuf};

use agent_comms_core::adapter::Profile;
use agent_comms_core::takeover::process::{my_processes, ProcessInfo};
use agent_comms_core::takeover::{ConversationDiscovery, Discovery, ProviderEnv};

/// The discoverer a profile names in `[conversation] discovery`.
pub fn discovery_for(profile: &Profile) -> Option<Box<dyn ConversationDiscovery>> {
    discovery_named(profile.conversation.as_ref()?.discovery.as_deref()?)
}

/// The discovery `[conversation] discovery = "<name>"` picks.
pub fn discovery_named(name: &str) -> Option<Box<dyn ConversationDiscovery>> {
    match name {
        "claude-code" => Some(Box::new(claude::Claude)),
        "codex" => Some(Box::new(FromProcessTable(codex::Codex))),
        "opencode" => Some(Box::new(FromProcessTable(opencode::OpenCode))),
        _ => None,
    }
}

/// The names `[conversation] discovery` accepts.
pub const DISCOVERIES: &[&str] = &["claude-code", "codex", "opencode"];

/// `$VAR` if set, else `$HOME/<rest>`.
fn dir_from(env: &ProviderEnv, var: &str, rest: &str) -> PathBuf {
    env.var(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| env.home().join(rest))
}

/// A provider that keeps no per-pid marker: which conversation a process
/// is on follows from its files and from the other live processes that
/// could have written them (the rivals).
trait ProcessTableDiscovery {
    /// The program whose processes may hold a conversation.
    const PROGRAM: &'static str;
    /// The conversation `proc` is on, `all` being this user's process table.
    fn discover_among(
        &self,
        proc: &ProcessInfo,
        env: &ProviderEnv,
        all: &[ProcessInfo],
    ) -> Discovery;
}

/// A [`ProcessTableDiscovery`] as a [`ConversationDiscovery`]: the process
/// table is read once per question and handed to every discovery.
struct FromProcessTable<D>(D);

impl<D: ProcessTableDiscovery + Send + Sync> ConversationDiscovery for FromProcessTable<D> {
    fn marks(&self, _proc: &ProcessInfo, _env: &ProviderEnv) -> bool {
        false
    }

    fn discover(&self, proc: &ProcessInfo, env: &ProviderEnv) -> Discovery {
        self.0.discover_among(proc, env, &my_processes())
    }

    /// Live processes of this user running the program whose discovered
    /// conversation is `id`.
    fn holders(&self, id: &str, env: &ProviderEnv) -> Vec<u32> {
        let all = my_processes();
        all.iter()
            .filter(|p| p.program().as_deref() == Some(D::PROGRAM))
            .filter(|p| {
                matches!(self.0.discover_among(p, env, &all), Discovery::Found(c) if c.id == id)
            })
            .map(|p| p.pid)
            .collect()
    }
}

/// Whether another process of `program` that keeps its files in `dir` —
/// not one of `proc`'s own children (a `node` wrapper's native binary) nor
/// a daemon it spawned — started after `proc` and no later than
/// `until_ms`: it, too, may have written what was found since `proc`
/// started. `dir_of` says where a process keeps its files, from its
/// environment (another HOME is another provider home).
/// `all` is this user's process table.
fn rival_started(
    proc: &ProcessInfo,
    program: &str,
    until_ms: u64,
    dir: &Path,
    dir_of: impl Fn(&ProviderEnv) -> PathBuf,
    all: &[ProcessInfo],
) -> bool {
    all.iter().any(|p| {
        p.pid != proc.pid
            && p.program().as_deref() == Some(program)
            && !p.argv.iter().any(|a| a == "app-server")
            && !descends_from(p, proc.pid, all)
            && p.started_ms > proc.started_ms
            && p.started_ms <= until_ms
            && dir_of(&ProviderEnv::of(p)) == dir
    })
}

/// Whether `p` is a child, grandchild … of `ancestor`.
fn descends_from(p: &ProcessInfo, ancestor: u32, all: &[ProcessInfo]) -> bool {
    let mut parent = p.ppid;
    for _ in 0..64 {
        if parent == ancestor {
            return true;
        }
        match all.iter().find(|q| q.pid == parent) {
            Some(q) if q.ppid != parent => parent = q.ppid,
            _ => return false,
        }
    }
    false
}

/// The files in `dir` (not recursive) ending in `suffix`.
fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.to_str().is_some_and(|s| s.ends_with(suffix)))
                .collect()
        })
        .unwrap_or_default()
}

/// When a file was last written, Unix milliseconds.
fn modified_ms(path: &Path) -> Option<u64> {
    let t = path.metadata().ok()?.modified().ok()?;
    Some(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as u64)
}
