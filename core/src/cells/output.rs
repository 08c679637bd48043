//! A cell's output, bounded.
//!
//! A cell that prints tens of megabytes must not grow the supervisor without
//! limit. The buffer keeps the *last* [`OUTPUT_LIMIT`] bytes — the end of the
//! output is what a person or agent reads first (the error, the summary) —
//! and says at the top how much was dropped. [`OutputBuffer`] holds the
//! bytes of shell-integration mode; [`LineTail`] the trimmed lines of the
//! line modes (repeat, exact prompt, hook), bounded the same way.

/// Bytes of output kept per cell.
pub const OUTPUT_LIMIT: usize = 4 << 20;
/// Buffers are cut back to [`OUTPUT_LIMIT`] when they pass this: at most a
/// quarter more is held, and each cut moves 4 MiB per MiB of new output.
const TRIM_AT: usize = OUTPUT_LIMIT + OUTPUT_LIMIT / 4;
/// How far into a cut tail a line break is looked for to start the kept
/// text at: lines longer than this are kept cut.
const LINE_SEEK: usize = 4096;

#[derive(Default)]
pub struct OutputBuffer {
    bytes: Vec<u8>,
    dropped: usize,
}

impl OutputBuffer {
    pub fn push(&mut self, data: &[u8]) {
        // A chunk bigger than the limit (floods arrive in chunks of
        // megabytes) replaces everything before it.
        if data.len() >= OUTPUT_LIMIT {
            self.dropped += self.bytes.len() + data.len() - OUTPUT_LIMIT;
            self.bytes.clear();
            self.bytes
                .extend_from_slice(&data[data.len() - OUTPUT_LIMIT..]);
            return;
        }
        self.bytes.extend_from_slice(data);
        if self.bytes.len() > TRIM_AT {
            self.trim();
        }
    }

    fn trim(&mut self) {
        if self.bytes.len() > OUTPUT_LIMIT {
            let cut = self.bytes.len() - OUTPUT_LIMIT;
            self.dropped += cut;
            self.bytes.drain(..cut);
        }
    }

    /// The text: lossy UTF-8, final line break removed, and a first line that
    /// says how many bytes were left out when the limit was hit. The note's
    /// count and the kept bytes add up to the whole output (less that final
    /// line break): what the note does not count is there.
    pub fn finish(mut self) -> String {
        self.trim();
        if self.bytes.last() == Some(&b'\n') {
            self.bytes.pop();
        }
        if self.dropped == 0 {
            return String::from_utf8_lossy(&self.bytes).into_owned();
        }
        let start = kept_start(&self.bytes);
        let text = String::from_utf8_lossy(&self.bytes[start..]);
        format!("{}\n{text}", omitted(self.dropped + start))
    }
}

/// How far into a cut tail the kept text starts: after the first line break
/// when one is near (no line shown cut in half), else at the first whole
/// character, so that a long line keeps its tail (a 5 MB line once kept
/// nothing of it, under a note that said 4 MB were kept).
fn kept_start(tail: &[u8]) -> usize {
    let near = &tail[..tail.len().min(LINE_SEEK)];
    match near.iter().position(|&b| b == b'\n') {
        Some(i) => i + 1,
        // UTF-8 continuation bytes are 0b10xx_xxxx.
        None => tail
            .iter()
            .take(3)
            .take_while(|&&b| b & 0xC0 == 0x80)
            .count(),
    }
}

fn omitted(bytes: usize) -> String {
    format!("[agent-comms: {bytes} earlier bytes of output omitted]")
}

/// A line mode's output lines: the last [`OUTPUT_LIMIT`] bytes of them, cut
/// at a line boundary. Held as one buffer (each line followed by `\n`), so
/// a flood of short lines costs their bytes, not an allocation each.
#[derive(Default)]
pub struct LineTail {
    text: Vec<u8>,
    dropped: usize,
}

impl LineTail {
    pub fn push(&mut self, line: String) {
        self.text.extend_from_slice(line.as_bytes());
        self.text.push(b'\n');
        if self.text.len() > TRIM_AT {
            self.trim();
        }
    }

