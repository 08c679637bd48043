//! `agent-comms mcp`: agent-comms as native tools for agents, over the
//! Model Context Protocol on standard input and output (the official Rust
//! SDK, `rmcp`).
//!
//! Without it an agent reaches agent-comms through its shell tool: a
//! permission, a quoting step and a parse of the output on every call, and
//! polling for anything it waits on. Here each capability is a typed tool
//! with a JSON schema for its input and its result, honest annotations
//! (`readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`
//! set on every tool), and waits that block in the server.
//!
//! The tools are thin: each is one call into `agent-comms-core`, the same
//! one the command line makes, run off the event loop so one slow session
//! never holds up another call. docs/mcp.md lists them.

pub mod config;
mod reply;
mod resources;
mod schema;
mod server;
mod set;
mod tools;
mod wait;

pub use server::{Options, Server};
pub use set::{ToolSet, UnknownToolSet};

use rmcp::ServiceExt;

#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("the MCP client's initialize failed: {0}")]
    Start(String),
    #[error("the MCP connection failed: {0}")]
    Serve(String),
}

/// Serves `options`' tools on standard input and output until the client
/// closes the connection.
pub async fn serve_stdio(options: Options) -> Result<(), McpError> {
    let running = Server::new(options)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| McpError::Start(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| McpError::Serve(e.to_string()))?;
    Ok(())
}
