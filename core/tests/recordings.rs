//! The screen model against what the real CLIs drew.
//!
//! `tests/recordings/` holds asciicast v2 start-up recordings of Claude Code
//! 2.1.197, Codex 0.171.0 and opencode 1.18.33 (its README says how they
//! were made), with the last screen of each rendered by pyte. Replaying
//! the output events through our model must give the same text, and the
//! cursor-position answers our responder computes must equal the ones the
//! recorder's emulator gave — both depend on the model placing every glyph
//! where a real terminal would.

use std::path::PathBuf;

use agent_comms_core::screen::ScreenModel;

struct Event {
    kind: String,
    data: String,
}

fn load(name: &str) -> (u16, u16, Vec<Event>) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/recordings")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: serde_json::Value =
        serde_json::from_str(lines.next().expect("header")).expect("header json");
    let events = lines
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("event json");
            Event {
                kind: v[1].as_str().expect("kind").to_owned(),
                data: v[2].as_str().expect("data").to_owned(),
            }
        })
        .collect();
    (
        header["height"].as_u64().expect("height") as u16,
        header["width"].as_u64().expect("width") as u16,
        events,
    )
}

/// Trailing spaces and trailing empty rows removed, as the reference files are.
fn normalise(lines: &[String]) -> Vec<String> {
    let mut out: Vec<String> = lines.iter().map(|l| l.trim_end().to_owned()).collect();
    while out.last().is_some_and(String::is_empty) {
        out.pop();
    }
    out
}

fn final_screen(cast: &str) -> Vec<String> {
    let (rows, cols, events) = load(cast);
    let mut model = ScreenModel::new(rows, cols);
    for e in events.iter().filter(|e| e.kind == "o") {
        model.feed(e.data.as_bytes());
    }
    normalise(&model.lines())
}

fn expected(screen: &str) -> Vec<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/recordings")
        .join(screen);
    let text = std::fs::read_to_string(path).expect("screen file");
    normalise(&text.lines().map(str::to_owned).collect::<Vec<_>>())
}

fn assert_same(cast: &str, screen: &str) {
    let got = final_screen(cast);
    let want = expected(screen);
    if got != want {
        let diff: Vec<String> = (0..got.len().max(want.len()))
            .filter(|&i| got.get(i) != want.get(i))
            .map(|i| {
                format!(
                    "row {}:\n  ours:     {:?}\n  recorded: {:?}",
                    i + 1,
                    got.get(i),
                    want.get(i)
                )
            })
            .collect();
        panic!(
            "{cast} renders differently from {screen}:\n{}",
            diff.join("\n")
        );
    }
}

#[test]
fn claude_code_start_screens_match() {
    assert_same(
        "claude-2.1.197-start-xterm.cast",
        "claude-2.1.197-start-screen.txt",
    );
    assert_same(
        "claude-2.1.197-onboarded-untrusted-xterm.cast",
        "claude-2.1.197-onboarded-untrusted-screen.txt",
    );
    assert_same(
        "claude-2.1.197-onboarded-trusted-xterm.cast",
        "claude-2.1.197-onboarded-trusted-screen.txt",
    );
}

#[test]
fn codex_start_screen_matches() {
    assert_same(
        "codex-0.171.0-start-xterm.cast",
        "codex-0.171.0-start-screen.txt",
    );
}

#[test]
fn opencode_start_screen_matches() {
    assert_same(
        "opencode-1.18.33-start-xterm.cast",
        "opencode-1.18.33-start-screen.txt",
    );
}

/// Every `ESC[6n` in the output is answered as the recorder answered it.
#[test]
fn cursor_reports_match_the_recorder() {
    for cast in [
        "codex-0.171.0-start-xterm.cast",
        "opencode-1.18.33-start-xterm.cast",
        "codex-0.171.0-turn.cast",
        "opencode-1.18.33-turn.cast",
    ] {
        let (rows, cols, events) = load(cast);
        let mut model = ScreenModel::new(rows, cols);
        model.set_answer_queries(true);
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for e in &events {
            match e.kind.as_str() {
                "o" => {
                    let reply =
                        String::from_utf8(model.feed(e.data.as_bytes())).expect("utf-8 replies");
                    ours.extend(cursor_reports(&reply));
                }
                "i" => theirs.extend(cursor_reports(&e.data)),
                _ => {}
            }
        }
        assert!(!theirs.is_empty(), "{cast} has no cursor report to compare");
        assert_eq!(ours, theirs, "{cast}: cursor position reports differ");
    }
}

fn cursor_reports(s: &str) -> Vec<String> {
    s.split('\x1b')
        .filter(|p| p.starts_with('[') && p.ends_with('R') && p[1..p.len() - 1].contains(';'))
        .map(str::to_owned)
        .collect()
}
