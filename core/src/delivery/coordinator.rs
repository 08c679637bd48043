//! The delivery coordinator: one writer at a time, idle and quiet first,
//! then text, echo, Enter, submission.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{watch, Mutex, Notify};

use super::validate::invisible;
use super::{validate, DeliveryError, DeliveryOptions, Evidence, Leftover, Waiting};
use crate::adapter::profile::{Input, InputStyle};
use crate::adapter::Activity;
use crate::time::unix_millis;

/// How long the text may take to show after it was written.
const ECHO_TIMEOUT: Duration = Duration::from_secs(3);
/// How long one Enter may take to show its effect before it is pressed again.
const SUBMIT_TIMEOUT: Duration = Duration::from_millis(1500);
/// Once the text is typed, the least time it gets to be entered, whatever
/// the caller's timeout (which bounds the wait before typing: `--timeout 0`
/// is "only if ready now", and typing makes a screen busy for a moment).
const ENTER_WAIT_MIN: Duration = Duration::from_secs(3);
/// How long the input line may take to show that a take-back worked.
const CLEAR_TIMEOUT: Duration = Duration::from_millis(1500);
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
    /// When a screen last read busy, every screen the program drew
    /// counted (not only the ones a delivery looked at).
    pub busy_at: Option<Instant>,
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
    /// (rows, cols) of the screen.
    pub size: (u16, u16),
    pub bracketed_paste: bool,
    /// When the terminal was last resized, if ever: the rows then move
    /// and are cut until the program redraws.
    pub resized_at: Option<Instant>,
}

/// How to type into one program.
#[derive(Debug, Clone)]
pub struct DeliveryStyle {
    pub input: Input,
    /// After a submission, how long the program may show nothing busy yet
    /// (the profile's `shows_busy_within_ms`).
    pub shows_busy_within: Duration,
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
    /// When the last delivery began typing, until the program showed busy
    /// after that (or [`DeliveryStyle::shows_busy_within`] passed).
    submitted: std::sync::Mutex<Option<Instant>>,
    /// Woken on every output chunk and keystroke.
    changed: Arc<Notify>,
    style: DeliveryStyle,
    /// The input line of a paste shown collapsed (the profile's
    /// `input.collapsed_paste`; validated when the profile loaded).
    collapsed_paste: Option<regex::Regex>,
    /// What the delivery checking the screen waits for now (`None`: it
    /// does not wait), for the clients that tell a person
    /// ([`crate::socket::protocol::Request::ReportWaits`]).
    waiting: watch::Sender<Option<Waiting>>,
}

impl DeliveryCoordinator {
    pub fn new(style: DeliveryStyle, changed: Arc<Notify>) -> Self {
        Self {
            // tokio's mutex queues waiters in order: first come, first served.
            turns: Arc::new(Mutex::new(())),
            submitted: std::sync::Mutex::new(None),
            changed,
            collapsed_paste: style
                .input
                .collapsed_paste
                .as_ref()
                .and_then(|p| regex::Regex::new(p.get_ref()).ok()),
            style,
            waiting: watch::channel(None).0,
        }
    }

    /// What deliveries into this session wait for, as it changes.
    pub fn waiting(&self) -> watch::Receiver<Option<Waiting>> {
        self.waiting.subscribe()
    }

    /// Whether a delivery holds the turn now: one that starts waits for it.
    pub fn turn_taken(&self) -> bool {
        self.turns.try_lock().is_err()
    }

    /// Says what the delivery waits for now (`None`: nothing); the time is
    /// kept while the reason stays the same.
    fn report(&self, why: Option<&str>) {
        self.waiting
            .send_if_modified(|now| match (now.as_ref(), why) {
                (Some(was), Some(why)) if was.why == why => false,
                (None, None) => false,
                (_, why) => {
                    *now = why.map(|why| Waiting {
                        why: why.to_owned(),
                        since: unix_millis(),
                    });
                    true
                }
            });
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
        // Busy from here on is this turn's (the program read idle): a busy
        // seen while the submission was checked counts as shown.
        let typing_at = Instant::now();
        let result = self.type_and_submit(term, text, deadline).await;
        if result.is_ok() && !self.style.shows_busy_within.is_zero() {
            *self.lock_submitted() = Some(typing_at);
        }
        drop(hold);
        drop(turn);
        result
    }

