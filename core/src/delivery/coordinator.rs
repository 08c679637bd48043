//! The delivery coordinator: one writer at a time, idle and quiet first,
//! then text, echo, Enter, submission.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, Notify};

use super::{validate, DeliveryError, DeliveryOptions, Evidence};
use crate::adapter::profile::{Input, InputStyle};
use crate::adapter::Activity;
use crate::time::unix_millis;

/// How long the text may take to show after it was written.
const ECHO_TIMEOUT: Duration = Duration::from_secs(3);
/// How long one Enter may take to show its effect before it is pressed again.
const SUBMIT_TIMEOUT: Duration = Duration::from_millis(1500);
/// Enter presses before giving up on a submission.
const MAX_ENTER_PRESSES: u32 = 3;
/// Re-evaluation period while waiting: the debounce and the keyboard's quiet
/// period end by time, not by output.
const TICK: Duration = Duration::from_millis(25);
/// How much of the text's end identifies it in the input line.
const TAIL_CHARS: usize = 24;
/// Why delivery waits while the adapter reads neither busy nor idle.
const UNREADABLE: &str = "the program shows neither busy nor idle yet";

/// What the coordinator needs from a live session. The supervisor's state
/// implements it; each call takes the state's lock briefly.
pub trait Terminal: Send + Sync {
    fn observe(&self) -> Observation;
    fn write(&self, bytes: Vec<u8>);
    /// While held, a person's keystrokes are queued instead of written;
    /// releasing writes what was queued.
    fn hold_keyboard(&self, hold: bool);
    fn ended(&self) -> bool;
}

/// One look at the session.
#[derive(Debug, Clone)]
pub struct Observation {
    /// Debounced: idle only after the adapter's quiet period.
    pub activity: Activity,
    /// This screen alone: busy the moment a submission starts work.
    pub raw: Activity,
    /// Since a person last typed (None: never).
    pub keyboard_quiet: Option<Duration>,
    /// What the input line holds (dim placeholders blanked), or `None` when
    /// no input line is visible (a dialog, a menu).
    pub input: Option<String>,
    /// Whether `input` is read by the adapter's own rule; without one it is
    /// the cursor's row, prompt included, so it cannot say "empty".
    pub input_rule: bool,
    /// The visible screen, rows joined.
    pub screen: String,
    pub bracketed_paste: bool,
}

/// How to type into one program.
#[derive(Debug, Clone)]
pub struct DeliveryStyle {
    pub input: Input,
    /// How long after a person's last keystroke delivery waits.
    pub keyboard_quiet: Duration,
    /// The session and the adapter that reads its screen, named in the
    /// error of a delivery that waited for a screen the adapter cannot read.
    pub session: String,
    pub adapter: Option<String>,
}

/// Serializes deliveries into one session and runs each to its evidence.
pub struct DeliveryCoordinator {
    turns: Arc<Mutex<()>>,
    /// Woken on every output chunk and keystroke.
    changed: Arc<Notify>,
    style: DeliveryStyle,
}

impl DeliveryCoordinator {
    pub fn new(style: DeliveryStyle, changed: Arc<Notify>) -> Self {
        Self {
            // tokio's mutex queues waiters in order: first come, first served.
            turns: Arc::new(Mutex::new(())),
            changed,
            style,
        }
    }

    pub fn style(&self) -> &DeliveryStyle {
        &self.style
    }

    /// Delivers `text`: returns the evidence, or why nothing (or not all)
    /// happened. Nothing is written unless the text is valid and the
    /// program idle with a quiet keyboard and an empty input line.
    pub async fn deliver(
        &self,
        term: &dyn Terminal,
        text: &str,
        opts: DeliveryOptions,
    ) -> Result<Evidence, DeliveryError> {
        validate(text)?;
        let deadline = Instant::now() + Duration::from_millis(opts.timeout_ms);
        let turn = if opts.try_only {
            self.turns
                .clone()
                .try_lock_owned()
                .map_err(|_| DeliveryError::Contended)?
        } else {
            let wait = tokio::time::Instant::from_std(deadline);
            tokio::time::timeout_at(wait, self.turns.clone().lock_owned())
                .await
                .map_err(|_| timeout(opts, "earlier deliveries finished"))?
        };
        let hold = self.wait_ready(term, deadline, opts).await?;
        let result = self.type_and_submit(term, text, deadline, opts).await;
        drop(hold);
        drop(turn);
        result
    }

