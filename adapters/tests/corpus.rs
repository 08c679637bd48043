//! The built-in adapters against what the real CLIs showed during whole
//! turns.
//!
//! Each recording is asciicast v2 of a real Claude Code, Codex or opencode
//! doing turns against the mock model server: the shared reference
//! recordings (`core/tests/recordings/*-turn.cast`) and the corpus our own
//! harness records (`tests/corpus/*.cast`, see tests/real_providers.rs).
//! The replay feeds every output event to the screen model and the
//! adapter's activity monitor at its recorded time, and checks the monitor
//! at moments the prompt itself fixes: the mock server pauses `THINK=`
//! seconds and streams for `SLOW=` seconds, so halfway through the stream
//! the program is busy — for Codex, with nothing busy on the screen — and a
//! while after it the program is idle. A detector change that misreads a
//! real screen fails here, in every `cargo test`, without the CLIs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_comms_core::adapter::monitor::AdapterSpec;
use agent_comms_core::adapter::{Activity, ScreenView};
use agent_comms_core::plugin::load::monitor;
use agent_comms_core::screen::ScreenModel;

/// After the stream's last piece, the program must read idle by then.
const SETTLED: f64 = 1.5;
/// How long after the Enter a program may take to draw that it took it:
/// opencode drew nothing busy for 0.45 s after one Enter and 0.85 s after
/// another (tests/corpus), its screen idle meanwhile. A delivery right
/// behind the first must not take that for idle: opencode's profile says
/// `shows_busy_within_ms`, and the coordinator waits for busy that long.
const TAKEN: f64 = 1.0;
/// The last part of a stream, where the recording's clock and the mock's
/// may disagree on which side of the reply's end a frame falls.
const STREAM_END: f64 = 0.3;

struct Event {
    at: f64,
    kind: String,
    data: String,
}

struct Cast {
    rows: u16,
    cols: u16,
    events: Vec<Event>,
}

fn load(path: &Path) -> Cast {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: serde_json::Value = serde_json::from_str(lines.next().expect("header")).unwrap();
    let events = lines
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| Event {
            at: v[0].as_f64().unwrap_or(0.0),
            kind: v[1].as_str().unwrap_or("").to_owned(),
            data: v[2].as_str().unwrap_or("").to_owned(),
        })
        .collect();
    Cast {
        rows: header["height"].as_u64().unwrap() as u16,
        cols: header["width"].as_u64().unwrap() as u16,
        events,
    }
}

/// What the replay must find at a moment of the recording.
#[derive(Debug)]
struct Checkpoint {
    at: f64,
    expect: Activity,
    why: String,
}

/// `NAME=<seconds>` in a prompt.
fn knob(prompt: &str, name: &str) -> f64 {
    prompt
        .split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
        .unwrap_or(0.0)
}

/// The prompts submitted in a cast: (time of the Enter, prompt).
fn submissions(cast: &Cast) -> Vec<(f64, String)> {
    let mut typed = String::new();
    let mut submitted = Vec::new();
    for e in cast.events.iter().filter(|e| e.kind == "i") {
        let text = e.data.replace("\x1b[200~", "").replace("\x1b[201~", "");
        match text.split_once('\r') {
            None => typed.push_str(&text),
            Some((before, _)) => {
                typed.push_str(before);
                submitted.push((e.at, std::mem::take(&mut typed)));
            }
        }
    }
    submitted
}

/// When `word` first shows on the screen after `from` outside an echoed
/// prompt (`REPLY=word`): the reply has arrived.
fn shows(cast: &Cast, word: &str, from: f64) -> Option<f64> {
    let mut model = ScreenModel::new(cast.rows, cast.cols);
    for e in cast.events.iter().filter(|e| e.kind == "o") {
        model.feed(e.data.as_bytes());
        if e.at > from
            && model
                .lines()
                .iter()
                .any(|l| l.contains(word) && !l.contains("REPLY="))
        {
            return Some(e.at);
        }
    }
    None
}

/// Busy halfway through each reply long enough to look at, idle a while
/// after it (unless another prompt was submitted by then). The reply's end
/// is where the prompt puts it (`THINK=` + `SLOW=` after the Enter), or,
/// with `REPLY=word`, where the word shows on the screen: a CLI may ask the
/// model seconds after the Enter (opencode's first prompt does).
fn checkpoints(cast: &Cast) -> Vec<Checkpoint> {
    let end = cast.events.last().map_or(0.0, |e| e.at);
    let submitted = submissions(cast);
    let mut out = Vec::new();
    for (i, (at, prompt)) in submitted.iter().enumerate() {
        let next = submitted.get(i + 1).map_or(f64::INFINITY, |(t, _)| *t);
        let (think, slow) = (knob(prompt, "THINK"), knob(prompt, "SLOW"));
        if slow < 2.0 {
            continue;
        }
        let reply = prompt
            .split_whitespace()
            .find_map(|w| w.strip_prefix("REPLY="));
        let done = match reply {
            Some(word) => match shows(cast, word, *at) {
                Some(t) => t,
                None => continue,
            },
            None => at + think + slow,
        };
        // Busy all through the reply, checked at every frame — with an
        // authoritative idle (no debounce) a frame read idle mid-turn would
        // let a delivery in.
        let frames = cast
            .events
            .iter()
            .filter(|e| e.kind == "o" && e.at > at + TAKEN && e.at < done - STREAM_END);
        out.extend(frames.map(|e| Checkpoint {
            at: e.at,
            expect: Activity::Busy,
            why: format!("a frame of the reply to {prompt:?}"),
        }));
        out.push(Checkpoint {
            at: done - slow / 2.0,
            expect: Activity::Busy,
            why: format!("halfway through the reply to {prompt:?}"),
        });
        let idle_at = done + SETTLED;
        if idle_at < next && idle_at <= end + SETTLED {
            out.push(Checkpoint {
                at: idle_at,
                expect: Activity::Idle,
                why: format!("{SETTLED} s after the reply to {prompt:?}"),
            });
        }
    }
    out
}

