//! Persistent REPL cells (`k`/`km`) on top of the supervisor.
//!
//! The engine lives inside a `k` session's supervisor and holds all cell
//! state: the active cell and its lock, results not yet polled, the event
//! stream and the filtered view. `k poll` is therefore one request answered
//! from memory, and `km` gets events pushed over the socket — no log files to
//! tail and no polling loops (agent-tty did both on top of tmux).

pub mod frame;
pub mod output;
pub mod view;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc, oneshot};

use self::frame::{
    FrameDetector, HookDetector, IntegrationDetector, PromptDetector, RepeatDetector,
};
use self::output::OutputBuffer;
use self::view::{FilteredView, FRAME_ENTERS};
use crate::adapter::profile::{Profile, Repl};
use crate::ids::random_hex;
use crate::pty::PtyWriter;
use crate::screen::strip::{AnsiStripper, Piece};
use crate::session::SessionName;
use crate::socket::protocol::{CellEvent, CellReply, CellState, CellStatusReply, ExitInfo};
use crate::time::now_iso;

/// Output quiet time after which a hook is shown the line in progress.
const HOOK_PROBE_QUIET: Duration = Duration::from_millis(50);
/// How long set-up waits for its cue before it is typed anyway.
const SETUP_CUE_WAIT: Duration = Duration::from_secs(2);
/// After a Ctrl-C, the REPL counts as back at its prompt once its output
/// has been quiet this long (agent-tty slept as long after each Ctrl-C).
/// Code typed while the REPL still handles a Ctrl-C is thrown away with the
/// line, and the number of prompts a Ctrl-C draws varies (none to two), so
/// they are not counted.
const INTERRUPT_SETTLE: Duration = Duration::from_millis(300);
/// A Ctrl-C sent while a command ran that brought no prompt back within
/// this time was lost (bash, between forking a command and handing it the
/// terminal, takes it itself and lets the command run on): it is sent
/// again, at most [`INTERRUPT_RETRIES`] times.
const INTERRUPT_RETRY: Duration = Duration::from_secs(1);
const INTERRUPT_RETRIES: u8 = 2;
/// How long a barrier may take to come back before another is typed, and
/// how many are typed at most.
const BARRIER_RETRY: Duration = Duration::from_secs(1);
const BARRIER_TRIES: u32 = 5;
/// Line modes: start-up output must have been quiet this long before the
/// REPL counts as started (repeat and hook modes).
const STARTUP_QUIET: Duration = Duration::from_millis(150);
/// Line modes: the longest the REPL is given to start before cells are
/// typed anyway (agent-tty waited one second after every `k new`).
const STARTUP_WAIT: Duration = Duration::from_secs(2);
/// Events kept for `km -1` to find completions that already happened.
const EVENT_HISTORY: usize = 256;
/// Finished results kept for polling.
const RESULTS_KEPT: usize = 64;

/// How a session's cells are framed, chosen at `k new`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum FrameMode {
    /// 5 Enters after the code; 5 identical lines end the frame.
    Repeat,
    /// A line equal to this prompt ends the frame.
    Prompt(String),
    /// This executable reads output lines; its exit ends the frame.
    Hook(PathBuf),
    /// The REPL's profile marks prompts with OSC 133 (see adapters).
    Integration(Integration),
}

/// A REPL profile's integration, rendered for one session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Integration {
    pub profile: String,
    /// Typed once at start; `{setup_file}` stands for a private file that
    /// holds `setup_script`.
    pub setup: String,
    pub setup_script: String,
    pub run_file: String,
    pub file_suffix: String,
    pub file_prologue: String,
    pub type_simple_lines: bool,
    pub exit_status: bool,
    pub newline_after_start: bool,
    pub setup_after: Option<String>,
    pub interrupt_barrier: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellsConfig {
    pub frame: FrameMode,
    /// Per-session secret carried by integration marks.
    pub token: String,
    /// Private (0700) directory for cell files.
    pub files_dir: PathBuf,
    /// Line modes: how the REPL runs multi-line code from a file, when its
    /// profile says (bash sources it); otherwise code is typed line by line.
    pub line_mode_file: Option<LineModeFile>,
}

/// A profile's `line_mode_run_file` with the suffix its files take.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LineModeFile {
    pub run_file: String,
    pub file_suffix: String,
}

