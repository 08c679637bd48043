//! Windows: a named pipe, `\\.\pipe\agent-comms-<user>-<hash>`.
//!
//! What guards it:
//! - Every instance gets a DACL for the supervisor's user alone
//!   (`D:P(A;;GA;;;<user SID>)`, protected from inheritance): nobody else
//!   may open it, even for reading, or add an instance. (The default DACL
//!   would give Everyone read access.)
//! - Remote clients are refused (`reject_remote_clients`).
//! - The first instance is created with `first_pipe_instance`: a pipe of
//!   that name made by someone else is refused as in use, never joined.
//! - A client checks who serves the pipe before it sends anything: the
//!   server's process (GetNamedPipeServerProcessId) must run as the
//!   client's own user (its token's user SID). A record left by a killed
//!   supervisor names a pipe that another user could create in the
//!   meantime; such a pipe is refused ([`ForeignEndpoint`]), as a Unix
//!   client refuses a socket served by another uid.
//! - Clients connect with SECURITY_IDENTIFICATION: the server may learn who
//!   they are, never act as them.
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
    ERROR_PIPE_BUSY, ERROR_PIPE_NOT_CONNECTED, ERROR_SEM_TIMEOUT, HANDLE, WAIT_OBJECT_0,
};
use windows_sys::Win32::Storage::FileSystem::{
    ReadFile, WriteFile, FILE_FLAG_OVERLAPPED, SECURITY_IDENTIFICATION,
};
use windows_sys::Win32::System::Pipes::WaitNamedPipeW;
use windows_sys::Win32::System::Threading::{
    CreateEventW, SetEvent, WaitForMultipleObjects, WaitForSingleObject, INFINITE,
};
use windows_sys::Win32::System::IO::{CancelIoEx, GetOverlappedResult, OVERLAPPED};

use windows_sys::Win32::Foundation::{LocalFree, HLOCAL};
use windows_sys::Win32::Security::Authorization::{
    ConvertSidToStringSidW, ConvertStringSecurityDescriptorToSecurityDescriptorW, SDDL_REVISION_1,
};
use windows_sys::Win32::Security::{
    EqualSid, GetTokenInformation, TokenUser, PSECURITY_DESCRIPTOR, SECURITY_ATTRIBUTES,
    TOKEN_QUERY, TOKEN_USER,
};
use windows_sys::Win32::System::Pipes::GetNamedPipeServerProcessId;
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, OpenProcess, OpenProcessToken, PROCESS_QUERY_LIMITED_INFORMATION,
};

use super::{BindOutcome, ForeignEndpoint, Listener, SocketError};

/// The user of a process's token (a TOKEN_USER and the SID it points
/// into, kept in pointer-aligned storage).
struct TokenUserInfo(Vec<usize>);

impl TokenUserInfo {
    fn of(process: HANDLE) -> io::Result<Self> {
        let mut token = std::ptr::null_mut();
        // SAFETY: a process handle with query access; out-pointer of ours.
        if unsafe { OpenProcessToken(process, TOKEN_QUERY, &mut token) } == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh handle that we own.
        let token = unsafe { OwnedHandle::from_raw_handle(token) };
        let mut len = 0;
        // SAFETY: asks for the size only (fails by design).
        unsafe {
            GetTokenInformation(
                token.as_raw_handle(),
                TokenUser,
                std::ptr::null_mut(),
                0,
                &mut len,
            )
        };
        let mut buf = vec![0usize; (len as usize).div_ceil(std::mem::size_of::<usize>())];
        // SAFETY: `buf` holds at least `len` bytes, pointer-aligned.
        let ok = unsafe {
            GetTokenInformation(
                token.as_raw_handle(),
                TokenUser,
                buf.as_mut_ptr().cast(),
                len,
                &mut len,
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self(buf))
    }

    fn mine() -> io::Result<Self> {
        // SAFETY: the pseudo handle of this process; never closed.
        Self::of(unsafe { GetCurrentProcess() })
    }

    fn sid(&self) -> *mut std::ffi::c_void {
        // SAFETY: filled in by GetTokenInformation(TokenUser) above.
        unsafe { (*self.0.as_ptr().cast::<TOKEN_USER>()).User.Sid }
    }

    /// The SID as text (`S-1-5-21-…`).
    fn sid_string(&self) -> io::Result<String> {
        let mut text: *mut u16 = std::ptr::null_mut();
        // SAFETY: a valid SID; the string is allocated for us (LocalFree).
        if unsafe { ConvertSidToStringSidW(self.sid(), &mut text) } == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a NUL-terminated string from the call above.
        Ok(unsafe {
            let len = (0..).take_while(|&i| *text.add(i) != 0).count();
            let sid = String::from_utf16_lossy(std::slice::from_raw_parts(text, len));
            LocalFree(text as HLOCAL);
            sid
        })
    }

    fn same_user(&self, other: &Self) -> bool {
        // SAFETY: two valid SIDs that live as long as `self` and `other`.
        unsafe { EqualSid(self.sid(), other.sid()) != 0 }
    }
}

/// Refuses a pipe whose server does not run as this process's user.
fn check_server(pipe: HANDLE, path: &Path) -> io::Result<()> {
    let mut server_pid = 0;
    // SAFETY: a valid pipe handle; out-pointer of ours.
    if unsafe { GetNamedPipeServerProcessId(pipe, &mut server_pid) } == 0 {
        return Err(io::Error::last_os_error());
    }
    let mine = TokenUserInfo::mine()?;
    let foreign = || -> io::Error {
        ForeignEndpoint {
            path: path.to_owned(),
            server: format!("process {server_pid}"),
            me: mine.sid_string().unwrap_or_else(|_| "your user".into()),
        }
        .into()
    };
    // SAFETY: plain call; a null handle means failure.
    let server = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, server_pid) };
    if server.is_null() {
        // A process we may not even query is not ours.
        return Err(foreign());
    }
    // SAFETY: a fresh handle that we own.
    let server = unsafe { OwnedHandle::from_raw_handle(server) };
    let theirs = TokenUserInfo::of(server.as_raw_handle()).map_err(|_| foreign())?;
    if !theirs.same_user(&mine) {
        return Err(foreign());
    }
    Ok(())
}