    /// Waits until a delivery could start now: earlier deliveries done, the
    /// program idle, nobody typing, the input line empty. Nothing is taken
    /// (neither the turn nor the keyboard), so a caller can decide what to
    /// type at the moment it can be typed — an inbox names every message
    /// waiting by then — and then deliver it, which checks all this again.
    pub async fn ready(
        &self,
        term: &dyn Terminal,
        opts: DeliveryOptions,
    ) -> Result<(), DeliveryError> {
        let deadline = Instant::now() + Duration::from_millis(opts.timeout_ms);
        if !opts.try_only {
            let wait = tokio::time::Instant::from_std(deadline);
            let _earlier_done = tokio::time::timeout_at(wait, self.turns.lock())
                .await
                .map_err(|_| timeout(opts, "earlier deliveries finished"))?;
        }
        self.wait_unblocked(term, deadline, opts).await
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
            self.wait_unblocked(term, deadline, opts).await?;
            // Hold the keyboard, then look again: a key that arrived in
            // between is now either on the screen or counted as recent.
            let hold = KeyboardHold::new(term);
            if self.blocker(&term.observe()).is_none() {
                return Ok(hold);
            }
            drop(hold);
            self.wait_or_give_up(deadline, opts, "a person typed just now")
                .await?;
        }
    }

    /// Waits until nothing blocks a delivery (see [`Self::blocker`]).
    async fn wait_unblocked(
        &self,
        term: &dyn Terminal,
        deadline: Instant,
        opts: DeliveryOptions,
    ) -> Result<(), DeliveryError> {
        loop {
            if term.ended() {
                return Err(DeliveryError::Ended);
            }
            let seen = term.observe();
            let Some(why) = self.blocker(&seen) else {
                self.report(None);
                return Ok(());
            };
            tracing::debug!(why, ?seen.activity, ?seen.input, "delivery waits");
            self.report(Some(why));
            let waited = self.wait_or_give_up(deadline, opts, why).await;
            if waited.is_err() {
                self.report(None);
            }
            waited?;
        }
    }

    /// One wait for `why` to pass, or the error of a wait that may not go
    /// on (`--try`, or the deadline passed).
    async fn wait_or_give_up(
        &self,
        deadline: Instant,
        opts: DeliveryOptions,
        why: &str,
    ) -> Result<(), DeliveryError> {
        if opts.try_only {
            return Err(DeliveryError::NotReady(why.to_owned()));
        }
        if Instant::now() >= deadline {
            return Err(self.not_ready_in_time(opts, why));
        }
        self.settle(deadline).await;
        Ok(())
    }

    /// Why delivery must wait now, if it must.
    fn blocker(&self, o: &Observation) -> Option<&'static str> {
        let turn_not_shown = self.turn_not_shown_yet(o);
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
        if turn_not_shown {
            return Some("the program has not shown the turn it was just given");
        }
        match &o.input {
            None => Some("no input line is visible (a dialog or menu may be open)"),
            Some(text) if o.input_rule && !text.is_empty() => {
                Some("the input line holds unsent text")
            }
            Some(_) => None,
        }
    }

    /// Whether the input line holds a paste the program shows collapsed.
    fn shows_collapsed_paste(&self, o: &Observation) -> bool {
        let (Some(pattern), Some(line)) = (&self.collapsed_paste, &o.input) else {
            return false;
        };
        pattern.is_match(line.trim())
    }

    /// Whether the last submission is recent and the program has not shown
    /// busy since (`o` is the latest look): a program that draws its turn
    /// late looks idle meanwhile. Forgets the submission once it showed —
    /// however briefly, and whether or not a delivery was looking then —
    /// or once [`DeliveryStyle::shows_busy_within`] passed.
    fn turn_not_shown_yet(&self, o: &Observation) -> bool {
        let mut submitted = self.lock_submitted();
        let waiting = submitted.is_some_and(|at| {
            o.busy_at.is_none_or(|busy| busy < at) && at.elapsed() < self.style.shows_busy_within
        });
        if !waiting {
            *submitted = None;
        }
        waiting
    }

    fn lock_submitted(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.submitted.lock().unwrap_or_else(|p| p.into_inner())
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

    /// Types the text, waits for its echo, enters it and sees it taken.
    /// A failure after typing first takes back what was typed (see
    /// [`Self::take_back`]) and says whether that worked.
    async fn type_and_submit(
        &self,
        term: &dyn Terminal,
        text: &str,
        deadline: Instant,
    ) -> Result<Evidence, DeliveryError> {
        let before = term.observe();
        let needle = echo_needle(text, before.size);
        let seen_before = occurrences(&before.screen, &needle);
        let paste = self.style.input.style == InputStyle::Paste && before.bracketed_paste;
        term.write(typed_bytes(text, paste));
        let mut enters = 0;
        let result = self
            .echo_and_enter(term, &needle, seen_before, paste, deadline, &mut enters)
            .await;
        match result {
            Ok((echoed, entered, presses)) => Ok(Evidence {
                echoed,
                entered,
                submitted: unix_millis(),
                enter_presses: presses,
                style: if paste { "paste" } else { "typed" }.into(),
                stop_reason: None,
            }),
            Err(failure) => {
                let typed = Typing {
                    text,
                    needle: &needle,
                    seen_before,
                    enters,
                };
                Err(self.take_back(term, typed, failure).await)
            }
        }
    }

    /// After the text was written: its echo, idle, then Enter until the
    /// submission shows. Returns when it echoed, when Enter was first
    /// pressed, and how many presses it took; counts the presses in
    /// `enters` as they happen.
    async fn echo_and_enter(
        &self,
        term: &dyn Terminal,
        needle: &str,
        seen_before: usize,
        pasted: bool,
        deadline: Instant,
        enters: &mut usize,
    ) -> Result<(u64, u64, u32), Failure> {
        let echo_deadline = Instant::now() + ECHO_TIMEOUT;
        let shown = |o: &Observation| {
            echoed(o, needle, seen_before) || pasted && self.shows_collapsed_paste(o)
        };
        while !shown(&term.observe()) {
            if term.ended() {
                return Err(Failure::Ended);
            }
            if Instant::now() >= echo_deadline {
                return Err(Failure::NoEcho);
            }
            self.settle(echo_deadline).await;
        }
        let echoed_at = unix_millis();
        let input = &self.style.input;
        // Some TUIs take an Enter in the same burst as text for part of it.
        tokio::time::sleep(input.enter_delay(pasted)).await;
        // A program that went busy on its own meanwhile gets the Enter only
        // once it is idle again. The caller's timeout bounds the wait before
        // typing; typed text gets at least ENTER_WAIT_MIN to be entered.
        let waiting_since = Instant::now();
        let enter_deadline = deadline.max(waiting_since + ENTER_WAIT_MIN);
        while !may_enter(&term.observe(), needle) {
            if term.ended() {
                return Err(Failure::Ended);
            }
            if Instant::now() >= enter_deadline {
                let waited = waiting_since.elapsed().as_millis() as u64;
                return Err(Failure::NeverIdle(waited.div_ceil(1000)));
            }
            self.settle(enter_deadline).await;
        }
        let entered_at = unix_millis();
        let mut typed = Typed::seen(&term.observe(), needle);
        for press in 1..=MAX_ENTER_PRESSES {
            term.write(input.enter.as_bytes().to_vec());
            *enters += 1;
            let submit_deadline = Instant::now() + SUBMIT_TIMEOUT;
            loop {
                if typed.submitted(&term.observe(), needle) {
                    return Ok((echoed_at, entered_at, press));
                }
                if term.ended() {
                    return Err(Failure::Ended);
                }
                if Instant::now() >= submit_deadline {
                    break;
                }
                self.settle(submit_deadline).await;
            }
        }
        Err(Failure::NotSubmitted)
    }

    /// Removes what a failed delivery typed, in the adapter's way, and
    /// turns the failure into its error, which says whether the input line
    /// is clean again or what was left there.
    async fn take_back(
        &self,
        term: &dyn Terminal,
        typed: Typing<'_>,
        failure: Failure,
    ) -> DeliveryError {
        if failure == Failure::Ended {
            return DeliveryError::Ended;
        }
        let keys = self
            .style
            .input
            .clear
            .keys(typed.text.chars().count(), typed.enters);
        let removed = !keys.is_empty() && {
            term.write(keys);
            self.cleared(term, &typed).await
        };
        let left = if removed {
            Leftover::Removed
        } else {
            Leftover::Left {
                session: self.style.session.clone(),
            }
        };
        match failure {
            Failure::NoEcho => DeliveryError::NoEcho {
                ms: ECHO_TIMEOUT.as_millis() as u64,
                left,
            },
            Failure::NeverIdle(secs) => DeliveryError::NeverIdle { secs, left },
            Failure::NotSubmitted => DeliveryError::NotSubmitted {
                presses: MAX_ENTER_PRESSES,
                left,
            },
            Failure::Ended => DeliveryError::Ended,
        }
    }

    /// Whether, within [`CLEAR_TIMEOUT`], the input line no longer shows
    /// the text's end and the screen shows the text no more often than
    /// before it was typed.
    async fn cleared(&self, term: &dyn Terminal, typed: &Typing<'_>) -> bool {
        let deadline = Instant::now() + CLEAR_TIMEOUT;
        loop {
            let seen = term.observe();
            if !holds_tail(&seen, typed.needle)
                && occurrences(&seen.screen, typed.needle) <= typed.seen_before
            {
                return true;
            }
            if Instant::now() >= deadline || term.ended() {
                return false;
            }
            self.settle(deadline).await;
        }
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

/// What a delivery typed, for taking it back.
struct Typing<'a> {
    text: &'a str,
    needle: &'a str,
    /// Times the needle showed on the screen before the typing.
    seen_before: usize,
    /// Enter presses after it.
    enters: usize,
}

/// How a delivery failed once its text was typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    NoEcho,
    /// Never idle to press Enter, after this many seconds.
    NeverIdle(u64),
    NotSubmitted,
    Ended,
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
    text.chars().filter(|&c| !invisible(c)).collect()
}

