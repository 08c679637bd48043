//! An ANSI-stripped view of the byte stream, chunk boundary safe.
//!
//! Cells report what a program printed, not what the screen shows at the end
//! (a screen forgets what scrolled away and what was overwritten), so they
//! read the raw stream through this filter: escape sequences are removed,
//! carriage returns dropped, and OSC payloads handed out separately because
//! shell-integration marks travel as OSC 133.

/// One piece of stripped output.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    Text(&'a [u8]),
    Osc(&'a [u8]),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ground,
    Esc,
    /// ESC followed by intermediate bytes (`ESC ( B` and friends).
    EscIntermediate,
    Csi,
    Osc,
    OscEsc,
    /// DCS, SOS, PM, APC: skipped up to the string terminator.
    Str,
    StrEsc,
}

/// Longest OSC payload kept; longer ones (images, clipboard) are dropped.
const MAX_OSC: usize = 4096;

pub struct AnsiStripper {
    state: State,
    osc: Vec<u8>,
    text: Vec<u8>,
}

impl Default for AnsiStripper {
    fn default() -> Self {
        Self {
            state: State::Ground,
            osc: Vec::new(),
            text: Vec::new(),
        }
    }
}

impl AnsiStripper {
    /// Runs `bytes` through the filter, calling `sink` for each piece in order.
    pub fn feed(&mut self, bytes: &[u8], sink: &mut dyn FnMut(Piece<'_>)) {
        for &b in bytes {
            match self.state {
                State::Ground => match b {
                    0x1b => {
                        self.flush(sink);
                        self.state = State::Esc;
                    }
                    b'\n' | b'\t' => self.text.push(b),
                    // Carriage returns and other C0 controls are terminal
                    // mechanics, not output.
                    0..=0x1f | 0x7f => {}
                    _ => self.text.push(b),
                },
                State::Esc => {
                    self.state = match b {
                        b'[' => State::Csi,
                        b']' => {
                            self.osc.clear();
                            State::Osc
                        }
                        b'P' | b'X' | b'^' | b'_' => State::Str,
                        0x20..=0x2f => State::EscIntermediate,
                        _ => State::Ground,
                    }
                }
                State::EscIntermediate => {
                    if !(0x20..=0x2f).contains(&b) {
                        self.state = State::Ground;
                    }
                }
                State::Csi => {
                    if (0x40..=0x7e).contains(&b) {
                        self.state = State::Ground;
                    }
                }
                State::Osc => match b {
                    0x07 => self.end_osc(sink),
                    0x1b => self.state = State::OscEsc,
                    _ => {
                        if self.osc.len() < MAX_OSC {
                            self.osc.push(b);
                        }
                    }
                },
                State::OscEsc => {
                    // ESC \ ends it; any other ESC also ends the string.
                    self.end_osc(sink);
                    if b != b'\\' {
                        self.state = State::Esc;
                    }
                }
                State::Str => {
                    if b == 0x1b {
                        self.state = State::StrEsc;
                    } else if b == 0x07 {
                        self.state = State::Ground;
                    }
                }
                State::StrEsc => {
                    self.state = if b == b'\\' {
                        State::Ground
                    } else {
                        State::Str
                    }
                }
            }
        }
        self.flush(sink);
    }

    fn end_osc(&mut self, sink: &mut dyn FnMut(Piece<'_>)) {
        if self.osc.len() < MAX_OSC {
            sink(Piece::Osc(&self.osc));
        }
        self.osc.clear();
        self.state = State::Ground;
    }

    fn flush(&mut self, sink: &mut dyn FnMut(Piece<'_>)) {
        if !self.text.is_empty() {
            sink(Piece::Text(&self.text));
            self.text.clear();
        }
    }
}

/// Strips a whole buffer at once (for tests and one-off use).
pub fn strip_all(bytes: &[u8]) -> String {
    let mut out = Vec::new();
    AnsiStripper::default().feed(bytes, &mut |p| {
        if let Piece::Text(t) = p {
            out.extend_from_slice(t);
        }
    });
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_sequences_and_carriage_returns() {
        assert_eq!(
            strip_all(b"\x1b[1;31mred\x1b[0m\r\n\x1b(Bplain\x1bP1$r\x1b\\ \tx"),
            "red\nplain \tx"
        );
    }

    #[test]
    fn survives_any_split_and_reports_osc() {
        let input = b"a\x1b]133;D;0;tok\x07b\x1b]2;t\x1b\\c";
        for split in 0..input.len() {
            let mut s = AnsiStripper::default();
            let mut text = Vec::new();
            let mut osc = Vec::new();
            for part in [&input[..split], &input[split..]] {
                s.feed(part, &mut |p| match p {
                    Piece::Text(t) => text.extend_from_slice(t),
                    Piece::Osc(o) => osc.push(o.to_vec()),
                });
            }
            assert_eq!(text, b"abc", "split at {split}");
            assert_eq!(osc, vec![b"133;D;0;tok".to_vec(), b"2;t".to_vec()]);
        }
    }
}
