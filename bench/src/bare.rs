//! The baseline: a PTY opened by the benchmark itself, with nothing between
//! the program and the reader.
//!
//! It uses portable-pty, the library the supervisor uses, so the difference
//! between a bare row and an agent-comms row is the supervisor (its threads,
//! screen model and socket hop), not a different way of opening terminals.
//! The benchmark reads the master directly: for echo it writes one byte and
//! waits (with `poll`, so a broken program cannot hang the run) until the
//! byte comes back; for throughput it reads until end of file.
//!
//! A second floor for throughput is `script` (util-linux), the relay a
//! person would reach for: it opens the PTY, copies what the program
//! writes to its own stdout, and nothing else. Its stdout is a pipe the
//! benchmark drains and counts, as a terminal would take it.
//!
//! Both floors run with one CPU kept busy ([`Busy`]). A relay that does
//! nothing but read sleeps between the kernel's 4 kB hand-overs, and on a
//! virtual machine an idle CPU wakes slowly, while a supervisor, whose
//! event loop parses what its reader hands over, keeps a CPU awake by
//! itself. On the 2-core VM of docs/benchmarks.md, `--section sessions`
//! measured the bare PTY at 63.7 MB/s and `script` at 59.4 MB/s without
//! [`Busy`], below a session's 115.5 MB/s: the floor measured the
//! hypervisor's wake-ups. With it: 113.5 and 100.8 MB/s.

use std::io::{Read, Write};
use std::os::fd::RawFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};

use crate::bench::Plan;
use crate::workload::{
    contains, echo_command, key, throughput_command, ECHO_READY, STEP_TIMEOUT, TERM,
    THROUGHPUT_BYTES,
};

/// A shell command in a PTY of its own, ended by pid when dropped.
struct BarePty {
    // Kept open for the child's lifetime; closing it hangs the child up.
    _master: Box<dyn MasterPty + Send>,
    master_fd: RawFd,
    child: Box<dyn Child + Send + Sync>,
    reader: Box<dyn Read + Send>,
    writer: Box<dyn Write + Send>,
}

/// A 24 × 80 pseudo-terminal, the size every measured program gets.
pub fn open_pty() -> anyhow::Result<portable_pty::PtyPair> {
    native_pty_system().openpty(PtySize {
        rows: 24,
        cols: 80,
        pixel_width: 0,
        pixel_height: 0,
    })
}

impl BarePty {
    fn spawn(shell_command: &str) -> anyhow::Result<Self> {
        let pair = open_pty()?;
        let mut cmd = CommandBuilder::new("sh");
        cmd.args(["-c", shell_command]);
        cmd.env("TERM", TERM);
        let child = pair.slave.spawn_command(cmd)?;
        // Our copy of the slave must close, or end of file never comes.
        drop(pair.slave);
        Ok(Self {
            master_fd: pair
                .master
                .as_raw_fd()
                .context("PTY master has no descriptor")?,
            reader: pair.master.try_clone_reader()?,
            writer: pair.master.take_writer()?,
            _master: pair.master,
            child,
        })
    }

    /// Reads until `needle` has appeared in the output.
    fn read_until(&mut self, needle: &[u8]) -> anyhow::Result<()> {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !contains(&seen, needle) {
            let mut poll = libc::pollfd {
                fd: self.master_fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd on a descriptor we keep open.
            let ready = unsafe { libc::poll(&mut poll, 1, STEP_TIMEOUT.as_millis() as i32) };
            ensure!(ready > 0, "no output within {STEP_TIMEOUT:?}");
            let n = self.reader.read(&mut buf)?;
            ensure!(n > 0, "the program ended early");
            seen.extend_from_slice(&buf[..n]);
        }
        Ok(())
    }
}

impl Drop for BarePty {
    fn drop(&mut self) {
        if let (Ok(None), Some(pid)) = (self.child.try_wait(), self.child.process_id()) {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// Keystroke → echo round trips through a bare PTY running raw `cat`.
pub fn echo(plan: &Plan) -> anyhow::Result<Vec<Duration>> {
    let mut pty = BarePty::spawn(&echo_command())?;
    pty.read_until(ECHO_READY.as_bytes())?;
    let mut samples = Vec::with_capacity(plan.keystrokes);
    for i in 0..plan.echo_warmup + plan.keystrokes {
        let key = key(i);
        let start = Instant::now();
        pty.writer.write_all(&[key])?;
        pty.read_until(&[key])?;
        if i >= plan.echo_warmup {
            samples.push(start.elapsed());
        }
    }
    Ok(samples)
}

/// A thread that spins until dropped, so that one CPU never idles.
struct Busy {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Busy {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Time from spawning the 200 MB writer to end of file on the master.
pub fn throughput() -> anyhow::Result<Duration> {
    let _busy = Busy::start();
    let start = Instant::now();
    let mut pty = BarePty::spawn(&throughput_command())?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        match pty.reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            // Linux reports a closed slave as EIO rather than end of file.
            Err(e) if e.raw_os_error() == Some(libc::EIO) => break,
            Err(e) => bail!("reading the PTY: {e}"),
        }
    }
    let elapsed = start.elapsed();
    ensure!(
        total >= THROUGHPUT_BYTES,
        "only {total} bytes arrived of {THROUGHPUT_BYTES}"
    );
    Ok(elapsed)
}

/// Time from spawning `script -q -e -c <the 200 MB writer> /dev/null` to
/// its exit, its stdout drained and counted.
pub fn script_relay() -> anyhow::Result<Duration> {
    let _busy = Busy::start();
    let start = Instant::now();
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c", &throughput_command(), "/dev/null"])
        .env("TERM", TERM)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot run script (util-linux)")?;
    let mut out = child.stdout.take().context("script's stdout")?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        match out.read(&mut buf)? {
            0 => break,
            n => total += n as u64,
        }
    }
    let status = child.wait()?;
    let elapsed = start.elapsed();
    ensure!(status.success(), "script exited with {status}");
    ensure!(
        total >= THROUGHPUT_BYTES,
        "only {total} bytes arrived of {THROUGHPUT_BYTES}"
    );
    Ok(elapsed)
}
