//! Windows: profile directories, process handles, console modes.
//!
//! Runs under Wine 8 in CI (tests/windows.rs, docs/windows.md), not yet on
//! Windows itself. What is missing against Unix is said where it is
//! missing: ACL checks, resize notifications and reading the hook's pipe.

use std::ffi::c_void;
use std::fs;
use std::io::{self, Write};
use std::os::windows::io::{FromRawHandle, IntoRawHandle};
use std::os::windows::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use windows_sys::core::BOOL;
use windows_sys::Win32::Foundation::{
    CloseHandle, HANDLE, INVALID_HANDLE_VALUE, WAIT_OBJECT_0, WAIT_TIMEOUT,
};
use windows_sys::Win32::System::Console::{
    GetConsoleMode, GetConsoleScreenBufferInfo, GetStdHandle, SetConsoleCtrlHandler,
    SetConsoleMode, SetStdHandle, CONSOLE_SCREEN_BUFFER_INFO, CTRL_BREAK_EVENT, CTRL_CLOSE_EVENT,
    CTRL_C_EVENT, DISABLE_NEWLINE_AUTO_RETURN, ENABLE_ECHO_INPUT, ENABLE_LINE_INPUT,
    ENABLE_PROCESSED_INPUT, ENABLE_VIRTUAL_TERMINAL_INPUT, ENABLE_VIRTUAL_TERMINAL_PROCESSING,
    STD_ERROR_HANDLE, STD_HANDLE, STD_INPUT_HANDLE, STD_OUTPUT_HANDLE,
};
use windows_sys::Win32::System::Threading::{
    OpenProcess, TerminateProcess, WaitForSingleObject, CREATE_NEW_PROCESS_GROUP, DETACHED_PROCESS,
    PROCESS_SYNCHRONIZE, PROCESS_TERMINATE,
};

use super::NotPrivate;

/// Mode bits do not exist on Windows: a file or directory gets the ACL it
/// inherits from its parent. The default locations (below) are under the
/// user's profile, which only the user, SYSTEM and administrators can open,
/// so `mode(..)` is accepted and ignored rather than cfg'd at every caller.
pub trait OpenOptionsExt {
    fn mode(&mut self, mode: u32) -> &mut Self;
}

impl OpenOptionsExt for fs::OpenOptions {
    fn mode(&mut self, _mode: u32) -> &mut Self {
        self
    }
}

/// See [`OpenOptionsExt`].
pub trait DirBuilderExt {
    fn mode(&mut self, mode: u32) -> &mut Self;
}

impl DirBuilderExt for fs::DirBuilder {
    fn mode(&mut self, _mode: u32) -> &mut Self {
        self
    }
}

/// `%LOCALAPPDATA%\agent-comms\run`: per user, not roaming. It holds the
/// session records and logs; the endpoints themselves are named pipes.
/// No root on Windows; an elevated process is not told apart yet.
/// This machine's name, for people (hosts are told apart by their ids).
pub fn hostname() -> String {
    std::env::var("COMPUTERNAME").unwrap_or_else(|_| "unknown".into())
}

pub fn running_as_root() -> bool {
    false
}

pub fn default_runtime_root() -> PathBuf {
    match std::env::var_os("LOCALAPPDATA").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("agent-comms").join("run"),
        // %TEMP% is per user too.
        None => std::env::temp_dir().join("agent-comms-run"),
    }
}

/// The base of per-user configuration: `%APPDATA%`.
pub fn config_base() -> PathBuf {
    std::env::var_os("APPDATA")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from("."), PathBuf::from)
}

/// Creates `dir` and its missing parents (`%LOCALAPPDATA%\agent-comms` may
/// not exist yet); the ACL is inherited, see [`OpenOptionsExt`].
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)
}

/// Pipe names are one namespace for the whole machine, so the name carries
/// the user, and a digest of the runtime root and the session name (two
/// roots, as tests use, must not meet; pipe names ignore case, session names
/// do not).
pub fn endpoint_path(root: &Path, name: &str) -> PathBuf {
    let user: String = std::env::var("USERNAME")
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        .collect();
    let key = format!("{}\0{name}", root.display());
    PathBuf::from(format!(
        r"\\.\pipe\agent-comms-{user}-{:016x}",
        super::fnv1a(key.as_bytes())
    ))
}

/// Missing on Windows: reading the owner and DACL of a directory or file. The default
/// root is private by inheritance (see [`OpenOptionsExt`]); a root named by
/// `AGENT_COMMS_RUNTIME_DIR` is trusted as given. Endpoints do not depend
/// on it: a named pipe carries its own DACL.
pub fn check_private(_meta: &fs::Metadata) -> Result<(), NotPrivate> {
    Ok(())
}

