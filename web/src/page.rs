//! The page: a plain ACP client in one HTML file, one script and one style
//! sheet, embedded at build time. Agent text reaches the document only as
//! text nodes (the script never builds HTML from it), and the page's
//! Content-Security-Policy allows nothing but this server's own script,
//! style and WebSocket.

use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::tokens::Role;

const HTML: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/app.js");
const STYLE: &str = include_str!("page/style.css");

/// The CSP of every response: only our own files, our WebSocket, no frames.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The page, told its role (so an observer's input starts disabled; the
/// bridge refuses an observer's prompts whatever the page does).
pub fn html(role: Role) -> Response {
    let role = match role {
        Role::Controller => "controller",
        Role::Observer => "observer",
    };
    file("text/html; charset=utf-8", HTML.replace("{{ROLE}}", role))
}

pub fn script() -> Response {
    file("text/javascript; charset=utf-8", SCRIPT.to_owned())
}

pub fn style() -> Response {
    file("text/css; charset=utf-8", STYLE.to_owned())
}

fn file(kind: &'static str, body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            // The URL carries the token: never send it on.
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-store"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}
