//! Keys from the bytes a terminal sends, one read at a time.
//!
//! A read is the unit the real CLIs' quirks are about (Claude Code drops an
//! Enter that comes in the same read as typed text), so the parser is fed
//! read by read and keeps between reads only what a read can cut in two: an
//! escape sequence, a UTF-8 character, a bracketed paste.

const ESC: u8 = 0x1b;
const PASTE_START: &[u8] = b"\x1b[200~";
const PASTE_END: &[u8] = b"\x1b[201~";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// Printable text typed (not pasted).
    Text(String),
    /// A bracketed paste, its CR, LF and CRLF each one newline.
    Paste(String),
    /// CR.
    Enter,
    /// LF (Ctrl-J): a newline in the input.
    Newline,
    Backspace,
    /// Ctrl-U.
    Clear,
    /// Ctrl-C.
    Interrupt,
    /// Ctrl-D.
    Eof,
    /// The Esc key alone.
    Esc,
    /// Any other key (arrows, Tab, Alt-x) or a terminal's report: ignored.
    Other,
}

#[derive(Default)]
pub struct Parser {
    pending: Vec<u8>,
    paste: Option<Vec<u8>>,
}

impl Parser {
    /// Whether an escape sequence was cut at the end of the last read: if
    /// nothing follows soon, it was the Esc key.
    pub fn has_partial_escape(&self) -> bool {
        self.paste.is_none() && self.pending.first() == Some(&ESC)
    }

    /// The Esc key, for a partial escape nothing completed while it
    /// waited long enough (`stale`).
    pub fn flush_stale_after(&mut self, stale: bool) -> Option<Key> {
        (stale && self.has_partial_escape()).then(|| {
            self.pending.clear();
            Key::Esc
        })
    }

    pub fn feed(&mut self, data: &[u8]) -> Vec<Key> {
        let mut buf = std::mem::take(&mut self.pending);
        buf.extend_from_slice(data);
        let mut out = Vec::new();
        let mut i = 0;
        while i < buf.len() {
            if let Some(paste) = &mut self.paste {
                match find(&buf[i..], PASTE_END) {
                    Some(end) => {
                        paste.extend_from_slice(&buf[i..i + end]);
                        out.push(Key::Paste(paste_text(paste)));
                        self.paste = None;
                        i += end + PASTE_END.len();
                    }
                    None => {
                        let keep = partial_suffix(&buf[i..], PASTE_END);
                        paste.extend_from_slice(&buf[i..buf.len() - keep]);
                        self.pending = buf[buf.len() - keep..].to_vec();
                        return out;
                    }
                }
                continue;
            }
            let byte = buf[i];
            if byte == ESC {
                let Some(len) = escape_length(&buf[i..]) else {
                    self.pending = buf[i..].to_vec();
                    return out;
                };
                let seq = &buf[i..i + len];
                if seq == PASTE_START {
                    self.paste = Some(Vec::new());
                } else {
                    out.push(if seq == [ESC] { Key::Esc } else { Key::Other });
                }
                i += len;
            } else if byte < 0x20 || byte == 0x7f {
                out.push(control(byte));
                i += 1;
            } else {
                let end = buf[i..]
                    .iter()
                    .position(|&b| b < 0x20 || b == 0x7f)
                    .map_or(buf.len(), |n| i + n);
                // A UTF-8 character cut by the end of the read waits for
                // the rest.
                let cut = if end == buf.len() {
                    incomplete_utf8_tail(&buf[i..end])
                } else {
                    0
                };
                let text = String::from_utf8_lossy(&buf[i..end - cut]).into_owned();
                if !text.is_empty() {
                    match out.last_mut() {
                        Some(Key::Text(t)) => t.push_str(&text),
                        _ => out.push(Key::Text(text)),
                    }
                }
                if cut > 0 {
                    self.pending = buf[end - cut..end].to_vec();
                    return out;
                }
                i = end;
            }
        }
        out
    }
}