/// Missing on Windows, as for [`check_private`]: a project's state
/// directory is trusted as found.
pub fn check_unwritable_dir(_meta: &fs::Metadata) -> Result<(), NotPrivate> {
    Ok(())
}

/// Missing on Windows: files carry an owner SID, not a uid, and it is not
/// read yet; nothing is reported as another user's.
pub fn foreign_owner(_meta: &fs::Metadata) -> Option<u32> {
    None
}

/// Nothing to do: see [`OpenOptionsExt`].
pub fn make_owner_only(_path: &Path) -> io::Result<()> {
    Ok(())
}

/// Compiled code is loaded only from a directory known to be the user's
/// alone; without reading its DACL we cannot know, so we say so.
pub fn only_user_writes(_meta: &fs::Metadata) -> Result<bool, String> {
    Err("cannot check on Windows yet who may write to it (its DACL is not read)".into())
}

/// Windows has no execute bit; starting the program says what is wrong.
pub fn is_executable(_path: &Path) -> bool {
    true
}

/// An open process handle, closed on drop.
struct Process(HANDLE);

impl Process {
    fn open(pid: u32, access: u32) -> Option<Self> {
        // SAFETY: plain call; a null handle means failure.
        let h = unsafe { OpenProcess(access, 0, pid) };
        (!h.is_null()).then_some(Self(h))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // SAFETY: we own the handle.
        unsafe { CloseHandle(self.0) };
    }
}

/// True while `pid` runs. A pid we may not open (another user's process)
/// counts as running, as it does on Unix.
pub fn pid_alive(pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    match Process::open(pid, PROCESS_SYNCHRONIZE) {
        // SAFETY: a valid handle with SYNCHRONIZE access; zero timeout.
        Some(p) => unsafe { WaitForSingleObject(p.0, 0) == WAIT_TIMEOUT },
        None => io::Error::last_os_error().kind() == io::ErrorKind::PermissionDenied,
    }
}

/// Waits until `pid` has exited, at most `timeout`; true when it is gone.
/// A process handle is signalled when the process ends: an event, no poll.
pub fn wait_gone(pid: u32, timeout: Duration) -> bool {
    let Some(p) = Process::open(pid, PROCESS_SYNCHRONIZE) else {
        return !pid_alive(pid);
    };
    let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX - 1);
    // SAFETY: a valid handle with SYNCHRONIZE access.
    unsafe { WaitForSingleObject(p.0, ms) == WAIT_OBJECT_0 }
}

/// Ends `pid` at once (TerminateProcess). Unlike SIGKILL to a process
/// group, its own children live on: a job object would be needed.
pub fn kill(pid: u32) {
    if let Some(p) = Process::open(pid, PROCESS_TERMINATE) {
        // SAFETY: a valid handle with TERMINATE access.
        unsafe { TerminateProcess(p.0, 1) };
    }
}

/// Missing on Windows: the parent's name needs a Toolhelp snapshot.
pub fn parent_name() -> Option<String> {
    None
}

/// Not needed on Windows: a pseudo console has no foreground process
/// group to name (`pty::foreground_group` is always `None` there).
pub fn process_name(_pid: u32) -> Option<String> {
    None
}

/// Missing on Windows: the write end of an anonymous pipe cannot be asked
/// how much is unread (PeekNamedPipe needs the read end, which the hook
/// holds). Zero means an exit is pinned to the last item written.
pub fn unread(_stdin: &std::process::ChildStdin) -> usize {
    0
}

fn std_handle(which: STD_HANDLE) -> HANDLE {
    // SAFETY: plain call; the handle is borrowed, never closed here.
    unsafe { GetStdHandle(which) }
}

fn console_mode(h: HANDLE) -> Option<u32> {
    let mut mode = 0;
    // SAFETY: `mode` is ours; fails (returns 0) when `h` is not a console.
    (unsafe { GetConsoleMode(h, &mut mode) } != 0).then_some(mode)
}

/// Restores the console's modes when dropped.
pub struct RawModeGuard {
    saved: Option<(u32, Option<u32>)>,
}