impl CellsConfig {
    /// The configuration for a command that `profile` claims (if any
    /// does): integration when the profile sets a REPL up and no
    /// `--prompt` was given.
    pub fn for_command(
        profile: Option<&Profile>,
        prompt: Option<FrameMode>,
        files_dir: PathBuf,
    ) -> Self {
        // Eight hex digits: enough to tell our marks from any other program's
        // OSC 133, and short enough for sqlite3, which cuts prompts at 19
        // bytes (`ESC ]133;D;0;` + token + BEL is exactly that).
        let token = random_hex(4);
        let frame = prompt.unwrap_or_else(|| {
            match profile.and_then(|p| Some((p.name.as_str(), p.repl.as_ref()?))) {
                Some((name, repl)) => FrameMode::Integration(render(name, repl, &token)),
                None => FrameMode::Repeat,
            }
        });
        Self {
            frame,
            token,
            files_dir,
            line_mode_file: line_mode_file(profile),
        }
    }

    pub fn mode_name(&self) -> String {
        match &self.frame {
            FrameMode::Repeat => "repeat".into(),
            FrameMode::Prompt(p) => format!("prompt {p:?}"),
            FrameMode::Hook(h) => format!("hook {}", h.display()),
            FrameMode::Integration(i) => format!("integration ({})", i.profile),
        }
    }
}

fn line_mode_file(profile: Option<&Profile>) -> Option<LineModeFile> {
    let repl = profile?.repl.as_ref()?;
    Some(LineModeFile {
        run_file: repl.line_mode_run_file.clone()?,
        file_suffix: repl.file_suffix.clone(),
    })
}

fn render(name: &str, r: &Repl, token: &str) -> Integration {
    let script = r
        .setup_script
        .as_deref()
        .unwrap_or("")
        .replace("{token}", token);
    let setup = r
        .setup
        .replace("{token}", token)
        .replace("{script_b64}", &base64(script.as_bytes()));
    Integration {
        profile: name.to_owned(),
        setup,
        setup_script: script,
        run_file: r.run_file.clone(),
        file_suffix: r.file_suffix.clone(),
        file_prologue: r.file_prologue.replace("{token}", token),
        type_simple_lines: r.type_simple_lines,
        exit_status: r.exit_status,
        newline_after_start: r.newline_after_start,
        setup_after: r.setup_after.clone(),
        interrupt_barrier: r.interrupt_barrier.clone(),
    }
}

/// Messages from helper threads back into the event loop.
#[derive(Debug)]
pub enum EngineNote {
    HookExited {
        cell_id: String,
        written: frame::HookWritten,
    },
}

struct ActiveCell {
    id: String,
    deadline: Instant,
    detector: Box<dyn FrameDetector>,
    output: OutputBuffer,
    waiter: Option<oneshot::Sender<CellReply>>,
    /// Bytes not yet typed because the REPL is not at its prompt yet.
    pending_input: Option<Vec<u8>>,
    timed_out: bool,
    timeout_polled: bool,
    file: Option<PathBuf>,
    hook_pid: Option<u32>,
    last_output: Instant,
}

/// Line modes (repeat, exact prompt, hook) have no set-up to wait for, but
/// code typed before the REPL has started is echoed twice (by the terminal,
/// then by the REPL's line editor) or lost, and the REPL's first prompt
/// would end the frame at once. So cells wait until the REPL has started:
/// it showed the prompt (exact-prompt mode), or its start-up output has been
/// quiet for [`STARTUP_QUIET`] (repeat and hook modes); at most
/// [`STARTUP_WAIT`].
/// A Ctrl-C being handled (integration mode).
struct Settling {
    /// When the (last) Ctrl-C was sent.
    sent: Instant,
    /// It was sent while a command ran: the REPL shows a prompt when the
    /// command has stopped.
    awaiting_prompt: bool,
    retries: u8,
    /// The last barrier typed (its number) and when.
    barrier: Option<(u32, Instant)>,
}

#[derive(Default)]
struct LineStartup {
    last_output: Option<Instant>,
    /// The line in progress (exact-prompt mode), bounded.
    line: Vec<u8>,
}

impl LineStartup {
    /// Start-up output; true once it shows `prompt`.
    fn output(&mut self, text: &[u8], prompt: Option<&str>) -> bool {
        self.last_output = Some(Instant::now());
        let Some(prompt) = prompt else {
            return false;
        };
        let is_prompt = |line: &[u8]| String::from_utf8_lossy(line).trim() == prompt;
        for &b in text {
            if b == b'\n' {
                if is_prompt(&self.line) {
                    return true;
                }
                self.line.clear();
            } else if self.line.len() < 4096 {
                self.line.push(b);
            }
        }
        is_prompt(&self.line)
    }
}

