//! `invocation list --follow`: the messages as they are, then every change
//! to them as it happens. The store wakes this command when a message
//! changes ([`agent_comms_core::store::watchers`]); it then reads the
//! messages again and prints those whose state moved since the last read.
//! One read per wake-up, and a slow periodic one for writers that cannot
//! wake it (another host, an older build).

use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use agent_comms_core::control::messages::InvocationView;
use agent_comms_core::control::open_store;
use agent_comms_core::display;
use agent_comms_core::store::{Invocation, InvocationFilter, InvocationStatus};
use agent_comms_core::time::{iso_from_unix_millis, unix_millis};

/// How often the store is read without a wake-up.
const UNTOLD_CHANGES_EVERY: Duration = Duration::from_secs(5);

/// What a message's line changes with.
#[derive(PartialEq)]
struct Seen {
    status: InvocationStatus,
    attempts: u32,
    reason: Option<String>,
}

/// Runs until stdout is closed (or the command is interrupted).
pub fn follow(filter: &InvocationFilter<'_>, json: bool) -> anyhow::Result<()> {
    // Listening before the first read: a change committed in between
    // wakes the second read, never falls between the two.
    let store = open_store()?;
    let follower = store.follow(None)?;
    let store = store.as_ref();
    let mut known: HashMap<String, Seen> = HashMap::new();
    let mut out = std::io::stdout().lock();
    let colour = super::look::colour(false);
    loop {
        let messages = store.invocations(filter)?;
        let seen = unix_millis();
        for inv in &messages {
            let now = Seen {
                status: inv.status,
                attempts: inv.attempts,
                reason: inv.reason.clone(),
            };
            if known.get(&inv.id) == Some(&now) {
                continue;
            }
            let line = if json {
                // The message as `invocation list --json` shows it, and
                // when this command saw it so.
                let mut line = serde_json::to_value(InvocationView::new(inv))?;
                line["seen"] = iso_from_unix_millis(seen).into();
                line.to_string()
            } else {
                text_line(inv, seen, colour)
            };
            // A reader that went away (`| head`) ends the command.
            if writeln!(out, "{line}").is_err() {
                return Ok(());
            }
            known.insert(inv.id.clone(), now);
        }
        if out.flush().is_err() {
            return Ok(());
        }
        follower.wait(UNTOLD_CHANGES_EVERY);
    }
}

/// `HH:MM:SS.mmm inv_… alice -> bob DELIVERED (reason)`, the time being
/// when the change was seen (UTC).
fn text_line(inv: &Invocation, seen: u64, colour: bool) -> String {
    let clock = iso_from_unix_millis(seen);
    let clock = clock.get(11..23).unwrap_or(&clock);
    let reason = inv
        .reason
        .as_deref()
        .map(|r| format!(" ({})", display::one_line(r)))
        .unwrap_or_default();
    format!(
        "{clock} {} {} -> {} {}{reason}",
        display::one_line(&inv.id),
        display::one_line(&inv.from),
        display::one_line(&inv.to),
        super::look::state(inv.status.as_str(), colour)
    )
}
