//! How fast a reply is streamed, and what it says.
//!
//! A test steers one request from the prompt it types, because that is the
//! only thing it controls end to end through a real CLI: the last user
//! message's text may hold the tokens `THINK=<seconds>` (a silent pause
//! before the first piece), `SLOW=<seconds>` (the time from the first piece
//! to the last), `DELTAS=<n>` (how many pieces) and `REPLY=<word>` (the
//! reply text). Tokens not given fall back to the server-wide defaults.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The reply every request gets unless `REPLY=` or the config says otherwise.
pub const CANNED_REPLY: &str = "Hello! This is a canned reply from the local mock model server. \
It was streamed slowly, in small pieces, so that the client stays busy for a while.";

/// Pieces a reply is cut into by default.
pub const DEFAULT_DELTAS: usize = 40;

/// The longest pause or spread a token may ask for.
const MAX_SECONDS: f64 = 24.0 * 3600.0;
/// The most pieces a token may ask for.
const MAX_DELTAS: usize = 100_000;

/// The timing of one streamed reply.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pacing {
    /// Silent pause between the request and the first piece of text.
    #[serde(with = "crate::log::secs")]
    pub think: Duration,
    /// Time from the first piece to the last; zero sends every piece at once.
    #[serde(with = "crate::log::secs")]
    pub slow: Duration,
    /// Number of pieces (at least 1, at most one per character).
    pub deltas: usize,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            think: Duration::ZERO,
            slow: Duration::ZERO,
            deltas: DEFAULT_DELTAS,
        }
    }
}

/// What the prompt's tokens asked for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    pub think: Option<Duration>,
    pub slow: Option<Duration>,
    pub deltas: Option<usize>,
    pub reply: Option<String>,
}

impl Overrides {
    /// Reads the tokens out of a prompt; the last occurrence of each wins.
    /// Malformed values are ignored.
    pub fn parse(prompt: &str) -> Overrides {
        let mut o = Overrides::default();
        for word in prompt.split_whitespace() {
            let Some((key, value)) = word.split_once('=') else {
                continue;
            };
            match key {
                "THINK" => o.think = seconds(value).or(o.think),
                "SLOW" => o.slow = seconds(value).or(o.slow),
                "DELTAS" => o.deltas = count(value).or(o.deltas),
                "REPLY" if !value.is_empty() => o.reply = Some(value.to_string()),
                _ => {}
            }
        }
        o
    }

    /// The defaults with these overrides applied.
    pub fn apply(&self, defaults: Pacing) -> Pacing {
        Pacing {
            think: self.think.unwrap_or(defaults.think),
            slow: self.slow.unwrap_or(defaults.slow),
            deltas: self.deltas.unwrap_or(defaults.deltas).max(1),
        }
    }
}

/// The leading number of `value` (so `SLOW=8.` or `SLOW=8,` still count).
fn leading_number(value: &str) -> &str {
    let end = value
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.'))
        .map_or(value.len(), |(i, _)| i);
    value[..end].trim_end_matches('.')
}

fn seconds(value: &str) -> Option<Duration> {
    let s: f64 = leading_number(value).parse().ok()?;
    (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s.min(MAX_SECONDS)))
}

fn count(value: &str) -> Option<usize> {
    let n: usize = leading_number(value).parse().ok()?;
    (n >= 1).then_some(n.min(MAX_DELTAS))
}

/// Cuts `text` into `pieces` parts of nearly equal length in characters
/// (fewer when the text has fewer characters; at least one part).
pub fn split(text: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let n = pieces.clamp(1, chars.len().max(1));
    (0..n)
        .map(|i| {
            let (a, b) = (i * chars.len() / n, (i + 1) * chars.len() / n);
            chars[a..b].iter().collect()
        })
        .collect()
}

/// When piece `i` of `n` is due, counted from the first piece: evenly spread
/// so that the last piece goes out `slow` after the first.
pub fn offset(slow: Duration, i: usize, n: usize) -> Duration {
    if n <= 1 {
        return Duration::ZERO;
    }
    slow.mul_f64(i as f64 / (n - 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_override_defaults() {
        let o = Overrides::parse("say hello THINK=3 SLOW=5. DELTAS=7 REPLY=pong");
        assert_eq!(o.think, Some(Duration::from_secs(3)));
        assert_eq!(o.slow, Some(Duration::from_secs(5)));
        assert_eq!(o.deltas, Some(7));
        assert_eq!(o.reply.as_deref(), Some("pong"));
        let p = o.apply(Pacing::default());
        assert_eq!(p.deltas, 7);
    }

    #[test]
    fn bad_tokens_are_ignored() {
        let o = Overrides::parse("THINK=x SLOW=-1 DELTAS=0 REPLY= think=2");
        assert_eq!(o, Overrides::default());
        let d = Pacing {
            think: Duration::from_millis(100),
            ..Pacing::default()
        };
        assert_eq!(o.apply(d), d);
    }

    #[test]
    fn split_is_even_and_lossless() {
        let parts = split(CANNED_REPLY, 40);
        assert_eq!(parts.len(), 40);
        assert_eq!(parts.concat(), CANNED_REPLY);
        let lens: Vec<usize> = parts.iter().map(|p| p.chars().count()).collect();
        assert!(lens.iter().max().unwrap() - lens.iter().min().unwrap() <= 1);
        assert_eq!(split("héllo", 40), vec!["h", "é", "l", "l", "o"]);
        assert_eq!(split("", 3), vec![""]);
    }

    #[test]
    fn offsets_span_slow() {
        let slow = Duration::from_secs(2);
        assert_eq!(offset(slow, 0, 5), Duration::ZERO);
        assert_eq!(offset(slow, 4, 5), slow);
        assert_eq!(offset(slow, 0, 1), Duration::ZERO);
    }
}