pub struct CellEngine {
    session: SessionName,
    config: CellsConfig,
    writer: PtyWriter,
    notes: mpsc::UnboundedSender<EngineNote>,
    stripper: AnsiStripper,
    /// Integration: set-up done and the REPL is at a marked prompt. Line
    /// modes: the REPL has started (see [`LineStartup`]).
    at_prompt: bool,
    /// Line modes, until the REPL has started.
    line_startup: Option<LineStartup>,
    seen_setup_mark: bool,
    /// Integration: a Ctrl-C was sent and the REPL may still be handling
    /// it; cells wait (see [`INTERRUPT_SETTLE`]). The prompts it draws are
    /// not counted: a cell's frame starts only at its own start mark.
    settling: Option<Settling>,
    /// Integration: a command runs (a start mark came after the last end
    /// mark).
    repl_busy: bool,
    /// When the REPL last printed anything.
    last_output: Instant,
    created: Instant,
    /// Lines naming the cells directory are our own invocations (`. file`,
    /// `__k('file')`), and lines carrying the token our set-up: machinery
    /// the filtered view hides.
    files_marker: String,
    setup_typed: bool,
    setup_cue_seen: bool,
    cue_window: Vec<u8>,
    active: Option<ActiveCell>,
    results: VecDeque<CellReply>,
    latest: Option<String>,
    events: broadcast::Sender<CellEvent>,
    past: VecDeque<CellEvent>,
    view: FilteredView,
}

impl CellEngine {
    pub fn new(
        session: SessionName,
        config: CellsConfig,
        writer: PtyWriter,
        notes: mpsc::UnboundedSender<EngineNote>,
    ) -> Self {
        let _ = crate::os::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(&config.files_dir);
        Self {
            files_marker: config.files_dir.display().to_string(),
            session,
            at_prompt: false,
            line_startup: (!matches!(config.frame, FrameMode::Integration(_)))
                .then(LineStartup::default),
            config,
            writer,
            notes,
            stripper: AnsiStripper::default(),
            seen_setup_mark: false,
            settling: None,
            repl_busy: false,
            last_output: Instant::now(),
            created: Instant::now(),
            setup_typed: false,
            setup_cue_seen: false,
            cue_window: Vec::new(),
            active: None,
            results: VecDeque::new(),
            latest: None,
            events: broadcast::channel(EVENT_HISTORY).0,
            past: VecDeque::new(),
            view: FilteredView::default(),
        }
    }

    /// Types the integration set-up once it is due: at once, or — for
    /// REPLs that discard what was typed before their line editor started —
    /// once the REPL has printed something and gone quiet.
    fn type_setup_if_due(&mut self, now: Instant) {
        let Some(due) = self.setup_due() else { return };
        if now < due {
            return;
        }
        let FrameMode::Integration(i) = &self.config.frame else {
            return;
        };
        let mut setup = i.setup.clone();
        if setup.contains("{setup_file}") {
            let path = self
                .config
                .files_dir
                .join(format!("setup{}", i.file_suffix));
            if let Err(e) = write_private(&path, &i.setup_script) {
                tracing::error!("cannot write the set-up file {}: {e}", path.display());
            }
            setup = setup.replace("{setup_file}", &path.display().to_string());
        }
        let mut out = Vec::new();
        for line in setup.lines() {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\r');
        }
        self.writer.write(out);
        self.setup_typed = true;
    }

    fn setup_due(&self) -> Option<Instant> {
        let FrameMode::Integration(i) = &self.config.frame else {
            return None;
        };
        if self.setup_typed {
            return None;
        }
        match &i.setup_after {
            None => Some(self.created),
            Some(_) if self.setup_cue_seen => Some(self.created),
            // Never wait forever for a cue a REPL version may not print.
            Some(_) => Some(self.created + SETUP_CUE_WAIT),
        }
    }

