//! Identifiers: the random ones agent-comms makes (session tokens, cell
//! ids, invocation ids, endpoint ids, the host id) and [`Id`], the one rule
//! every agent, runtime, message and conversation id that comes in is
//! held to (docs/security.md#names-ids-and-what-is-typed).

/// `bytes` random bytes from the system's random source, as lowercase hex.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    if getrandom::fill(&mut buf).is_err() {
        // Never expected; fall back to time and pid, still unique enough per session.
        let seed = crate::time::unix_millis() ^ u64::from(std::process::id()) << 32;
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (seed >> ((i % 8) * 8)) as u8;
        }
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// Longest agent, runtime, message or conversation id.
pub const MAX_ID_LEN: usize = 128;

/// The rule every id follows, as errors and docs state it.
pub const ID_RULE: &str = "1 to 128 characters: letters, digits, '.', '_' or '-' ([A-Za-z0-9._-])";

/// What an id names, for the error that refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    Agent,
    Runtime,
    Message,
    /// A provider's conversation (its own session) id.
    Conversation,
}

impl IdKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent id",
            Self::Runtime => "runtime id",
            Self::Message => "message id",
            Self::Conversation => "conversation id",
        }
    }
}

/// An id refused by [`Id::parse`]. The value is shown escaped: it may hold
/// a line break or an escape sequence, and the error is one terminal line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {} '{}': an id is {ID_RULE}", .kind.as_str(), .value.escape_debug())]
pub struct IdError {
    pub kind: IdKind,
    pub value: String,
}

/// Whether `value` uses only the id alphabet, `[A-Za-z0-9._-]`: the one
/// rule ids and session names share (each adds its own length and form).
pub fn in_id_alphabet(value: &str) -> bool {
    value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A validated id of an agent, a runtime, a message or a conversation.
///
/// Ids are typed into prompts (a notification names its message and its
/// sender), become file and socket names and appear in the repair commands
/// agent-comms prints, so every id that comes in — from the command line,
/// the environment, a socket request or a store row an older build wrote —
/// passes through here: `[A-Za-z0-9._-]`, 1 to [`MAX_ID_LEN`] characters.
/// Nothing in that alphabet is a shell metacharacter, a control character or
/// a space.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(String);

impl Id {
    pub fn parse(kind: IdKind, value: &str) -> Result<Self, IdError> {
        let valid = (1..=MAX_ID_LEN).contains(&value.len()) && in_id_alphabet(value);
        if valid {
            Ok(Self(value.to_owned()))
        } else {
            Err(IdError {
                kind,
                value: value.to_owned(),
            })
        }
    }

    pub fn agent(value: &str) -> Result<Self, IdError> {
        Self::parse(IdKind::Agent, value)
    }

    pub fn message(value: &str) -> Result<Self, IdError> {
        Self::parse(IdKind::Message, value)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Id {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_the_safe_alphabet_within_the_length() {
        for ok in [
            "alice",
            "bob-2",
            "a.b_c",
            "inv_0123456789ab",
            &"x".repeat(128),
        ] {
            assert_eq!(Id::agent(ok).unwrap().as_str(), ok);
        }
        for bad in [
            "",
            "a b",
            "ev\nil",
            "alice; rm -rf ~",
            "é",
            "a/b",
            "\u{1b}[2J",
            &"x".repeat(129),
        ] {
            assert!(Id::agent(bad).is_err(), "{bad:?}");
        }
        let e = Id::agent("ev\nil").unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid agent id 'ev\\nil': an id is 1 to 128 characters: letters, digits, '.', '_' or '-' ([A-Za-z0-9._-])"
        );
    }
}