/// How often the (normalized) `needle` shows on the screen.
fn occurrences(screen: &str, needle: &str) -> usize {
    normalize(screen).matches(needle).count()
}

/// What of the text the echo check looks for: all of it (normalized) when
/// it fits on a screen of `size`, else its end, as much of it as surely
/// fits — an eighth of the screen's cells, which leaves room for the
/// program's own rows, wide characters and the spaces normalizing drops.
/// A text of 4,096 bytes did not fit whole on 80 × 24 and never "echoed".
fn echo_needle(text: &str, (rows, cols): (u16, u16)) -> String {
    let fits = (usize::from(rows) * usize::from(cols) / 8).max(TAIL_CHARS);
    last_chars(&normalize(text), fits)
}

fn last_chars(text: &str, n: usize) -> String {
    let skip = text.chars().count().saturating_sub(n);
    text.chars().skip(skip).collect()
}

fn typed_bytes(text: &str, paste: bool) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(text.len() + 12);
    if paste {
        bytes.extend_from_slice(b"\x1b[200~");
        bytes.extend_from_slice(text.as_bytes());
        bytes.extend_from_slice(b"\x1b[201~");
    } else {
        bytes.extend_from_slice(text.as_bytes());
    }
    bytes
}

/// The needle is on the screen once more than before, or in the input
/// line.
fn echoed(o: &Observation, needle: &str, seen_before: usize) -> bool {
    occurrences(&o.screen, needle) > seen_before
        || o.input
            .as_ref()
            .is_some_and(|i| normalize(i).contains(needle))
}

