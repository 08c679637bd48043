//! A child process in a real pseudo-terminal.
//!
//! portable-pty chooses the platform implementation (openpty on Unix, ConPTY
//! on Windows) and is blocking, so reading happens on a dedicated thread that
//! hands chunks to async code; writing has its own thread too, because a child
//! that stops reading fills the tty buffer (4 KiB on Linux) and a blocked write
//! must never stall the supervisor's event loop.

pub mod cast;
pub mod size;
// Signals, process groups and polling differ: one file per platform.
#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as sys;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as sys;

use std::io::{Read, Write};
use std::path::PathBuf;

use portable_pty::{CommandBuilder, MasterPty, PtySize};
use tokio::sync::mpsc;

use crate::socket::protocol::ExitInfo;

#[derive(Debug, thiserror::Error)]
pub enum PtyError {
    #[error("cannot open a pseudo-terminal: {0}")]
    Open(String),
    /// Windows only: ConPTY is missing or refused.
    #[error(
        "cannot create a pseudo console: Windows 10 1809 (build 17763) or later is required ({0})"
    )]
    NoConsole(String),
    #[error("cannot start {program}: {reason}")]
    Spawn { program: String, reason: String },
    #[error("working directory {0} does not exist or is not a directory")]
    BadCwd(String),
    #[error("cannot write the recording {path}: {reason}")]
    Record { path: String, reason: String },
    #[error(transparent)]
    Size(#[from] size::SizeError),
    #[error("the pseudo-terminal is gone: {0}")]
    Io(#[from] std::io::Error),
}

/// What to run and how.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SpawnSpec {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// Variables to set on top of the inherited environment.
    pub env: Vec<(String, String)>,
    /// Inherited variables to drop.
    pub env_remove: Vec<String>,
    pub rows: u16,
    pub cols: u16,
    /// Record the session as asciicast v2 here.
    #[serde(default)]
    pub record: Option<PathBuf>,
}

/// Everything the PTY produces, in order, on one channel.
#[derive(Debug)]
pub enum PtyEvent {
    Output(Vec<u8>),
    /// The master side reached end of file: every process holding the slave
    /// has closed it.
    Eof,
    Exited(ExitInfo),
}

/// A running child in a PTY. Dropping it closes the master, which hangs the
/// child up.
pub struct PtyProcess {
    master: Box<dyn MasterPty + Send>,
    input: PtyWriter,
    pid: u32,
    control: sys::Control,
    recorder: Option<cast::SharedRecorder>,
}

/// A cloneable handle that queues bytes for the child, in order.
#[derive(Clone)]
pub struct PtyWriter(std::sync::mpsc::Sender<Vec<u8>>);

impl PtyWriter {
    pub fn write(&self, bytes: Vec<u8>) {
        // The writer thread is gone only once the PTY is: nothing to do then.
        let _ = self.0.send(bytes);
    }
}

impl PtyProcess {
    /// Starts the child; its output, EOF and exit arrive on `events`.
    ///
    /// Three threads serve it, each blocking on one thing: the reader (the
    /// child's output), the waiter (its exit) and the writer (input queued
    /// by any caller, in order).
    pub fn spawn(spec: &SpawnSpec, events: mpsc::Sender<PtyEvent>) -> Result<Self, PtyError> {
        if !spec.cwd.is_dir() {
            return Err(PtyError::BadCwd(spec.cwd.display().to_string()));
        }
        size::checked(spec.rows, spec.cols)?;
        let recorder = start_recording(spec)?;
        let pair = sys::open(size(spec.rows, spec.cols))?;
        let child = pair
            .slave
            .spawn_command(command(spec))
            .map_err(|e| PtyError::Spawn {
                program: spec.argv.first().cloned().unwrap_or_default(),
                // portable-pty explains a failed PATH search over several
                // lines; errors are one line (and the detached launcher
                // reads exactly one), so join them.
                reason: e
                    .to_string()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
            })?;
        // Our copy of the slave must close, or EOF never comes.
        drop(pair.slave);
        let pid = child.process_id().unwrap_or(0);
        let control = sys::Control::new(pid, &*child);
        let reader = pair
            .master
            .try_clone_reader()
            .map_err(|e| PtyError::Open(e.to_string()))?;
        let waiting = sys::Waiting::new(&*pair.master);
        read_output(reader, waiting, events.clone(), recorder.clone())?;
        wait_for_exit(child, events)?;
        let writer = pair
            .master
            .take_writer()
            .map_err(|e| PtyError::Open(e.to_string()))?;
        let input = write_input(writer, recorder.clone())?;
        Ok(Self {
            master: pair.master,
            input,
            pid,
            control,
            recorder,
        })
    }

    /// Queues bytes for the child; order is kept across callers.
    pub fn write(&self, bytes: Vec<u8>) {
        self.input.write(bytes);
    }

    pub fn writer(&self) -> PtyWriter {
        self.input.clone()
    }

    pub fn resize(&self, rows: u16, cols: u16) -> Result<(), PtyError> {
        if let Some(r) = &self.recorder {
            lock(r).resize(rows, cols);
        }
        self.master
            .resize(size(rows, cols))
            .map_err(|e| PtyError::Open(e.to_string()))
    }

    /// The child's pid; it leads its own session and process group.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The process group in the terminal's foreground (a job the shell
    /// runs); None on Windows, which has no such thing.
    pub fn foreground_group(&self) -> Option<i32> {
        self.control.foreground_group(&*self.master)
    }

