//! The screen model: a vt100 emulator fed by every byte the child writes.
//!
//! Detectors and snapshots read the *rendered* screen, never raw bytes: TUIs
//! such as Claude Code place words with cursor moves, so the text a person
//! sees exists only after emulation. The model also keeps what vt100 itself
//! does not: the window title, recent OSC sequences (the signals some
//! providers send instead of screen text), and the answers owed to terminal
//! queries when no real terminal is attached (see [`responder`]).

pub mod log;
pub mod responder;
pub mod strip;

use std::collections::VecDeque;

use crate::socket::protocol::ScreenSnapshot;

/// Rows of scrollback kept for snapshots and redraws.
const SCROLLBACK: usize = 2_000;
/// OSC sequences remembered for detectors.
const OSC_HISTORY: usize = 64;
/// Chunks smaller than this are always parsed whole (see `fast_forward`).
const FAST_FORWARD_MIN: usize = 256 * 1024;

/// Printable ASCII, UTF-8 sequences, CR and LF only.
fn is_plain_text(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .all(|&b| b >= 0x20 && b != 0x7f || b == b'\r' || b == b'\n')
}

/// State collected from sequences that do not change the grid.
#[derive(Default)]
struct Hooks {
    title: String,
    osc: VecDeque<Vec<u8>>,
    replies: Vec<u8>,
    answer_queries: bool,
}

impl vt100::Callbacks for Hooks {
    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        self.title = String::from_utf8_lossy(title).into_owned();
    }

    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        if self.answer_queries {
            responder::answer_csi(screen, i1, i2, params, c, &mut self.replies);
        }
    }

    fn unhandled_osc(&mut self, _: &mut vt100::Screen, params: &[&[u8]]) {
        if self.answer_queries {
            responder::answer_osc(params, &mut self.replies);
        }
        if self.osc.len() == OSC_HISTORY {
            self.osc.pop_front();
        }
        self.osc.push_back(params.join(&b';'));
    }
}

/// The emulated terminal of one session.
pub struct ScreenModel {
    parser: vt100::Parser<Hooks>,
}

impl ScreenModel {
    pub fn new(rows: u16, cols: u16) -> Self {
        Self {
            parser: vt100::Parser::new_with_callbacks(
                nonzero(rows),
                nonzero(cols),
                SCROLLBACK,
                Hooks::default(),
            ),
        }
    }

    /// Whether this model answers terminal queries. Only while no real
    /// terminal is attached: two answers to one query confuse the program.
    pub fn set_answer_queries(&mut self, on: bool) {
        self.parser.callbacks_mut().answer_queries = on;
    }

    /// Feeds child output; returns the bytes owed back to the child as
    /// answers to the queries it contained (empty when none, or when a real
    /// terminal answers instead).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        match self.fast_forward(bytes) {
            Some(tail) => {
                // Start the kept lines where a line starts, as they did.
                self.parser.process(b"\r\n");
                self.parser.process(tail);
            }
            None => self.parser.process(bytes),
        }
        std::mem::take(&mut self.parser.callbacks_mut().replies)
    }

    /// The part of a large chunk of plain text that can still show.
    ///
    /// A flood of output (a build log, `cat` of a big file) arrives faster
    /// than any emulator parses it, and the PTY reader hands over what piled
    /// up as one large chunk. When that chunk is plain text — printable
    /// characters, CR and LF, nothing that sets a mode, a colour or a title —
    /// every line but the last `rows + scrollback` is pushed out of the
    /// scrollback by the lines after it, whatever came before: the final
    /// screen and scrollback depend only on that tail, which starts right
    /// after a CR LF (column 0). Parsing just the tail gives the same model,
    /// exactly, at a fraction of the cost.
    fn fast_forward<'a>(&self, bytes: &'a [u8]) -> Option<&'a [u8]> {
        let (rows, _) = self.size();
        let keep = usize::from(rows) + self.parser.screen().scrollback_capacity() + 1;
        if bytes.len() < FAST_FORWARD_MIN || !is_plain_text(bytes) {
            return None;
        }
        let mut seen = 0;
        let cut = bytes.windows(2).rposition(|w| {
            seen += usize::from(w == b"\r\n");
            seen > keep
        })?;
        Some(&bytes[cut + 2..])
    }

    pub fn resize(&mut self, rows: u16, cols: u16) {
        self.parser
            .screen_mut()
            .set_size(nonzero(rows), nonzero(cols));
    }

    pub fn size(&self) -> (u16, u16) {
        let (r, c) = self.parser.screen().size();
        (r.get(), c.get())
    }

    pub fn title(&self) -> &str {
        &self.parser.callbacks().title
    }

    /// Recent OSC sequences other than titles, oldest first, parameters
    /// joined with `;` (e.g. `7501;state=working:app=codex`).
    pub fn recent_osc(&self) -> impl Iterator<Item = &[u8]> {
        self.parser.callbacks().osc.iter().map(Vec::as_slice)
    }

    /// The visible rows as text, trailing blanks trimmed.
    pub fn lines(&self) -> Vec<String> {
        let (_, cols) = self.size();
        self.parser
            .screen()
            .rows(0, cols)
            .map(|r| r.trim_end().to_owned())
            .collect()
    }

    /// The visible rows with faint text blanked out. Placeholders ("Ask
    /// anything…") are drawn faint in an empty input line — dim (SGR 2), or
    /// in the palette's bright black (colour 8), as opencode 1.18 does: read
    /// this way, the line holds only what somebody typed.
    pub fn lines_without_dim(&self) -> Vec<String> {
        let screen = self.parser.screen();
        let (rows, cols) = self.size();
        (0..rows)
            .map(|row| {
                let mut line = String::new();
                for col in 0..cols {
                    let Some(cell) = screen.cell(row, col) else {
                        break;
                    };
                    if cell.is_wide_continuation() {
                        continue;
                    }
                    match cell.contents() {
                        "" => line.push(' '),
                        _ if is_faint(cell) => line.push(' '),
                        text => line.push_str(text),
                    }
                }
                line.trim_end().to_owned()
            })
            .collect()
    }

    /// Whether the program asked for bracketed paste (`ESC[?2004h`).
    pub fn bracketed_paste(&self) -> bool {
        self.parser.screen().bracketed_paste()
    }

    /// (row, col) of the cursor, zero-based.
    pub fn cursor(&self) -> (u16, u16) {
        self.parser.screen().cursor_position()
    }

    pub fn snapshot(&self) -> ScreenSnapshot {
        let screen = self.parser.screen();
        let (rows, cols) = self.size();
        ScreenSnapshot {
            rows,
            cols,
            cursor: self.cursor(),
            title: self.title().to_owned(),
            alternate_screen: screen.alternate_screen(),
            lines: self.lines(),
        }
    }

    /// Bytes that repaint a real terminal to show this screen (for a client
    /// that attaches mid-session): modes, contents, cursor.
    pub fn redraw(&self) -> Vec<u8> {
        let screen = self.parser.screen();
        let mut out = Vec::new();
        if screen.alternate_screen() {
            out.extend_from_slice(b"\x1b[?1049h");
        }
        out.extend_from_slice(b"\x1b[H\x1b[2J");
        out.extend_from_slice(screen.state_formatted().as_bytes());
        out
    }
}

