//! Unix: uids and mode bits, signals, termios and `/proc`.

use std::fs;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, Signal};
use nix::sys::termios::{self, SetArg, Termios};

pub use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};

use super::NotPrivate;

/// Whether we run as root (some agents need telling they are sandboxed).
/// This machine's name, for people (hosts are told apart by their ids).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; the name is NUL-ended
    // unless truncated, which the length bound below handles.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

pub fn running_as_root() -> bool {
    euid() == 0
}

pub fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// `/tmp/agent-comms-<euid>` (paths.rs says why not `TMPDIR`).
pub fn default_runtime_root() -> PathBuf {
    PathBuf::from(format!("/tmp/agent-comms-{}", euid()))
}

/// The base of per-user configuration: `~/.config`.
pub fn config_base() -> PathBuf {
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/".into());
    PathBuf::from(home).join(".config")
}

/// Longest socket path we bind. `sun_path` holds 108 bytes on Linux and 104 on
/// the BSDs; leave room for the terminating NUL.
const MAX_SOCKET_PATH: usize = 100;

/// `<root>/<name>.sock`, or a hashed name when that would not fit.
pub fn endpoint_path(root: &Path, name: &str) -> PathBuf {
    let plain = root.join(format!("{name}.sock"));
    if plain.as_os_str().len() <= MAX_SOCKET_PATH {
        plain
    } else {
        // A long root or name would overflow sun_path: hash the name. The
        // record (whose file name has no such limit) says which it is.
        // If even this does not fit, the root itself is too long and
        // binding fails with an error naming the path.
        root.join(format!("h{:016x}.sock", super::fnv1a(name.as_bytes())))
    }
}

/// Creates `dir` mode 0700; its parent must exist.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new().mode(0o700).create(dir)
}

/// Refuses a directory or file that is not ours or that the group or
/// others may open (the socket root; a state database, whose message
/// bodies are private).
pub fn check_private(meta: &fs::Metadata) -> Result<(), NotPrivate> {
    check_owner_and_mode(meta, 0o077)
}

/// Refuses a directory that is not ours or that the group or others may
/// write to (they could replace what is in it); reading is allowed.
pub fn check_unwritable_dir(meta: &fs::Metadata) -> Result<(), NotPrivate> {
    check_owner_and_mode(meta, 0o022)
}

fn check_owner_and_mode(meta: &fs::Metadata, forbidden: u32) -> Result<(), NotPrivate> {
    if let Some(owner) = foreign_owner(meta) {
        return Err(NotPrivate::ForeignOwner { owner, me: euid() });
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & forbidden != 0 {
        return Err(NotPrivate::Permissive { mode });
    }
    Ok(())
}

/// The uid that owns what `meta` describes, when that is not the user.
pub fn foreign_owner(meta: &fs::Metadata) -> Option<u32> {
    (meta.uid() != euid()).then_some(meta.uid())
}

/// Makes a file readable and writable by its owner only.
pub fn make_owner_only(path: &Path) -> io::Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
}

/// Whether the user owns what `meta` describes and nobody else may write to it.
pub fn only_user_writes(meta: &fs::Metadata) -> Result<bool, String> {
    Ok(meta.uid() == euid() && meta.mode() & 0o022 == 0)
}

/// Whether the file at `path` may be executed by us.
pub fn is_executable(path: &Path) -> bool {
    nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).is_ok()
}

/// True when `pid` names a process that is not a zombie. `kill(pid, 0)`
/// succeeds on zombies, so the state in `/proc/<pid>/stat` decides.
pub fn pid_alive(pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised command name, which may
            // itself contain spaces and parentheses.
            let state = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next());
            !matches!(state, Some('Z') | Some('X') | None)
        }
        Err(_) => false,
    }
}

/// Waits until `pid` has exited (a zombie counts), at most `timeout`; true
/// when it is gone. Supervisors are not our children, so `waitpid` cannot
/// see them end; a pidfd can, as an event. Kernels without pidfds get a
/// bounded poll of `/proc`.
pub fn wait_gone(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if raw < 0 {
        if io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
            return true;
        }
        while pid_alive(pid) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        return true;
    }
    // SAFETY: the syscall returned a descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return n > 0 || !pid_alive(pid);
    }
}

/// Ends `pid` at once (SIGKILL).
pub fn kill(pid: u32) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGKILL);
}

