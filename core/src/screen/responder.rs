//! Answers to terminal queries, for a PTY that no real terminal is attached to.
//!
//! Current TUIs ask the terminal about itself at start-up (cursor position,
//! device attributes, modes, colours) and wait 250–300 ms for answers that a
//! detached PTY never gives; older Codex releases quit instead. The answers
//! here are those of a plain xterm-compatible terminal, with the cursor and
//! mode state taken from the screen model, so a program started detached
//! behaves as it would in a terminal window.

use std::io::Write;

const ESC: &str = "\x1b";

pub(super) fn answer_csi(
    screen: &vt100::Screen,
    i1: Option<u8>,
    i2: Option<u8>,
    params: &[&[u16]],
    c: char,
    out: &mut Vec<u8>,
) {
    let first = params.first().and_then(|p| p.first()).copied();
    match (i1, i2, c) {
        // DSR: cursor position report, and "terminal OK".
        (None, None, 'n') if first == Some(6) => {
            let (row, col) = screen.cursor_position();
            let _ = write!(out, "{ESC}[{};{}R", row + 1, col + 1);
        }
        (None, None, 'n') if first == Some(5) => out.extend_from_slice(b"\x1b[0n"),
        // DA1: a VT220-class terminal with ANSI colour.
        (None, None, 'c') if matches!(first, None | Some(0)) => {
            out.extend_from_slice(b"\x1b[?62;22c")
        }
        // DA2.
        (Some(b'>'), None, 'c') => out.extend_from_slice(b"\x1b[>0;276;0c"),
        // XTVERSION.
        (Some(b'>'), None, 'q') => {
            let _ = write!(
                out,
                "{ESC}P>|agent-comms({}){ESC}\\",
                env!("CARGO_PKG_VERSION")
            );
        }
        // Kitty keyboard protocol query: flags 0, i.e. not in use.
        (Some(b'?'), None, 'u') => out.extend_from_slice(b"\x1b[?0u"),
        // DECRQM for private modes.
        (Some(b'?'), Some(b'$'), 'p') => {
            if let Some(mode) = first {
                let _ = write!(out, "{ESC}[?{mode};{}$y", private_mode_state(screen, mode));
            }
        }
        // Window size in pixels, in cells, and cell size.
        (None, None, 't') => match first {
            Some(14) => {
                let (rows, cols) = size(screen);
                let _ = write!(out, "{ESC}[4;{};{}t", rows * 16, cols * 8);
            }
            Some(16) => out.extend_from_slice(b"\x1b[6;16;8t"),
            Some(18) => {
                let (rows, cols) = size(screen);
                let _ = write!(out, "{ESC}[8;{rows};{cols}t");
            }
            _ => {}
        },
        _ => {}
    }
}

/// DECRQM answer: 1 set, 2 reset, 0 not recognised.
fn private_mode_state(screen: &vt100::Screen, mode: u16) -> u8 {
    let flag = |on: bool| if on { 1 } else { 2 };
    match mode {
        1 => flag(screen.application_cursor()),
        25 => flag(!screen.hide_cursor()),
        47 | 1047 | 1049 => flag(screen.alternate_screen()),
        2004 => flag(screen.bracketed_paste()),
        1000 | 1002 | 1003 => flag(screen.mouse_protocol_mode() != vt100::MouseProtocolMode::None),
        // Accepted and harmless to us (focus events, synchronized output,
        // grapheme clustering, colour-scheme and in-band resize reports).
        1004 | 1006 | 1016 | 2026 | 2027 | 2031 | 2048 => 2,
        _ => 0,
    }
}

pub(super) fn answer_osc(params: &[&[u8]], out: &mut Vec<u8>) {
    match params {
        // Foreground and background colour queries: white on black.
        [b"10", b"?"] => out.extend_from_slice(b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\"),
        [b"11", b"?"] => out.extend_from_slice(b"\x1b]11;rgb:0000/0000/0000\x1b\\"),
        _ => {}
    }
}

fn size(screen: &vt100::Screen) -> (u16, u16) {
    let (r, c) = screen.size();
    (r.get(), c.get())
}

#[cfg(test)]
mod tests {
    use crate::screen::ScreenModel;

    fn ask(query: &[u8]) -> String {
        let mut m = ScreenModel::new(40, 120);
        m.set_answer_queries(true);
        String::from_utf8(m.feed(query)).unwrap()
    }

    #[test]
    fn answers_what_the_recorded_tuis_ask() {
        // Codex 0.171 and OpenCode 1.18 start-up queries (core/tests/recordings).
        assert_eq!(ask(b"\x1b[c"), "\x1b[?62;22c");
        assert_eq!(ask(b"\x1b[?u"), "\x1b[?0u");
        assert_eq!(ask(b"\x1b[?2004h\x1b[?2004$p"), "\x1b[?2004;1$y");
        assert_eq!(ask(b"\x1b[?1007$p"), "\x1b[?1007;0$y");
        assert_eq!(ask(b"\x1b]11;?\x1b\\"), "\x1b]11;rgb:0000/0000/0000\x1b\\");
        assert_eq!(ask(b"\x1b[14t"), "\x1b[4;640;960t");
        assert!(ask(b"\x1b[>0q").starts_with("\x1bP>|agent-comms("));
        assert_eq!(ask(b"\x1b[2;5H\x1b[6n"), "\x1b[2;5R");
    }
}
