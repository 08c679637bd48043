//! `fake-agent`: a fake coding agent for end-to-end tests, on Unix and on
//! Windows (under Wine, which has no Python for tests/fakes/fakeprovider.py).
//!
//! It reproduces, from the Python fakes and the recordings they cite, what
//! delivery depends on: Claude Code's and Codex's screens and titles, busy
//! turns of `FAKE_BUSY_MS` (or a message's `BUSY=N`) queued behind each
//! other, bracketed paste, Claude Code's swallowed Enter, Codex's
//! paste-burst rule and OSC 7501, and the JSON-lines submission log
//! (`FAKE_LOG`). tests/fakes/README.md documents each behaviour; what this
//! program leaves out (opencode, session files, FAKE_AUTOBUSY and the other
//! knobs) is listed there too.
//!
//! Run it under the name of the CLI it acts as (`claude`, `codex`, with
//! `.exe` on Windows): the host picks its adapter by the program's name.

mod agent;
mod input;
mod knobs;
mod log;
mod screen;
mod term;

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::json;

use agent::{Agent, Face, Quit, ANIMATION_MS};
use input::Parser;
use knobs::Knobs;
use log::EventLog;
use screen::Frame;
use term::Terminal;

/// How long a cut escape sequence may wait for its rest before it is the
/// Esc key.
const STALE_ESCAPE_MS: f64 = 50.0;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let stem = argv
        .first()
        .and_then(|a| Path::new(a).file_stem())
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_owned();
    let Some(face) = Face::from_program(&stem) else {
        eprintln!(
            "fake-agent: run me as `claude` or `codex` (copy or link me under that name): the host picks its adapter by the program's name"
        );
        return ExitCode::from(2);
    };
    let knobs = match Knobs::from_env(|name| std::env::var(name).ok()) {
        Ok(knobs) => knobs,
        Err(e) => {
            eprintln!("{stem} (fake): {e}");
            return ExitCode::from(2);
        }
    };
    let mut log = match EventLog::open(knobs.log.as_deref()) {
        Ok(log) => log,
        Err(e) => {
            eprintln!("{stem} (fake): cannot open FAKE_LOG: {e}");
            return ExitCode::from(2);
        }
    };
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    log.write(
        "start",
        json!({"provider": face.name(), "pid": std::process::id(), "argv": argv, "cwd": cwd}),
    );
    let mut terminal = match Terminal::raw() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{stem} (fake): needs a terminal: {e}");
            return ExitCode::from(1);
        }
    };
    let mut agent = Agent::new(face, knobs, log, cwd);
    let reason = run(&mut agent, &mut terminal);
    terminal.leave(face.alt_screen(), agent.bracketed_paste());
    drop(terminal);
    agent
        .log
        .write("exit", json!({"status": 0, "reason": reason}));
    ExitCode::SUCCESS
}

/// One read of stdin, or its end.
enum Chunk {
    Bytes(Vec<u8>, Instant),
    End(&'static str),
}

/// Reads stdin on a thread of its own, read by read, each stamped when it
/// came: the main loop waits on the channel with a deadline.
fn reader() -> mpsc::Receiver<Chunk> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = [0u8; 4096];
        loop {
            let read = match stdin.read(&mut buf) {
                Ok(0) => Chunk::End("eof"),
                Ok(n) => Chunk::Bytes(buf[..n].to_vec(), Instant::now()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => Chunk::End("hangup"),
            };
            let end = matches!(read, Chunk::End(_));
            if tx.send(read).is_err() || end {
                return;
            }
        }
    });
    rx
}

fn run(agent: &mut Agent, terminal: &mut Terminal) -> &'static str {
    let start = Instant::now();
    let ms = |at: Instant| at.duration_since(start).as_secs_f64() * 1000.0;
    terminal.enter(agent.face.alt_screen(), agent.bracketed_paste());
    let input = reader();
    let mut parser = Parser::default();
    let mut shown: Option<Frame> = None;
    let mut size = terminal.size();
    let mut last_read = 0.0;
    loop {
        if let Some(reason) = terminal.ended() {
            return reason;
        }
        let now = ms(Instant::now());
        agent.tick(now);
        let current = terminal.size();
        if current != size {
            size = current;
            shown = None;
        }
        let frame = agent.render(now, size.0, size.1);
        let codes = std::mem::take(&mut agent.out);
        terminal.draw(&codes, shown.as_ref(), &frame, size);
        shown = Some(frame);

        // Wake for the end of a turn, a stale escape, the spinner and a
        // resize (the size is polled: SIGWINCH has no Windows twin).
        let mut wait = ANIMATION_MS;
        if let Some(change) = agent.next_change() {
            wait = wait.min(change - now);
        }
        if parser.has_partial_escape() {
            wait = wait.min(last_read + STALE_ESCAPE_MS - now);
        }
        let result = match input.recv_timeout(Duration::from_secs_f64(wait.max(0.0) / 1000.0)) {
            Ok(Chunk::Bytes(bytes, at)) => {
                last_read = ms(at);
                agent.read(parser.feed(&bytes), last_read)
            }
            Ok(Chunk::End(reason)) => return reason,
            Err(RecvTimeoutError::Disconnected) => return "hangup",
            Err(RecvTimeoutError::Timeout) => {
                let now = ms(Instant::now());
                match parser.flush_stale_after(now - last_read >= STALE_ESCAPE_MS) {
                    Some(esc) => agent.read(vec![esc], now),
                    None => Ok(()),
                }
            }
        };
        if let Err(Quit { reason }) = result {
            return reason;
        }
    }
}
