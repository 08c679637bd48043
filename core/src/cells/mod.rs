//! Persistent REPL cells (`k`/`km`) on top of the supervisor.
//!
//! The engine lives inside a `k` session's supervisor and holds all cell
//! state: the active cell and its lock, results not yet polled, the event
//! stream and the filtered view. `k poll` is therefore one request answered
//! from memory, and `km` gets events pushed over the socket — no log files to
//! tail and no polling loops (agent-tty did both on top of tmux).
//!
//! The engine is one state machine split along its seams: `config` (how a
//! session's cells are framed, chosen at `k new`), `setup` (typing the
//! shell integration, or waiting for a line-mode REPL to start), `stream`
//! (what the REPL prints: text, OSC marks, interrupts settling, deadlines)
//! and `requests` (run, poll, interrupt, status and the event stream).

mod config;
pub mod frame;
mod hold;
pub mod output;
mod requests;
mod setup;
mod stream;
pub mod view;

pub use config::{CellsConfig, FrameMode, Integration, LineModeFile};
use setup::LineStartup;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::sync::{broadcast, mpsc, oneshot};

use self::frame::FrameDetector;
use self::output::OutputBuffer;
use self::view::FilteredView;
use crate::pty::PtyWriter;
use crate::screen::strip::AnsiStripper;
use crate::session::SessionName;
use crate::socket::protocol::{CellEvent, CellReply, CellState};

/// Output quiet time after which a hook is shown the line in progress.
const HOOK_PROBE_QUIET: Duration = Duration::from_millis(50);
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

/// Messages from helper threads back into the event loop.
#[derive(Debug)]
pub enum EngineNote {
    HookExited {
        cell_id: String,
        written: frame::HookWritten,
    },
    /// A request gave the engine a nearer deadline than the one the event
    /// loop sleeps until: it looks again.
    DeadlineMoved,
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
    /// Barriers typed for this interrupt.
    tries: u32,
    /// A Ctrl-C went after a barrier that never came back, to discard the
    /// line it was read into; the next barrier waits for quiet output.
    cleared: bool,
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
    /// The REPL's own process group (its pid: it leads its session).
    repl_group: Option<i32>,
    /// When the active cell's line was typed, until its frame ends.
    line_typed: Option<Instant>,
    /// Ctrl-Cs waiting for the cell's command to take the terminal
    /// (see [`hold`]).
    held: Option<Vec<u8>>,
    created: Instant,
    /// What marks a line of our own machinery, which the filtered view
    /// hides: the cells directory (our invocations, `. file`,
    /// `__k('file')`), the token, and the start of each long set-up line
    /// (python's carries its script base64-encoded, so neither of the
    /// others shows in its echo).
    machinery: Vec<String>,
    setup_typed: bool,
    setup_cue_seen: bool,
    cue_window: Vec<u8>,
    /// Interrupt barriers typed so far (each one's mark carries its number).
    barriers: u32,
    active: Option<ActiveCell>,
    results: VecDeque<CellReply>,
    latest: Option<String>,
    events: broadcast::Sender<CellEvent>,
    past: VecDeque<CellEvent>,
    view: FilteredView,
}

/// How long a set-up line's start must be to mark it: long enough that
/// a REPL's own output never starts the same way.
const SETUP_MARK_CHARS: usize = 40;

fn machinery_marks(config: &CellsConfig) -> Vec<String> {
    let mut marks = vec![config.files_dir.display().to_string(), config.token.clone()];
    if let FrameMode::Integration(i) = &config.frame {
        marks.extend(
            i.setup
                .lines()
                .filter(|line| line.chars().count() >= SETUP_MARK_CHARS)
                .map(|line| line.chars().take(SETUP_MARK_CHARS).collect()),
        );
    }
    marks
}

impl CellEngine {
    pub fn new(
        session: SessionName,
        config: CellsConfig,
        writer: PtyWriter,
        repl_group: Option<i32>,
        notes: mpsc::UnboundedSender<EngineNote>,
    ) -> Self {
        let _ = crate::os::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(&config.files_dir);
        Self {
            machinery: machinery_marks(&config),
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
            repl_group,
            line_typed: None,
            held: None,
            created: Instant::now(),
            setup_typed: false,
            setup_cue_seen: false,
            cue_window: Vec::new(),
            barriers: 0,
            active: None,
            results: VecDeque::new(),
            latest: None,
            events: broadcast::channel(EVENT_HISTORY).0,
            past: VecDeque::new(),
            view: FilteredView::default(),
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::random_hex;

    #[test]
    fn cell_ids_are_twelve_lowercase_hex() {
        assert!(is_cell_id(&random_hex(6)));
        assert!(!is_cell_id("ABCDEF012345"));
        assert!(!is_cell_id("abc"));
    }
}
