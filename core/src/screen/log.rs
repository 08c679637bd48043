//! What a program printed, as text, addressed by position: the last
//! [`KEPT`] bytes of its escape-stripped output and how many came before.
//!
//! A reader that wants only what is new (an agent following another
//! session through MCP's `session_output_since`) keeps the position the
//! last answer ended at and asks from there. The screen cannot answer that:
//! it forgets what scrolled away, and a redrawn line looks new. Positions
//! count stripped bytes from the session's start, so they stay valid however
//! the output was chunked; what fell out of the window is reported as
//! skipped, never silently.

use std::collections::VecDeque;

use super::strip::{AnsiStripper, Piece};

/// Bytes of text kept for readers that fall behind.
pub const KEPT: usize = 256 * 1024;

#[derive(Default)]
pub struct OutputLog {
    stripper: AnsiStripper,
    kept: VecDeque<u8>,
    /// Position just after the last byte kept.
    end: u64,
}

/// Text after a position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Since {
    pub text: String,
    /// Where the next read starts.
    pub cursor: u64,
    /// Bytes after the asked position that are no longer kept (the reader
    /// fell more than [`KEPT`] behind).
    pub skipped: u64,
}

impl OutputLog {
    pub fn push(&mut self, bytes: &[u8]) {
        let (kept, end) = (&mut self.kept, &mut self.end);
        self.stripper.feed(bytes, &mut |piece| {
            if let Piece::Text(text) = piece {
                kept.extend(text);
                *end += text.len() as u64;
            }
        });
        let over = self.kept.len().saturating_sub(KEPT);
        self.kept.drain(..over);
    }

    /// The position after everything printed so far.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// The text after `cursor` (all that is kept when it is older; nothing
    /// when it is at or past the end).
    pub fn since(&self, cursor: u64) -> Since {
        let start = self.end - self.kept.len() as u64;
        let from = cursor.clamp(start, self.end);
        let mut bytes: Vec<u8> = self
            .kept
            .range((from - start) as usize..)
            .copied()
            .collect();
        // When the window was trimmed, its first bytes can be the rest of a
        // character: start at the next whole one. A cursor an earlier
        // answer gave is always on a boundary.
        let partial = if from == start {
            bytes.iter().take_while(|b| is_continuation(**b)).count()
        } else {
            0
        };
        bytes.drain(..partial);
        let shown_from = from + partial as u64;
        // The end can fall inside a character the program is still
        // writing: the next read begins at its first byte.
        bytes.truncate(whole_chars(&bytes));
        Since {
            cursor: shown_from + bytes.len() as u64,
            text: String::from_utf8_lossy(&bytes).into_owned(),
            skipped: shown_from.saturating_sub(cursor),
        }
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xc0 == 0x80
}

/// The length of the longest prefix of `bytes` that does not end inside a
/// UTF-8 character.
fn whole_chars(bytes: &[u8]) -> usize {
    let tail = bytes
        .iter()
        .rev()
        .take(3)
        .take_while(|b| is_continuation(**b))
        .count();
    let Some(lead_at) = bytes.len().checked_sub(tail + 1) else {
        return bytes.len();
    };
    let needed = match bytes[lead_at] {
        b if b >= 0xf0 => 4,
        b if b >= 0xe0 => 3,
        b if b >= 0xc0 => 2,
        _ => return bytes.len(),
    };
    if tail + 1 < needed {
        lead_at
    } else {
        bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_gets_only_what_is_new_without_escapes() {
        let mut log = OutputLog::default();
        log.push(b"one\r\n\x1b[31mtwo\x1b[0m\n");
        let first = log.since(0);
        assert_eq!(first.text, "one\ntwo\n");
        assert_eq!(first.skipped, 0);
        log.push(b"three\n");
        let next = log.since(first.cursor);
        assert_eq!(next.text, "three\n");
        assert_eq!(log.since(next.cursor).text, "");
        assert_eq!(next.cursor, log.end());
    }

    #[test]
    fn an_escape_split_across_chunks_is_still_removed() {
        let mut log = OutputLog::default();
        log.push(b"a\x1b[3");
        log.push(b"1mb");
        assert_eq!(log.since(0).text, "ab");
    }

    #[test]
    fn a_character_split_across_chunks_waits_for_its_end() {
        let mut log = OutputLog::default();
        let snow = "\u{2603}".as_bytes();
        log.push(&[b'x', snow[0]]);
        let first = log.since(0);
        assert_eq!(first.text, "x");
        log.push(&snow[1..]);
        assert_eq!(log.since(first.cursor).text, "\u{2603}");
    }

    #[test]
    fn a_reader_that_fell_behind_is_told_how_much_it_missed() {
        let mut log = OutputLog::default();
        log.push("\u{e9}".as_bytes());
        log.push(&vec![b'a'; KEPT - 1]);
        let read = log.since(0);
        // The window now starts inside the two-byte character: both of
        // its bytes are missed, and no broken character is shown.
        assert_eq!(read.skipped, 2);
        assert_eq!(read.text, "a".repeat(KEPT - 1));
        assert_eq!(read.cursor, log.end());
    }
}
