//! Processes by pid, read from /proc: whether one lives, waiting for its
//! end, signalling it, finding a test's processes by a variable of their
//! environment, and describing them for failure messages. Nothing here
//! looks a process up by name.

use std::fs;
use std::time::Duration;

/// True when `pid` names a process that has not exited (zombies count as
/// exited: they only wait to be reaped), and the wait until it has (a
/// pidfd event): both from core.
pub use agent_comms_core::session::{pid_alive, wait_gone};

/// Sends `sig` to `pid`; the caller has checked that the pid is its own.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a pid the caller checked to be ours.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// SIGTERM, a wait of at most `grace`, then SIGKILL and a short wait.
pub fn terminate(pid: u32, grace: Duration) {
    if !pid_alive(pid) {
        return;
    }
    signal(pid, libc::SIGTERM);
    if !wait_gone(pid, grace) && pid_alive(pid) {
        signal(pid, libc::SIGKILL);
        wait_gone(pid, Duration::from_secs(2));
    }
}

/// Whether the environment of `pid` holds one of the `wanted` `NAME=value`
/// entries exactly.
pub fn environ_has(pid: u32, wanted: &[Vec<u8>]) -> bool {
    let Ok(environ) = fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    environ
        .split(|&b| b == 0)
        .any(|var| wanted.iter().any(|w| var == w.as_slice()))
}

/// Live processes (zombies and this test process excluded) whose
/// environment holds one of the `wanted` entries: a test's processes, found
/// by the unique paths it gave them.
pub fn with_environ(wanted: &[Vec<u8>]) -> Vec<u32> {
    let me = std::process::id();
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me && pid_alive(pid) && environ_has(pid, wanted))
        .collect()
}

/// The arguments of a process.
pub fn cmdline(pid: u32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The fields of `/proc/<pid>/stat` after `pid (comm)`: comm may hold
/// spaces, so they are read after the last ')'. Field 0 is the state.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
    )
}

/// The parent of a process.
pub fn parent(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// When a process started, as an ISO time with milliseconds (from
/// /proc's start ticks and the boot time).
pub fn started_iso(pid: u32) -> String {
    let ticks: Option<f64> = stat_fields(pid).and_then(|f| f.get(19)?.parse().ok());
    let btime: Option<f64> = fs::read_to_string("/proc/stat").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
    });
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    match (ticks, btime) {
        (Some(t), Some(b)) => {
            agent_comms_core::time::iso_from_unix_millis(((b + t / hz) * 1000.0) as u64)
        }
        _ => "?".into(),
    }
}

/// `pid state args…`, for failure messages.
pub fn describe(pid: u32) -> String {
    let state = stat_fields(pid)
        .and_then(|f| f.first().cloned())
        .unwrap_or_default();
    format!("{pid} {state} {}", cmdline(pid).join(" "))
}

/// Resident memory of `pid` (VmRSS or VmHWM), in KiB.
pub fn vm_kib(pid: u32, field: &str) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("process status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// How many file descriptors `pid` has open.
pub fn open_fds(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd dir")
        .count()
}
