//! What may be delivered: one line of printable text.
//!
//! Delivered text is typed into somebody's terminal. A newline would submit
//! early, an escape sequence could drive the program (or the terminal) in
//! ways nobody reviewed, and a NUL or backspace would corrupt the line a
//! person sees. So the text is checked before anything is written, and a
//! refusal says exactly what was wrong and where.

/// Longest text accepted, in bytes: enough for any note, short enough that
/// a TUI's input box shows it whole for the echo check.
pub const MAX_TEXT_BYTES: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidText {
    #[error("the text is empty; give the message to deliver")]
    Empty,
    #[error("the text is blank (only spaces, zero-width or box-drawing characters); give the message to deliver")]
    Blank,
    #[error("the text is {0} bytes; the limit is {MAX_TEXT_BYTES}: send a short note and put the rest in a file")]
    TooLong(usize),
    #[error("the prompt is {0} bytes; the limit is {MAX_PROMPT_BYTES}: put the rest in a file the agent can read")]
    PromptTooLong(usize),
    #[error("the text is not valid UTF-8 (at byte {0}); send UTF-8 text")]
    NotUtf8(usize),
    #[error("the text holds a line break at character {0}; deliver one line; a longer text goes as a message, of which only a one-line notice is typed: agent-comms send --to AGENT --body-file FILE")]
    LineBreak(usize),
    #[error("the text holds the control character {code} at character {at}; remove it (escape sequences and control keys are never delivered)")]
    Control { code: String, at: usize },
}

/// Checks raw bytes (as they came from a file or a socket).
pub fn validate_bytes(bytes: &[u8]) -> Result<&str, InvalidText> {
    let text = std::str::from_utf8(bytes).map_err(|e| InvalidText::NotUtf8(e.valid_up_to()))?;
    validate(text)?;
    Ok(text)
}

/// Checks text: not empty, bounded, no CR/LF, no C0 or C1 control
/// characters (ESC, NUL, BEL, DEL …), not blank.
pub fn validate(text: &str) -> Result<(), InvalidText> {
    if text.is_empty() {
        return Err(InvalidText::Empty);
    }
    if text.len() > MAX_TEXT_BYTES {
        return Err(InvalidText::TooLong(text.len()));
    }
    for (at, c) in text.chars().enumerate() {
        match c {
            '\r' | '\n' | '\u{2028}' | '\u{2029}' => return Err(InvalidText::LineBreak(at + 1)),
            c if c.is_control() => {
                return Err(InvalidText::Control {
                    code: format!("U+{:04X}", u32::from(c)),
                    at: at + 1,
                })
            }
            _ => {}
        }
    }
    // Nothing of it would show, so nothing could prove it echoed or was
    // submitted; and its Enter would still run (bash ran an NBSP).
    if text.chars().all(invisible) {
        return Err(InvalidText::Blank);
    }
    Ok(())
}

/// The longest first prompt (`--prompt`, `--prompt-file`).
pub const MAX_PROMPT_BYTES: usize = 1 << 20;

/// A first prompt: text of several lines, perhaps, but no other control
/// characters (it ends up on a terminal in `acp log`), bounded, not blank.
/// A delivery is held to the one-line rule of every runtime instead.
pub fn check_prompt(text: &str) -> Result<(), InvalidText> {
    if text.len() > MAX_PROMPT_BYTES {
        return Err(InvalidText::PromptTooLong(text.len()));
    }
    for (at, c) in text.chars().enumerate() {
        if c.is_control() && c != '\n' && c != '\t' {
            return Err(InvalidText::Control {
                code: format!("U+{:04X}", u32::from(c)),
                at: at + 1,
            });
        }
    }
    if text.chars().all(invisible) {
        return Err(if text.is_empty() {
            InvalidText::Empty
        } else {
            InvalidText::Blank
        });
    }
    Ok(())
}

/// Characters the echo check leaves out: whitespace of any kind (NBSP and
/// the ideographic space included), zero-width characters, and the
/// box-drawing characters TUIs draw around and inside input boxes.
pub fn invisible(c: char) -> bool {
    c.is_whitespace()
        || matches!(c, '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}')
        || ('\u{2500}'..='\u{257F}').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_one_line_of_text() {
        assert!(validate("héllo wörld — 你好 ✓").is_ok());
        // A tab would complete a path in most TUIs: it is a control key.
        assert!(matches!(
            validate("a\tb"),
            Err(InvalidText::Control { at: 2, .. })
        ));
    }

    #[test]
    fn refuses_what_would_drive_the_terminal() {
        assert_eq!(validate("a\nb"), Err(InvalidText::LineBreak(2)));
        assert_eq!(validate("a\rb"), Err(InvalidText::LineBreak(2)));
        assert!(matches!(
            validate("a\x1b[31m"),
            Err(InvalidText::Control { at: 2, .. })
        ));
        assert!(matches!(validate("a\0"), Err(InvalidText::Control { .. })));
        assert!(matches!(
            validate("a\u{7f}"),
            Err(InvalidText::Control { .. })
        ));
        assert!(matches!(
            validate("a\u{9b}31m"),
            Err(InvalidText::Control { .. })
        ));
        assert_eq!(validate(""), Err(InvalidText::Empty));
        for blank in [" ", "\u{a0}", "\u{a0} \u{3000}", "\u{200b}\u{2003}", "──"] {
            assert_eq!(validate(blank), Err(InvalidText::Blank), "{blank:?}");
        }
        assert!(validate(" \u{a0}x ").is_ok());
        assert_eq!(
            validate(&"x".repeat(MAX_TEXT_BYTES + 1)),
            Err(InvalidText::TooLong(MAX_TEXT_BYTES + 1))
        );
        assert_eq!(validate_bytes(b"ok\xff"), Err(InvalidText::NotUtf8(2)));
    }
}