    /// Looks for the text after which the set-up may be typed, across chunk
    /// boundaries.
    fn watch_setup_cue(&mut self, bytes: &[u8]) {
        let FrameMode::Integration(i) = &self.config.frame else {
            return;
        };
        let Some(cue) = i
            .setup_after
            .as_deref()
            .filter(|_| !self.setup_typed && !self.setup_cue_seen)
        else {
            return;
        };
        self.cue_window.extend_from_slice(bytes);
        if self
            .cue_window
            .windows(cue.len())
            .any(|w| w == cue.as_bytes())
        {
            self.setup_cue_seen = true;
            self.cue_window = Vec::new();
            self.type_setup_if_due(Instant::now());
        } else {
            let keep = self.cue_window.len().saturating_sub(cue.len());
            self.cue_window.drain(..keep);
        }
    }

    /// Called once the supervisor runs: types an immediate set-up.
    pub fn start(&mut self) {
        self.type_setup_if_due(Instant::now());
    }

    /// Ready for cells: set-up complete, or (line modes) the REPL started.
    pub fn is_ready(&self) -> bool {
        self.at_prompt
    }

    pub fn on_output(&mut self, bytes: &[u8]) {
        self.last_output = Instant::now();
        self.watch_setup_cue(bytes);
        // The stripper is taken out for the call so that its pieces go
        // straight to the handlers: a flood arrives in chunks of megabytes,
        // and copying each piece first would double what the engine holds.
        let mut stripper = std::mem::take(&mut self.stripper);
        stripper.feed(bytes, &mut |p| match p {
            Piece::Text(t) => self.on_text(t),
            Piece::Osc(o) => self.on_osc(o),
        });
        self.stripper = stripper;
    }

    fn on_text(&mut self, text: &[u8]) {
        let shown = self
            .view
            .text(text, &[&self.files_marker, &self.config.token]);
        self.broadcast_lines(shown);
        if let Some(startup) = self.line_startup.as_mut() {
            let prompt = match &self.config.frame {
                FrameMode::Prompt(p) => Some(p.as_str()),
                _ => None,
            };
            if startup.output(text, prompt) {
                self.line_started();
            }
        }
        let Some(cell) = self.active.as_mut() else {
            return;
        };
        cell.last_output = Instant::now();
        if cell.timed_out || cell.pending_input.is_some() {
            return;
        }
        if let Some(end) = cell.detector.text(text, &mut cell.output) {
            self.finish_frame(end.exit_code);
        }
    }

    fn on_osc(&mut self, payload: &[u8]) {
        if let FrameMode::Integration(_) = self.config.frame {
            if payload == format!("133;A;{}", self.config.token).as_bytes() {
                self.seen_setup_mark = true;
                return;
            }
            if payload == format!("133;C;{}", self.config.token).as_bytes() {
                self.repl_busy = true;
            }
            if self.barrier_mark(payload) {
                return;
            }
            if IntegrationDetector::end_mark(payload, &self.config.token).is_some() {
                self.repl_busy = false;
                if let Some(s) = self.settling.as_mut() {
                    s.awaiting_prompt = false;
                }
                if !self.at_prompt {
                    // The first marked prompt after set-up, or the prompt an
                    // interrupt produced: the REPL is ready for code now.
                    if self.seen_setup_mark {
                        self.at_prompt = true;
                        self.send_pending();
                    }
                    return;
                }
            }
        }
        let Some(cell) = self.active.as_mut() else {
            return;
        };
        if cell.timed_out || cell.pending_input.is_some() {
            return;
        }
        if let Some(end) = cell.detector.osc(payload, &mut cell.output) {
            self.finish_frame(end.exit_code);
        }
    }

    /// After a Ctrl-C: a lost one is sent again; once the REPL is back at
    /// its prompt and quiet, a cell that was waiting is typed.
    fn settle_interrupt(&mut self, now: Instant) {
        let Some(s) = self.settling.as_mut() else {
            return;
        };
        if s.awaiting_prompt {
            if now < s.sent + INTERRUPT_RETRY {
                return;
            }
            if s.retries < INTERRUPT_RETRIES {
                s.retries += 1;
                s.sent = now;
                self.last_output = now;
                self.writer.write(vec![0x03]);
                return;
            }
            // Still busy: the REPL ignores Ctrl-C. The cell is typed ahead
            // and runs when the REPL gets to it (or times out).
        } else if now < self.last_output + INTERRUPT_SETTLE {
            return;
        }
        if let Some(template) = self.interrupt_barrier() {
            // A barrier typed while the Ctrl-C is still being handled can
            // be discarded with the line it was read into: type another.
            let s = self.settling.as_mut().expect("checked above");
            match s.barrier {
                Some((_, typed)) if now < typed + BARRIER_RETRY => return,
                Some((n, _)) if n >= BARRIER_TRIES => {}
                previous => {
                    let n = previous.map_or(1, |(n, _)| n + 1);
                    s.barrier = Some((n, now));
                    let mark = format!("{};{n}", self.config.token);
                    self.writer
                        .write(format!("{}\r", template.replace("{barrier}", &mark)).into_bytes());
                    return;
                }
            }
        }
        self.settling = None;
        self.send_pending();
    }