fn adapter_for(file: &str) -> &'static str {
    ["claude-code", "codex", "opencode"]
        .into_iter()
        .find(|a| file.starts_with(a.split('-').next().unwrap()))
        .unwrap_or_else(|| panic!("{file}: no adapter for this recording"))
}

fn spec(adapter: &str) -> AdapterSpec {
    let (file, text) = agent_comms_adapters::BUILTIN
        .iter()
        .find(|(f, _)| *f == format!("{adapter}.toml"))
        .expect("a built-in profile");
    AdapterSpec {
        name: adapter.to_owned(),
        source: (*file).to_owned(),
        text: (*text).to_owned(),
        plugin: None,
    }
}

/// Replays `path`; returns what went wrong at each checkpoint, if anything.
fn replay(path: &Path) -> Result<usize, Vec<String>> {
    let file = path.file_name().unwrap().to_str().unwrap();
    let cast = load(path);
    let mut monitor = monitor(&spec(adapter_for(file)));
    let mut model = ScreenModel::new(cast.rows, cast.cols);
    let base = Instant::now();
    let at = |secs: f64| base + Duration::from_secs_f64(secs);
    let mut observe = |model: &ScreenModel, now: Instant| {
        let lines = model.lines();
        let osc: Vec<Vec<u8>> = model.recent_osc().map(<[u8]>::to_vec).collect();
        let view = ScreenView {
            lines: &lines,
            title: model.title(),
            osc: &osc,
            cursor_row: model.cursor().0,
            foreground: "",
        };
        monitor.observe(&view, now, || None)
    };
    let checkpoints = checkpoints(&cast);
    let mut outputs = cast.events.iter().filter(|e| e.kind == "o").peekable();
    let mut failures = Vec::new();
    for cp in &checkpoints {
        while let Some(e) = outputs.next_if(|e| e.at <= cp.at) {
            model.feed(e.data.as_bytes());
            observe(&model, at(e.at));
        }
        let report = observe(&model, at(cp.at));
        if report.activity != cp.expect {
            failures.push(format!(
                "{file} at {:.2} s ({}): expected {}, the adapter said {} (raw {}); title {:?}; screen:\n{}",
                cp.at,
                cp.why,
                cp.expect.as_str(),
                report.activity.as_str(),
                report.raw.as_str(),
                model.title(),
                model.lines().join("\n")
            ));
        }
    }
    if failures.is_empty() {
        Ok(checkpoints.len())
    } else {
        Err(failures)
    }
}

fn recordings() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut all: Vec<PathBuf> = [
        root.join("core/tests/recordings"),
        root.join("tests/corpus"),
    ]
    .iter()
    .filter_map(|dir| std::fs::read_dir(dir).ok())
    .flatten()
    .filter_map(|e| e.ok().map(|e| e.path()))
    .filter(|p| {
        p.extension().is_some_and(|x| x == "cast")
            && p.file_name().unwrap().to_str().unwrap().contains("-turn")
    })
    .collect();
    all.sort();
    all
}

#[test]
fn the_adapters_read_every_recorded_turn_right() {
    let files = recordings();
    assert!(files.len() >= 3, "recordings missing: {files:?}");
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in &files {
        match replay(file) {
            Ok(n) => {
                eprintln!("{}: {n} checkpoints", file.display());
                checked += n;
            }
            Err(f) => failures.extend(f),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        checked >= files.len() + 3,
        "too few checkpoints: {checked} in {files:?}"
    );
}

/// The replay can fail: a profile without the signals Codex gives while it
/// streams reads the streaming screen as idle.
#[test]
fn a_detector_that_reads_only_the_screen_misreads_codex() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../core/tests/recordings/codex-0.171.0-turn.cast");
    let cast = load(&path);
    let mut spec = spec("codex");
    // Drop the rules that read OSC sequences and the title; keep the rest.
    let mut blocks = spec.text.split("[[detect.rules]]");
    let head = blocks.next().unwrap().to_owned();
    spec.text = blocks
        .filter(|b| !b.contains("\nosc =") && !b.contains("\ntitle ="))
        .fold(head, |text, b| text + "[[detect.rules]]" + b);
    let mut monitor = monitor(&spec);
    let mut model = ScreenModel::new(cast.rows, cast.cols);
    let busy = checkpoints(&cast)
        .into_iter()
        .find(|c| c.expect == Activity::Busy)
        .unwrap();
    for e in cast
        .events
        .iter()
        .filter(|e| e.kind == "o" && e.at <= busy.at)
    {
        model.feed(e.data.as_bytes());
    }
    let lines = model.lines();
    let view = ScreenView {
        lines: &lines,
        title: model.title(),
        osc: &[],
        cursor_row: model.cursor().0,
        foreground: "",
    };
    let report = monitor.observe(&view, Instant::now(), || None);
    assert_eq!(
        report.by,
        agent_comms_core::adapter::monitor::Classifier::Rules
    );
    assert_ne!(
        report.raw,
        Activity::Busy,
        "the screen alone cannot tell that Codex is busy mid-reply"
    );
}
