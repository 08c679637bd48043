//! What the system says about a process: parent, arguments, working
//! directory, start time, environment, and whether it is ours.
//!
//! Takeover decides from these, never from a process's name alone: provider
//! CLIs are often scripts (`node …/cli.js`, `python3 …/claude`), so the
//! executable is an interpreter and the program is its first argument.
//! Linux reads `/proc` (procfs.rs); Windows a Toolhelp snapshot and process
//! handles (toolhelp.rs), which show less: no arguments beyond the
//! executable, no working directory, no environment.

#[cfg(unix)]
#[path = "process/procfs.rs"]
mod platform;
#[cfg(windows)]
#[path = "process/toolhelp.rs"]
mod platform;

use std::collections::HashMap;
use std::path::PathBuf;

use super::TakeoverError;
use crate::adapter::command::program_name;

/// A live process, read once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: u32,
    pub ppid: u32,
    /// It runs as the same user as this process.
    pub mine: bool,
    pub argv: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// When it started, Unix milliseconds.
    pub started_ms: u64,
    /// It has exited and waits to be reaped (a zombie).
    pub exited: bool,
}

impl ProcessInfo {
    pub fn read(pid: u32) -> Result<Self, TakeoverError> {
        platform::read(pid).ok_or(TakeoverError::NoProcess(pid))
    }

    /// The program this process runs, by its [`program_name`]: the script
    /// after an interpreter (`node`, `python3`, `bun` …), else argv[0].
    pub fn program(&self) -> Option<String> {
        let first = program_name(self.argv.first()?);
        if is_interpreter(first) {
            let script = self.argv[1..].iter().find(|a| !a.starts_with('-'))?;
            return Some(program_name(script).to_owned());
        }
        Some(first.to_owned())
    }

    /// Whether one of its first arguments holds `marker` (a package path
    /// such as `@anthropic-ai/claude-code`).
    pub fn mentions(&self, marker: &str) -> bool {
        self.argv.iter().take(3).any(|a| a.contains(marker))
    }

    /// Its environment, as far as it can be read.
    pub fn environ(&self) -> HashMap<String, String> {
        platform::environ(self.pid)
    }
}

/// Live processes of this user (for "who holds this session").
pub fn my_processes() -> Vec<ProcessInfo> {
    platform::pids()
        .into_iter()
        .filter_map(platform::read)
        .filter(|p| p.mine && !p.exited)
        .collect()
}

fn is_interpreter(program: &str) -> bool {
    let stem = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    matches!(stem, "node" | "nodejs" | "bun" | "deno" | "python")
}

/// Whether `pid` is this process or one of its ancestors.
pub fn is_self_or_ancestor(pid: u32) -> bool {
    let mut current = std::process::id();
    for _ in 0..4096 {
        if current == pid {
            return true;
        }
        match platform::read(current) {
            Some(p) if p.ppid != 0 && p.ppid != current => current = p.ppid,
            _ => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = ProcessInfo::read(std::process::id()).unwrap();
        assert!(me.mine);
        assert!(!me.argv.is_empty());
        let now = crate::time::unix_millis();
        assert!(me.started_ms <= now + 1000 && me.started_ms > now - 3_600_000);
        assert!(is_self_or_ancestor(std::process::id()));
        assert!(is_self_or_ancestor(me.ppid));
    }

    #[test]
    fn a_script_under_an_interpreter_is_the_program() {
        let p = ProcessInfo {
            pid: 1,
            ppid: 0,
            mine: true,
            argv: vec![
                "/usr/bin/node".into(),
                "--no-warnings".into(),
                "/opt/bin/claude".into(),
            ],
            cwd: None,
            started_ms: 0,
            exited: false,
        };
        assert_eq!(p.program().as_deref(), Some("claude"));
        let plain = ProcessInfo {
            argv: vec!["codex".into(), "resume".into()],
            ..p
        };
        assert_eq!(plain.program().as_deref(), Some("codex"));
    }
}
