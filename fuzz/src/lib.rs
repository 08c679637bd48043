//! The fuzz targets' logic, one function per target.
//!
//! Each function takes the fuzzer's bytes, drives one parser of core with
//! them and asserts the properties that parser promises; a panic is a
//! finding. The same functions serve both runners: `fuzz_targets/*.rs`
//! (libFuzzer, on nightly, via `scripts/fuzz`) and core's
//! `tests/fuzz_regressions.rs`, which includes this file and replays every
//! input under `fuzz/regressions/` on stable in every `cargo test`. So a
//! crash found once stays fixed, without a second copy of the checks.
//!
//! Inputs that must be split (a byte stream arriving in reads) carry their
//! split in front: see [`split_input`].
//!
//! The web server's targets ([`WEB_TARGETS`]) are `web.rs`, apart because
//! they need the web crate, which core cannot depend on: the root package's
//! `tests/fuzz_regressions.rs` replays their inputs.

pub mod framing;

pub use framing::split_input;

use agent_comms_core::acp::bridge::history::{self, History};
use agent_comms_core::acp::policy::Policy;
use agent_comms_core::acp::transcript::{Direction, Entry};
use agent_comms_core::acp::view::LogView;
use agent_comms_core::adapter::input_line::InputLineReader;
use std::sync::OnceLock;

use framing::{line_seen, peer_of, Peer, Seen};

use agent_comms_core::adapter::profile::{Anchor, InputLine, Profile, Region};
use agent_comms_core::adapter::{Rules, ScreenView};
use agent_comms_core::delivery::validate::invisible;
use agent_comms_core::delivery::{validate, validate_bytes, InvalidText, MAX_TEXT_BYTES};
use agent_comms_core::pty::cast::take_text;
use agent_comms_core::screen::ScreenModel;
use agent_comms_core::socket::codec::{encode, Frame, FrameDecoder, Message};
use agent_comms_core::socket::limits::MAX_REQUEST_FRAME;
use agent_comms_core::socket::protocol::{Event, Request, Response};

/// A target: it panics when its input breaks a property.
pub type Target = fn(&[u8]);

/// The names of the targets, as `fuzz_targets/NAME.rs` and the folders of
/// `fuzz/regressions/` spell them, with the function that runs each.
pub const TARGETS: &[(&str, Target)] = &[
    ("socket_codec", socket_codec),
    ("protocol_json", protocol_json),
    ("profile", profile),
    ("delivery_text", delivery_text),
    ("input_line", input_line),
    ("screen", screen),
    ("cast_text", cast_text),
    ("acp_policy", acp_policy),
    ("acp_view", acp_view),
    ("acp_history", acp_history),
    ("bridge_lines", bridge_lines),
];

/// The targets whose logic is `web.rs` (see the top of this file).
pub const WEB_TARGETS: &[&str] = &["web_frames"];

/// The decoder's outcome on one stream: every frame with the bytes it came
/// from, and whether it stopped on a length beyond its limit.
fn decode_all(pieces: &[&[u8]]) -> (Vec<(Frame, Vec<u8>)>, bool) {
    let mut decoder = FrameDecoder::new(MAX_REQUEST_FRAME);
    let mut held: Vec<u8> = Vec::new();
    let mut frames = Vec::new();
    for piece in pieces {
        decoder.push(piece);
        held.extend_from_slice(piece);
        loop {
            assert_eq!(decoder.buffered(), held.len(), "the decoder lost bytes");
            let total = decoder.head_len();
            match decoder.next_frame() {
                Ok(Some(frame)) => {
                    let total = total.expect("a frame was decoded before its length came");
                    frames.push((frame, held.drain(..total).collect()));
                }
                Ok(None) => break,
                Err(_) => return (frames, true),
            }
        }
    }
    (frames, false)
}

/// The socket codec, fed the stream in the pieces [`split_input`] gives:
/// it decodes to exactly what the stream decodes to in one read (framing
/// holds for every split), and each frame it understood encodes back to the
/// bytes it came from (raw input and output) or to a frame that decodes to
/// the same message (JSON, whose spacing and key order are free).
pub fn socket_codec(data: &[u8]) {
    let pieces = split_input(data);
    let whole: Vec<u8> = pieces.concat();
    let split = decode_all(&pieces);
    assert_eq!(split, decode_all(&[&whole]), "the split changed the frames");
    for (frame, bytes) in &split.0 {
        match &frame.message {
            Message::Invalid { .. } => {}
            Message::Input(_) | Message::Output(_) => assert_eq!(&encode(frame), bytes),
            Message::Request(_) | Message::Response(_) | Message::Event(_) => {
                let (again, _) = decode_all(&[&encode(frame)]);
                assert_eq!(again.len(), 1);
                assert_eq!(&again[0].0, frame, "a re-encoded frame decodes differently");
            }
        }
    }
}

