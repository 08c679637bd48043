//! Structured sessions over the Agent Client Protocol (`runtime acp-serve`):
//! an agent speaking JSON-RPC on its stdio, with agent-comms in ACP's client
//! role, through the `agent-client-protocol` crate.
//!
//! - [`policy`]: what the agent may do, fixed before it starts.
//! - [`transcript`]: the tap — every message in both directions, durable,
//!   and followed live.
//! - [`lines`]: the agent's stdio as the crate's line transport: bounded
//!   lines in, a write deadline out, the tap in both.
//! - [`agent`]: the agent process, tied to its supervisor.
//! - [`client`]: the client role — `initialize`, and the answers to what
//!   the agent asks (permissions, files, terminals), all by the policy.
//! - [`turns`]: one turn at a time, kept by our own bookkeeping.
//! - [`handle`]: prompts with the delivery discipline, cancel, status.
//! - [`supervisor`]: the process: start, endpoint, end conditions.
//! - [`view`]: the transcript as text for people (`acp log`).
//! - [`bridge`]: ACP clients attached to the running session.
//!
//! It knows no provider: what each agent needs (its command, environment
//! and quirks) is in the adapters' `[acp]` sections.

pub mod agent;
pub mod bridge;
pub mod client;
mod endpoint;
pub mod handle;
pub mod lines;
pub mod policy;
pub mod supervisor;
pub mod transcript;
pub mod turns;
pub mod view;

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    #[error(transparent)]
    Policy(#[from] policy::PolicyError),
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Paths(#[from] crate::paths::PathError),
    #[error(transparent)]
    Supervisor(#[from] crate::supervisor::SupervisorError),
    #[error(transparent)]
    Spawn(#[from] agent::SpawnError),
    #[error("cannot keep the transcript {}: {source}", .path.display())]
    Transcript {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write the session record {}: {source}", .path.display())]
    Record {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the ACP agent did not start: {0}")]
    Start(String),
    #[error("cannot continue ACP session {0}: {1}; start a new one with --new-session")]
    Continue(String, String),
}

/// An enum of the schema as it is spelled on the wire (`"end_turn"`).
pub(crate) fn wire_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}