    fn interrupt_barrier(&self) -> Option<String> {
        match &self.config.frame {
            FrameMode::Integration(i) => i.interrupt_barrier.clone(),
            _ => None,
        }
    }

    /// The mark of the latest barrier came back: the interrupt is over.
    fn barrier_mark(&mut self, payload: &[u8]) -> bool {
        let Some((n, _)) = self.settling.as_ref().and_then(|s| s.barrier) else {
            return false;
        };
        if payload != format!("133;B;{};{n}", self.config.token).as_bytes() {
            return false;
        }
        self.settling = None;
        self.send_pending();
        true
    }

    /// Line modes: the REPL has started; a cell that was waiting is typed.
    fn line_started(&mut self) {
        self.line_startup = None;
        self.at_prompt = true;
        self.send_pending();
    }

    fn send_pending(&mut self) {
        if self.settling.is_some() || !self.at_prompt {
            return;
        }
        if let Some(input) = self.active.as_mut().and_then(|c| c.pending_input.take()) {
            self.writer.write(input);
        }
    }

    pub fn on_note(&mut self, note: EngineNote) {
        match note {
            EngineNote::HookExited { cell_id, written } => {
                let Some(cell) = self
                    .active
                    .as_mut()
                    .filter(|c| c.id == cell_id && !c.timed_out)
                else {
                    return;
                };
                if cell.detector.hook_exited(written).is_some() {
                    cell.hook_pid = None;
                    self.finish_frame(None);
                }
            }
        }
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        if let Some(due) = self.setup_due() {
            return Some(due);
        }
        let startup = self.line_startup.as_ref().map(|startup| {
            let quiet = startup
                .last_output
                .filter(|_| !matches!(self.config.frame, FrameMode::Prompt(_)))
                .map(|t| t + STARTUP_QUIET);
            let cap = self.created + STARTUP_WAIT;
            quiet.map_or(cap, |q| q.min(cap))
        });
        let cell = self.active.as_ref().filter(|c| !c.timed_out).map(|cell| {
            let probe = cell
                .detector
                .wants_quiet()
                .then(|| cell.last_output + HOOK_PROBE_QUIET)
                .filter(|p| *p > Instant::now());
            probe.map_or(cell.deadline, |p| p.min(cell.deadline))
        });
        let settle = self
            .settling
            .as_ref()
            .map(|s| match (s.awaiting_prompt, s.barrier) {
                (true, _) => s.sent + INTERRUPT_RETRY,
                (false, Some((_, typed))) => typed + BARRIER_RETRY,
                (false, None) => self.last_output + INTERRUPT_SETTLE,
            });
        [startup, cell, settle].into_iter().flatten().min()
    }

    pub fn on_tick(&mut self, now: Instant) {
        self.type_setup_if_due(now);
        if let Some(startup) = &self.line_startup {
            let quiet = !matches!(self.config.frame, FrameMode::Prompt(_))
                && startup
                    .last_output
                    .is_some_and(|t| now >= t + STARTUP_QUIET);
            if quiet || now >= self.created + STARTUP_WAIT {
                self.line_started();
            }
        }
        self.settle_interrupt(now);
        let Some(cell) = self.active.as_mut().filter(|c| !c.timed_out) else {
            return;
        };
        if now < cell.deadline {
            if cell.detector.wants_quiet() && now >= cell.last_output + HOOK_PROBE_QUIET {
                cell.detector.quiet();
                // Do not probe again until more output arrives.
                cell.last_output = now + Duration::from_secs(3600);
            }
            return;
        }
        // The REPL may still be busy: the lock stays until `k int`/`k kill`.
        cell.timed_out = true;
        kill_hook(cell);
        let id = cell.id.clone();
        let reply = reply(&id, CellState::Timeout, String::new());
        if let Some(waiter) = cell.waiter.take() {
            let _ = waiter.send(reply);
        }
        self.emit_cell(&id, CellState::Timeout);
    }

