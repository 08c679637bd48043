//! A cell's output, bounded.
//!
//! A cell that prints tens of megabytes must not grow the supervisor without
//! limit. The buffer keeps the *last* [`OUTPUT_LIMIT`] bytes — the end of the
//! output is what a person or agent reads first (the error, the summary) —
//! and says at the top how much was dropped.

/// Bytes of output kept per cell.
pub const OUTPUT_LIMIT: usize = 4 << 20;

#[derive(Default)]
pub struct OutputBuffer {
    bytes: Vec<u8>,
    dropped: usize,
}

impl OutputBuffer {
    pub fn push(&mut self, data: &[u8]) {
        self.bytes.extend_from_slice(data);
        if self.bytes.len() > 2 * OUTPUT_LIMIT {
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
        format!(
            "[agent-comms: {} earlier bytes of output omitted]\n{text}",
            self.dropped
        )
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
}
