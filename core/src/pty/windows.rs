//! Windows: a ConPTY pseudo console (Windows 10 1809, build 17763, or
//! later), driven here with windows-sys instead of portable-pty's Windows
//! backend; it still hands out portable-pty's `MasterPty`, `SlavePty` and
//! `Child`, so the rest of the PTY layer does not know the difference.
//!
//! Why not portable-pty's own:
//! - The program's standard handles. portable-pty starts it with
//!   STARTF_USESTDHANDLES and INVALID_HANDLE_VALUE, which Windows replaces
//!   with the pseudo console's handles; Wine 8 passes them on as null
//!   handles, and cmd.exe reads nothing and exits at once. Under Wine the
//!   program gets handles opened on `\Device\ConDrv\Input` and `Output`
//!   instead, which Wine resolves against the console the program is
//!   attached to: the pseudo console. Wine is told apart by the
//!   `wine_get_version` export of its ntdll (its documented marker); Windows
//!   keeps portable-pty's proven way. Both run detached, with no console of
//!   the supervisor's own for the program to mix into.
//! - A job object. The program starts suspended, joins a job that ends
//!   with the supervisor (KILL_ON_JOB_CLOSE), and only then runs: a kill
//!   ends it and every process it started, as a signal to a Unix process
//!   group does, and nothing outlives a supervisor that dies.
//! - A polite end before the kill: closing the pseudo console sends its
//!   programs CTRL_CLOSE_EVENT, the counterpart of SIGHUP; the supervisor's
//!   grace period follows, then the job is terminated.
//! - CreatePseudoConsole is looked up at run time, so that an older Windows
//!   gets an error naming the version it needs instead of a program that
//!   does not load (`AGENT_COMMS_NO_CONPTY` makes it look missing, for the
//!   tests of that error).

use std::ffi::{c_void, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle, RawHandle};
use std::sync::{Arc, Mutex, OnceLock};

use portable_pty::{
    Child, ChildKiller, CommandBuilder, ExitStatus, MasterPty, PtyPair, PtySize, SlavePty,
};
use windows_sys::core::HRESULT;
use windows_sys::Win32::Foundation::{
    GENERIC_READ, GENERIC_WRITE, HANDLE, INVALID_HANDLE_VALUE, WAIT_OBJECT_0,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, FILE_SHARE_READ, FILE_SHARE_WRITE, OPEN_EXISTING,
};
use windows_sys::Win32::System::Console::{COORD, HPCON};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectExtendedLimitInformation,
    SetInformationJobObject, TerminateJobObject, JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
use windows_sys::Win32::System::Pipes::CreatePipe;
use windows_sys::Win32::System::Threading::TerminateProcess;
use windows_sys::Win32::System::Threading::{
    CreateProcessW, GetExitCodeProcess, InitializeProcThreadAttributeList, ResumeThread,
    UpdateProcThreadAttribute, WaitForSingleObject, CREATE_SUSPENDED, CREATE_UNICODE_ENVIRONMENT,
    EXTENDED_STARTUPINFO_PRESENT, INFINITE, PROCESS_INFORMATION,
    PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE, STARTF_USESTDHANDLES, STARTUPINFOEXW,
};

use super::PtyError;

/// The three ConPTY functions, found in kernel32.dll at run time.
struct ConPtyApi {
    create: unsafe extern "system" fn(COORD, HANDLE, HANDLE, u32, *mut HPCON) -> HRESULT,
    resize: unsafe extern "system" fn(HPCON, COORD) -> HRESULT,
    close: unsafe extern "system" fn(HPCON),
}

fn wide(s: impl AsRef<OsStr>) -> Vec<u16> {
    s.as_ref().encode_wide().chain(Some(0)).collect()
}

/// An export of a module this process has loaded.
fn export(module: &str, name: &std::ffi::CStr) -> Option<unsafe extern "system" fn() -> isize> {
    // SAFETY: NUL-terminated names; kernel32 and ntdll are loaded in every
    // process and their module handles are never released.
    unsafe {
        let m = GetModuleHandleW(wide(module).as_ptr());
        if m.is_null() {
            return None;
        }
        GetProcAddress(m, name.as_ptr().cast())
    }
}