    /// Asks the child, and the job it runs in the foreground, to exit
    /// (SIGHUP, SIGCONT, SIGTERM; on Windows it is killed at once).
    pub fn ask_to_exit(&self) {
        self.control.ask_to_exit(&*self.master);
    }

    /// Ends the child and its foreground job now (SIGKILL; TerminateProcess
    /// on Windows).
    pub fn kill(&self) {
        self.control.kill(&*self.master);
    }
}

/// The asciicast recorder `spec` asks for, created before the child starts
/// so that a bad path refuses the session.
fn start_recording(spec: &SpawnSpec) -> Result<Option<cast::SharedRecorder>, PtyError> {
    let Some(path) = &spec.record else {
        return Ok(None);
    };
    cast::CastRecorder::create(path, spec.rows, spec.cols, &spec.argv.join(" "))
        .map(Some)
        .map_err(|e| PtyError::Record {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
}

fn command(spec: &SpawnSpec) -> CommandBuilder {
    let mut cmd = CommandBuilder::from_argv(spec.argv.iter().map(Into::into).collect());
    cmd.cwd(&spec.cwd);
    if std::env::var_os("TERM").is_none() {
        // A terminal program without TERM guesses badly; say what we are.
        cmd.env("TERM", "xterm-256color");
    }
    for key in &spec.env_remove {
        cmd.env_remove(key);
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    cmd
}

/// The reader thread: the child's output, recorded, then EOF.
fn read_output(
    mut reader: Box<dyn Read + Send>,
    waiting: sys::Waiting,
    out: mpsc::Sender<PtyEvent>,
    recorder: Option<cast::SharedRecorder>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("pty-reader".into())
        .spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        record(&recorder, &buf[..n]);
                        let chunk = buf[..n].to_vec();
                        if !send_coalesced(&out, chunk, &mut reader, &waiting, &recorder) {
                            return;
                        }
                    }
                }
            }
            let _ = out.blocking_send(PtyEvent::Eof);
        })
        .map(drop)
}

/// The waiter thread: how the child ended.
fn wait_for_exit(
    mut child: Box<dyn portable_pty::Child + Send + Sync>,
    out: mpsc::Sender<PtyEvent>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("pty-waiter".into())
        .spawn(move || {
            let info = match child.wait() {
                Ok(status) => match status.signal() {
                    Some(sig) => ExitInfo {
                        code: None,
                        signal: Some(sig.to_owned()),
                    },
                    None => ExitInfo {
                        code: Some(status.exit_code() as i32),
                        signal: None,
                    },
                },
                Err(_) => ExitInfo {
                    code: None,
                    signal: None,
                },
            };
            let _ = out.blocking_send(PtyEvent::Exited(info));
        })
        .map(drop)
}

/// The writer thread: queued input, in order, recorded. A child that stops
/// reading blocks only this thread.
fn write_input(
    mut writer: Box<dyn Write + Send>,
    recorder: Option<cast::SharedRecorder>,
) -> std::io::Result<PtyWriter> {
    let (input, queued) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::Builder::new()
        .name("pty-writer".into())
        .spawn(move || {
            for chunk in queued {
                if let Some(r) = &recorder {
                    lock(r).input(&chunk);
                }
                if writer
                    .write_all(&chunk)
                    .and_then(|_| writer.flush())
                    .is_err()
                {
                    break;
                }
            }
        })?;
    Ok(PtyWriter(input))
}

fn lock(recorder: &cast::SharedRecorder) -> std::sync::MutexGuard<'_, cast::CastRecorder> {
    recorder.lock().unwrap_or_else(|p| p.into_inner())
}

fn record(recorder: &Option<cast::SharedRecorder>, output: &[u8]) {
    if let Some(r) = recorder {
        lock(r).output(output);
    }
}

/// Most bytes merged into one chunk while the consumer is behind.
const MAX_COALESCED: usize = 1 << 20;

/// Hands `chunk` to the event loop. While the loop is behind (the channel is
/// full) and more output is already waiting in the PTY, it is read and
/// merged instead of queued chunk by chunk: a flood then reaches the screen
/// model as a few large chunks, which it can fast-forward through. Nothing
/// is held back once the PTY has nothing more to read. Returns false when
/// the loop is gone. Every read is recorded, merged or not.
fn send_coalesced(
    out: &mpsc::Sender<PtyEvent>,
    mut chunk: Vec<u8>,
    reader: &mut Box<dyn Read + Send>,
    waiting: &sys::Waiting,
    recorder: &Option<cast::SharedRecorder>,
) -> bool {
    use tokio::sync::mpsc::error::TrySendError;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match out.try_send(PtyEvent::Output(chunk)) {
            Ok(()) => return true,
            Err(TrySendError::Closed(_)) => return false,
            Err(TrySendError::Full(PtyEvent::Output(back))) => {
                chunk = back;
                if chunk.len() < MAX_COALESCED && waiting.now() {
                    match reader.read(&mut buf) {
                        Ok(n) if n > 0 => {
                            record(recorder, &buf[..n]);
                            chunk.extend_from_slice(&buf[..n]);
                            continue;
                        }
                        _ => {}
                    }
                }
                return out.blocking_send(PtyEvent::Output(chunk)).is_ok();
            }
            Err(TrySendError::Full(_)) => unreachable!("only output is sent here"),
        }
    }
}

fn size(rows: u16, cols: u16) -> PtySize {
    PtySize {
        rows: rows.max(1),
        cols: cols.max(1),
        pixel_width: 0,
        pixel_height: 0,
    }
}