    /// The frame of the active cell ended.
    fn finish_frame(&mut self, exit_code: Option<i32>) {
        let Some(mut cell) = self.active.take() else {
            return;
        };
        kill_hook(&mut cell);
        let output = match cell.detector.lines() {
            Some(lines) => lines.finish(),
            None => std::mem::take(&mut cell.output).finish(),
        };
        let mut result = reply(&cell.id, CellState::Done, output);
        result.exit_code = exit_code;
        self.settle(cell, result, CellState::Done);
    }

    /// Hands `result` to the waiting `run`, or keeps it for `poll`.
    fn settle(&mut self, mut cell: ActiveCell, result: CellReply, event: CellState) {
        remove_file(&cell.file);
        match cell.waiter.take() {
            Some(waiter) => {
                if let Err(unsent) = waiter.send(result) {
                    self.keep_result(unsent);
                }
            }
            None => self.keep_result(result),
        }
        self.emit_cell(&cell.id, event);
    }

    fn keep_result(&mut self, result: CellReply) {
        if self.results.len() == RESULTS_KEPT {
            self.results.pop_front();
        }
        self.results.push_back(result);
    }

    pub fn on_exit(&mut self, info: &ExitInfo) {
        if let Some(mut cell) = self.active.take() {
            kill_hook(&mut cell);
            let result = reply(
                &cell.id,
                CellState::Error,
                format!("session exited ({info})"),
            );
            remove_file(&cell.file);
            if let Some(waiter) = cell.waiter.take() {
                let _ = waiter.send(result);
            }
        }
        self.emit(CellEvent::Closed { ts: now_iso() });
        let _ = std::fs::remove_dir_all(&self.config.files_dir);
    }

    /// Starts a cell. `Ok` carries the receiver of the final reply (only
    /// with `wait`); `Err` is the reply to give at once (fired, or refused).
    pub fn run(
        &mut self,
        code: String,
        timeout_ms: u64,
        wait: bool,
    ) -> Result<oneshot::Receiver<CellReply>, CellReply> {
        if let Some(active) = &self.active {
            return Err(error_reply(None, format!("active cell '{}'", active.id)));
        }
        let id = random_hex(6);
        let (input, file, detector, hook_pid) = match self.prepare(&id, &code) {
            Ok(p) => p,
            Err(message) => return Err(error_reply(None, format!("send failed: {message}"))),
        };
        let now = Instant::now();
        let ready = self.at_prompt && self.settling.is_none();
        if ready {
            self.writer.write(input.clone());
        }
        let (tx, rx) = oneshot::channel();
        self.active = Some(ActiveCell {
            id: id.clone(),
            deadline: now + Duration::from_millis(timeout_ms),
            detector,
            output: OutputBuffer::default(),
            waiter: wait.then_some(tx),
            pending_input: (!ready).then_some(input),
            timed_out: false,
            timeout_polled: false,
            file,
            hook_pid,
            last_output: now,
        });
        self.latest = Some(id.clone());
        self.emit_cell(&id, CellState::Fired);
        if wait {
            Ok(rx)
        } else {
            Err(reply(&id, CellState::Fired, String::new()))
        }
    }

