//! Recording a PTY as asciicast v2 (what `asciinema play` reads).
//!
//! Output, input (keystrokes, deliveries, and the answers the supervisor
//! gives to terminal queries) and resizes are written as they cross the
//! PTY, timestamped from the start, one JSON line each. Events carry text,
//! so a UTF-8 sequence split across two reads is held back until it is
//! whole; bytes that are not UTF-8 are written as U+FFFD.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A shared handle: the reader, writer and resize paths all record.
pub type SharedRecorder = Arc<Mutex<CastRecorder>>;

pub struct CastRecorder {
    out: BufWriter<File>,
    start: Instant,
    /// Incomplete UTF-8 at the end of the last chunk, per stream.
    carry_output: Vec<u8>,
    carry_input: Vec<u8>,
}

impl CastRecorder {
    /// Creates `path` (0600) and writes the header.
    pub fn create(
        path: &Path,
        rows: u16,
        cols: u16,
        command: &str,
    ) -> std::io::Result<SharedRecorder> {
        use crate::os::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?;
        let mut out = BufWriter::new(file);
        let header = serde_json::json!({
            "version": 2,
            "width": cols,
            "height": rows,
            "timestamp": crate::time::unix_millis() / 1000,
            "command": command,
            "env": {"TERM": std::env::var("TERM").unwrap_or_else(|_| "xterm-256color".into())},
        });
        writeln!(out, "{header}")?;
        out.flush()?;
        Ok(Arc::new(Mutex::new(Self {
            out,
            start: Instant::now(),
            carry_output: Vec::new(),
            carry_input: Vec::new(),
        })))
    }

    pub fn output(&mut self, bytes: &[u8]) {
        let text = take_text(&mut self.carry_output, bytes);
        self.event("o", &text);
    }

    pub fn input(&mut self, bytes: &[u8]) {
        let text = take_text(&mut self.carry_input, bytes);
        self.event("i", &text);
    }

    pub fn resize(&mut self, rows: u16, cols: u16) {
        self.event("r", &format!("{cols}x{rows}"));
    }

    fn event(&mut self, kind: &str, data: &str) {
        if data.is_empty() {
            return;
        }
        let t = self.start.elapsed().as_secs_f64();
        let line = serde_json::json!([(t * 1e6).round() / 1e6, kind, data]);
        // A recording that cannot be written must not stop the session.
        let _ = writeln!(self.out, "{line}").and_then(|_| self.out.flush());
    }
}

/// The text of `carry` + `bytes`, keeping an incomplete UTF-8 sequence at
/// the end in `carry` for the next chunk. Public for the fuzz target
/// `cast_text` (fuzz/src/lib.rs), which checks it against whole-stream
/// decoding.
pub fn take_text(carry: &mut Vec<u8>, bytes: &[u8]) -> String {
    carry.extend_from_slice(bytes);
    // Only the last piece can be a sequence cut short at the end (an error
    // with no length); invalid bytes before it must not hide it, or a
    // character split between reads after them is lost.
    let cut_short = carry.utf8_chunks().last().map_or(0, |chunk| {
        let tail = chunk.invalid();
        match std::str::from_utf8(tail) {
            Err(e) if e.error_len().is_none() => tail.len(),
            _ => 0,
        }
    });
    let complete = carry.len() - cut_short;
    let text = String::from_utf8_lossy(&carry[..complete]).into_owned();
    carry.drain(..complete);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_events_and_keeps_split_utf8_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.cast");
        let rec = CastRecorder::create(&path, 24, 80, "bash").unwrap();
        {
            let mut r = rec.lock().unwrap();
            let e = "é".as_bytes();
            r.output(&[b'a', e[0]]);
            r.output(&[e[1], b'\n']);
            r.input(b"ls\r");
            r.resize(40, 120);
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["version"], 2);
        assert_eq!(
            (lines[0]["width"].as_u64(), lines[0]["height"].as_u64()),
            (Some(80), Some(24))
        );
        let events: Vec<(String, String)> = lines[1..]
            .iter()
            .map(|e| {
                (
                    e[1].as_str().unwrap().to_owned(),
                    e[2].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let want = [("o", "a"), ("o", "é\n"), ("i", "ls\r"), ("r", "120x40")];
        assert_eq!(events, want.map(|(k, d)| (k.to_owned(), d.to_owned())));
    }

    #[test]
    fn an_invalid_byte_does_not_break_a_character_split_after_it() {
        // Found by the `cast_text` fuzz target: the invalid 0xff hid the cut
        // `é` behind it, which was written as two U+FFFD.
        let mut carry = Vec::new();
        assert_eq!(take_text(&mut carry, b"x\xff\xc3"), "x\u{fffd}");
        assert_eq!(take_text(&mut carry, b"\xa9"), "é");
        assert!(carry.is_empty());
    }
}
