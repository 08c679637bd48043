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
    /// says how many bytes were left out when the limit was hit.
    pub fn finish(mut self) -> String {
        self.trim();
        if self.bytes.last() == Some(&b'\n') {
            self.bytes.pop();
        }
        let text = String::from_utf8_lossy(&self.bytes);
        if self.dropped == 0 {
            return text.into_owned();
        }
        // Start at a line boundary so no line is shown cut in half.
        let text = text.split_once('\n').map_or(&*text, |(_, rest)| rest);
        format!("{}\n{text}", omitted(self.dropped))
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
