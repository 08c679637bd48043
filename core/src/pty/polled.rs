//! Unix: the master read and written on the supervisor's event loop.
//!
//! The master is a descriptor the event loop can poll, so no thread stands
//! between the child and the loop: a cell's input goes from the request
//! that typed it straight into the PTY, and the child's answer wakes the
//! loop itself. With a reader and a writer thread, every round trip paid two
//! more wake-ups (a thread's, then the loop's) — a third of the context
//! switches of a `k run` on a warm shell (docs/architecture.md, "What a
//! cell's round trip costs").
//!
//! The descriptor is non-blocking, so a child that stops reading leaves
//! input queued in the writer task, never a blocked loop.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Arc;

use portable_pty::MasterPty;
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc::{self, error::TrySendError};

use super::{cast::SharedRecorder, lock, PtyError, PtyEvent, PtyWriter};

/// Bytes asked for per read.
const READ_CHUNK: usize = 64 * 1024;
/// Most bytes merged into one chunk while the consumer is behind.
const MAX_COALESCED: usize = 1 << 20;

/// Starts the reader and writer tasks on the current runtime.
pub(super) fn start_io(
    master: &dyn MasterPty,
    events: mpsc::Sender<PtyEvent>,
    recorder: Option<SharedRecorder>,
) -> Result<PtyWriter, PtyError> {
    let raw = master
        .as_raw_fd()
        .ok_or_else(|| PtyError::Open("the pseudo-terminal has no descriptor".into()))?;
    // SAFETY: `raw` is the master's descriptor, open while `master` is
    // borrowed; the tasks get a duplicate of their own.
    let own = unsafe { BorrowedFd::borrow_raw(raw) }.try_clone_to_owned()?;
    set_nonblocking(&own)?;
    // SAFETY: a `File` owns its descriptor and never replaces it; nothing
    // else closes it while the AsyncFd holds it.
    let fd = unsafe { AsyncFd::register(File::from(own)) }.map_err(io::Error::from)?;
    let fd = Arc::new(fd);
    let (input, queued) = mpsc::unbounded_channel();
    tokio::spawn(read_output(fd.clone(), events, recorder.clone()));
    tokio::spawn(write_input(fd, queued, recorder));
    Ok(PtyWriter(input))
}

fn set_nonblocking(fd: &impl AsRawFd) -> io::Result<()> {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own, with integer arguments only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The child's output, recorded, then EOF. Linux reports the last slave's
/// close as EIO, which ends the output as end of file does.
async fn read_output(
    fd: Arc<AsyncFd<File>>,
    out: mpsc::Sender<PtyEvent>,
    recorder: Option<SharedRecorder>,
) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        let n = match read_ready(&fd, &mut buf).await {
            Ok(n) if n > 0 => n,
            _ => break,
        };
        record(&recorder, &buf[..n]);
        let chunk = buf[..n].to_vec();
        if !send_coalesced(&out, chunk, &fd, &mut buf, &recorder).await {
            return;
        }
    }
    let _ = out.send(PtyEvent::Eof).await;
}

/// Waits until the master has output, then reads it.
async fn read_ready(fd: &AsyncFd<File>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        let mut ready = fd.readable().await?;
        match ready.try_io(|f| f.get_ref().read(buf)) {
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
            Ok(result) => return result,
            Err(_would_block) => continue,
        }
    }
}

/// Hands `chunk` to the event loop. While the loop is behind (the channel is
/// full) and more output already waits in the PTY, it is read and merged
/// instead of queued chunk by chunk: a flood then reaches the screen model
/// as a few large chunks, which it can fast-forward through. Nothing is held
/// back once the PTY has nothing more to read. Returns false when the loop
/// is gone.
async fn send_coalesced(
    out: &mpsc::Sender<PtyEvent>,
    mut chunk: Vec<u8>,
    fd: &AsyncFd<File>,
    buf: &mut [u8],
    recorder: &Option<SharedRecorder>,
) -> bool {
    loop {
        match out.try_send(PtyEvent::Output(chunk)) {
            Ok(()) => return true,
            Err(TrySendError::Closed(_)) => return false,
            Err(TrySendError::Full(event)) => {
                let PtyEvent::Output(back) = event else {
                    unreachable!("only output is sent here")
                };
                chunk = back;
                if chunk.len() < MAX_COALESCED {
                    // Non-blocking: WouldBlock means nothing waits.
                    if let Ok(n @ 1..) = fd.get_ref().read(buf) {
                        record(recorder, &buf[..n]);
                        chunk.extend_from_slice(&buf[..n]);
                        continue;
                    }
                }
                return out.send(PtyEvent::Output(chunk)).await.is_ok();
            }
        }
    }
}

/// Queued input, in order, recorded; ends when the PTY refuses a write.
async fn write_input(
    fd: Arc<AsyncFd<File>>,
    mut queued: mpsc::UnboundedReceiver<Vec<u8>>,
    recorder: Option<SharedRecorder>,
) {
    while let Some(chunk) = queued.recv().await {
        if let Some(r) = &recorder {
            lock(r).input(&chunk);
        }
        if write_all(&fd, &chunk).await.is_err() {
            break;
        }
    }
}

async fn write_all(fd: &AsyncFd<File>, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        let mut ready = fd.writable().await?;
        match ready.try_io(|f| f.get_ref().write(bytes)) {
            Ok(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(Ok(n)) => bytes = &bytes[n..],
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Ok(Err(e)) => return Err(e),
            Err(_would_block) => {}
        }
    }
    Ok(())
}

fn record(recorder: &Option<SharedRecorder>, bytes: &[u8]) {
    if let Some(r) = recorder {
        lock(r).output(bytes);
    }
}
