//! Windows: the pseudo console's pipes, read and written by a thread each.
//!
//! ConPTY hands out anonymous pipes, which cannot be polled by the event
//! loop, so each direction blocks on a thread of its own; a blocked write
//! (a program that stops reading) stalls only the writer thread.

use std::io::{Read, Write};

use portable_pty::MasterPty;
use tokio::sync::mpsc;

use super::{cast::SharedRecorder, lock, PtyError, PtyEvent, PtyWriter};

/// Starts the reader and writer threads.
pub(super) fn start_io(
    master: &dyn MasterPty,
    events: mpsc::Sender<PtyEvent>,
    recorder: Option<SharedRecorder>,
) -> Result<PtyWriter, PtyError> {
    let reader = master
        .try_clone_reader()
        .map_err(|e| PtyError::Open(e.to_string()))?;
    let writer = master
        .take_writer()
        .map_err(|e| PtyError::Open(e.to_string()))?;
    read_output(reader, events, recorder.clone())?;
    write_input(writer, recorder)
}

/// The reader thread: the program's output, recorded, then EOF.
fn read_output(
    mut reader: Box<dyn Read + Send>,
    out: mpsc::Sender<PtyEvent>,
    recorder: Option<SharedRecorder>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("pty-reader".into())
        .spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if let Some(r) = &recorder {
                            lock(r).output(&buf[..n]);
                        }
                        if out
                            .blocking_send(PtyEvent::Output(buf[..n].to_vec()))
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            }
            let _ = out.blocking_send(PtyEvent::Eof);
        })
        .map(drop)
}

/// The writer thread: queued input, in order, recorded.
fn write_input(
    mut writer: Box<dyn Write + Send>,
    recorder: Option<SharedRecorder>,
) -> Result<PtyWriter, PtyError> {
    let (input, mut queued) = mpsc::unbounded_channel::<Vec<u8>>();
    std::thread::Builder::new()
        .name("pty-writer".into())
        .spawn(move || {
            while let Some(chunk) = queued.blocking_recv() {
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