    /// Waits until the program is idle, nobody is typing and the input line
    /// is empty; returns with the keyboard held, so that stays true.
    async fn wait_ready<'t>(
        &self,
        term: &'t dyn Terminal,
        deadline: Instant,
        opts: DeliveryOptions,
    ) -> Result<KeyboardHold<'t>, DeliveryError> {
        loop {
            if term.ended() {
                return Err(DeliveryError::Ended);
            }
            let seen = term.observe();
            let blocker = self.blocker(&seen);
            tracing::debug!(?blocker, ?seen.activity, ?seen.input, "delivery waits");
            if blocker.is_none() {
                // Hold the keyboard, then look again: a key that arrived in
                // between is now either on the screen or counted as recent.
                let hold = KeyboardHold::new(term);
                match self.blocker(&term.observe()) {
                    None => return Ok(hold),
                    Some(_) => drop(hold),
                }
            }
            let why = blocker.unwrap_or("a person typed just now");
            if opts.try_only {
                return Err(DeliveryError::NotReady(why.to_owned()));
            }
            if Instant::now() >= deadline {
                return Err(self.not_ready_in_time(opts, why));
            }
            self.settle(deadline).await;
        }
    }

    /// Why delivery must wait now, if it must.
    fn blocker(&self, o: &Observation) -> Option<&'static str> {
        if o.keyboard_quiet
            .is_some_and(|q| q < self.style.keyboard_quiet)
        {
            return Some("a person is typing");
        }
        match o.activity {
            Activity::Busy => return Some("the program is busy"),
            Activity::Unknown => return Some(UNREADABLE),
            Activity::Idle => {}
        }
        match &o.input {
            None => Some("no input line is visible (a dialog or menu may be open)"),
            Some(text) if o.input_rule && !text.is_empty() => {
                Some("the input line holds unsent text")
            }
            Some(_) => None,
        }
    }

    /// The error of a wait for ready that ran out of time: the plain
    /// timeout, or — when the adapter could not read the screen — where to
    /// look and what to check.
    fn not_ready_in_time(&self, opts: DeliveryOptions, why: &str) -> DeliveryError {
        match &self.style.adapter {
            Some(adapter) if why == UNREADABLE => DeliveryError::Unreadable {
                secs: opts.timeout_ms.div_ceil(1000),
                session: self.style.session.clone(),
                adapter: adapter.clone(),
            },
            _ => timeout(opts, &format!("ready ({why})")),
        }
    }

    async fn type_and_submit(
        &self,
        term: &dyn Terminal,
        text: &str,
        deadline: Instant,
        opts: DeliveryOptions,
    ) -> Result<Evidence, DeliveryError> {
        let input = &self.style.input;
        let before = term.observe();
        let seen_before = occurrences(&before.screen, text);
        let paste = input.style == InputStyle::Paste && before.bracketed_paste;
        let mut bytes = Vec::with_capacity(text.len() + 12);
        if paste {
            bytes.extend_from_slice(b"\x1b[200~");
            bytes.extend_from_slice(text.as_bytes());
            bytes.extend_from_slice(b"\x1b[201~");
        } else {
            bytes.extend_from_slice(text.as_bytes());
        }
        term.write(bytes);

        let echo_deadline = Instant::now() + ECHO_TIMEOUT;
        while !echoed(&term.observe(), text, seen_before) {
            if term.ended() {
                return Err(DeliveryError::Ended);
            }
            if Instant::now() >= echo_deadline {
                return Err(DeliveryError::NoEcho(ECHO_TIMEOUT.as_millis() as u64));
            }
            self.settle(echo_deadline).await;
        }
        let echoed_at = unix_millis();

        // Some TUIs take an Enter in the same burst as text for part of it.
        tokio::time::sleep(Duration::from_millis(input.enter_delay_ms)).await;
        // A program that went busy on its own meanwhile gets the Enter only
        // once it is idle again; the text waits in its input line.
        while term.observe().activity != Activity::Idle {
            if term.ended() {
                return Err(DeliveryError::Ended);
            }
            if Instant::now() >= deadline {
                return Err(timeout(
                    opts,
                    "idle to press Enter (the text waits in the input line)",
                ));
            }
            self.settle(deadline).await;
        }
        let mut entered_at = None;
        for press in 1..=MAX_ENTER_PRESSES {
            term.write(input.enter.as_bytes().to_vec());
            entered_at.get_or_insert_with(unix_millis);
            let submit_deadline = Instant::now() + SUBMIT_TIMEOUT;
            loop {
                if submitted(&term.observe(), text) {
                    return Ok(Evidence {
                        echoed: echoed_at,
                        entered: entered_at.unwrap_or_default(),
                        submitted: unix_millis(),
                        enter_presses: press,
                        style: if paste { "paste" } else { "typed" }.into(),
                    });
                }
                if term.ended() {
                    return Err(DeliveryError::Ended);
                }
                if Instant::now() >= submit_deadline {
                    break;
                }
                self.settle(submit_deadline).await;
            }
        }
        Err(DeliveryError::NotSubmitted(MAX_ENTER_PRESSES))
    }

    /// Until the screen changes, a key is pressed, or a tick passes.
    async fn settle(&self, deadline: Instant) {
        let tick = deadline.saturating_duration_since(Instant::now()).min(TICK);
        let _ = tokio::time::timeout(tick, self.changed.notified()).await;
    }
}

