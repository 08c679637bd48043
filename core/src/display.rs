//! Untrusted text made safe to print to a terminal.
//!
//! Message bodies, sender names an older build stored, screen rows, command
//! lines and profile fields come from other people's programs. Printed as
//! they are, an `ESC ] 0;… BEL` retitles the reader's terminal, other
//! escape sequences move its cursor or rewrite what it shows, and a line
//! break splits a table row in two. Every such field passes through one of
//! the two functions here on its way to a terminal; `--raw` is the explicit
//! way to get a body's exact bytes. `--json` output goes through [`json`]:
//! JSON escapes C0 controls itself, but not C1 controls or bidirectional
//! overrides, and a person reading it on a terminal (`… --json | less`) is
//! as exposed to those as to the table; [`json`] writes them as `\uNNNN`,
//! the same text to any JSON reader.
//!
//! What is escaped, visibly and unambiguously enough to read: C0 controls
//! and DEL as `\xNN` (`\x1b`, `\x07`) — except `\n` and `\t`, shown as
//! such — C1 controls (U+0080–U+009F, which many terminals obey as ESC
//! sequences) as `\u{NN}`, and the Unicode bidirectional overrides and
//! isolates (U+202A–U+202E, U+2066–U+2069), which reorder what a line
//! seems to say, as `\u{NNNN}`. Everything else — any other Unicode text,
//! backslashes included — is printed as is.

use std::borrow::Cow;
use std::io;

use serde::Serialize;

/// `text` for one cell of a table or one line of a report: every control
/// character escaped, line breaks and tabs included, so it stays on its
/// line.
pub fn one_line(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// `text` as a block (a message body): its line breaks kept, every other
/// control character escaped.
pub fn block(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

fn escape(text: &str, keep_newlines: bool) -> Cow<'_, str> {
    let kept = |c: char| keep_newlines && matches!(c, '\n' | '\t');
    if !text.chars().any(|c| unsafe_char(c) && !kept(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            _ if kept(c) || !unsafe_char(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\0'..='\x1f' | '\x7f' => out.push_str(&format!("\\x{:02x}", c as u32)),
            _ => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// A character a terminal may act on instead of showing.
fn unsafe_char(c: char) -> bool {
    c.is_control() || bidi_control(c)
}

/// The bidirectional overrides and isolates, which reorder what a line
/// seems to say.
fn bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `value` as one line of JSON, with every character a terminal may act on
/// escaped as `\uNNNN` (serde_json escapes C0 controls; this adds C1
/// controls, DEL and the bidirectional controls).
pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let mut out = Vec::with_capacity(128);
    value.serialize(&mut serde_json::Serializer::with_formatter(
        &mut out,
        TerminalSafe,
    ))?;
    Ok(String::from_utf8(out).expect("serde_json writes UTF-8"))
}

/// serde_json's compact form, with the escapes [`json`] adds.
struct TerminalSafe;

impl serde_json::ser::Formatter for TerminalSafe {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut rest = fragment;
        while let Some((at, c)) = rest.char_indices().find(|(_, c)| unsafe_char(*c)) {
            writer.write_all(&rest.as_bytes()[..at])?;
            write!(writer, "\\u{:04x}", c as u32)?;
            rest = &rest[at + c.len_utf8()..];
        }
        writer.write_all(rest.as_bytes())
    }
}

/// `word` as one shell word: quoted when it holds anything but the
/// characters of plain paths.
pub fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%=,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_what_a_terminal_would_obey_and_reads_back_the_same() {
        let text = "a\u{9b}31mred\u{202e}txt.exe\u{7f}\x1b]0;x\x07 é\\\"";
        let line = json(&serde_json::json!({ "body": text })).unwrap();
        assert_eq!(
            line,
            r#"{"body":"a\u009b31mred\u202etxt.exe\u007f\u001b]0;x\u0007 é\\\""}"#
        );
        let back: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(back["body"], text);
    }

    #[test]
    fn controls_are_escaped_and_other_text_is_kept() {
        let hostile = "a\u{1b}]0;HACKED\u{7}b\u{9b}2J\u{7f}\r\u{202e}txt.exe";
        assert_eq!(
            one_line(hostile),
            "a\\x1b]0;HACKED\\x07b\\u{9b}2J\\x7f\\x0d\\u{202e}txt.exe"
        );
        assert_eq!(one_line("two\nlines\tand tab"), "two\\nlines\\tand tab");
        assert_eq!(
            block("two\nlines\tand tab\u{1b}[2J"),
            "two\nlines\tand tab\\x1b[2J"
        );
        // Ordinary text, backslashes and all, is borrowed unchanged.
        for plain in ["ünïcode ✓ 日本", "C:\\path\\x1b", ""] {
            assert!(matches!(one_line(plain), Cow::Borrowed(s) if s == plain));
        }
    }

    #[test]
    fn nothing_escaped_holds_a_control_character() {
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        for escaped in [one_line(&all), block(&all)] {
            assert!(escaped
                .chars()
                .all(|c| !unsafe_char(c) || matches!(c, '\n' | '\t')));
        }
        assert!(!one_line(&all).contains('\n'));
    }
}