fn conpty() -> Option<&'static ConPtyApi> {
    static API: OnceLock<Option<ConPtyApi>> = OnceLock::new();
    API.get_or_init(|| {
        if std::env::var_os("AGENT_COMMS_NO_CONPTY").is_some() {
            return None;
        }
        let create = export("kernel32.dll", c"CreatePseudoConsole")?;
        let resize = export("kernel32.dll", c"ResizePseudoConsole")?;
        let close = export("kernel32.dll", c"ClosePseudoConsole")?;
        // SAFETY: the documented signatures of these three exports.
        unsafe {
            Some(ConPtyApi {
                create: std::mem::transmute::<
                    unsafe extern "system" fn() -> isize,
                    unsafe extern "system" fn(COORD, HANDLE, HANDLE, u32, *mut HPCON) -> HRESULT,
                >(create),
                resize: std::mem::transmute::<
                    unsafe extern "system" fn() -> isize,
                    unsafe extern "system" fn(HPCON, COORD) -> HRESULT,
                >(resize),
                close: std::mem::transmute::<
                    unsafe extern "system" fn() -> isize,
                    unsafe extern "system" fn(HPCON),
                >(close),
            })
        }
    })
    .as_ref()
}

/// Whether this process runs under Wine (see the module docs).
fn under_wine() -> bool {
    static WINE: OnceLock<bool> = OnceLock::new();
    *WINE.get_or_init(|| export("ntdll.dll", c"wine_get_version").is_some())
}

fn coord(size: PtySize) -> COORD {
    let clamp = |n: u16| i16::try_from(n).unwrap_or(i16::MAX);
    COORD {
        X: clamp(size.cols),
        Y: clamp(size.rows),
    }
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// A pipe's two ends.
fn pipe() -> io::Result<(OwnedHandle, OwnedHandle)> {
    let (mut read, mut write) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: out-pointers of ours; default security, default size.
    if unsafe { CreatePipe(&mut read, &mut write, std::ptr::null(), 0) } == 0 {
        return Err(last_error());
    }
    // SAFETY: two fresh handles that we own.
    Ok(unsafe {
        (
            OwnedHandle::from_raw_handle(read),
            OwnedHandle::from_raw_handle(write),
        )
    })
}

/// The pseudo console, closed once: by [`Control::ask_to_exit`] or on drop.
struct PseudoConsole {
    api: &'static ConPtyApi,
    handle: Mutex<Option<HPCON>>,
}

impl PseudoConsole {
    fn resize(&self, size: PtySize) -> io::Result<()> {
        let Some(h) = *self.handle.lock().unwrap_or_else(|p| p.into_inner()) else {
            return Err(io::ErrorKind::BrokenPipe.into());
        };
        // SAFETY: a live pseudo console handle.
        let hr = unsafe { (self.api.resize)(h, coord(size)) };
        if hr < 0 {
            return Err(io::Error::other(format!(
                "ResizePseudoConsole failed: HRESULT {hr:#x}"
            )));
        }
        Ok(())
    }

    /// Closes the console on a thread of its own: on some Windows versions
    /// the call waits until its output has been read, which is the reader
    /// thread's work, and the caller may hold what that thread waits for.
    fn close(self: &Arc<Self>) {
        let Some(h) = self.handle.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        let api = self.api;
        // The handle is a plain value; it moves as an integer.
        let _ = std::thread::Builder::new()
            .name("pty-close".into())
            // SAFETY: the handle was live and is closed exactly once.
            .spawn(move || unsafe { (api.close)(h) });
    }
}

impl Drop for PseudoConsole {
    fn drop(&mut self) {
        if let Some(h) = self
            .handle
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            // SAFETY: the handle is live and closed exactly once.
            unsafe { (self.api.close)(h) };
        }
    }
}

pub(super) fn open(size: PtySize) -> Result<PtyPair, PtyError> {
    let Some(api) = conpty() else {
        return Err(PtyError::NoConsole(
            "this system's kernel32.dll has no CreatePseudoConsole".into(),
        ));
    };
    let (input_read, input_write) = pipe()?;
    let (output_read, output_write) = pipe()?;
    let mut handle: HPCON = 0;
    // SAFETY: valid pipe ends; the console duplicates what it keeps, so
    // ours close when they drop below.
    let hr = unsafe {
        (api.create)(
            coord(size),
            input_read.as_raw_handle(),
            output_write.as_raw_handle(),
            0,
            &mut handle,
        )
    };
    if hr < 0 {
        return Err(PtyError::NoConsole(format!(
            "CreatePseudoConsole failed: HRESULT {hr:#x}"
        )));
    }
    drop((input_read, output_write));
    let console = Arc::new(PseudoConsole {
        api,
        handle: Mutex::new(Some(handle)),
    });
    Ok(PtyPair {
        slave: Box::new(Slave {
            console: console.clone(),
        }),
        master: Box::new(Master {
            console,
            size: Mutex::new(size),
            output: File::from(output_read),
            input: Mutex::new(Some(File::from(input_write))),
        }),
    })
}