impl RawModeGuard {
    /// Raw mode when stdin is a console: no line editing, echo or Ctrl-C
    /// processing, keys as VT sequences; output interprets VT sequences.
    /// A no-op guard otherwise.
    pub fn enable() -> Self {
        let (input, output) = (std_handle(STD_INPUT_HANDLE), std_handle(STD_OUTPUT_HANDLE));
        let Some(in_mode) = console_mode(input) else {
            return Self { saved: None };
        };
        let out_mode = console_mode(output);
        let raw_in = (in_mode & !(ENABLE_ECHO_INPUT | ENABLE_LINE_INPUT | ENABLE_PROCESSED_INPUT))
            | ENABLE_VIRTUAL_TERMINAL_INPUT;
        // SAFETY: console handles of this process.
        unsafe {
            SetConsoleMode(input, raw_in);
            if let Some(m) = out_mode {
                SetConsoleMode(
                    output,
                    m | ENABLE_VIRTUAL_TERMINAL_PROCESSING | DISABLE_NEWLINE_AUTO_RETURN,
                );
            }
        }
        Self {
            saved: Some((in_mode, out_mode)),
        }
    }

    pub fn is_terminal(&self) -> bool {
        self.saved.is_some()
    }
}

impl Drop for RawModeGuard {
    fn drop(&mut self) {
        if let Some((in_mode, out_mode)) = self.saved {
            // SAFETY: console handles of this process.
            unsafe {
                SetConsoleMode(std_handle(STD_INPUT_HANDLE), in_mode);
                if let Some(m) = out_mode {
                    SetConsoleMode(std_handle(STD_OUTPUT_HANDLE), m);
                }
            }
        }
    }
}

/// The size of the console window on stdout, if it is one.
pub fn terminal_size() -> Option<(u16, u16)> {
    // SAFETY: a zeroed plain-data struct the call fills in.
    let mut info: CONSOLE_SCREEN_BUFFER_INFO = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is ours.
    if unsafe { GetConsoleScreenBufferInfo(std_handle(STD_OUTPUT_HANDLE), &mut info) } == 0 {
        return None;
    }
    let w = info.srWindow;
    let rows = u16::try_from(i32::from(w.Bottom) - i32::from(w.Top) + 1).ok()?;
    let cols = u16::try_from(i32::from(w.Right) - i32::from(w.Left) + 1).ok()?;
    (rows > 0 && cols > 0).then_some((rows, cols))
}

/// How often [`watch_resizes`] looks at the console's size.
const RESIZE_POLL: Duration = Duration::from_millis(250);

/// Calls `resized` with the console's size after each change, on a thread
/// of its own, until it returns false. Windows sends no resize signal: a
/// console reports a resize only as an input record, and stdin is read as
/// VT bytes (`RawModeGuard`), which carry none. So the size is looked at
/// four times a second, a call that costs nothing while it is unchanged.
pub fn watch_resizes(mut resized: impl FnMut(u16, u16) -> bool + Send + 'static) {
    let mut last = terminal_size();
    std::thread::spawn(move || loop {
        std::thread::sleep(RESIZE_POLL);
        let now = terminal_size();
        if now == last {
            continue;
        }
        last = now;
        if let Some((rows, cols)) = now {
            if !resized(rows, cols) {
                return;
            }
        }
    });
}

type Interrupted = Box<dyn FnOnce() + Send>;

/// The callback of the live [`InterruptGuard`]; a console control handler
/// is a plain function, so it finds its callback here.
static INTERRUPTED: Mutex<Option<Interrupted>> = Mutex::new(None);

unsafe extern "system" fn on_ctrl_c(kind: u32) -> BOOL {
    if kind != CTRL_C_EVENT {
        return 0;
    }
    let callback = INTERRUPTED.lock().unwrap_or_else(|p| p.into_inner()).take();
    match callback {
        // Runs on the thread Windows starts for the handler.
        Some(f) => {
            f();
            1
        }
        // A second Ctrl-C: the default handler ends the process.
        None => 0,
    }
}

/// While alive, the first Ctrl-C sends the message given to
/// [`on_interrupt_send`] instead of ending the process.
pub struct InterruptGuard(());

/// While the guard lives, the first Ctrl-C opens the endpoint's named pipe
/// at `socket` and writes `message` there (from the thread Windows starts
/// for the console control handler), identifying us as the socket layer's
/// clients do.
pub fn on_interrupt_send(socket: &Path, message: Vec<u8>) -> Option<InterruptGuard> {
    use std::os::windows::fs::OpenOptionsExt as _;
    use windows_sys::Win32::Storage::FileSystem::SECURITY_IDENTIFICATION;
    let socket = socket.to_owned();
    let interrupted = move || {
        let endpoint = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .security_qos_flags(SECURITY_IDENTIFICATION)
            .open(&socket);
        if let Ok(mut endpoint) = endpoint {
            let _ = endpoint.write_all(&message);
        }
    };
    *INTERRUPTED.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(interrupted));
    // SAFETY: registers a handler function that lives as long as the program.
    if unsafe { SetConsoleCtrlHandler(Some(on_ctrl_c), 1) } == 0 {
        INTERRUPTED.lock().unwrap_or_else(|p| p.into_inner()).take();
        return None;
    }
    Some(InterruptGuard(()))
}