/// `value` serialized and read back is `value`.
fn assert_roundtrips<T>(value: &T)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let json = serde_json::to_vec(value).expect("protocol types serialize");
    let back: T = serde_json::from_slice(&json).expect("what we wrote reads back");
    assert_eq!(&back, value, "{}", String::from_utf8_lossy(&json));
}

/// Requests, responses and events from arbitrary bytes: reading never
/// panics, and whatever reads as one of them round-trips through JSON.
pub fn protocol_json(data: &[u8]) {
    if let Ok(request) = serde_json::from_slice::<Request>(data) {
        assert_roundtrips(&request);
    }
    if let Ok(response) = serde_json::from_slice::<Response>(data) {
        assert_roundtrips(&response);
    }
    if let Ok(event) = serde_json::from_slice::<Event>(data) {
        assert_roundtrips(&event);
    }
}

/// A TOML profile: parsing never panics, an error points inside the text,
/// and an accepted profile's rules and input line compile (load validated
/// them) and classify its own samples and a screen made of its text.
pub fn profile(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let profile = match Profile::parse("fuzz.toml", text) {
        Ok(profile) => profile,
        Err(e) => {
            let lines = text.lines().count().max(1);
            assert!((1..=lines + 1).contains(&e.line), "{e}");
            assert!(e.column >= 1, "{e}");
            return;
        }
    };
    let rules = profile
        .detect
        .as_ref()
        .map(|d| Rules::new(d).expect("a loaded profile's rules compile"));
    let reader = InputLineReader::new(profile.input.line.as_ref());
    let text_lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut screens = vec![(text_lines, String::new(), Vec::new(), 0, String::new())];
    for s in &profile.samples {
        let lines = s.screen.lines().map(str::to_owned).collect();
        let osc = s.osc.iter().map(|o| o.as_bytes().to_vec()).collect();
        let cursor = s.cursor_row.unwrap_or(0);
        screens.push((lines, s.title.clone(), osc, cursor, s.foreground.clone()));
    }
    for (lines, title, osc, cursor_row, foreground) in &screens {
        let view = ScreenView {
            lines,
            title,
            osc,
            cursor_row: *cursor_row,
            foreground,
        };
        if let Some(rules) = &rules {
            rules.classify(&view);
        }
        reader.read(lines, *cursor_row);
    }
}

/// Delivered text: whatever `validate` accepts is one line of printable
/// text within the limit, and a refusal points at the character it names.
pub fn delivery_text(data: &[u8]) {
    let text = match validate_bytes(data) {
        Ok(text) => text,
        Err(InvalidText::NotUtf8(at)) => {
            assert!(std::str::from_utf8(&data[..at]).is_ok());
            assert!(std::str::from_utf8(data).is_err());
            return;
        }
        Err(e) => {
            let text = std::str::from_utf8(data).expect("only UTF-8 gets this far");
            assert_eq!(validate(text), Err(e.clone()));
            let named = |at: usize| text.chars().nth(at - 1).expect("the position is inside");
            match e {
                InvalidText::Empty => assert!(text.is_empty()),
                InvalidText::Blank => assert!(!text.is_empty() && text.chars().all(invisible)),
                InvalidText::TooLong(len) => assert!(len > MAX_TEXT_BYTES && len == text.len()),
                InvalidText::LineBreak(at) => {
                    assert!(matches!(named(at), '\r' | '\n' | '\u{2028}' | '\u{2029}'))
                }
                InvalidText::Control { at, .. } => assert!(named(at).is_control()),
                InvalidText::NotUtf8(_) => unreachable!("handled above"),
                InvalidText::PromptTooLong(_) => {
                    unreachable!("only a first prompt's check says it")
                }
            }
            return;
        }
    };
    assert!(!text.is_empty() && text.len() <= MAX_TEXT_BYTES);
    assert!(
        !text
            .chars()
            .any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')),
        "accepted a control character or line break: {text:?}"
    );
}

/// Regions the `input_line` target tries each built-in rule in: every
/// anchor, offsets and heights at their extremes and in between.
const OFFSETS: [i32; 5] = [i32::MIN, -1, 0, 2, i32::MAX];
const HEIGHTS: [u16; 4] = [0, 1, 8, u16::MAX];

