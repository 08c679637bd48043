//! Windows: a named pipe, `\\.\pipe\agent-comms-<user>-<hash>`.
//!
//! What guards it:
//! - The pipe gets the default DACL from the supervisor's token: full
//!   control for the user who created it, SYSTEM and administrators; read
//!   access for Everyone and Anonymous. Another user can thus open it for
//!   reading only, and a reader cannot send a request: it can neither type
//!   into the session nor ask for its screen. Nor can it add an instance,
//!   so it cannot serve our clients under our name.
//! - Remote clients are refused (`reject_remote_clients`).
//! - The first instance is created with `first_pipe_instance`: a pipe of
//!   that name made by someone else is refused as in use, never joined.
//! - Clients connect with SECURITY_IDENTIFICATION: the server may learn who
//!   they are, never act as them.
//!
//! Missing against Unix: an explicit DACL without the read access above,
//! and a client-side check of who serves the pipe (the server's process
//! token, via GetNamedPipeServerProcessId); without it a record left by a
//! killed supervisor names a pipe another user could then create.
//!
//! Clients open the pipe for overlapped I/O ([`ClientStream`]): a read can
//! then wait with a deadline, `attach` writes keys from one thread while
//! another reads output, and a detach wakes the blocked reader.
//!
//! There is no file to remove afterwards: a pipe ends with its last handle,
//! so a dead supervisor never leaves a stale endpoint.

use std::io::{self, Read, Write};
use std::os::windows::ffi::OsStrExt;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::windows::named_pipe::{NamedPipeServer, ServerOptions};
use windows_sys::Win32::Foundation::{
    ERROR_ACCESS_DENIED, ERROR_BROKEN_PIPE, ERROR_IO_PENDING, ERROR_OPERATION_ABORTED,
    ERROR_PIPE_BUSY, ERROR_PIPE_NOT_CONNECTED, HANDLE, WAIT_OBJECT_0,
};
use windows_sys::Win32::Storage::FileSystem::{
    ReadFile, WriteFile, FILE_FLAG_OVERLAPPED, SECURITY_IDENTIFICATION,
};
use windows_sys::Win32::System::Pipes::WaitNamedPipeW;
use windows_sys::Win32::System::Threading::{
    CreateEventW, SetEvent, WaitForMultipleObjects, WaitForSingleObject, INFINITE,
};
use windows_sys::Win32::System::IO::{CancelIoEx, GetOverlappedResult, OVERLAPPED};

use super::{BindOutcome, Listener, SocketError};

/// A connection as the supervisor sees it.
pub type Stream = NamedPipeServer;
pub type ReadHalf = tokio::io::ReadHalf<NamedPipeServer>;
pub type WriteHalf = tokio::io::WriteHalf<NamedPipeServer>;

/// How long a client waits for a free pipe instance: one exists again as
/// soon as the supervisor has accepted the connection before.
const BUSY_WAIT: Duration = Duration::from_secs(2);

/// The pipe's name and the instance the next client will connect to.
pub(super) struct RawListener {
    path: PathBuf,
    next: NamedPipeServer,
}

fn server_options(first: bool) -> ServerOptions {
    let mut options = ServerOptions::new();
    options
        .first_pipe_instance(first)
        .reject_remote_clients(true);
    options
}

impl RawListener {
    /// Waits for a client on the waiting instance, then makes the next one.
    /// Cancel-safe: until a client connects nothing changes.
    pub async fn accept(&mut self) -> io::Result<Stream> {
        let connected = self.next.connect().await;
        let next = server_options(false).create(&self.path)?;
        let this = std::mem::replace(&mut self.next, next);
        connected.map(|()| this)
    }
}

