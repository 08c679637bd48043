//! The one test-side terminal: a program in a real PTY on the test's side,
//! the "person's terminal" for `attach`, `watch`, `session run` and
//! `interactive-serve`. Everything it shows is kept as bytes (to wait for
//! text as it arrives) and fed to core's screen model (to read the screen
//! as rendered). Its size, whether it answers terminal queries, and how it
//! ends its program are [`TermOptions`]: what the caller builds is only the
//! command (which environment, which directory).

use std::io::{Read, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use agent_comms_core::screen::ScreenModel;
use portable_pty::{native_pty_system, CommandBuilder, ExitStatus, MasterPty, PtySize};

use super::procs::{signal, wait_gone};
use super::TIMEOUT;

/// How a test-side terminal is set up.
#[derive(Clone, Copy, Debug)]
pub struct TermOptions {
    pub rows: u16,
    pub cols: u16,
    /// Answer terminal queries (cursor position, device attributes,
    /// colours …) the way xterm does, through the screen model. Programs
    /// that ask at start-up wait for the answers (Codex quits without);
    /// tests of what happens when nobody answers leave this off.
    pub answer_queries: bool,
    /// How dropping the terminal (or [`Term::end`]) ends its program:
    /// `None`, SIGKILL at once (a client that vanishes); `Some(grace)`,
    /// SIGTERM first (a supervisor then ends its provider), SIGKILL after
    /// `grace`.
    pub term_grace: Option<Duration>,
}

impl Default for TermOptions {
    /// 24x80, answering nothing, killed when dropped.
    fn default() -> Self {
        Self {
            rows: 24,
            cols: 80,
            answer_queries: false,
            term_grace: None,
        }
    }
}

/// Everything a test-side terminal has shown so far.
#[derive(Default)]
struct Shown {
    bytes: Vec<u8>,
    eof: bool,
}

/// A program in a real PTY on the test's side.
pub struct Term {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    pid: u32,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    master: Box<dyn MasterPty + Send>,
    shown: Arc<(Mutex<Shown>, Condvar)>,
    model: Arc<Mutex<ScreenModel>>,
    options: TermOptions,
    status: Option<ExitStatus>,
}

impl Term {
    /// Starts `cmd` in a new PTY set up as `options` say.
    pub fn start(cmd: CommandBuilder, options: TermOptions) -> Self {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: options.rows,
                cols: options.cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("open a test-side PTY");
        let argv = format!("{:?}", cmd.get_argv());
        let child = pair
            .slave
            .spawn_command(cmd)
            .unwrap_or_else(|e| panic!("cannot start {argv} in a PTY: {e}"));
        drop(pair.slave);
        let pid = child.process_id().expect("the child has a pid");
        let reader = pair.master.try_clone_reader().expect("PTY reader");
        let writer = Arc::new(Mutex::new(pair.master.take_writer().expect("PTY writer")));
        let shown = Arc::new((Mutex::new(Shown::default()), Condvar::new()));
        let model = Arc::new(Mutex::new(ScreenModel::new(options.rows, options.cols)));
        model
            .lock()
            .unwrap()
            .set_answer_queries(options.answer_queries);
        let (to_shown, to_model, answers) = (shown.clone(), model.clone(), writer.clone());
        std::thread::spawn(move || read_screen(reader, &to_shown, &to_model, &answers));
        Self {
            child,
            pid,
            writer,
            master: pair.master,
            shown,
            model,
            options,
            status: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Types `bytes`.
    /// Resizes the terminal, as a person resizing the window does: the
    /// program in front gets SIGWINCH.
    pub fn resize(&self, rows: u16, cols: u16) {
        self.model.lock().unwrap().resize(rows, cols);
        self.master
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("resize the test-side terminal");
    }

    pub fn write(&self, bytes: &[u8]) {
        let mut writer = self.writer.lock().unwrap();
        writer.write_all(bytes).expect("write to the test-side PTY");
        writer.flush().expect("flush the test-side PTY");
    }

    /// Everything shown so far, lossily decoded.
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&self.shown.0.lock().unwrap().bytes).into_owned()
    }

    /// Everything shown so far, as bytes (for a screen model of the
    /// test's own).
    pub fn output_bytes(&self) -> Vec<u8> {
        self.shown.0.lock().unwrap().bytes.clone()
    }

    /// The rendered screen's rows.
    pub fn lines(&self) -> Vec<String> {
        self.model.lock().unwrap().lines()
    }

    /// How many bytes were shown so far (a mark for [`Term::wait_for_after`]).
    pub fn mark(&self) -> usize {
        self.shown.0.lock().unwrap().bytes.len()
    }

    /// Waits until the output contains `needle` (woken by every chunk read);
    /// fails the test after [`TIMEOUT`] or when the terminal closes.
    #[track_caller]
    pub fn wait_for(&self, needle: &str) {
        self.wait_for_after(0, needle);
    }

    /// Waits until the output after byte `mark` contains `needle`.
    #[track_caller]
    pub fn wait_for_after(&self, mark: usize, needle: &str) {
        if let Err(why) = self.wait_shown(mark, needle, TIMEOUT) {
            panic!(
                "{why} waiting for {needle:?} on the test terminal (pid {}); it showed:\n{:?}",
                self.pid,
                self.output()
            );
        }
    }

    /// Waits until the output contains `needle`; false on timeout or when
    /// the terminal closes.
    pub fn wait_output(&self, needle: &str, timeout: Duration) -> bool {
        self.wait_shown(0, needle, timeout).is_ok()
    }

    /// Waits until the output after byte `mark` contains `needle`, at most
    /// `timeout`; the error says why not.
    fn wait_shown(&self, mark: usize, needle: &str, timeout: Duration) -> Result<(), &str> {
        let (lock, cvar) = &*self.shown;
        let deadline = Instant::now() + timeout;
        let mut s = lock.lock().unwrap();
        loop {
            let tail = &s.bytes[mark.min(s.bytes.len())..];
            if tail.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                return Ok(());
            }
            if s.eof {
                return Err("the terminal closed");
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("timed out");
            }
            s = cvar.wait_timeout(s, left).unwrap().0;
        }
    }

    /// Waits until every process holding the terminal has closed it, so
    /// that everything they wrote has been read; false on timeout.
    pub fn wait_closed(&self, timeout: Duration) -> bool {
        let (lock, cvar) = &*self.shown;
        let deadline = Instant::now() + timeout;
        let mut s = lock.lock().unwrap();
        while !s.eof {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            s = cvar.wait_timeout(s, left).unwrap().0;
        }
        true
    }

    /// The screen as this terminal shows it, with row numbers, cursor and
    /// title (for failure messages).
    pub fn screen(&self) -> String {
        let m = self.model.lock().unwrap();
        let mut s = format!("cursor {:?}, title {:?}\n", m.cursor(), m.title());
        for (i, l) in m.lines().iter().enumerate() {
            if !l.trim().is_empty() {
                s.push_str(&format!("{i:2}|{l}\n"));
            }
        }
        s
    }

    /// Whether the screen (rendered) holds `needle`.
    pub fn shows(&self, needle: &str) -> bool {
        self.model
            .lock()
            .unwrap()
            .lines()
            .iter()
            .any(|l| l.contains(needle))
    }

    /// Polls the rendered screen until `cond` holds; false on timeout.
    pub fn wait_screen(&self, timeout: Duration, cond: impl Fn(&[String]) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if cond(&self.model.lock().unwrap().lines()) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the program has exited (reaping it if so).
    pub fn exited(&mut self) -> bool {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status.is_some()
    }

    /// Waits (bounded) for the program to exit and returns its status.
    #[track_caller]
    pub fn wait_exit(&mut self) -> ExitStatus {
        self.wait_exit_within(TIMEOUT)
    }

    /// [`Term::wait_exit`] with another bound (Wine starts slowly).
    #[track_caller]
    pub fn wait_exit_within(&mut self, timeout: Duration) -> ExitStatus {
        if let Some(status) = &self.status {
            return status.clone();
        }
        assert!(
            wait_gone(self.pid, timeout),
            "the program in the test terminal (pid {}) did not exit within {timeout:?}; it showed:\n{:?}",
            self.pid,
            self.output()
        );
        let status = self.child.wait().expect("reap the test terminal's program");
        self.status = Some(status.clone());
        status
    }

    /// SIGKILLs the program (a client that vanishes mid-stream) and reaps it.
    pub fn kill(&mut self) {
        if !self.exited() {
            // Our own unreaped child, so the pid is still its.
            signal(self.pid, libc::SIGKILL);
            self.status = Some(self.child.wait().expect("reap the test terminal's program"));
        }
    }

    /// Ends the program as [`TermOptions::term_grace`] says and reaps it.
    pub fn end(&mut self) {
        let Some(grace) = self.options.term_grace else {
            return self.kill();
        };
        if !self.exited() {
            // Our own unreaped child, so the pid is still its.
            signal(self.pid, libc::SIGTERM);
            if !wait_gone(self.pid, grace) {
                signal(self.pid, libc::SIGKILL);
            }
            self.status = self.child.wait().ok();
        }
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        self.end();
    }
}

/// The terminal's reader thread: keeps every byte, feeds the screen model
/// and writes back what it answers, until the PTY closes.
fn read_screen(
    mut reader: Box<dyn Read + Send>,
    shown: &(Mutex<Shown>, Condvar),
    model: &Mutex<ScreenModel>,
    answers: &Mutex<Box<dyn Write + Send>>,
) {
    let mut buf = [0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) | Err(_) => 0,
            Ok(n) => n,
        };
        let (lock, cvar) = shown;
        if n == 0 {
            lock.lock().unwrap().eof = true;
            cvar.notify_all();
            return;
        }
        let replies = model.lock().unwrap().feed(&buf[..n]);
        if !replies.is_empty() {
            let mut w = answers.lock().unwrap();
            let _ = w.write_all(&replies).and_then(|()| w.flush());
        }
        lock.lock().unwrap().bytes.extend_from_slice(&buf[..n]);
        cvar.notify_all();
    }
}