/// Whether Enter may be pressed on the typed text: the program reads idle,
/// or reads neither busy nor idle only because the text covers the rows
/// the adapter reads (a text taller than the screen pushes a composer's
/// prompt off it) — it was idle when the typing began.
fn may_enter(o: &Observation, needle: &str) -> bool {
    match o.activity {
        Activity::Idle => true,
        Activity::Unknown => o.raw != Activity::Busy && normalize(&o.screen).contains(needle),
        Activity::Busy => false,
    }
}

/// Whether the input line still shows the needle's last [`TAIL_CHARS`].
fn holds_tail(o: &Observation, needle: &str) -> bool {
    let tail = last_chars(needle, TAIL_CHARS);
    // No input line visible: the program moved on (to show the turn).
    o.input
        .as_ref()
        .is_some_and(|line| normalize(line).contains(&tail))
}

/// How the typed text showed just before Enter: what a submission changes.
struct Typed {
    /// The input line showed the text's end (a long text wraps past the
    /// rows an input line is read from, or pushes it off the screen).
    in_input_line: bool,
    /// Times the needle showed on the screen.
    on_screen: usize,
    /// What the input line showed (its first rows, when the text wraps).
    input: Option<String>,
    /// The last resize then: one since makes the screen's rows move.
    resized_at: Option<Instant>,
}