/// The command name of our parent process, if it can be read.
pub fn parent_name() -> Option<String> {
    process_name(nix::unistd::getppid().as_raw() as u32)
}

/// The command name of process `pid` (as `ps -o comm` shows it), if it
/// can be read.
#[cfg(target_os = "linux")]
pub fn process_name(pid: u32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim_end().to_owned())
}

/// The command name of process `pid`, if it can be read (macOS has no
/// `/proc`: libproc answers).
#[cfg(target_os = "macos")]
pub fn process_name(pid: u32) -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: proc_name writes at most `buf.len()` bytes into `buf` and
    // returns how many it wrote (0 or less on failure).
    let n = unsafe {
        libc::proc_name(
            pid as libc::c_int,
            buf.as_mut_ptr().cast(),
            buf.len() as u32,
        )
    };
    (n > 0).then(|| String::from_utf8_lossy(&buf[..n as usize]).into_owned())
}

/// Other Unixes: not read yet (adapters that match the foreground program
/// see an empty name and fall back to the screen).
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub fn process_name(_pid: u32) -> Option<String> {
    None
}

/// Bytes written to a child's stdin that it has not read.
pub fn unread(stdin: &std::process::ChildStdin) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD stores an int through the pointer; the fd is open
    // (borrowed from `stdin`). Linux answers it on either end of a pipe.
    let rc = unsafe { libc::ioctl(stdin.as_raw_fd(), libc::FIONREAD, &mut n) };
    if rc == 0 {
        n.max(0) as usize
    } else {
        0
    }
}

/// Restores the terminal's settings when dropped.
pub struct RawModeGuard {
    saved: Option<Termios>,
}

impl RawModeGuard {
    /// Raw mode on stdin when it is a terminal; a no-op guard otherwise.
    pub fn enable() -> Self {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd()).ok();
        if let Some(orig) = &saved {
            let mut raw = orig.clone();
            termios::cfmakeraw(&mut raw);
            let _ = termios::tcsetattr(stdin.as_fd(), SetArg::TCSADRAIN, &raw);
        }
        Self { saved }
    }

    pub fn is_terminal(&self) -> bool {
        self.saved.is_some()
    }
}

impl Drop for RawModeGuard {
    fn drop(&mut self) {
        if let Some(orig) = &self.saved {
            let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSADRAIN, orig);
        }
    }
}

/// The size of the terminal on stdin, if it is one.
pub fn terminal_size() -> Option<(u16, u16)> {
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes a winsize into the pointer we own.
    let ok = unsafe {
        libc::ioctl(
            std::io::stdin().as_fd().as_raw_fd(),
            libc::TIOCGWINSZ,
            &mut ws,
        )
    } == 0;
    (ok && ws.ws_row > 0 && ws.ws_col > 0).then_some((ws.ws_row, ws.ws_col))
}

/// Calls `resized` with the terminal's size after each change (SIGWINCH),
/// on a thread of its own, until it returns false. Call it before spawning
/// other threads: the signal is blocked here, so that every thread spawned
/// after inherits the mask and only this one's sigwait sees it.
pub fn watch_resizes(mut resized: impl FnMut(u16, u16) -> bool + Send + 'static) {
    let mut set = SigSet::empty();
    set.add(Signal::SIGWINCH);
    if set.thread_block().is_err() {
        return;
    }
    std::thread::spawn(move || {
        while set.wait().is_ok() {
            if let Some((rows, cols)) = terminal_size() {
                if !resized(rows, cols) {
                    return;
                }
            }
        }
    });
}

/// While alive, the first Ctrl-C (SIGINT) sends a message instead of ending
/// the process; a second one ends it.
pub struct InterruptGuard {
    previous: libc::sigaction,
}

/// What the SIGINT handler sends, built beforehand: a handler may only make
/// async-signal-safe calls, so it allocates nothing and takes no lock.
struct InterruptMessage {
    address: libc::sockaddr_un,
    address_len: libc::socklen_t,
    bytes: Vec<u8>,
}

/// The live guard's message; null when there is none.
static INTERRUPT_MESSAGE: AtomicPtr<InterruptMessage> = AtomicPtr::new(std::ptr::null_mut());

