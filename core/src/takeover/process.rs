//! What the kernel says about a process: owner, parent, arguments, working
//! directory, start time, environment (Linux `/proc`).
//!
//! Takeover decides from these, never from a process's name alone: provider
//! CLIs are often scripts (`node …/cli.js`, `python3 …/claude`), so the
//! executable is an interpreter and the program is its first argument.

use std::collections::HashMap;
use std::path::PathBuf;

use super::TakeoverError;

/// A live process, read once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: u32,
    pub ppid: u32,
    pub uid: u32,
    pub argv: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// When it started, Unix milliseconds (10 ms resolution).
    pub started_ms: u64,
    /// The kernel's state letter (`Z` for a zombie).
    pub state: char,
}

impl ProcessInfo {
    pub fn read(pid: u32) -> Result<Self, TakeoverError> {
        let gone = || TakeoverError::NoProcess(pid);
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|_| gone())?;
        // The command name is in parentheses and may hold spaces or ')'.
        let after = &stat[stat.rfind(')').ok_or_else(gone)? + 2..];
        let fields: Vec<&str> = after.split(' ').collect();
        let field = |n: usize| fields.get(n - 3).copied().unwrap_or("0");
        let state = field(3).chars().next().unwrap_or('?');
        let ppid = field(4).parse().unwrap_or(0);
        let start_ticks: u64 = field(22).parse().unwrap_or(0);
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|_| gone())?;
        let uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|u| u.parse().ok())
            .ok_or_else(gone)?;
        let argv = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| {
                b.split(|c| *c == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self {
            pid,
            ppid,
            uid,
            argv,
            cwd: std::fs::read_link(format!("/proc/{pid}/cwd")).ok(),
            started_ms: boot_ms() + start_ticks * 1000 / clock_ticks(),
            state,
        })
    }

    /// The program this process runs, as a basename: the script after an
    /// interpreter (`node`, `python3`, `bun` …), else argv[0].
    pub fn program(&self) -> Option<String> {
        let first = basename(self.argv.first()?);
        if is_interpreter(&first) {
            let script = self.argv[1..].iter().find(|a| !a.starts_with('-'))?;
            return Some(basename(script));
        }
        Some(first)
    }

    /// Every argument, for matching a provider's markers (a package path
    /// such as `@anthropic-ai/claude-code`).
    pub fn mentions(&self, marker: &str) -> bool {
        self.argv.iter().take(3).any(|a| a.contains(marker))
    }

    /// The process's environment (readable for the same user).
    pub fn environ(&self) -> HashMap<String, String> {
        std::fs::read(format!("/proc/{}/environ", self.pid))
            .map(|b| {
                b.split(|c| *c == 0)
                    .filter_map(|kv| {
                        let kv = String::from_utf8_lossy(kv);
                        let (k, v) = kv.split_once('=')?;
                        Some((k.to_owned(), v.to_owned()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn basename(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_owned()
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
        match ProcessInfo::read(current) {
            Ok(p) if p.ppid != 0 && p.ppid != current => current = p.ppid,
            _ => return false,
        }
    }
    false
}

/// Live processes of `uid`, for scans such as "who holds this session".
pub fn processes_of(uid: u32) -> Vec<ProcessInfo> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| ProcessInfo::read(pid).ok())
        .filter(|p| p.uid == uid && p.state != 'Z')
        .collect()
}

/// Boot time, Unix milliseconds: now on the wall clock minus the time since
/// boot (`/proc/stat`'s `btime` is whole seconds, too coarse to tell which
/// of two files came first after a process started).
fn boot_ms() -> u64 {
    let read = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec into memory we own.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
    };
    read(libc::CLOCK_REALTIME).saturating_sub(read(libc::CLOCK_BOOTTIME))
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as u64
    } else {
        100
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = ProcessInfo::read(std::process::id()).unwrap();
        assert_eq!(me.uid, crate::paths::euid());
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
            uid: 0,
            argv: vec![
                "/usr/bin/node".into(),
                "--no-warnings".into(),
                "/opt/bin/claude".into(),
            ],
            cwd: None,
            started_ms: 0,
            state: 'S',
        };
        assert_eq!(p.program().as_deref(), Some("claude"));
        let plain = ProcessInfo {
            argv: vec!["codex".into(), "resume".into()],
            ..p
        };
        assert_eq!(plain.program().as_deref(), Some("codex"));
    }
}
