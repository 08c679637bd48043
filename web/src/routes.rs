//! The three files of the page and the WebSocket, each behind its check.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::Query;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use tokio::sync::Semaphore;

use crate::tokens::Tokens;
use crate::{auth, page, relay, Config};

/// The largest message a page may send (a prompt with a pasted file).
const MAX_MESSAGE: usize = 8 << 20;
/// Pages attached at once: each is a connection to the bridge, under the
/// owner's uid, so the bridge's per-uid bound (32) leaves the owner's own
/// clients room whatever a token holder opens.
pub const MAX_WEBSOCKETS: usize = 16;

#[derive(Clone)]
pub struct State(Arc<Inner>);

struct Inner {
    tokens: Tokens,
    bridge: PathBuf,
    owner: u32,
    local: SocketAddr,
    websockets: Arc<Semaphore>,
}

impl State {
    pub fn new(config: Config, local: SocketAddr) -> Self {
        Self(Arc::new(Inner {
            tokens: config.tokens,
            bridge: config.bridge,
            owner: config.bridge_owner,
            local,
            websockets: Arc::new(Semaphore::new(MAX_WEBSOCKETS)),
        }))
    }
}

#[derive(Deserialize)]
struct Auth {
    token: Option<String>,
}

pub fn router(state: State) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/app.js", get(|| async { page::script() }))
        .route("/style.css", get(|| async { page::style() }))
        .route("/acp", get(acp))
        .with_state(state)
}

async fn index(
    axum::extract::State(state): axum::extract::State<State>,
    Query(q): Query<Auth>,
) -> Response {
    match auth::role(&state.0.tokens, q.token.as_deref()) {
        Ok(role) => page::html(role),
        Err(refusal) => refusal.into_response(),
    }
}

/// The token first (401), then the Origin (403), then whether it is a
/// WebSocket upgrade at all.
async fn acp(
    axum::extract::State(state): axum::extract::State<State>,
    Query(q): Query<Auth>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let role = match auth::role(&state.0.tokens, q.token.as_deref()) {
        Ok(role) => role,
        Err(refusal) => return refusal.into_response(),
    };
    if let Err(refusal) = auth::origin(&headers, state.0.local) {
        return refusal.into_response();
    }
    let Ok(place) = state.0.websockets.clone().try_acquire_owned() else {
        let why = format!(
            "{MAX_WEBSOCKETS} pages are attached, the most this server takes; close one and reload"
        );
        return (StatusCode::SERVICE_UNAVAILABLE, why).into_response();
    };
    match upgrade {
        Ok(ws) => ws
            .max_message_size(MAX_MESSAGE)
            .on_upgrade(move |socket| async move {
                relay::run(socket, &state.0.bridge, state.0.owner, role).await;
                drop(place);
            }),
        Err(rejection) => rejection.into_response(),
    }
}
