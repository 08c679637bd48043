//! Laying rows out and drawing them: what detection reads.
//!
//! Every change redraws the whole screen row by row in place (never a blank
//! screen in between), as the Python fakes do; a fake has no reason to be
//! clever about it.

use unicode_width::UnicodeWidthChar;

pub const ESC: &str = "\x1b";
/// The string terminator: Wine's console rings a BEL instead of passing it
/// on, and every terminal takes ST.
pub const ST: &str = "\x1b\\";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub rows: Vec<String>,
    /// 0-based row and column.
    pub cursor: (usize, usize),
    pub title: String,
}

/// The characters of `text` a terminal shows: all but its SGR sequences.
fn shown_chars(text: &str) -> impl Iterator<Item = char> + '_ {
    let mut in_sgr = false;
    text.chars().filter(move |&ch| {
        if ch == '\x1b' {
            in_sgr = true;
        } else if in_sgr {
            in_sgr = ch != 'm';
        } else {
            return true;
        }
        false
    })
}

/// Terminal columns `text` takes; SGR sequences take none.
pub fn cells(text: &str) -> usize {
    shown_chars(text).map(|ch| ch.width().unwrap_or(0)).sum()
}

/// `row` without its SGR sequences, cut to `width` columns: for a console
/// drawn through its API, which takes no escape sequences.
#[cfg(windows)]
pub fn plain(row: &str, width: usize) -> String {
    clip(&shown_chars(row).collect::<String>(), width)
}

/// `row` cut to `width` columns, keeping its SGR sequences.
fn clip(row: &str, width: usize) -> String {
    if cells(row) <= width {
        return row.to_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    let mut in_sgr = false;
    for ch in row.chars() {
        if ch == '\x1b' || in_sgr {
            in_sgr = ch != 'm';
            out.push(ch);
            continue;
        }
        used += ch.width().unwrap_or(0);
        if used > width {
            break;
        }
        out.push(ch);
    }
    if row.contains('\x1b') {
        out.push_str("\x1b[0m");
    }
    out
}

/// Rows for `text`: its first line after `prefix`, each further line and
/// each row a long line wraps onto after `cont`.
pub fn wrap(text: &str, prefix: &str, cont: &str, width: usize) -> Vec<String> {
    let mut rows = Vec::new();
    for (n, line) in text.split('\n').enumerate() {
        let mut row = if n == 0 { prefix } else { cont }.to_owned();
        let mut used = cells(&row);
        for ch in line.chars() {
            let w = ch.width().unwrap_or(0);
            if used + w > width && used > cells(cont) {
                rows.push(std::mem::replace(&mut row, cont.to_owned()));
                used = cells(cont);
            }
            row.push(ch);
            used += w;
        }
        rows.push(row);
    }
    rows
}

pub fn dim(text: &str) -> String {
    format!("{ESC}[2m{text}{ESC}[0m")
}

/// The rows of a screen: all of `bottom` last (cut from its top only when
/// the screen is shorter), after as many of the last rows of `above` as
/// fit. `fill` pads between them so that `bottom` ends on the last row
/// (full-screen TUIs). Also returns the screen row of `bottom[0]`
/// (negative when cut).
pub fn stack(
    above: &[String],
    bottom: &[String],
    height: usize,
    fill: bool,
) -> (Vec<String>, isize) {
    let kept = &bottom[bottom.len().saturating_sub(height)..];
    let room = height - kept.len();
    let shown = &above[above.len().saturating_sub(room)..];
    let gap = if fill { room - shown.len() } else { 0 };
    let origin = (shown.len() + gap) as isize - (bottom.len() - kept.len()) as isize;
    let mut rows = shown.to_vec();
    rows.extend(std::iter::repeat_n(String::new(), gap));
    rows.extend_from_slice(kept);
    (rows, origin)
}

/// A cursor given within the bottom block, as a screen position.
pub fn place(rows: &[String], origin: isize, cursor: (usize, usize)) -> (usize, usize) {
    let row = (origin + cursor.0 as isize).clamp(0, rows.len().saturating_sub(1) as isize);
    (row as usize, cursor.1)
}

/// The escape sequences that turn the screen showing `shown` into `frame`,
/// or nothing when they are the same.
#[cfg(unix)]
pub fn redraw(shown: Option<&Frame>, frame: &Frame, height: usize, width: usize) -> String {
    if shown == Some(frame) {
        return String::new();
    }
    let mut out = format!("{ESC}[?25l");
    if shown.map(|s| &s.title) != Some(&frame.title) {
        out += &format!("{ESC}]0;{}{ST}", frame.title);
    }
    for (n, row) in frame.rows.iter().enumerate() {
        out += &format!("{ESC}[{};1H{ESC}[2K{}", n + 1, clip(row, width));
    }
    if frame.rows.len() < height {
        out += &format!("{ESC}[{};1H{ESC}[J", frame.rows.len() + 1);
    }
    let (row, col) = frame.cursor;
    out += &format!("{ESC}[{};{}H{ESC}[?25h", row + 1, col + 1);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_continues_long_lines_and_new_lines_after_cont() {
        assert_eq!(
            wrap("abcdefgh\nij", "❯ ", "  ", 6),
            ["❯ abcd", "  efgh", "  ij"]
        );
    }

    #[test]
    fn stack_keeps_the_bottom_and_fills_for_full_screens() {
        let s = |v: &[&str]| v.iter().map(|r| r.to_string()).collect::<Vec<_>>();
        let (rows, origin) = stack(&s(&["a", "b", "c"]), &s(&["x", "y"]), 3, false);
        assert_eq!((rows, origin), (s(&["c", "x", "y"]), 1));
        let (rows, origin) = stack(&s(&["a"]), &s(&["x"]), 3, true);
        assert_eq!((rows, origin), (s(&["a", "", "x"]), 2));
    }
}
