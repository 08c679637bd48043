//! Reading a program's input line: what a person (or a delivery) has typed
//! and not yet sent.
//!
//! Delivery must never type into a half-written message, and it proves a
//! submission by the input line emptying. Where the line is differs per
//! program — a `❯` row inside a box, a `›` composer, the cursor's row in a
//! REPL — so the adapter says; dim text is blanked first, because TUIs show
//! a dim placeholder in an empty input line.

use regex::Regex;

use super::detect::region_range;
use super::profile::{Anchor, InputLine, Region};

/// A compiled [`InputLine`], or the cursor's row when the adapter gives none.
pub struct InputLineReader {
    region: Region,
    pattern: Option<Regex>,
    continuation: Option<Regex>,
}

impl InputLineReader {
    /// Profiles are validated at load, so the pattern compiles; a pattern
    /// that does not falls back to the cursor's row.
    pub fn new(line: Option<&InputLine>) -> Self {
        match line {
            Some(line) => Self {
                region: line.region,
                pattern: Regex::new(line.pattern.get_ref()).ok(),
                continuation: line
                    .continuation
                    .as_ref()
                    .and_then(|c| Regex::new(c.get_ref()).ok()),
            },
            None => Self {
                region: Region {
                    from: Anchor::Cursor,
                    offset: 0,
                    rows: 1,
                },
                pattern: None,
                continuation: None,
            },
        }
    }

    /// What the input line holds (trimmed; empty when nothing), or `None`
    /// when no row of the region looks like an input line. Text that wraps
    /// goes on in the rows right below, as the adapter's continuation rule
    /// says. `lines` are the screen's rows with dim text blanked.
    pub fn read(&self, lines: &[String], cursor_row: u16) -> Option<String> {
        let range = region_range(lines, cursor_row, self.region);
        let Some(pattern) = &self.pattern else {
            return lines.get(range.start).map(|r| r.trim().to_owned());
        };
        // The last match: history above the input line may look like it.
        let (row, first) = range
            .rev()
            .find_map(|i| Some((i, captured(pattern, &lines[i])?)))?;
        let mut text = first;
        if let Some(continuation) = &self.continuation {
            for more in lines[row + 1..]
                .iter()
                .map_while(|l| captured(continuation, l).filter(|t| !t.trim().is_empty()))
            {
                text.push(' ');
                text.push_str(more.trim());
            }
        }
        Some(text.trim().to_owned())
    }
}

/// The text a pattern captures in `row` (its `text` group, or its first).
fn captured(pattern: &Regex, row: &str) -> Option<String> {
    let caps = pattern.captures(row)?;
    let text = caps.name("text").or_else(|| caps.get(1))?;
    Some(text.as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::profile::Profile;

    fn reader(line: &str) -> InputLineReader {
        let text = format!(
            "schema = 1\nname = \"t\"\nversion = \"1\"\nkind = \"agent\"\ncommands = [\"t\"]\n[input.line]\n{line}"
        );
        let profile = Profile::parse("t.toml", &text).unwrap();
        InputLineReader::new(profile.input.line.as_ref())
    }

    fn rows(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn reads_the_prompt_row_in_the_region() {
        let r = reader("region = { from = \"bottom\", rows = 4 }\npattern = '^❯ ?(.*)$'\ncontinuation = '^  (.*)$'");
        let screen = rows("❯ old message\nreply\n────\n❯ half typed\n────\n  ? for shortcuts");
        assert_eq!(r.read(&screen, 0).as_deref(), Some("half typed"));
        let empty = rows("❯ old message\n────\n❯\n────\n  ? for shortcuts");
        assert_eq!(r.read(&empty, 0).as_deref(), Some(""));
        assert_eq!(r.read(&rows("nothing here"), 0), None);
        let wrapped = rows("❯ a long line that\n  wraps on\n────\n  ? for shortcuts");
        assert_eq!(
            r.read(&wrapped, 0).as_deref(),
            Some("a long line that wraps on")
        );
    }

    #[test]
    fn without_a_rule_the_cursor_row_is_the_line() {
        let r = InputLineReader::new(None);
        let screen = rows("$ echo hi\nhi\n$ ls");
        assert_eq!(r.read(&screen, 2).as_deref(), Some("$ ls"));
    }

    #[test]
    fn a_pattern_without_a_group_is_refused_at_load() {
        let text = "schema = 1\nname = \"t\"\nversion = \"1\"\nkind = \"agent\"\ncommands = [\"t\"]\n[input.line]\nregion = { from = \"cursor\" }\npattern = '^> '";
        let e = Profile::parse("t.toml", text).unwrap_err();
        assert!(e.message.contains("capture what the line holds"), "{e}");
    }
}