    /// Keeps the last [`OUTPUT_LIMIT`] bytes, from the start of the line
    /// they begin in.
    fn trim(&mut self) {
        if self.text.len() <= OUTPUT_LIMIT {
            return;
        }
        let cut = self.text.len() - OUTPUT_LIMIT;
        let start = self.text[..cut]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        self.dropped += start;
        self.text.drain(..start);
    }

    /// Removes the last line.
    pub fn pop(&mut self) -> Option<String> {
        let body = self.text.strip_suffix(b"\n")?;
        let start = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let line = String::from_utf8_lossy(&body[start..]).into_owned();
        self.text.truncate(start);
        Some(line)
    }

    /// The lines joined with `\n`, under a first line that says how many
    /// bytes were left out when the limit was hit.
    pub fn finish(&self) -> String {
        let body = self.text.strip_suffix(b"\n").unwrap_or(&self.text);
        // The first whole line within the last OUTPUT_LIMIT bytes (or, if
        // the last line alone is longer, that line).
        let cut = body.len().saturating_sub(OUTPUT_LIMIT);
        let start = match cut {
            0 => 0,
            cut => body[cut - 1..]
                .iter()
                .position(|&b| b == b'\n')
                .map(|i| cut + i)
                .unwrap_or_else(|| {
                    body[..cut]
                        .iter()
                        .rposition(|&b| b == b'\n')
                        .map_or(0, |i| i + 1)
                }),
        };
        let text = String::from_utf8_lossy(&body[start..]);
        match self.dropped + start {
            0 => text.into_owned(),
            dropped => format!("{}\n{text}", omitted(dropped)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_tail_of_huge_output() {
        let mut b = OutputBuffer::default();
        let line = format!("{}\n", "x".repeat(99));
        for _ in 0..(3 * OUTPUT_LIMIT / 100) {
            b.push(line.as_bytes());
        }
        b.push(b"last line\n");
        let out = b.finish();
        assert!(out.starts_with("[agent-comms: "));
        assert!(out.ends_with("\nlast line"));
        assert!(out.len() <= OUTPUT_LIMIT + 100);
    }

    /// The note's count plus the kept bytes (and the final line break) is
    /// everything pushed, for short lines, one long line and a cut through
    /// a character.
    #[test]
    fn the_note_counts_exactly_what_is_not_kept() {
        let long = format!("{}\nEND\n", "x".repeat(5_000_000));
        let short = format!("{}END\n", "0123456789\n".repeat(500_000));
        let wide = format!("{}\nEND\n", "é".repeat(2_500_001));
        for (total, chunk) in [(&long, 65536), (&short, 4000), (&wide, 1 << 20)] {
            let mut b = OutputBuffer::default();
            for piece in total.as_bytes().chunks(chunk) {
                b.push(piece);
            }
            let out = b.finish();
            let (note, kept) = out.split_once('\n').unwrap();
            let omitted: usize = note
                .strip_prefix("[agent-comms: ")
                .and_then(|n| n.strip_suffix(" earlier bytes of output omitted]"))
                .and_then(|n| n.parse().ok())
                .unwrap();
            assert_eq!(omitted + kept.len() + 1, total.len(), "{note}");
            assert_eq!(kept, &total[omitted..total.len() - 1]);
            assert!(kept.len() > OUTPUT_LIMIT - LINE_SEEK, "{}", kept.len());
        }
    }

    #[test]
    fn line_tail_keeps_the_last_lines() {
        let mut t = LineTail::default();
        for i in 0..(3 * OUTPUT_LIMIT / 10) {
            t.push(format!("{i:09}"));
        }
        t.push("last".into());
        assert_eq!(t.pop().as_deref(), Some("last"));
        let out = t.finish();
        assert!(out.starts_with("[agent-comms: "), "{}", &out[..80]);
        assert!(out.ends_with(&format!("\n{:09}", 3 * OUTPUT_LIMIT / 10 - 1)));
        assert!(out.len() <= OUTPUT_LIMIT + 100);
    }
}