/// The input-line readers the `input_line` target picks from: no rule
/// (the cursor's row), then each built-in adapter's rule in each region
/// (see [`OFFSETS`], [`HEIGHTS`]). Compiled once, lazily: compiling the
/// patterns costs more than a read, and the target runs millions of times.
fn input_line_reader(which: usize) -> &'static InputLineReader {
    static RULES: OnceLock<Vec<InputLine>> = OnceLock::new();
    static READERS: OnceLock<Vec<OnceLock<InputLineReader>>> = OnceLock::new();
    let rules = RULES.get_or_init(|| {
        [
            include_str!("../../config/providers/claude-code.toml"),
            include_str!("../../config/providers/codex.toml"),
            include_str!("../../config/providers/opencode.toml"),
        ]
        .iter()
        .filter_map(|text| {
            Profile::parse("built-in", text)
                .expect("built-in")
                .input
                .line
        })
        .collect()
    });
    let per_rule = 3 * OFFSETS.len() * HEIGHTS.len();
    let readers = READERS.get_or_init(|| {
        (0..=rules.len() * per_rule)
            .map(|_| OnceLock::new())
            .collect()
    });
    let which = which % readers.len();
    readers[which].get_or_init(|| {
        let Some(i) = which.checked_sub(1) else {
            return InputLineReader::new(None);
        };
        let mut line = rules[i / per_rule].clone();
        let region = i % per_rule;
        line.region = Region {
            from: [Anchor::Top, Anchor::Bottom, Anchor::Cursor][region % 3],
            offset: OFFSETS[region / 3 % OFFSETS.len()],
            rows: HEIGHTS[region / 3 / OFFSETS.len()],
        };
        InputLineReader::new(Some(&line))
    })
}

/// The input-line reader over an arbitrary screen: `which | cursor row
/// (2 bytes) | screen text`. `which` picks a reader (see
/// [`input_line_reader`]). Reading never panics and yields one trimmed line.
pub fn input_line(data: &[u8]) {
    let [which, c0, c1, screen @ ..] = data else {
        return;
    };
    let reader = input_line_reader(usize::from(*which));
    let lines: Vec<String> = String::from_utf8_lossy(screen)
        .split('\n')
        .map(str::to_owned)
        .collect();
    if let Some(text) = reader.read(&lines, u16::from_le_bytes([*c0, *c1])) {
        assert_eq!(text.trim(), text);
        assert!(!text.contains('\n'));
    }
}

/// The screen model with the query responder on: `rows | cols | split`
/// (see [`split_input`]), sizes 1 to 64 × 1 to 256, the stream fed in its
/// pieces. Feeding never panics; answers are escape sequences; the screen
/// keeps its size and its cursor inside it.
pub fn screen(data: &[u8]) {
    let [rows, cols, rest @ ..] = data else {
        return;
    };
    let (rows, cols) = (u16::from(rows % 64) + 1, u16::from(*cols) + 1);
    let mut model = ScreenModel::new(rows, cols);
    model.set_answer_queries(true);
    for piece in split_input(rest) {
        let answers = model.feed(piece);
        assert!(answers.is_empty() || answers[0] == 0x1b, "{answers:?}");
    }
    assert_eq!(model.size(), (rows, cols));
    assert_eq!(model.lines().len(), usize::from(rows));
    assert_eq!(model.lines_without_dim().len(), usize::from(rows));
    let (row, col) = model.cursor();
    assert!(
        row < rows && col <= cols,
        "cursor {row},{col} on {rows}x{cols}"
    );
    let _ = (model.title(), model.recent_osc().count(), model.snapshot());
    let _ = model.redraw();
}

/// The text a recording writes for a stream of output arriving in pieces
/// (asciicast events carry text): pieces joined are the stream as UTF-8,
/// a sequence split between reads kept whole, invalid bytes as U+FFFD, as
/// if the stream had come in one read.
pub fn cast_text(data: &[u8]) {
    let pieces = split_input(data);
    let mut carry = Vec::new();
    let mut written = String::new();
    for piece in &pieces {
        written.push_str(&take_text(&mut carry, piece));
        assert!(carry.len() < 4, "held back more than a partial character");
    }
    written.push_str(&String::from_utf8_lossy(&carry));
    assert_eq!(written, String::from_utf8_lossy(&pieces.concat()));
}

/// An ACP policy file: parsing never panics, an error is one line that
/// points inside the text, and an accepted policy answers every question
/// (a permission, a path to read or write) without panicking.
pub fn acp_policy(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let policy = match Policy::parse(text, "fuzz.toml") {
        Ok(policy) => policy,
        Err(e) => {
            let lines = text.lines().count().max(1);
            assert!((1..=lines + 1).contains(&e.line), "{e}");
            assert!(e.column >= 1, "{e}");
            assert!(!e.to_string().contains('\n'), "{e}");
            return;
        }
    };
    let cwd = std::path::Path::new("/nonexistent-fuzz-cwd");
    for line in text.lines().take(8) {
        policy.permission(Some(line), line);
        policy.permission(None, line);
        let path = std::path::Path::new(line);
        let answers = [policy.fs_read(cwd, path), policy.fs_write(cwd, path)];
        for served in answers.into_iter().flatten() {
            assert!(served.is_absolute(), "{}", served.display());
        }
    }
}