impl Typed {
    fn seen(o: &Observation, needle: &str) -> Self {
        Self {
            in_input_line: holds_tail(o, needle),
            on_screen: occurrences(&o.screen, needle),
            input: o.input.clone(),
            resized_at: o.resized_at,
        }
    }

    /// The program went busy; or the input line that showed the text's end
    /// no longer does; or, when it never showed it, the input line or the
    /// number of times the screen shows the text changed.
    ///
    /// A resize since moves and cuts the rows, which is no submission (the
    /// soak found a resize between Enter and the program reading it taken
    /// for one, and then a redraw that came in pieces): after a resize only
    /// busy counts, until the input line shows the text's end again — then
    /// that look is the one a submission changes.
    fn submitted(&mut self, o: &Observation, needle: &str) -> bool {
        if o.raw == Activity::Busy {
            return true;
        }
        if o.resized_at != self.resized_at {
            if self.in_input_line && holds_tail(o, needle) {
                *self = Self::seen(o, needle);
            }
            return false;
        }
        if self.in_input_line {
            return !holds_tail(o, needle);
        }
        o.input != self.input || occurrences(&o.screen, needle) != self.on_screen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn looking_at(input: &str, resized_at: Option<Instant>) -> Observation {
        Observation {
            activity: Activity::Idle,
            raw: Activity::Idle,
            busy_at: None,
            keyboard_quiet: None,
            input: Some(input.to_owned()),
            input_rule: true,
            screen: format!("> {input}"),
            size: (24, 80),
            bracketed_paste: true,
            resized_at,
        }
    }

    /// A resize between Enter and the program reading it cuts the input
    /// line's rows: that is no submission, nor is a redraw that has not yet
    /// reached the input line; once the text shows again, its leaving is.
    #[test]
    fn a_resize_is_not_taken_for_the_submission() {
        let text = "please review the change";
        let needle = echo_needle(text, (24, 80));
        let needle = needle.as_str();
        let mut typed = Typed::seen(&looking_at(text, None), needle);
        assert!(typed.in_input_line);
        let resized = Some(Instant::now());
        assert!(!typed.submitted(&looking_at("", resized), needle));
        assert!(!typed.submitted(&looking_at("", resized), needle));
        assert!(!typed.submitted(&looking_at(text, resized), needle));
        assert!(typed.submitted(&looking_at("", resized), needle));
        let mut unresized = Typed::seen(&looking_at(text, None), needle);
        assert!(unresized.submitted(&looking_at("", None), needle));
    }

    #[test]
    fn wrapped_text_inside_a_box_still_echoes() {
        let screen = "  ┃  [agent-comms] message inv_1 from bob; read it with: agent-\n  ┃  comms message show inv_1\n  ┃";
        let text =
            "[agent-comms] message inv_1 from bob; read it with: agent-comms message show inv_1";
        assert_eq!(occurrences(screen, &normalize(text)), 1);
        assert_eq!(occurrences("❯ hello  world", &normalize("hello world")), 1);
    }

    #[test]
    fn a_text_longer_than_the_screen_is_checked_by_its_end() {
        let text = format!("{}end", "w ".repeat(2000));
        let needle = echo_needle(&text, (24, 80));
        assert_eq!(needle.chars().count(), 24 * 80 / 8);
        assert!(needle.ends_with("wwend"), "{needle}");
        assert_eq!(echo_needle("short  text", (24, 80)), "shorttext");
        // A tiny screen still compares a recognisable end.
        assert_eq!(echo_needle(&text, (2, 10)).chars().count(), TAIL_CHARS);
    }
}
