//! A running ACP runtime from a browser: `agent-comms acp serve-web`.
//!
//! The runtime's bridge socket (`<runtime dir>/<id>.acp.sock`) already
//! speaks ACP to any number of clients, with roles, replay and permission
//! asks. This crate only carries that stream over WebSocket and serves a
//! page that is a plain ACP client of it:
//!
//! - `GET /` is the page (HTML, JS and CSS embedded in the binary: no build
//!   step, nothing fetched from the network).
//! - `GET /acp` upgrades to a WebSocket; each WebSocket connection is one
//!   new connection to the bridge, one JSON-RPC message per text message
//!   each way ([`relay`]). A read-only token's connection first says
//!   `_agent_comms/observe`, so the bridge itself refuses its prompts,
//!   cancels and permission answers. The server keeps no ACP state.
//!
//! Who may use it is decided by a token in the URL and, for the WebSocket,
//! by the `Origin` header ([`auth`], [`tokens`]); where it may listen by
//! [`address`]. What anyone who can reach the port can make it hold is
//! bounded ([`connections`]). It depends on no other crate of the workspace: the command
//! line finds the bridge and says when the runtime has ended. Unix only,
//! as the bridge socket is.

#![cfg(unix)]

pub mod address;
pub mod auth;
pub mod connections;
mod page;
pub mod relay;
mod routes;
pub mod tokens;

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Serialize;
use tokio::signal::unix::{signal, SignalKind};

pub use address::Listen;
pub use tokens::Tokens;

/// What to serve, and to whom.
pub struct Config {
    /// Where to listen (already checked: [`address::check`]).
    pub listen: Listen,
    /// The runtime's bridge socket.
    pub bridge: PathBuf,
    /// The uid that must be serving the bridge (the runtime's owner).
    pub bridge_owner: u32,
    pub tokens: Tokens,
}

/// The addresses printed once the server listens.
#[derive(Debug, Clone, Serialize)]
pub struct Urls {
    /// The page for a controller: prompts, cancels, permission answers.
    pub url: String,
    /// The page for an observer: the session, read only.
    pub read_only_url: String,
    /// The address actually listened on (port 0 resolved).
    pub listen: SocketAddr,
}

#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the web server failed: {0}")]
    Serve(std::io::Error),
    #[error("cannot start the web server's runtime: {0}")]
    Runtime(std::io::Error),
    #[error("{0}")]
    Address(#[from] address::AddressError),
    #[error("{0}")]
    Tokens(#[from] tokens::TokenError),
}

/// Listens on `config.listen`, calls `ready` with the URLs, and serves until
/// `until_over` returns (it blocks, on a thread of its own, until the
/// runtime has ended) or SIGTERM or SIGINT comes, so that the caller can
/// clean up. Open WebSockets end with it.
pub fn serve(
    config: Config,
    ready: impl FnOnce(&Urls),
    until_over: impl FnOnce() + Send + 'static,
) -> Result<(), WebError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(WebError::Runtime)?;
    let served = rt.block_on(async move {
        let addr = config.listen.addr();
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| WebError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| WebError::Bind { addr, source })?;
        let urls = Urls {
            url: format!("http://{local}/?token={}", config.tokens.controller()),
            read_only_url: format!("http://{local}/?token={}", config.tokens.observer()),
            listen: local,
        };
        let app = routes::router(routes::State::new(config, local));
        ready(&urls);
        let over = tokio::task::spawn_blocking(until_over);
        let mut term = signal(SignalKind::terminate()).map_err(WebError::Serve)?;
        let mut int = signal(SignalKind::interrupt()).map_err(WebError::Serve)?;
        tokio::select! {
            served = connections::serve(listener, app) => served.map_err(WebError::Serve),
            _ = over => Ok(()),
            _ = term.recv() => Ok(()),
            _ = int.recv() => Ok(()),
        }
    });
    // `until_over` may still be blocked (after a signal): do not wait for it.
    rt.shutdown_background();
    served
}
