//! Host layers of agent-comms.
//!
//! Each module is one layer that every adapter shares; none of them knows a
//! provider by name. A reader looking for "where does X happen" should find it
//! from the folder names alone:
//!
//! - [`os`]: what differs between Unix and Windows, behind one interface
//!   (the endpoint and the PTY keep their own platform files).
//! - [`paths`]: the per-user runtime root and the user's home for agent-comms,
//!   both of which are contract (see DESIGN.md).
//! - [`session`]: session names, the on-disk record of a live session, and the
//!   registry that lists and repairs them.
//! - [`pty`]: a child in a real pseudo-terminal.
//! - [`screen`]: the screen model fed by every byte, and the terminal-query
//!   responder that answers for a terminal nobody attached.
//! - [`socket`]: the endpoint socket, its peer check and the versioned codec.
//! - [`supervisor`]: the process that owns one PTY and one endpoint.
//! - [`plugin`]: the native and Wasm plugin hosts behind adapters.
//! - [`client`]: the blocking client used by the short-lived CLI commands.
//! - [`adapter`]: the adapter interface, TOML profiles and their registry.
//! - [`cells`]: persistent REPL cells (`k`/`km`) on top of the supervisor.
//! - [`store`]: the control-plane record (agents, runtimes, invocations and
//!   delivery attempts) in the project's `.agent-comms/state.db`.

pub mod adapter;
pub mod cells;
pub mod client;
pub mod control;
pub mod delivery;
pub mod ids;
pub mod keys;
pub mod os;
pub mod paths;
pub mod plugin;
pub mod pty;
pub mod screen;
pub mod session;
pub mod socket;
pub mod store;
pub mod supervisor;
pub mod takeover;
pub mod time;