/// A security descriptor that grants this process's user alone full
/// access, freed on drop.
struct OwnerOnly(PSECURITY_DESCRIPTOR);

// SAFETY: the descriptor is read-only memory of ours; Windows only reads it.
unsafe impl Send for OwnerOnly {}
// SAFETY: as above.
unsafe impl Sync for OwnerOnly {}

impl OwnerOnly {
    fn new() -> io::Result<Self> {
        let sid = TokenUserInfo::mine()?.sid_string()?;
        let sddl: Vec<u16> = format!("D:P(A;;GA;;;{sid})")
            .encode_utf16()
            .chain(Some(0))
            .collect();
        let mut descriptor: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
        // SAFETY: a NUL-terminated descriptor string; allocated for us.
        let ok = unsafe {
            ConvertStringSecurityDescriptorToSecurityDescriptorW(
                sddl.as_ptr(),
                SDDL_REVISION_1,
                &mut descriptor,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self(descriptor))
    }

    /// Creates an instance of the pipe with this descriptor.
    fn create(&self, options: &ServerOptions, path: &Path) -> io::Result<NamedPipeServer> {
        let mut attributes = SECURITY_ATTRIBUTES {
            nLength: std::mem::size_of::<SECURITY_ATTRIBUTES>() as u32,
            lpSecurityDescriptor: self.0,
            bInheritHandle: 0,
        };
        // SAFETY: valid attributes that outlive the call; tokio passes
        // them to CreateNamedPipeW only.
        unsafe {
            options.create_with_security_attributes_raw(
                path,
                std::ptr::from_mut(&mut attributes).cast(),
            )
        }
    }
}

impl Drop for OwnerOnly {
    fn drop(&mut self) {
        // SAFETY: allocated by ConvertStringSecurityDescriptorToSecurityDescriptorW.
        unsafe { LocalFree(self.0 as HLOCAL) };
    }
}

/// A connection as the supervisor sees it.
pub type Stream = NamedPipeServer;
pub type ReadHalf = tokio::io::ReadHalf<NamedPipeServer>;
pub type WriteHalf = tokio::io::WriteHalf<NamedPipeServer>;

/// How long a client waits for a free pipe instance: one exists again as
/// soon as the supervisor has accepted the connection before.
const BUSY_WAIT: Duration = Duration::from_secs(2);

/// The pipe's name, the DACL of its instances, and the instance the next
/// client will connect to.
pub(super) struct RawListener {
    path: PathBuf,
    dacl: OwnerOnly,
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
        let next = self.dacl.create(&server_options(false), &self.path)?;
        let this = std::mem::replace(&mut self.next, next);
        connected.map(|()| this)
    }
}

/// Whether a pipe of this name exists now, with a free instance or not.
/// FILE_FLAG_FIRST_PIPE_INSTANCE should refuse such a name by itself, but
/// Wine 8 ignores the flag (a supervisor joined a pipe another program
/// held), so the name is asked about first; a pipe made between the
/// question and the creation is still Windows' to refuse.
fn pipe_exists(path: &Path) -> bool {
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain(Some(0)).collect();
    // SAFETY: a NUL-terminated name; waits at most 1 ms.
    if unsafe { WaitNamedPipeW(wide.as_ptr(), 1) } != 0 {
        return true;
    }
    io::Error::last_os_error().raw_os_error() == Some(ERROR_SEM_TIMEOUT as i32)
}

/// Creates the pipe's first instance; must run inside a tokio runtime.
pub fn bind(path: &Path) -> Result<(Listener, BindOutcome), SocketError> {
    let bind_error = |source| SocketError::Bind {
        path: path.to_owned(),
        source,
    };
    let dacl = OwnerOnly::new().map_err(bind_error)?;
    if pipe_exists(path) {
        return Err(SocketError::NameTaken(path.to_owned()));
    }
    match dacl.create(&server_options(true), path) {
        Ok(next) => Ok((
            Listener::new(RawListener {
                path: path.to_owned(),
                dacl,
                next,
            }),
            BindOutcome::Fresh,
        )),
        Err(e) if e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) => {
            Err(SocketError::NameTaken(path.to_owned()))
        }
        Err(source) => Err(bind_error(source)),
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

/// Connects to the pipe at `path`, refusing one served by another user
/// ([`ForeignEndpoint`]) before anything is sent.
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
                check_server(file.as_raw_handle(), path)?;
                return Ok(ClientStream {
                    pipe: Arc::new(Pipe {
                        handle: file.into(),
                        shut: Event::new()?,
                        read_timeout: Mutex::new(None),
                    }),
                });
            }
            Err(e) => return Err(e),
        }
    }
}