/// Creates the pipe's first instance; must run inside a tokio runtime.
pub fn bind(path: &Path) -> Result<(Listener, BindOutcome), SocketError> {
    match server_options(true).create(path) {
        Ok(next) => Ok((
            Listener::new(RawListener {
                path: path.to_owned(),
                next,
            }),
            BindOutcome::Fresh,
        )),
        Err(e) if e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) => {
            Err(SocketError::InUse(path.to_owned()))
        }
        Err(source) => Err(SocketError::Bind {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Nothing to check per connection: the pipe's DACL and the refusal of
/// remote clients (above) decided who could connect at all.
pub fn check_peer(_stream: &Stream) -> Result<(), String> {
    Ok(())
}

/// Reading and writing halves that can live in one task each.
pub fn split(stream: Stream) -> (ReadHalf, WriteHalf) {
    tokio::io::split(stream)
}

/// A connection as a short-lived command sees it (blocking), on a pipe
/// handle opened for overlapped I/O: a read can then wait with a deadline,
/// a second thread can write while one reads (`attach`), and a shutdown
/// wakes a blocked reader. Synchronous pipe I/O can do none of the three:
/// Windows serializes it per handle and it has no timeout.
pub struct ClientStream {
    pipe: Arc<Pipe>,
}

/// The pipe handle shared by a stream and its clones, the event that
/// [`ClientStream::shutdown`] sets to end every wait on it, and the read
/// timeout (shared by the clones, as a socket's SO_RCVTIMEO is).
struct Pipe {
    handle: OwnedHandle,
    shut: Event,
    read_timeout: Mutex<Option<Duration>>,
}

/// A manual-reset event, closed on drop.
struct Event(OwnedHandle);

impl Event {
    fn new() -> io::Result<Self> {
        // SAFETY: no attributes or name; a null handle means failure.
        let h = unsafe { CreateEventW(std::ptr::null(), 1, 0, std::ptr::null()) };
        if h.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh handle that we own.
        Ok(Self(unsafe { OwnedHandle::from_raw_handle(h) }))
    }

    fn raw(&self) -> HANDLE {
        self.0.as_raw_handle()
    }
}

/// Which way one overlapped operation goes.
enum Op<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

impl Pipe {
    /// Runs one overlapped read or write to its end, at most `timeout`
    /// (then `TimedOut`), or until the stream is shut down (then a read
    /// sees the end of the stream, a write a broken pipe).
    fn io(&self, op: Op<'_>, timeout: Option<Duration>) -> io::Result<usize> {
        let h = self.handle.as_raw_handle();
        let done = Event::new()?;
        // SAFETY: plain data; zero is the documented initial state.
        let mut ov: OVERLAPPED = unsafe { std::mem::zeroed() };
        ov.hEvent = done.raw();
        let is_read = matches!(op, Op::Read(_));
        let len = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        // SAFETY: the buffer and `ov` outlive the operation: every path
        // below waits for it to complete (or be cancelled) before return.
        let started = unsafe {
            match op {
                Op::Read(buf) => ReadFile(
                    h,
                    buf.as_mut_ptr(),
                    len(buf.len()),
                    std::ptr::null_mut(),
                    &mut ov,
                ),
                Op::Write(buf) => WriteFile(
                    h,
                    buf.as_ptr(),
                    len(buf.len()),
                    std::ptr::null_mut(),
                    &mut ov,
                ),
            }
        };
        if started == 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(ERROR_IO_PENDING as i32) {
                return ended(e, is_read);
            }
            let ms = timeout.map_or(INFINITE, |t| {
                u32::try_from(t.as_millis()).unwrap_or(INFINITE - 1)
            });
            let events = [done.raw(), self.shut.raw()];
            // SAFETY: two valid event handles.
            let woke = unsafe { WaitForMultipleObjects(2, events.as_ptr(), 0, ms) };
            if woke != WAIT_OBJECT_0 {
                // SAFETY: cancels only this operation; it then completes.
                unsafe { CancelIoEx(h, &ov) };
            }
        }
        let mut n = 0;
        // SAFETY: waits for the operation started above to complete.
        if unsafe { GetOverlappedResult(h, &ov, &mut n, 1) } == 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(c) if c == ERROR_OPERATION_ABORTED as i32 && self.is_shut() => {
                    ended(io::ErrorKind::BrokenPipe.into(), is_read)
                }
                Some(c) if c == ERROR_OPERATION_ABORTED as i32 => {
                    Err(io::ErrorKind::TimedOut.into())
                }
                _ => ended(e, is_read),
            };
        }
        Ok(n as usize)
    }

    fn is_shut(&self) -> bool {
        // SAFETY: a valid event handle; zero timeout.
        unsafe { WaitForSingleObject(self.shut.raw(), 0) == WAIT_OBJECT_0 }
    }
}

/// A read that finds the pipe closed by the server (or the stream shut
/// down) has reached the end of the stream, as a socket's would.
fn ended(e: io::Error, is_read: bool) -> io::Result<usize> {
    let closed = e.kind() == io::ErrorKind::BrokenPipe
        || e.raw_os_error() == Some(ERROR_BROKEN_PIPE as i32)
        || e.raw_os_error() == Some(ERROR_PIPE_NOT_CONNECTED as i32);
    if closed && is_read {
        Ok(0)
    } else {
        Err(e)
    }
}

impl ClientStream {
    /// A second handle on the connection, for a writer thread.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(Self {
            pipe: self.pipe.clone(),
        })
    }

    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        *self
            .pipe
            .read_timeout
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = timeout;
        Ok(())
    }

    /// Ends every wait on the connection, in this handle and its clones:
    /// a blocked read returns the end of the stream.
    pub fn shutdown(&self, _how: std::net::Shutdown) -> io::Result<()> {
        // SAFETY: a valid event handle.
        unsafe { SetEvent(self.pipe.shut.raw()) };
        Ok(())
    }
}

impl Read for ClientStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pipe.is_shut() {
            return Ok(0);
        }
        let timeout = *self
            .pipe
            .read_timeout
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        self.pipe.io(Op::Read(buf), timeout)
    }
}

impl Write for ClientStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.pipe.is_shut() {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        self.pipe.io(Op::Write(buf), None)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Connects to the pipe at `path`. Not checked yet, unlike on Unix: which
/// user serves it (the module docs say what that leaves open); a
/// [`super::ForeignEndpoint`] is never returned here.
pub fn connect(path: &Path) -> io::Result<ClientStream> {
    let deadline = Instant::now() + BUSY_WAIT;
    loop {
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .security_qos_flags(SECURITY_IDENTIFICATION)
            .custom_flags(FILE_FLAG_OVERLAPPED)
            .open(path);
        match opened {
            Err(e)
                if e.raw_os_error() == Some(ERROR_PIPE_BUSY as i32)
                    && Instant::now() < deadline =>
            {
                let wide: Vec<u16> = path.as_os_str().encode_wide().chain(Some(0)).collect();
                // SAFETY: a NUL-terminated name; returns when an instance
                // is free or after 100 ms.
                unsafe { WaitNamedPipeW(wide.as_ptr(), 100) };
            }
            Ok(file) => {
                return Ok(ClientStream {
                    pipe: Arc::new(Pipe {
                        handle: file.into(),
                        shut: Event::new()?,
                        read_timeout: Mutex::new(None),
                    }),
                })
            }
            Err(e) => return Err(e),
        }
    }
}