impl Drop for InterruptGuard {
    fn drop(&mut self) {
        // SAFETY: removes the handler registered in `on_interrupt_send`.
        unsafe { SetConsoleCtrlHandler(Some(on_ctrl_c), 0) };
        INTERRUPTED.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

unsafe extern "system" fn exit_zero(kind: u32) -> BOOL {
    if matches!(kind, CTRL_C_EVENT | CTRL_BREAK_EVENT | CTRL_CLOSE_EVENT) {
        std::process::exit(0);
    }
    0
}

/// From now on Ctrl-C, Ctrl-Break and closing the console end the process
/// with exit code 0 (the counterparts of SIGINT and SIGTERM).
pub fn exit_zero_on_termination() {
    // SAFETY: registers a handler function that lives as long as the program.
    unsafe { SetConsoleCtrlHandler(Some(exit_zero), 1) };
}

/// Raised by Ctrl-Break and closing the console once [`flag_termination`]
/// ran.
static TERMINATION: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

unsafe extern "system" fn raise_termination(kind: u32) -> BOOL {
    if matches!(kind, CTRL_BREAK_EVENT | CTRL_CLOSE_EVENT) {
        TERMINATION.store(true, std::sync::atomic::Ordering::SeqCst);
        return 1;
    }
    0
}

/// From now on Ctrl-Break and closing the console only raise the flag
/// returned (the counterparts of SIGTERM and SIGHUP), for a program that
/// must put its terminal back before it ends (`top`).
pub fn flag_termination() -> &'static std::sync::atomic::AtomicBool {
    // SAFETY: registers a handler function that lives as long as the program.
    unsafe { SetConsoleCtrlHandler(Some(raise_termination), 1) };
    &TERMINATION
}

/// Makes `cmd` start without a console (the program it runs gets a pseudo
/// console of its own) in a new process group, so the launcher's Ctrl-C
/// never reaches it: the counterparts of `setsid`.
pub fn detach(cmd: &mut Command) {
    cmd.creation_flags(DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP);
}

/// Nothing to reset: Windows processes inherit no signal masks.
pub fn reset_signals() {}

/// Nothing to tune: the Windows heap has neither glibc's creeping mmap
/// threshold nor its arena per thread.
pub fn tune_allocator() {}

/// The launcher's pipe, once stdout went to the log.
static READY: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// Writes the one status line to the launcher's pipe and closes it; later
/// calls do nothing.
pub fn write_ready(line: &str) {
    let h = READY.swap(std::ptr::null_mut(), Ordering::SeqCst);
    if h.is_null() {
        return;
    }
    // SAFETY: `h` is the launcher's pipe, taken out of stdout in
    // `redirect_output_to_log`; nothing else uses or closes it.
    let mut pipe = unsafe { fs::File::from_raw_handle(h) };
    let _ = writeln!(pipe, "{line}");
}

pub fn redirect_stdin_to_null() {
    if let Ok(null) = fs::File::open("NUL") {
        // SAFETY: the handle is leaked on purpose: it is stdin from now on.
        unsafe { SetStdHandle(STD_INPUT_HANDLE, null.into_raw_handle()) };
    }
}

/// Points stdout and stderr at `log`, keeping the launcher's pipe for
/// [`write_ready`]. Rust's stdout and stderr look the handle up on every
/// write, so SetStdHandle is the counterpart of `dup2`. A log that cannot
/// be opened leaves no handle: writes to it are then dropped.
pub fn redirect_output_to_log(log: &Path) {
    let _ = std::io::stdout().flush();
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(log);
    let target = file.map_or(std::ptr::null_mut(), IntoRawHandle::into_raw_handle);
    // SAFETY: the log handle is leaked on purpose (it is stdout and stderr
    // from now on); the pipe moves to READY, which owns it.
    unsafe {
        let pipe = std_handle(STD_OUTPUT_HANDLE);
        if !pipe.is_null() && pipe != INVALID_HANDLE_VALUE {
            READY.store(pipe, Ordering::SeqCst);
        }
        SetStdHandle(STD_OUTPUT_HANDLE, target);
        SetStdHandle(STD_ERROR_HANDLE, target);
    }
}

/// Nothing yet on Windows: a job object would tie the agent's life to the
/// supervisor's; without one it ends when its input closes.
pub fn tie_to_supervisor(_cmd: &mut tokio::process::Command) {}

/// Ends the process itself (its own children live on; see [`kill`]).
pub fn signal_group(pid: u32, _now: bool) {
    kill(pid);
}