/// Drawn the way placeholders are.
fn is_faint(cell: &vt100::Cell) -> bool {
    cell.dim() || cell.fgcolor() == vt100::Color::Idx(8)
}

fn nonzero(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dim_placeholder_reads_as_empty() {
        let mut m = ScreenModel::new(3, 40);
        m.feed(b"\x1b[?2004h> \x1b[2mAsk anything\x1b[0m\r\n> typed \x1b[2mhint\x1b[0m");
        assert_eq!(m.lines()[0], "> Ask anything");
        assert_eq!(m.lines_without_dim()[0], ">");
        assert_eq!(m.lines_without_dim()[1], "> typed");
        assert!(m.bracketed_paste());
        // opencode 1.18's placeholder: bright black, not dim.
        let mut m = ScreenModel::new(2, 60);
        m.feed("┃  \x1b[38;5;8m\x1b[48;5;234mAsk anything… \"Fix broken tests\"\x1b[0m".as_bytes());
        assert_eq!(m.lines_without_dim()[0], "┃");
    }

    #[test]
    fn renders_cursor_placed_text_and_title() {
        let mut m = ScreenModel::new(5, 20);
        m.feed(b"\x1b]0;my title\x07hello\x1b[3Gxy\r\nnext");
        assert_eq!(m.title(), "my title");
        assert_eq!(m.lines()[0], "hexyo");
        assert_eq!(m.lines()[1], "next");
    }

    #[test]
    fn answers_cursor_queries_only_when_asked_to() {
        let mut m = ScreenModel::new(24, 80);
        assert!(m.feed(b"ab\x1b[6n").is_empty());
        m.set_answer_queries(true);
        assert_eq!(m.feed(b"\x1b[6n"), b"\x1b[1;3R");
    }

    /// Parsing only the tail of a plain-text flood gives the same screen,
    /// scrollback and cursor as parsing all of it, from any starting state.
    #[test]
    fn fast_forward_gives_the_same_model_as_a_full_parse() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..6 {
            let mut flood = Vec::new();
            while flood.len() < 2 * FAST_FORWARD_MIN {
                let len = (next() % 200) as usize;
                flood.extend((0..len).map(|i| b'a' + ((i as u64 + next()) % 26) as u8));
                flood.extend_from_slice(if next() % 7 == 0 {
                    "é\r\n".as_bytes()
                } else {
                    b"\r\n"
                });
            }
            let prefix: &[u8] = if round % 2 == 0 {
                b"$ prompt "
            } else {
                b"\x1b[1;31mred\x1b[0m\r\nx"
            };
            let mut fast = ScreenModel::new(24, 80);
            let mut full = vt100::Parser::new(nonzero(24), nonzero(80), SCROLLBACK);
            fast.feed(prefix);
            full.process(prefix);
            assert!(
                fast.fast_forward(&flood).is_some(),
                "round {round}: fast path not taken"
            );
            fast.feed(&flood);
            full.process(&flood);
            assert_eq!(
                fast.parser.screen().contents_formatted(),
                full.screen().contents_formatted()
            );
            assert_eq!(
                fast.parser.screen().cursor_position(),
                full.screen().cursor_position()
            );
            let (mut a, mut b) = (fast.parser, full);
            a.screen_mut().set_scrollback(SCROLLBACK);
            b.screen_mut().set_scrollback(SCROLLBACK);
            assert_eq!(
                a.screen().contents(),
                b.screen().contents(),
                "round {round}: scrollback differs"
            );
        }
    }

    #[test]
    fn fast_forward_never_skips_sequences() {
        let m = ScreenModel::new(24, 80);
        let mut flood = b"line\r\n".repeat(FAST_FORWARD_MIN);
        flood.extend_from_slice(b"\x1b]0;title\x07");
        assert!(m.fast_forward(&flood).is_none());
    }

    #[test]
    fn keeps_osc_signals_for_detectors() {
        let mut m = ScreenModel::new(5, 20);
        m.feed(b"\x1b]7501;state=working:app=codex\x1b\\");
        assert_eq!(
            m.recent_osc().last().unwrap(),
            b"7501;state=working:app=codex"
        );
    }
}
