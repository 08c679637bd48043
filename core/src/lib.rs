//! Host layers of agent-comms.
//!
//! Each module is one layer that every adapter shares; none of them knows a
//! provider by name. A reader looking for "where does X happen" should find it
//! from the folder names alone. They are listed bottom to top, and a module
//! uses only those above it in this list (docs/architecture.md#the-layers-of-core
//! draws the graph and says where each behaviour lives):
//!
//! - [`time`], [`keys`], [`ids`], [`display`]: UTC timestamps, named keys,
//!   random and validated ids, untrusted text escaped for a terminal.
//! - [`regular_file`]: reading the files configuration names, bounded and
//!   never blocking.
//! - [`os`]: what differs between Unix and Windows, behind one interface
//!   (the endpoint and the PTY keep their own platform files).
//! - [`paths`]: the per-user runtime root, the user's home for agent-comms
//!   and the project root, all of which are contract
//!   (docs/architecture.md#paths-identities-environment).
//! - [`trust`]: the user's record of the project files they trusted
//!   (profiles, plugins, settings): until then such a file is inert.
//! - [`session`]: session names, the on-disk record of a live session, and the
//!   registry that lists and repairs them.
//! - [`adapter`]: the adapter interface, TOML profiles and their registry;
//!   the built-in adapters are the `agent-comms-adapters` crate.
//! - [`plugin`]: the native and Wasm plugin hosts behind adapters; the SDKs
//!   plugins are built with are in `plugins/`.
//! - [`delivery`]: typing a message into a prompt, safely and with proof.
//! - [`socket`]: the endpoint socket, its peer check and the versioned codec.
//! - [`screen`]: the screen model fed by every byte, and the terminal-query
//!   responder that answers for a terminal nobody attached.
//! - [`pty`]: a child in a real pseudo-terminal.
//! - [`cells`]: persistent REPL cells (`k`/`km`) on top of the supervisor.
//! - [`supervisor`]: the process that owns one PTY and one endpoint.
//! - [`client`]: the blocking client used by the short-lived CLI commands.
//! - [`takeover`]: a live provider process handed over into supervision, on
//!   its conversation (the provider's own session or thread).
//! - [`store`]: the control-plane record (agents, runtimes, invocations and
//!   delivery attempts) in the project's `.agent-comms/state.db`.
//! - [`acp`]: an agent headless over the Agent Client Protocol: its
//!   supervisor, the tap, the policy, prompts as deliveries.
//! - [`control`]: interactive and ACP runtimes, messages between agents,
//!   `doctor`.

pub mod acp;
pub mod adapter;
pub mod cells;
pub mod client;
pub mod control;
pub mod delivery;
pub mod display;
pub mod ids;
pub mod keys;
pub mod os;
pub mod paths;
pub mod plugin;
pub mod pty;
pub mod regular_file;
pub mod screen;
pub mod session;
pub mod socket;
pub mod store;
pub mod supervisor;
pub mod takeover;
pub mod time;
pub mod trust;