/// The readable transcript (`acp log`): each line of the input is an
/// entry as the tap writes it (its JSON, or, when it is not, a line the
/// agent sent that was not JSON); the view never panics, and nothing it
/// prints holds a control character but the line breaks it adds, whatever
/// the agent put in its messages.
pub fn acp_view(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut view = LogView::new();
    let mut out = String::new();
    for (seq, line) in text.lines().enumerate() {
        let entry = serde_json::from_str::<Entry>(line).unwrap_or_else(|_| Entry {
            seq: seq as u64,
            ts: "2026-12-01T00:00:00.000Z".into(),
            dir: Direction::FromAgent,
            msg: serde_json::from_str(line).ok(),
            text: Some(line.to_owned()),
        });
        out.push_str(&view.push(&entry));
    }
    out.push_str(&view.finish());
    assert!(
        !out.chars().any(|c| c.is_control() && c != '\n'),
        "a control character reached the terminal: {out:?}"
    );
}

/// Lines as a transcript holds them, shown to a client of the bridge
/// (`acp::bridge::history`): no panic; whatever the agent sent, every update
/// shown is of the client's session and carries the position of the entry
/// it came from; a seat's own prompts are left out live; a replay never
/// starts past the live stream's mark.
pub fn acp_history(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let entries: Vec<Entry> = text
        .lines()
        .enumerate()
        .map(|(seq, line)| {
            let dir = match seq % 3 {
                0 => Direction::ToAgent,
                1 => Direction::FromAgent,
                _ => Direction::Note,
            };
            serde_json::from_str::<Entry>(line).unwrap_or_else(|_| Entry {
                seq: seq as u64,
                ts: String::new(),
                dir,
                msg: serde_json::from_str(line).ok(),
                text: None,
            })
        })
        .collect();
    for entry in &entries {
        for update in history::updates(entry, "s", None) {
            assert_eq!(update["sessionId"], "s", "{update}");
            assert_eq!(
                update["_meta"][history::META_KEY]["seq"],
                entry.seq,
                "{update}"
            );
        }
        let own = entry
            .msg
            .as_ref()
            .and_then(|m| m.get("params"))
            .and_then(history::prompt_origin);
        if let Some(from) = own {
            let skipped = history::updates(entry, "s", Some(from));
            assert!(skipped
                .iter()
                .all(|u| u["update"]["sessionUpdate"] != "user_message_chunk"));
        }
    }
    let mark = entries.iter().map(|e| e.seq + 1).max().unwrap_or(0);
    for h in [History::Full, History::PendingOnly, History::None] {
        assert!(
            history::replay_start(&entries, h, mark)
                <= mark.max(entries.iter().map(|e| e.seq).max().unwrap_or(0))
        );
    }
}

/// The bridge's line framing (`acp::lines::bounded`: a client's
/// connection is read through it, and the agent's output): `how | split`
/// (see [`split_input`]), where `how`'s low six bits make the longest line
/// taken (1 to 64 bytes) and its two high bits the peer and the deadline
/// ([`framing::peer_of`]). However the stream is cut into reads, the reader
/// gets exactly its lines in order ([`line_seen`]): each of at most `max`
/// bytes as text (never more than one line, never more than `max` bytes of
/// the stream), a blank one left out, each longer one reported once to
/// `too_long` with its length and dropped, the lines after it read on. A
/// last line without its newline is read when the stream ends; when the
/// peer goes quiet instead, it fails the stream at the deadline with a
/// one-line `TimedOut` error, and a quiet peer between lines is waited for.
pub fn bridge_lines(data: &[u8]) {
    let Some((&how, rest)) = data.split_first() else {
        return;
    };
    let max = usize::from(how & 63) + 1;
    let (peer, deadline) = peer_of(how);
    let pieces = split_input(rest);
    let seen = framing::read_lines(&pieces, peer, max, deadline);
    for s in &seen {
        match s {
            Seen::Line(line) => assert!(!line.contains('\n'), "{line:?}"),
            Seen::TooLong(len) => assert!(*len > max, "{len} reported over {max}"),
            Seen::Failed(kind) => assert_eq!(*kind, std::io::ErrorKind::TimedOut),
        }
    }
    let stream = pieces.concat();
    let mut lines: Vec<&[u8]> = stream.split(|&b| b == b'\n').collect();
    let tail = lines.pop().unwrap_or_default();
    let mut expected: Vec<Seen> = lines.iter().filter_map(|l| line_seen(l, max)).collect();
    if !tail.is_empty() {
        match peer {
            Peer::Closes | Peer::Dawdles => expected.extend(line_seen(tail, max)),
            Peer::GoesQuiet => expected.push(Seen::Failed(std::io::ErrorKind::TimedOut)),
        }
    }
    assert_eq!(seen, expected, "max {max}, {peer:?}, {deadline:?}");
}
