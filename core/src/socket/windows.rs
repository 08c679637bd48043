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
//! There is no file to remove afterwards: a pipe ends with its last handle,
//! so a dead supervisor never leaves a stale endpoint.

use std::io::{self, Read, Write};
use std::os::windows::ffi::OsStrExt;
use std::os::windows::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::net::windows::named_pipe::{NamedPipeServer, ServerOptions};
use windows_sys::Win32::Foundation::{ERROR_ACCESS_DENIED, ERROR_PIPE_BUSY};
use windows_sys::Win32::Storage::FileSystem::SECURITY_IDENTIFICATION;
use windows_sys::Win32::System::Pipes::WaitNamedPipeW;

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

/// A connection as a short-lived command sees it (blocking).
pub struct ClientStream(std::fs::File);

impl ClientStream {
    /// Missing on Windows: a second handle for a writer thread. The pipe is
    /// opened for synchronous I/O, which Windows serializes per handle (and
    /// its duplicates), so a write would wait behind the blocked read of
    /// the other thread. `attach` and `watch` need overlapped I/O first.
    pub fn try_clone(&self) -> io::Result<Self> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "attach and watch are not supported on Windows yet (the endpoint cannot be read and written at once); use `session snapshot` and `session send`",
        ))
    }

    /// Missing on Windows for the same reason (synchronous pipe I/O has no
    /// timeout): waits with a deadline say they are unsupported.
    pub fn set_read_timeout(&self, _timeout: Option<std::time::Duration>) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "waiting with a timeout is not supported on Windows yet (the endpoint's reads cannot time out)",
        ))
    }

    /// See [`ClientStream::try_clone`]: there is no second handle to end.
    pub fn shutdown(&self, _how: std::net::Shutdown) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

impl Read for ClientStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for ClientStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
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
            other => return other.map(ClientStream),
        }
    }
}
