//! Whether a live runtime's adapter can read its screen.
//!
//! A program whose screen the adapter reads as neither busy nor idle (a
//! sign-in dialog, a release that redrew its prompt) never gets a delivery:
//! each one waits its whole timeout. The supervisor knows for how long the
//! screen has been unreadable; `doctor` and `runtime show` ask it, and show
//! the adapter's name and the screen's bottom rows, so that a person sees
//! what the rules miss without attaching.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::adapter::Activity;
use crate::client::{Client, ClientError};
use crate::socket::protocol::{Request, Response};

/// Rows shown from the bottom of an unreadable screen: where prompts and
/// footers, the rows rules read, are.
pub const BOTTOM_ROWS: usize = 5;

/// Unknown for longer than this is a finding: a program that is starting
/// shows nothing readable for a moment, and that is no problem.
pub const UNREADABLE_AFTER: Duration = Duration::from_secs(5);

/// The activity of one live session, as its adapter reads the screen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScreenReading {
    pub activity: Activity,
    /// The adapter that reads the screen.
    pub adapter: String,
    /// While `activity` is unknown: for how long it has been (ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown_for_ms: Option<u64>,
    /// While `activity` is unknown: the screen's last rows down to the last
    /// one with text, control characters escaped (the text is the
    /// program's, and goes to a terminal).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bottom_rows: Vec<String>,
}

impl ScreenReading {
    /// Unknown for longer than [`UNREADABLE_AFTER`].
    pub fn unreadable(&self) -> bool {
        self.unknown_for_ms
            .is_some_and(|ms| ms > UNREADABLE_AFTER.as_millis() as u64)
    }
}

/// Asks the supervisor at `endpoint` how its adapter reads the screen.
pub fn read(endpoint: &Path) -> Result<ScreenReading, ClientError> {
    let mut client = Client::connect(endpoint)?;
    let report = match client.request(Request::Activity)? {
        Response::Activity(report) => report,
        other => return Err(ClientError::Unexpected(format!("{other:?}"))),
    };
    let bottom_rows = match report.activity {
        Activity::Unknown => match client.request(Request::Snapshot)? {
            Response::Snapshot(snapshot) => bottom_rows(&snapshot.lines),
            other => return Err(ClientError::Unexpected(format!("{other:?}"))),
        },
        _ => Vec::new(),
    };
    Ok(ScreenReading {
        activity: report.activity,
        adapter: report.adapter,
        unknown_for_ms: report.unknown_for_ms,
        bottom_rows,
    })
}

/// The last [`BOTTOM_ROWS`] rows ending at the last row with text, escaped.
fn bottom_rows(lines: &[String]) -> Vec<String> {
    let Some(last) = lines.iter().rposition(|l| !l.trim().is_empty()) else {
        return Vec::new();
    };
    let first = (last + 1).saturating_sub(BOTTOM_ROWS);
    lines[first..=last]
        .iter()
        .map(|l| crate::display::one_line(l).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bottom_rows_end_at_the_last_row_with_text_and_are_escaped() {
        let lines: Vec<String> = ["a", "b", "c", "d", "e", "f\u{1b}[2J", "", ""]
            .map(str::to_owned)
            .to_vec();
        assert_eq!(bottom_rows(&lines), ["b", "c", "d", "e", "f\\x1b[2J"]);
        assert!(bottom_rows(&[String::new()]).is_empty());
    }
}
