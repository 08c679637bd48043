//! Delivery: typing a message into a program's prompt, safely and with proof.
//!
//! Every adapter shares this discipline (docs/architecture.md#delivery-discipline):
//! validate the text; one writer at a time, first come first served; wait
//! until the program is idle *and* no person is typing; write in the
//! adapter's input style; verify the whole text echoed; press Enter after the
//! adapter's delay; verify the submission took, pressing Enter again a
//! bounded number of times; return timestamps as evidence.
//!
//! Being human-aware is what tmux-based tools cannot do: they see only the
//! screen, so a person's half-typed line looks like an idle prompt. The
//! supervisor relays the person's keystrokes, so it knows when they last
//! typed, and while a delivery writes, their keys are held back and released
//! after it — a message never lands in the middle of what a person types.

mod coordinator;
pub mod validate;

use serde::{Deserialize, Serialize};

pub use coordinator::{DeliveryCoordinator, DeliveryStyle, Observation, Terminal};
pub use validate::{validate, validate_bytes, InvalidText, MAX_TEXT_BYTES};

/// Proof that a delivery took: when the text showed on the screen, when
/// Enter was first pressed, and when the submission was seen (Unix ms).
///
/// A delivery into an ACP runtime is a prompt (style `prompt`): `entered`
/// is when the prompt was sent, `echoed` when the agent's first update of
/// the turn came (its response, if it sent none), `submitted` when the
/// turn ended, with the agent's `stop_reason`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub echoed: u64,
    pub entered: u64,
    pub submitted: u64,
    /// Enter presses it took (more than one: a lost Enter was recovered).
    pub enter_presses: u32,
    /// `paste`, `typed` or `prompt`.
    pub style: String,
    /// How the agent ended the turn (`end_turn`, `cancelled` …); prompts only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
}

/// What the delivery at the head of a session's queue waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiting {
    /// "the program is busy", "a person is typing", "the input line holds
    /// unsent text", "another delivery is ahead of this one" …
    pub why: String,
    /// Since when it waits for that (Unix ms).
    pub since: u64,
}

/// What a delivery that failed after typing left in the input line: the
/// next delivery (or a person) must not find half a message there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leftover {
    /// Removed in the adapter's way (`[input] clear`), and the input line
    /// showed it gone.
    Removed,
    /// Still there, or not known to be gone.
    Left { session: String },
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Removed => write!(f, "what was typed was removed from the input line"),
            Self::Left { session } => write!(
                f,
                "the text may still be in the input line of session {session}: look and clear it with: agent-comms session attach {session}"
            ),
        }
    }
}

/// How long to wait, and whether to wait at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryOptions {
    /// Fail at once when busy, a person is typing, or another delivery runs.
    pub try_only: bool,
    /// Bound on waiting for the turn and for idle.
    pub timeout_ms: u64,
}

/// Default bound on waiting for a turn and for idle.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    #[error(transparent)]
    Invalid(#[from] InvalidText),
    #[error("another delivery is in progress; retry, or leave out --try to wait for it")]
    Contended,
    #[error("not delivered: {0}; retry later, or leave out --try to wait")]
    NotReady(String),
    #[error("timed out after {secs} s waiting until {waiting}; nothing was typed")]
    Timeout { secs: u64, waiting: String },
    #[error("timed out after {secs} s: the {adapter} adapter cannot read the screen (it shows neither busy nor idle), so nothing was typed; see what it shows with: agent-comms session snapshot {session}; if the adapter should read it, add it to the profile as a sample and check the rules with: agent-comms adapters check {adapter}")]
    Unreadable {
        secs: u64,
        session: String,
        adapter: String,
    },
    #[error("the text did not show on the screen within {ms} ms after it was written, so Enter was not pressed; {left}")]
    NoEcho { ms: u64, left: Leftover },
    #[error("the program did not turn idle within {secs} s after the text was typed, so Enter was not pressed; {left}")]
    NeverIdle { secs: u64, left: Leftover },
    #[error("Enter was pressed {presses} times and the input line still held the text; {left}")]
    NotSubmitted { presses: u32, left: Leftover },
    #[error("the session ended before the delivery finished")]
    Ended,
    /// An ACP agent answered the prompt with an error.
    #[error("the agent refused the prompt: {0}")]
    Refused(String),
    #[error("this session runs cells, which type for themselves; use: k run")]
    RunsCells,
}