/// While the guard lives, the first Ctrl-C connects to the Unix socket at
/// `socket` and writes `message` there, from the signal handler itself
/// (socket, connect, getsockopt, write and close are async-signal-safe).
/// No thread waits for the signal: starting one was a measurable part of
/// every `k run`. The endpoint must be ours (the socket layer's check).
///
/// A signal goes to any thread that does not block it: call this in a
/// single-threaded program, or with SIGINT blocked in the other threads.
/// `None` when there is already a guard, when the path does not fit a
/// socket address, or when SIGINT is ignored (a background job's Ctrl-C is
/// not meant for it).
pub fn on_interrupt_send(socket: &Path, message: Vec<u8>) -> Option<InterruptGuard> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: sockaddr_un is plain data; all zeros is a valid value.
    let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    address.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let path = socket.as_os_str().as_bytes();
    if path.len() >= address.sun_path.len() {
        return None;
    }
    for (to, from) in address.sun_path.iter_mut().zip(path) {
        *to = *from as libc::c_char;
    }
    let message = Box::into_raw(Box::new(InterruptMessage {
        address,
        address_len: std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        bytes: message,
    }));
    let installed = INTERRUPT_MESSAGE.compare_exchange(
        std::ptr::null_mut(),
        message,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    if installed.is_err() {
        // SAFETY: `message` came from Box::into_raw above and was not shared.
        drop(unsafe { Box::from_raw(message) });
        return None;
    }
    // SAFETY: sigaction is plain data; the handler makes only
    // async-signal-safe calls.
    let previous = unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = send_interrupt as *const () as libc::sighandler_t;
        // The waiting read resumes once the handler has sent the message.
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        let mut previous: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGINT, &action, &mut previous);
        previous
    };
    let guard = InterruptGuard { previous };
    (guard.previous.sa_sigaction != libc::SIG_IGN).then_some(guard)
}

extern "C" fn send_interrupt(_: libc::c_int) {
    // SAFETY: only async-signal-safe calls; the message stays allocated
    // until the guard is dropped, after it has taken this handler away.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        let Some(message) = INTERRUPT_MESSAGE.load(Ordering::SeqCst).as_ref() else {
            return;
        };
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return;
        }
        let address = (&message.address as *const libc::sockaddr_un).cast::<libc::sockaddr>();
        if libc::connect(fd, address, message.address_len) == 0 && peer_is_me(fd) {
            let bytes = &message.bytes;
            let _ = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        }
        libc::close(fd);
    }
}

/// Whether the process listening at the other end of `fd` runs as us
/// (async-signal-safe: one getsockopt).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn peer_is_me(fd: libc::c_int) -> bool {
    // SAFETY: ucred is plain data; getsockopt writes at most `len` bytes.
    unsafe {
        let mut cred: libc::ucred = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        let got = libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        );
        got == 0 && cred.uid == libc::geteuid()
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn peer_is_me(fd: libc::c_int) -> bool {
    let (mut uid, mut gid) = (0, 0);
    // SAFETY: getpeereid writes two ids into locals we own.
    unsafe { libc::getpeereid(fd, &mut uid, &mut gid) == 0 && uid == libc::geteuid() }
}

impl Drop for InterruptGuard {
    fn drop(&mut self) {
        // SAFETY: restores the disposition saved in `on_interrupt_send`;
        // once the handler is gone, nothing reads the message.
        unsafe { libc::sigaction(libc::SIGINT, &self.previous, std::ptr::null_mut()) };
        let message = INTERRUPT_MESSAGE.swap(std::ptr::null_mut(), Ordering::SeqCst);
        // SAFETY: the pointer came from Box::into_raw in `on_interrupt_send`.
        drop(unsafe { Box::from_raw(message) });
    }
}

/// From now on SIGINT and SIGTERM end the process with exit code 0.
pub fn exit_zero_on_termination() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installing a handler that only calls _exit is async-signal-safe.
        unsafe { libc::signal(sig, exit_zero as *const () as libc::sighandler_t) };
    }
}

/// Raised by SIGTERM and SIGHUP once [`flag_termination`] ran.
static TERMINATION: AtomicBool = AtomicBool::new(false);

/// From now on SIGTERM and SIGHUP only raise the flag returned, for a
/// program that must put its terminal back before it ends (`top`).
pub fn flag_termination() -> &'static AtomicBool {
    for sig in [libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe { libc::signal(sig, raise_termination as *const () as libc::sighandler_t) };
    }
    &TERMINATION
}

extern "C" fn raise_termination(_: libc::c_int) {
    TERMINATION.store(true, Ordering::SeqCst);
}

extern "C" fn exit_zero(_: libc::c_int) {
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(0) }
}