fn timeout(opts: DeliveryOptions, waiting: &str) -> DeliveryError {
    DeliveryError::Timeout {
        secs: opts.timeout_ms.div_ceil(1000),
        waiting: waiting.to_owned(),
    }
}

/// Holds a person's keystrokes back for as long as it lives.
struct KeyboardHold<'t>(&'t dyn Terminal);

impl<'t> KeyboardHold<'t> {
    fn new(term: &'t dyn Terminal) -> Self {
        term.hold_keyboard(true);
        Self(term)
    }
}

impl Drop for KeyboardHold<'_> {
    fn drop(&mut self) {
        self.0.hold_keyboard(false);
    }
}

/// Text compared without whitespace and box-drawing characters: TUIs wrap,
/// indent and pad lines, and draw a border at the start of every row of an
/// input box (opencode's `┃`), also inside wrapped text.
fn normalize(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_whitespace() && !('\u{2500}'..='\u{257F}').contains(c))
        .collect()
}

fn occurrences(screen: &str, text: &str) -> usize {
    let needle = normalize(text);
    normalize(screen).matches(needle.as_str()).count()
}

/// The whole text is on the screen once more than before, or in the input
/// line.
fn echoed(o: &Observation, text: &str, seen_before: usize) -> bool {
    let needle = normalize(text);
    occurrences(&o.screen, text) > seen_before
        || o.input
            .as_ref()
            .is_some_and(|i| normalize(i).contains(&needle))
}

/// The input line no longer ends with the text, or the program went busy.
fn submitted(o: &Observation, text: &str) -> bool {
    if o.raw == Activity::Busy {
        return true;
    }
    let needle = normalize(text);
    let tail: String = {
        let chars: Vec<char> = needle.chars().collect();
        chars[chars.len().saturating_sub(TAIL_CHARS)..]
            .iter()
            .collect()
    };
    match &o.input {
        Some(line) => !normalize(line).contains(&tail),
        // The input line is gone: the program moved on to show the turn.
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_text_inside_a_box_still_echoes() {
        let screen = "  ┃  [agent-comms] message inv_1 from bob; read it with: agent-\n  ┃  comms message show inv_1\n  ┃";
        let text =
            "[agent-comms] message inv_1 from bob; read it with: agent-comms message show inv_1";
        assert_eq!(occurrences(screen, text), 1);
        assert_eq!(occurrences("❯ hello  world", "hello world"), 1);
    }
}