    /// The bytes to type, the cell file, and the detector for one cell.
    #[allow(clippy::type_complexity)]
    fn prepare(
        &self,
        id: &str,
        code: &str,
    ) -> Result<
        (
            Vec<u8>,
            Option<PathBuf>,
            Box<dyn FrameDetector>,
            Option<u32>,
        ),
        String,
    > {
        let enters = "\r".repeat(FRAME_ENTERS);
        match &self.config.frame {
            FrameMode::Integration(i) => {
                if i.type_simple_lines && is_simple_line(code) {
                    let d = IntegrationDetector::new(
                        &self.config.token,
                        i.newline_after_start,
                        i.exit_status,
                    );
                    return Ok((format!("{code}\r").into_bytes(), None, Box::new(d), None));
                }
                let path = self.config.files_dir.join(format!("{id}{}", i.file_suffix));
                write_private(&path, &format!("{}{code}\n", i.file_prologue))
                    .map_err(|e| e.to_string())?;
                let typed = i.run_file.replace("{file}", &path.display().to_string());
                let d = IntegrationDetector::new(
                    &self.config.token,
                    i.newline_after_start,
                    i.exit_status,
                );
                Ok((
                    format!("{typed}\r").into_bytes(),
                    Some(path),
                    Box::new(d),
                    None,
                ))
            }
            mode => {
                // agent-tty's framing: multi-line code is run from a file
                // where the profile says how (bash sources it); everything
                // else is pasted line by line.
                let from_file = self
                    .config
                    .line_mode_file
                    .as_ref()
                    .filter(|_| !matches!(mode, FrameMode::Prompt(_)) && echo_lines(code) > 1);
                let (send, file) = if let Some(how) = from_file {
                    let path = self
                        .config
                        .files_dir
                        .join(format!("{id}{}", how.file_suffix));
                    write_private(&path, &format!("{code}\n")).map_err(|e| e.to_string())?;
                    let typed = how.run_file.replace("{file}", &path.display().to_string());
                    (typed, Some(path))
                } else {
                    (code.trim_start().to_owned(), None)
                };
                let echo = echo_lines(&send);
                let mut input = send.split('\n').collect::<Vec<_>>().join("\r");
                input.push('\r');
                let (detector, hook_pid): (Box<dyn FrameDetector>, _) = match mode {
                    FrameMode::Prompt(p) => (Box::new(PromptDetector::new(p, echo)), None),
                    FrameMode::Hook(path) => {
                        input.push_str(&enters);
                        let (tx, pid) = self
                            .spawn_hook(id, path)
                            .map_err(|e| format!("hook {}: {e}", path.display()))?;
                        (Box::new(HookDetector::new(echo, tx)), Some(pid))
                    }
                    _ => {
                        input.push_str(&enters);
                        (Box::new(RepeatDetector::new(echo)), None)
                    }
                };
                Ok((input.into_bytes(), file, detector, hook_pid))
            }
        }
    }

    fn spawn_hook(
        &self,
        id: &str,
        path: &std::path::Path,
    ) -> std::io::Result<(std::sync::mpsc::SyncSender<frame::ToHook>, u32)> {
        let notes = self.notes.clone();
        let cell_id = id.to_owned();
        frame::spawn_hook(path, move |written| {
            let _ = notes.send(EngineNote::HookExited { cell_id, written });
        })
    }

    pub fn poll(&mut self, cell_id: Option<&str>) -> CellReply {
        let id = match cell_id {
            Some(id) if is_cell_id(id) => id.to_owned(),
            Some(_) => return error_reply(None, "invalid cell_id".into()),
            None => match self
                .active
                .as_ref()
                .map(|c| c.id.clone())
                .or_else(|| self.latest.clone())
            {
                Some(id) => id,
                None => return error_reply(None, format!("no active cell on '{}'", self.session)),
            },
        };
        if let Some(pos) = self
            .results
            .iter()
            .position(|r| r.cell_id.as_deref() == Some(id.as_str()))
        {
            let result = self.results.remove(pos).expect("position is valid");
            if self.latest.as_deref() == Some(id.as_str()) && self.active.is_none() {
                self.latest = None;
            }
            return result;
        }
        match self.active.as_mut().filter(|c| c.id == id) {
            Some(cell) if cell.timed_out => {
                let hint = if cell.timeout_polled {
                    "use k int or k kill"
                } else {
                    ""
                };
                cell.timeout_polled = true;
                reply(&id, CellState::Timeout, hint.into())
            }
            Some(_) => reply(&id, CellState::Running, String::new()),
            None if cell_id.is_none() => {
                error_reply(None, format!("no active cell on '{}'", self.session))
            }
            None => error_reply(Some(id), "unknown cell".into()),
        }
    }

    /// Ctrl-C to the REPL; the active cell resolves as interrupted.
    pub fn interrupt(&mut self) {
        let mut bytes = vec![0x03];
        match self.config.frame {
            FrameMode::Integration(_) => {
                if self.at_prompt {
                    // Code typed while the REPL is still handling the
                    // Ctrl-C could be eaten: the next cell waits for it to
                    // settle.
                    let now = Instant::now();
                    self.settling = Some(Settling {
                        sent: now,
                        awaiting_prompt: self.repl_busy,
                        retries: 0,
                        barrier: None,
                    });
                    self.last_output = now;
                }
            }
            FrameMode::Repeat | FrameMode::Hook(_) => bytes.extend(b"\r".repeat(FRAME_ENTERS)),
            FrameMode::Prompt(_) => {}
        }
        self.writer.write(bytes);
        if let Some(mut cell) = self.active.take() {
            kill_hook(&mut cell);
            // `k int` releases the lock, as agent-tty's did: a later `k poll`
            // without an id finds no active cell, while `k poll ID` still
            // gets `interrupted`.
            if self.latest.as_deref() == Some(cell.id.as_str()) {
                self.latest = None;
            }
            let result = error_reply(Some(cell.id.clone()), "interrupted".into());
            self.settle(cell, result, CellState::Interrupted);
        }
    }

