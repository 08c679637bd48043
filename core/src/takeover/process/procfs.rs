//! Linux: `/proc/<pid>/{stat,status,cmdline,cwd,environ}`.

use std::collections::HashMap;

use super::ProcessInfo;

pub fn read(pid: u32) -> Option<ProcessInfo> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces or ')'.
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    let field = |n: usize| fields.get(n - 3).copied().unwrap_or("0");
    let start_ticks: u64 = field(22).parse().unwrap_or(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let uid: u32 = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|u| u.parse().ok())?;
    let argv = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default();
    Some(ProcessInfo {
        pid,
        ppid: field(4).parse().unwrap_or(0),
        mine: uid == crate::paths::euid(),
        argv,
        cwd: std::fs::read_link(format!("/proc/{pid}/cwd")).ok(),
        started_ms: boot_ms() + start_ticks * 1000 / clock_ticks(),
        exited: field(3) == "Z",
    })
}

pub fn environ(pid: u32) -> HashMap<String, String> {
    std::fs::read(format!("/proc/{pid}/environ"))
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

pub fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
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