struct Master {
    console: Arc<PseudoConsole>,
    size: Mutex<PtySize>,
    output: File,
    input: Mutex<Option<File>>,
}

impl MasterPty for Master {
    fn resize(&self, size: PtySize) -> anyhow::Result<()> {
        self.console.resize(size)?;
        *self.size.lock().unwrap_or_else(|p| p.into_inner()) = size;
        Ok(())
    }

    fn get_size(&self) -> anyhow::Result<PtySize> {
        Ok(*self.size.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn try_clone_reader(&self) -> anyhow::Result<Box<dyn io::Read + Send>> {
        Ok(Box::new(self.output.try_clone()?))
    }

    fn take_writer(&self) -> anyhow::Result<Box<dyn io::Write + Send>> {
        let writer = self.input.lock().unwrap_or_else(|p| p.into_inner()).take();
        Ok(Box::new(writer.ok_or_else(|| {
            anyhow::anyhow!("the pseudo console's writer was already taken")
        })?))
    }
}

struct Slave {
    console: Arc<PseudoConsole>,
}

impl SlavePty for Slave {
    fn spawn_command(&self, cmd: CommandBuilder) -> anyhow::Result<Box<dyn Child + Send + Sync>> {
        let console = (*self
            .console
            .handle
            .lock()
            .unwrap_or_else(|p| p.into_inner()))
        .ok_or_else(|| anyhow::anyhow!("the pseudo console is closed"))?;
        Ok(Box::new(spawn(&cmd, console)?))
    }
}

/// The handles a program under Wine gets as its standard ones (see the
/// module docs); closed once it has started.
fn wine_console_handles() -> io::Result<(OwnedHandle, OwnedHandle)> {
    let open = |name: &str| {
        let path = wide(format!(r"\\?\GLOBALROOT\Device\ConDrv\{name}"));
        // SAFETY: a NUL-terminated path; no template.
        let h = unsafe {
            CreateFileW(
                path.as_ptr(),
                GENERIC_READ | GENERIC_WRITE,
                FILE_SHARE_READ | FILE_SHARE_WRITE,
                std::ptr::null(),
                OPEN_EXISTING,
                0,
                std::ptr::null_mut(),
            )
        };
        if h == INVALID_HANDLE_VALUE {
            return Err(last_error());
        }
        // SAFETY: a fresh handle that we own.
        Ok(unsafe { OwnedHandle::from_raw_handle(h) })
    };
    Ok((open("Input")?, open("Output")?))
}

/// A job that ends every process in it when its last handle closes.
fn kill_on_close_job() -> io::Result<OwnedHandle> {
    // SAFETY: no attributes, no name; null means failure.
    let job = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
    if job.is_null() {
        return Err(last_error());
    }
    // SAFETY: a fresh handle that we own.
    let job = unsafe { OwnedHandle::from_raw_handle(job) };
    // SAFETY: plain data; zero is "no limits".
    let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
    limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    // SAFETY: the structure and its size match the information class.
    let set = unsafe {
        SetInformationJobObject(
            job.as_raw_handle(),
            JobObjectExtendedLimitInformation,
            std::ptr::from_ref(&limits).cast(),
            std::mem::size_of_val(&limits) as u32,
        )
    };
    if set == 0 {
        return Err(last_error());
    }
    Ok(job)
}

/// `argv` as one command line, quoted the way the C runtime (and Rust's
/// std) split it again.
fn command_line(argv: &[OsString]) -> Vec<u16> {
    let mut line: Vec<u16> = Vec::new();
    for (i, arg) in argv.iter().enumerate() {
        if i > 0 {
            line.push(u16::from(b' '));
        }
        let arg: Vec<u16> = arg.encode_wide().collect();
        let quote = arg.is_empty()
            || arg
                .iter()
                .any(|&c| c == u16::from(b' ') || c == u16::from(b'\t') || c == u16::from(b'"'));
        if !quote {
            line.extend_from_slice(&arg);
            continue;
        }
        line.push(u16::from(b'"'));
        let mut backslashes = 0;
        for &c in &arg {
            if c == u16::from(b'\\') {
                backslashes += 1;
                continue;
            }
            // Backslashes before a quote are doubled, and the quote escaped.
            let n = if c == u16::from(b'"') {
                backslashes * 2 + 1
            } else {
                backslashes
            };
            line.extend(std::iter::repeat_n(u16::from(b'\\'), n));
            line.push(c);
            backslashes = 0;
        }
        line.extend(std::iter::repeat_n(u16::from(b'\\'), backslashes * 2));
        line.push(u16::from(b'"'));
    }
    line.push(0);
    line
}

/// `NAME=value\0…\0\0`, what CreateProcessW takes with
/// CREATE_UNICODE_ENVIRONMENT.
fn environment_block(cmd: &CommandBuilder) -> Vec<u16> {
    let mut block: Vec<u16> = Vec::new();
    for (k, v) in cmd.iter_full_env_as_str() {
        block.extend(OsStr::new(&format!("{k}={v}")).encode_wide());
        block.push(0);
    }
    block.push(0);
    block
}

/// A process-thread attribute list that names the pseudo console; the
/// buffer must outlive the CreateProcessW call that reads it.
fn console_attribute(console: HPCON) -> io::Result<Vec<u8>> {
    let mut size = 0;
    // SAFETY: asks for the size of a one-attribute list (fails by design).
    unsafe { InitializeProcThreadAttributeList(std::ptr::null_mut(), 1, 0, &mut size) };
    let mut attrs = vec![0u8; size];
    let list = attrs.as_mut_ptr().cast::<c_void>();
    // SAFETY: `attrs` has the size asked for above; the console handle
    // outlives the process creation that reads the list.
    unsafe {
        if InitializeProcThreadAttributeList(list, 1, 0, &mut size) == 0 {
            return Err(last_error());
        }
        if UpdateProcThreadAttribute(
            list,
            0,
            PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE as usize,
            console as *const c_void,
            std::mem::size_of::<HPCON>(),
            std::ptr::null_mut(),
            std::ptr::null(),
        ) == 0
        {
            return Err(last_error());
        }
    }
    Ok(attrs)
}

/// Starts `cmd` in the pseudo console, inside a job of its own.
fn spawn(cmd: &CommandBuilder, console: HPCON) -> io::Result<Program> {
    let job = kill_on_close_job()?;
    let mut attrs = console_attribute(console)?;
    let list = attrs.as_mut_ptr().cast::<c_void>();
    // SAFETY: plain data; zero is the documented initial state.
    let mut si: STARTUPINFOEXW = unsafe { std::mem::zeroed() };
    si.StartupInfo.cb = std::mem::size_of::<STARTUPINFOEXW>() as u32;
    si.lpAttributeList = list;
    si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    let wine_handles = if under_wine() {
        Some(wine_console_handles()?)
    } else {
        None
    };
    let (stdin, stdout) = match &wine_handles {
        Some((i, o)) => (i.as_raw_handle(), o.as_raw_handle()),
        None => (INVALID_HANDLE_VALUE, INVALID_HANDLE_VALUE),
    };
    si.StartupInfo.hStdInput = stdin;
    si.StartupInfo.hStdOutput = stdout;
    si.StartupInfo.hStdError = stdout;
    let mut line = command_line(cmd.get_argv());
    let mut env = environment_block(cmd);
    let cwd = cmd.get_cwd().map(wide);
    // SAFETY: plain data the call fills in.
    let mut pi: PROCESS_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: every pointer is to a live, NUL-terminated buffer of ours;
    // the attribute list and the handles outlive the call.
    let started = unsafe {
        CreateProcessW(
            std::ptr::null(),
            line.as_mut_ptr(),
            std::ptr::null(),
            std::ptr::null(),
            0,
            EXTENDED_STARTUPINFO_PRESENT | CREATE_UNICODE_ENVIRONMENT | CREATE_SUSPENDED,
            env.as_mut_ptr().cast(),
            cwd.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            &si.StartupInfo,
            &mut pi,
        )
    };
    if started == 0 {
        return Err(last_error());
    }
    // SAFETY: fresh handles that we own.
    let (process, thread) = unsafe {
        (
            OwnedHandle::from_raw_handle(pi.hProcess),
            OwnedHandle::from_raw_handle(pi.hThread),
        )
    };
    // SAFETY: valid job and process handles; the thread is suspended until
    // the process is in the job, so nothing it starts escapes.
    unsafe {
        if AssignProcessToJobObject(job.as_raw_handle(), process.as_raw_handle()) == 0 {
            let e = last_error();
            TerminateJobObject(job.as_raw_handle(), 1);
            TerminateProcess(process.as_raw_handle(), 1);
            return Err(e);
        }
        ResumeThread(thread.as_raw_handle());
    }
    Ok(Program {
        pid: pi.dwProcessId,
        process: Arc::new(process),
        job: Arc::new(job),
    })
}

/// The program: its process handle and its job.
#[derive(Debug, Clone)]
struct Program {
    pid: u32,
    process: Arc<OwnedHandle>,
    job: Arc<OwnedHandle>,
}

impl Program {
    fn status(&self) -> io::Result<ExitStatus> {
        let mut code = 0;
        // SAFETY: a valid process handle.
        if unsafe { GetExitCodeProcess(self.process.as_raw_handle(), &mut code) } == 0 {
            return Err(last_error());
        }
        Ok(ExitStatus::with_exit_code(code))
    }
}

impl ChildKiller for Program {
    /// Ends the program and everything it started (the whole job).
    fn kill(&mut self) -> io::Result<()> {
        // SAFETY: a valid job handle.
        if unsafe { TerminateJobObject(self.job.as_raw_handle(), 1) } == 0 {
            return Err(last_error());
        }
        Ok(())
    }

    fn clone_killer(&self) -> Box<dyn ChildKiller + Send + Sync> {
        Box::new(self.clone())
    }
}

impl Child for Program {
    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        // SAFETY: a valid process handle; zero timeout.
        match unsafe { WaitForSingleObject(self.process.as_raw_handle(), 0) } {
            WAIT_OBJECT_0 => self.status().map(Some),
            _ => Ok(None),
        }
    }

    fn wait(&mut self) -> io::Result<ExitStatus> {
        // SAFETY: a valid process handle.
        if unsafe { WaitForSingleObject(self.process.as_raw_handle(), INFINITE) } != WAIT_OBJECT_0 {
            return Err(last_error());
        }
        self.status()
    }

    fn process_id(&self) -> Option<u32> {
        Some(self.pid)
    }

    fn as_raw_handle(&self) -> Option<RawHandle> {
        Some(self.process.as_raw_handle())
    }
}

/// Ends the program: politely by closing its console, then its whole job.
pub(super) struct Control {
    killer: Mutex<Box<dyn ChildKiller + Send + Sync>>,
}

impl Control {
    pub fn new(_pid: u32, child: &dyn Child) -> Self {
        Self {
            killer: Mutex::new(child.clone_killer()),
        }
    }

    /// A console has no foreground process group to ask about.
    pub fn foreground_group(&self, _master: &dyn MasterPty) -> Option<i32> {
        None
    }

    /// Closes the pseudo console: its programs get CTRL_CLOSE_EVENT (the
    /// counterpart of SIGHUP) and may end on their own within the grace
    /// period; [`Control::kill`] follows if they do not.
    pub fn ask_to_exit(&self, master: &dyn MasterPty) {
        if let Some(m) = master.downcast_ref::<Master>() {
            m.console.close();
        }
    }

    /// Terminates the program's job: the program and everything it
    /// started.
    pub fn kill(&self, _master: &dyn MasterPty) {
        let _ = self.killer.lock().unwrap_or_else(|p| p.into_inner()).kill();
    }
}

/// Missing on Windows: asking whether output waits without reading it
/// (PeekNamedPipe works on anonymous pipes, but the reader is a clone the
/// reader thread owns). The reader hands over chunk by chunk instead of
/// merging a flood.
pub(super) struct Waiting;

impl Waiting {
    pub fn new(_master: &dyn MasterPty) -> Self {
        Self
    }

    pub fn now(&self) -> bool {
        false
    }
}
