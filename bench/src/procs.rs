//! Process helpers: waiting for and ending processes by pid, their RSS and
//! PSS, and what happens on Ctrl-C.
//!
//! Supervisors and tmux servers are not our children (they daemonize), so
//! `waitpid` cannot see them end. A pidfd can: it becomes readable when the
//! process exits, which gives an exact end time without polling `/proc`
//! (used by the "no client attached" throughput row) and a clean way to
//! wait after sending a signal.

use std::io::Read;
use std::os::fd::IntoRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use anyhow::Context;
use nix::sys::signal::{kill, sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::unistd::Pid;

/// How long a process may take to exit after a polite signal.
const GRACE: Duration = Duration::from_secs(5);

/// Waits until `pid` has exited, at most `timeout`; true if it is gone.
pub use agent_comms_core::session::wait_gone;

/// Sends `signal` to `pid`, then SIGKILL if it is still there after a grace
/// period; returns once it is gone.
pub fn stop(pid: u32, signal: Signal) {
    let target = Pid::from_raw(pid as i32);
    if kill(target, signal).is_err() || wait_gone(pid, GRACE) {
        return;
    }
    let _ = kill(target, Signal::SIGKILL);
    wait_gone(pid, GRACE);
}

/// Resident set size of `pid` in MB (10^6 bytes), from `/proc/<pid>/status`.
pub fn rss_mb(pid: u32) -> anyhow::Result<f64> {
    status_mb(pid, "VmRSS")
}

/// Proportional set size of `pid` in MB, from `/proc/<pid>/smaps_rollup`:
/// each page it maps divided by the number of processes that map it, so
/// summed over processes a page they share counts once.
pub fn pss_mb(pid: u32) -> anyhow::Result<f64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .with_context(|| format!("process {pid} is gone"))?;
    kb_line(&rollup, "Pss")
}

/// A size line of `/proc/<pid>/status` (`VmRSS`, `VmHWM` …) in MB.
pub fn status_mb(pid: u32, key: &str) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("process {pid} is gone"))?;
    kb_line(&status, key)
}

/// The `KEY: N kB` line of a /proc file, in MB.
fn kb_line(text: &str, key: &str) -> anyhow::Result<f64> {
    let kb: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no {key} line"))?;
    Ok(kb * 1024.0 / 1e6)
}

/// On SIGINT or SIGTERM: stop starting processes, run `clean_up`, exit 130.
///
/// The handler only wakes a thread through a pipe, and that thread does the
/// work. (Blocking the signals and taking them with `sigwait` would be
/// simpler, but a blocked mask is inherited by every process started, and
/// supervisors would then ignore SIGTERM.) The measurement thread goes on
/// meanwhile, so it is stopped at its next [`before_start`]; `clean_up` runs
/// twice, since a process that was being started when the signal came
/// shows up a moment later.
pub fn on_interrupt(clean_up: impl Fn() + Send + 'static) -> anyhow::Result<()> {
    let (wake, wake_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    WAKE_FD.store(wake_write.into_raw_fd(), Ordering::SeqCst);
    let action = SigAction::new(
        SigHandler::Handler(wake_on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only calls write(2), which is async-signal-safe.
        unsafe { sigaction(signal, &action)? };
    }
    std::thread::spawn(move || {
        if std::fs::File::from(wake).read(&mut [0u8]).is_ok() {
            INTERRUPTED.store(true, Ordering::SeqCst);
            eprintln!("interrupted: ending what the benchmark started");
            clean_up();
            std::thread::sleep(Duration::from_millis(300));
            clean_up();
            std::process::exit(130);
        }
    });
    Ok(())
}

/// Called before starting anything that outlives its command (a supervisor,
/// a tmux server): once the run is interrupted, the caller waits here for
/// the exit instead.
pub fn before_start() {
    while INTERRUPTED.load(Ordering::SeqCst) {
        std::thread::park();
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// The write end of the pipe that [`wake_on_signal`] writes to.
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn wake_on_signal(_: libc::c_int) {
    let fd = WAKE_FD.load(Ordering::SeqCst);
    // SAFETY: write(2) of one byte from a valid buffer; a failure is moot.
    unsafe { libc::write(fd, [0u8].as_ptr().cast(), 1) };
}
