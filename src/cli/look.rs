//! How text output looks to a person: times relative to now ("3 min ago")
//! and states and errors in colour — colour only on a terminal, never in a
//! pipe or a file (scripts read those), and never with `NO_COLOR` set
//! (<https://no-color.org>) or `TERM=dumb`. `--json` keeps absolute times
//! and no colour: it is for programs.

use std::io::IsTerminal;

use agent_comms_core::time::{unix_millis, unix_millis_from_iso};

/// Whether colour may be written to stdout (`stderr: false`) or stderr.
pub fn colour(stderr: bool) -> bool {
    let no_colour = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
    let terminal = if stderr {
        std::io::stderr().is_terminal()
    } else {
        std::io::stdout().is_terminal()
    };
    terminal && !no_colour && !dumb
}

/// SGR colours, by what they mean.
#[derive(Clone, Copy)]
enum Hue {
    Good,
    Waiting,
    Bad,
}

impl Hue {
    fn sgr(self) -> &'static str {
        match self {
            Hue::Good => "32",
            Hue::Waiting => "33",
            Hue::Bad => "31",
        }
    }
}

/// `text` (already padded: escapes have no width) in the colour its
/// state word means, when `on`.
pub fn state(text: &str, on: bool) -> String {
    let hue = match text.trim() {
        "DELIVERED" | "ONLINE" | "idle" | "done" => Some(Hue::Good),
        "PENDING" | "DELIVERING" | "DRAINING" | "busy" | "running" | "fired" => Some(Hue::Waiting),
        "FAILED" | "UNAVAILABLE" | "OFFLINE" | "REVOKED" | "timeout" | "error" => Some(Hue::Bad),
        _ => None,
    };
    paint(text, hue.filter(|_| on))
}

/// An error line for stderr, red on a terminal.
pub fn error(text: &str) -> String {
    paint(text, colour(true).then_some(Hue::Bad))
}

fn paint(text: &str, hue: Option<Hue>) -> String {
    match hue {
        Some(hue) => format!("\x1b[{}m{text}\x1b[0m", hue.sgr()),
        None => text.to_owned(),
    }
}

/// An ISO time from the store as a person reads it: "3 min ago"; text
/// that is not such a time is shown as it is.
pub fn ago_iso(iso: &str) -> String {
    match unix_millis_from_iso(iso) {
        Some(then) => ago(then, unix_millis()),
        None => iso.to_owned(),
    }
}

/// `then` as seen from `now` (both Unix ms).
pub fn ago(then: u64, now: u64) -> String {
    let secs = now.saturating_sub(then) / 1000;
    match secs {
        0..=4 => "just now".to_owned(),
        5..=59 => format!("{secs} s ago"),
        60..=3599 => format!("{} min ago", secs / 60),
        3600..=86_399 => format!("{} h ago", secs / 3600),
        _ => match secs / 86_400 {
            1 => "1 day ago".to_owned(),
            days => format!("{days} days ago"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_how_long_ago() {
        let now = 10_000_000_000;
        assert_eq!(ago(now, now), "just now");
        assert_eq!(ago(now + 5000, now), "just now");
        assert_eq!(ago(now - 42_000, now), "42 s ago");
        assert_eq!(ago(now - 3 * 60_000 - 5000, now), "3 min ago");
        assert_eq!(ago(now - 2 * 3_600_000, now), "2 h ago");
        assert_eq!(ago(now - 86_400_000, now), "1 day ago");
        assert_eq!(ago(now - 3 * 86_400_000, now), "3 days ago");
        assert_eq!(ago_iso("-"), "-");
    }

    #[test]
    fn only_state_words_are_coloured_and_only_when_asked() {
        assert_eq!(state("DELIVERED  ", true), "\x1b[32mDELIVERED  \x1b[0m");
        assert_eq!(state("FAILED", true), "\x1b[31mFAILED\x1b[0m");
        assert_eq!(state("FAILED", false), "FAILED");
        assert_eq!(state("bob", true), "bob");
    }
}
