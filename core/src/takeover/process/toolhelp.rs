//! Windows: a Toolhelp snapshot gives parents and executable names; a
//! process handle gives the start time. A process we may not open belongs
//! to another user (or to the system). Arguments beyond the executable, the
//! working directory and the environment live in the other process's memory
//! and are not read, so provider checks fall back to the executable's name
//! and discovery to this process's environment.

use std::collections::HashMap;

use windows_sys::Win32::Foundation::{CloseHandle, FILETIME, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Process32FirstW, Process32NextW, PROCESSENTRY32W, TH32CS_SNAPPROCESS,
};
use windows_sys::Win32::System::Threading::{
    GetProcessTimes, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
};

use super::ProcessInfo;

/// Every process in a snapshot: (pid, parent, executable name).
fn snapshot() -> Vec<(u32, u32, String)> {
    let mut out = Vec::new();
    // SAFETY: plain call; an invalid handle means failure.
    let snap = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0) };
    if snap == INVALID_HANDLE_VALUE {
        return out;
    }
    // SAFETY: PROCESSENTRY32W is plain data; dwSize must be set first.
    let mut entry: PROCESSENTRY32W = unsafe { std::mem::zeroed() };
    entry.dwSize = std::mem::size_of::<PROCESSENTRY32W>() as u32;
    // SAFETY: a valid snapshot handle and an entry with its size set.
    let mut more = unsafe { Process32FirstW(snap, &mut entry) } != 0;
    while more {
        let len = entry.szExeFile.iter().position(|c| *c == 0).unwrap_or(0);
        let name = String::from_utf16_lossy(&entry.szExeFile[..len]);
        out.push((entry.th32ProcessID, entry.th32ParentProcessID, name));
        // SAFETY: as above.
        more = unsafe { Process32NextW(snap, &mut entry) } != 0;
    }
    // SAFETY: we own the snapshot handle.
    unsafe { CloseHandle(snap) };
    out
}

pub fn read(pid: u32) -> Option<ProcessInfo> {
    let (_, ppid, name) = snapshot().into_iter().find(|(p, _, _)| *p == pid)?;
    // SAFETY: plain call; a null handle means we may not open it.
    let handle = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    let mine = !handle.is_null();
    let mut started_ms = 0;
    if mine {
        let zero = FILETIME {
            dwLowDateTime: 0,
            dwHighDateTime: 0,
        };
        let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
        // SAFETY: a valid handle with query access and four FILETIMEs we own.
        if unsafe { GetProcessTimes(handle, &mut created, &mut exited, &mut kernel, &mut user) }
            != 0
        {
            let ticks =
                (u64::from(created.dwHighDateTime) << 32) | u64::from(created.dwLowDateTime);
            // 100 ns ticks since 1601 to milliseconds since 1970.
            started_ms = (ticks / 10_000).saturating_sub(11_644_473_600_000);
        }
        // SAFETY: we own the handle.
        unsafe { CloseHandle(handle) };
    }
    Some(ProcessInfo {
        pid,
        ppid,
        mine,
        argv: vec![name],
        cwd: None,
        started_ms,
        exited: false,
    })
}

pub fn environ(_pid: u32) -> HashMap<String, String> {
    HashMap::new()
}

pub fn pids() -> Vec<u32> {
    snapshot().into_iter().map(|(pid, _, _)| pid).collect()
}