    pub fn status(&self) -> CellStatusReply {
        let (state, id) = match &self.active {
            Some(c) if c.timed_out => ("timeout", Some(c.id.clone())),
            Some(c) => ("running", Some(c.id.clone())),
            None => match self
                .latest
                .as_ref()
                // A finished cell nobody polled yet (an interrupted one is not).
                .filter(|id| {
                    self.results
                        .iter()
                        .any(|r| r.cell_id.as_ref() == Some(*id) && r.status == CellState::Done)
                }) {
                Some(id) => ("done", Some(id.clone())),
                None => ("idle", None),
            },
        };
        CellStatusReply {
            state: state.into(),
            cell_id: id,
        }
    }

    pub fn notify(&mut self, from: String, message: String) {
        let line = format!("📢 {message} ({from})");
        let shown = self.view.event(line);
        self.broadcast_lines(shown);
        self.emit(CellEvent::Notify {
            from,
            message,
            ts: now_iso(),
        });
    }

    pub fn history(&self, lines: usize) -> Vec<String> {
        self.view.last(lines)
    }

    pub fn subscribe(&self, history: bool) -> (Vec<CellEvent>, broadcast::Receiver<CellEvent>) {
        let past = if history {
            self.past.iter().cloned().collect()
        } else {
            Vec::new()
        };
        (past, self.events.subscribe())
    }

    fn emit_cell(&mut self, id: &str, status: CellState) {
        let marker = match status {
            CellState::Fired => format!("── {} ──", &id[..8]),
            CellState::Done => "── ✓ ──".into(),
            CellState::Timeout => "── ⏱ ──".into(),
            _ => "── ✗ ──".into(),
        };
        let shown = self.view.event(marker);
        self.broadcast_lines(shown);
        self.emit(CellEvent::Cell {
            cell_id: id.to_owned(),
            status,
            ts: now_iso(),
        });
    }

    fn broadcast_lines(&self, lines: Vec<String>) {
        for text in lines {
            let _ = self.events.send(CellEvent::Line { text });
        }
    }

    fn emit(&mut self, event: CellEvent) {
        if self.past.len() == EVENT_HISTORY {
            self.past.pop_front();
        }
        self.past.push_back(event.clone());
        let _ = self.events.send(event);
    }
}

fn kill_hook(cell: &mut ActiveCell) {
    if let Some(pid) = cell.hook_pid.take() {
        crate::os::kill(pid);
    }
}

fn reply(id: &str, status: CellState, output: String) -> CellReply {
    CellReply {
        cell_id: Some(id.to_owned()),
        status,
        output: Some(output),
        exit_code: None,
    }
}

fn error_reply(id: Option<String>, message: String) -> CellReply {
    CellReply {
        cell_id: id,
        status: CellState::Error,
        output: Some(message),
        exit_code: None,
    }
}

/// Lines the REPL echoes: the code's lines up to the last non-blank one.
fn echo_lines(code: &str) -> usize {
    let lines: Vec<&str> = code.trim_start().split('\n').collect();
    lines
        .iter()
        .rposition(|l| !l.trim().is_empty())
        .map_or(0, |i| i + 1)
}

/// One line a line editor takes as typed: no control characters, not huge.
fn is_simple_line(code: &str) -> bool {
    !code.is_empty() && code.len() < 2048 && !code.chars().any(char::is_control)
}

pub fn is_cell_id(id: &str) -> bool {
    id.len() == 12 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use crate::os::OpenOptionsExt;
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())
}

fn remove_file(path: &Option<PathBuf>) {
    if let Some(p) = path {
        let _ = std::fs::remove_file(p);
    }
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn echo_lines_ignores_trailing_blank_lines() {
        assert_eq!(echo_lines("a\nb\n\n"), 2);
        assert_eq!(echo_lines("\n  x"), 1);
        assert_eq!(echo_lines(""), 0);
    }

    #[test]
    fn cell_ids_are_twelve_lowercase_hex() {
        assert!(is_cell_id(&random_hex(6)));
        assert!(!is_cell_id("ABCDEF012345"));
        assert!(!is_cell_id("abc"));
    }
}