fn control(byte: u8) -> Key {
    match byte {
        0x0d => Key::Enter,
        0x0a => Key::Newline,
        0x7f | 0x08 => Key::Backspace,
        0x15 => Key::Clear,
        0x03 => Key::Interrupt,
        0x04 => Key::Eof,
        _ => Key::Other,
    }
}

/// The length of the escape sequence `buf` starts with, or `None` when the
/// read ended inside it. A lone ESC at the end is `None` too: the next read
/// (or the stale timer) tells an Esc key from a cut sequence.
fn escape_length(buf: &[u8]) -> Option<usize> {
    match *buf.get(1)? {
        b'[' => {
            let params = buf[2..].iter().position(|b| !(0x20..=0x3f).contains(b))?;
            let last = buf[2 + params];
            Some(if (0x40..=0x7e).contains(&last) {
                params + 3
            } else {
                params + 2
            })
        }
        b'O' => (buf.len() > 2).then_some(3),
        b']' | b'P' | b'_' | b'^' | b'X' => {
            let mut j = 2;
            while j < buf.len() {
                match buf[j] {
                    0x07 => return Some(j + 1),
                    ESC if buf.get(j + 1) == Some(&b'\\') => return Some(j + 2),
                    ESC if j + 1 == buf.len() => return None,
                    _ => {}
                }
                j += 1;
            }
            None
        }
        ESC => Some(1),
        _ => Some(2),
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The length of the longest tail of `buf` that begins `marker`.
fn partial_suffix(buf: &[u8], marker: &[u8]) -> usize {
    (1..marker.len().min(buf.len() + 1))
        .rev()
        .find(|&k| buf.ends_with(&marker[..k]))
        .unwrap_or(0)
}

/// How many bytes at the end of `buf` begin a UTF-8 character that is not
/// complete yet.
fn incomplete_utf8_tail(buf: &[u8]) -> usize {
    for back in 1..=3.min(buf.len()) {
        let b = buf[buf.len() - back];
        if b & 0xc0 != 0x80 {
            let need = match b {
                0xc0..=0xdf => 2,
                0xe0..=0xef => 3,
                0xf0..=0xf7 => 4,
                _ => return 0,
            };
            return if back < need { back } else { 0 };
        }
    }
    0
}

fn paste_text(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw)
        .replace("\r\n", "\n")
        .replace('\r', "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paste_cut_across_reads_is_one_paste_with_newlines() {
        let mut p = Parser::default();
        assert_eq!(p.feed(b"\x1b[20"), []);
        assert_eq!(p.feed(b"0~one\r\ntwo\x1b[2"), []);
        assert_eq!(
            p.feed(b"01~\r"),
            [Key::Paste("one\ntwo".into()), Key::Enter]
        );
    }

    #[test]
    fn typed_utf8_cut_in_two_and_controls() {
        let mut p = Parser::default();
        assert_eq!(p.feed(b"a\xe2\x9c"), [Key::Text("a".into())]);
        assert_eq!(
            p.feed(b"\x93\x7f\x15\x03\n"),
            [
                Key::Text("\u{2713}".into()),
                Key::Backspace,
                Key::Clear,
                Key::Interrupt,
                Key::Newline
            ]
        );
    }

    #[test]
    fn a_lone_esc_waits_then_is_the_esc_key_and_sequences_are_ignored() {
        let mut p = Parser::default();
        assert_eq!(
            p.feed(b"\x1b[A\x1b]11;rgb:0/0/0\x07\x1b"),
            [Key::Other, Key::Other]
        );
        assert!(p.has_partial_escape());
        assert_eq!(p.flush_stale_after(false), None);
        assert_eq!(p.flush_stale_after(true), Some(Key::Esc));
        assert_eq!(p.feed(b"\x1b\x1b"), [Key::Esc]);
    }
}
