//! Built-in adapters of agent-comms.
//!
//! An adapter answers every provider-specific question for one program so
//! that the host layers never name a provider. For now this crate holds the
//! REPL profiles that `k` uses for shell integration; provider adapters for
//! Claude Code, Codex and OpenCode grow here (see the adapters issue).

pub mod command;
pub mod repl;

pub use command::program_of;
pub use repl::{builtin_repls, repl_for_command, ProfileError, ReplProfile, ReplSection};