/// Makes `cmd` start a new session: no controlling terminal, and the
/// launcher's terminal signals never reach it.
pub fn detach(cmd: &mut Command) {
    // SAFETY: setsid is async-signal-safe; nothing else runs in pre_exec.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(io::Error::from)?;
            Ok(())
        });
    }
}

/// A supervisor must answer SIGTERM, SIGINT and SIGHUP whatever its
/// launcher had blocked or ignored (both survive exec): a script that
/// blocks SIGTERM around `session new` would otherwise leave a session that
/// nothing but SIGKILL can end.
pub fn reset_signals() {
    use nix::sys::signal::{signal, SigHandler};
    let _ = SigSet::empty().thread_set_mask();
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        // SAFETY: restoring the default disposition before any thread or
        // handler exists.
        let _ = unsafe { signal(sig, SigHandler::SigDfl) };
    }
}

/// Allocator settings for a long-lived daemon (a supervisor), set before
/// any thread starts.
///
/// A flood passes through buffers of up to a few MiB (merged PTY chunks, a
/// cell's kept output and its reply). glibc raises its mmap threshold each
/// time such a buffer is freed, after which they come from the heap and
/// fragment it, so a long-lived supervisor's footprint creeps up with the
/// output it has seen. A fixed threshold keeps every large buffer mapped
/// and returned on free: the footprint stays bounded.
///
/// glibc also gives each thread that allocates an arena of its own (up to
/// 8 per core), to spare threads that allocate at once the wait for a lock.
/// A supervisor's threads (the event loop and the PTY's reader, writer and
/// waiter) take turns on one stream of output and allocate little, so that
/// wait is short, while each arena keeps its own partly used pages: one
/// arena saves about 70 kB of an idle supervisor's 1.5 MB of private memory
/// (docs/benchmarks.md, idle memory).
pub fn tune_allocator() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only tunes the allocator; called before any thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Writes the one status line to the launcher's pipe (moved to a spare
/// descriptor when stdout went to the log) and closes it; later calls do
/// nothing.
pub fn write_ready(line: &str) {
    let fd = READY_FD.swap(-1, std::sync::atomic::Ordering::SeqCst);
    if fd < 0 {
        return;
    }
    // SAFETY: `fd` is the launcher pipe we dup'ed and own; File closes it.
    let mut pipe = unsafe { fs::File::from_raw_fd(fd) };
    let _ = writeln!(pipe, "{line}");
}

static READY_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

pub fn redirect_stdin_to_null() {
    if let Ok(null) = fs::File::open("/dev/null") {
        let _ = nix::unistd::dup2(null.as_raw_fd(), 0);
    }
}

/// Points stdout and stderr at `log`, keeping the launcher's pipe for
/// [`write_ready`].
pub fn redirect_output_to_log(log: &Path) {
    let _ = std::io::stdout().flush();
    // Keep the launcher's pipe for the ready line.
    if let Ok(fd) = nix::unistd::dup(1) {
        READY_FD.store(fd, std::sync::atomic::Ordering::SeqCst);
    }
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(log);
    if let Ok(file) = file {
        let _ = make_owner_only(log);
        let _ = nix::unistd::dup2(file.as_raw_fd(), 1);
        let _ = nix::unistd::dup2(file.as_raw_fd(), 2);
    }
}

/// Sets up a piped child (an ACP agent) so that it does not outlive its
/// supervisor: its own process group (ended as a whole, with the helpers
/// it starts), and on Linux SIGKILL when the supervisor dies, even by
/// SIGKILL. Its helpers see their pipes close and end on their own.
pub fn tie_to_supervisor(cmd: &mut tokio::process::Command) {
    cmd.process_group(0);
    #[cfg(target_os = "linux")]
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Signals the process group `pid` leads (see [`tie_to_supervisor`]):
/// SIGTERM, or SIGKILL with `now`.
pub fn signal_group(pid: u32, now: bool) {
    let signal = if now {
        Signal::SIGKILL
    } else {
        Signal::SIGTERM
    };
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), signal);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_get_short_socket_paths() {
        let root = Path::new("/tmp/agent-comms-0");
        assert_eq!(endpoint_path(root, "short"), root.join("short.sock"));
        let long = endpoint_path(root, &"n".repeat(150));
        assert!(long.as_os_str().len() <= MAX_SOCKET_PATH, "{long:?}");
        assert_ne!(long, endpoint_path(root, &"m".repeat(150)));
    }
}
