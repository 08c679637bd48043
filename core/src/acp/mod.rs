//! Structured sessions over the Agent Client Protocol (`runtime acp-serve`):
//! an agent speaking JSON-RPC on its stdio, with agent-comms in ACP's client
//! role.
//!
//! [`policy`] is what the agent may do, fixed before it starts; [`view`]
//! turns the transcript of every message into text for people.

pub mod policy;
pub mod view;
