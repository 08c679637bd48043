//! The bounds of a terminal size.
//!
//! Rows and columns arrive from the command line, from attached terminals
//! and from raw `resize` requests on the socket; the screen model allocates
//! every cell of them (and of its scrollback), so an unbounded size is an
//! unbounded allocation: 65535 × 65535 aborted the supervisor, 2000 × 2000
//! took it from 9 MB to 134 MB. Real terminals stay far below these bounds
//! (a 4K monitor at a small font is about 400 × 150), so every size is
//! checked against them, in one place, by every boundary.

/// The most rows a session's terminal may have.
pub const MAX_ROWS: u16 = 1000;
/// The most columns a session's terminal may have.
pub const MAX_COLS: u16 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "a terminal of {rows} × {cols} is out of bounds: a terminal has 1 to {MAX_ROWS} rows and 1 to {MAX_COLS} columns"
)]
pub struct SizeError {
    pub rows: u16,
    pub cols: u16,
}

/// `(rows, cols)` if both are within the bounds.
pub fn checked(rows: u16, cols: u16) -> Result<(u16, u16), SizeError> {
    if (1..=MAX_ROWS).contains(&rows) && (1..=MAX_COLS).contains(&cols) {
        Ok((rows, cols))
    } else {
        Err(SizeError { rows, cols })
    }
}

/// The size a client asks for on behalf of a real terminal: a terminal
/// larger than the bounds (or one that reports 0) still attaches, and the
/// session's screen is the part that fits.
pub fn clamped(rows: u16, cols: u16) -> (u16, u16) {
    (rows.clamp(1, MAX_ROWS), cols.clamp(1, MAX_COLS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_within_the_bounds_pass_and_others_are_refused() {
        assert_eq!(checked(1, 1), Ok((1, 1)));
        assert_eq!(checked(MAX_ROWS, MAX_COLS), Ok((MAX_ROWS, MAX_COLS)));
        for (rows, cols) in [(0, 80), (24, 0), (MAX_ROWS + 1, 80), (24, MAX_COLS + 1)] {
            assert_eq!(checked(rows, cols), Err(SizeError { rows, cols }));
        }
        assert_eq!(clamped(0, u16::MAX), (1, MAX_COLS));
    }
}
