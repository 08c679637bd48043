//! Who may open the page and the WebSocket: the holder of a token (in the
//! URL's query, `?token=…`, as printed), and for the WebSocket a page of
//! this server's own origin.
//!
//! The `Origin` check stops another site's page, open in the owner's
//! browser, from driving the session through a WebSocket (browsers let any
//! page open one to any address, and send the Origin they came from). A
//! request without `Origin` is not a browser's and passes on its token
//! alone: a program that can set headers could set any Origin anyway.

use std::net::SocketAddr;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::tokens::{Role, Tokens};

/// Why a request was refused: one line for whoever sent it.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Token,
    Origin,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let (status, body) = match self {
            Refusal::Token => (StatusCode::UNAUTHORIZED, "a valid token is needed: open the URL that `agent-comms acp serve-web` printed (it ends in ?token=…)\n"),
            Refusal::Origin => (StatusCode::FORBIDDEN, "this WebSocket may only be opened by the page this server serves (the Origin header names another site)\n"),
        };
        (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            body,
        )
            .into_response()
    }
}

/// The role `token` grants.
pub fn role(tokens: &Tokens, token: Option<&str>) -> Result<Role, Refusal> {
    token.and_then(|t| tokens.role_of(t)).ok_or(Refusal::Token)
}

/// Passes a request without `Origin`, or whose `Origin` is this server:
/// `local` as listened on (and `localhost` for a loopback address), or,
/// on an unspecified address (0.0.0.0), the host the browser asked for.
pub fn origin(headers: &HeaderMap, local: SocketAddr) -> Result<(), Refusal> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let Ok(origin) = origin.to_str() else {
        return Err(Refusal::Origin);
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if own_origins(local, host).iter().any(|o| o == origin) {
        Ok(())
    } else {
        Err(Refusal::Origin)
    }
}

fn own_origins(local: SocketAddr, host: Option<&str>) -> Vec<String> {
    let mut own = vec![format!("http://{local}")];
    if local.ip().is_loopback() {
        own.push(format!("http://localhost:{}", local.port()));
    }
    if local.ip().is_unspecified() {
        own.extend(host.map(|h| format!("http://{h}")));
    }
    own
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with(origin: &str, host: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        h
    }

    #[test]
    fn only_the_servers_own_origin_passes() {
        let local: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        assert_eq!(origin(&HeaderMap::new(), local), Ok(()));
        assert_eq!(
            origin(&with("http://127.0.0.1:4000", "127.0.0.1:4000"), local),
            Ok(())
        );
        assert_eq!(
            origin(&with("http://localhost:4000", "localhost:4000"), local),
            Ok(())
        );
        for foreign in [
            "http://evil.example",
            "http://127.0.0.1:4001",
            "https://127.0.0.1:4000",
            "null",
        ] {
            assert_eq!(
                origin(&with(foreign, "127.0.0.1:4000"), local),
                Err(Refusal::Origin),
                "{foreign}"
            );
        }
        // A host name that resolves to loopback (DNS rebinding) is not ours.
        assert_eq!(
            origin(
                &with("http://evil.example:4000", "evil.example:4000"),
                local
            ),
            Err(Refusal::Origin)
        );
        let any: SocketAddr = "0.0.0.0:4000".parse().unwrap();
        assert_eq!(
            origin(&with("http://box.lan:4000", "box.lan:4000"), any),
            Ok(())
        );
        assert_eq!(
            origin(&with("http://evil.example", "box.lan:4000"), any),
            Err(Refusal::Origin)
        );
    }
}
