//! The tools, one module per thing an agent works with. Each module adds
//! its own router to [`crate::Server`]; what a tool does is a call into
//! `agent-comms-core`, the same one the command line makes.

pub(crate) mod acp;
pub(crate) mod cells;
pub(crate) mod messages;
pub(crate) mod sessions;

use agent_comms_core::client::{Client, ClientError};
use agent_comms_core::display::one_line;
use agent_comms_core::paths::ensure_runtime_root;
use agent_comms_core::session::{Registry, SessionError, SessionName, SessionRecord};
use agent_comms_core::socket::is_dialable;
use agent_comms_core::socket::protocol::{Request, Response};

use crate::reply::ToolError;

/// Every timeout a tool takes is in seconds, at most this many: a call
/// that blocks longer than an hour is a mistake, not a wait.
pub(crate) const MAX_TIMEOUT_S: f64 = 3600.0;

/// A timeout argument as a duration, or why it is unusable.
pub(crate) fn timeout(
    seconds: Option<f64>,
    default: f64,
) -> Result<std::time::Duration, ToolError> {
    let s = seconds.unwrap_or(default);
    if !(s > 0.0 && s <= MAX_TIMEOUT_S) {
        return Err(ToolError::new(format!(
            "timeout must be more than 0 and at most {MAX_TIMEOUT_S} seconds; got {s}"
        )));
    }
    Ok(std::time::Duration::from_secs_f64(s))
}

/// A session name from a tool's arguments.
pub(crate) fn session_name(raw: &str) -> Result<SessionName, ToolError> {
    SessionName::parse(raw).map_err(|e| {
        ToolError::new(format!(
            "'{}' is not a session name ({e}); session_list shows the live ones",
            one_line(raw)
        ))
    })
}

/// The live sessions, sorted by name (stale records are cleaned up).
pub(crate) fn live_sessions() -> Result<Vec<SessionRecord>, ToolError> {
    let root = ensure_runtime_root().map_err(|e| ToolError::new(e.to_string()))?;
    Registry::new(root, is_dialable)
        .live(&mut |_| {})
        .map_err(|e| ToolError::new(e.to_string()))
}

/// Connects to a live session; `missing` says what to call when there is
/// none of that name.
pub(crate) fn connect(name: &SessionName, missing: &str) -> Result<Client, ToolError> {
    connect_with_record(name, missing).map(|(client, _)| client)
}

/// [`connect`], with the session's record (its supervisor's pid).
pub(crate) fn connect_with_record(
    name: &SessionName,
    missing: &str,
) -> Result<(Client, SessionRecord), ToolError> {
    match Client::for_session(name) {
        Ok(connected) => Ok(connected),
        Err(ClientError::Session(SessionError::NotFound(_)) | ClientError::Stale { .. }) => {
            Err(ToolError::new(format!("no session '{name}'; {missing}")))
        }
        Err(e) => Err(ToolError::new(e.to_string())),
    }
}

/// One request to a live session; the supervisor's refusal is the tool's
/// error, as it says.
pub(crate) fn ask(
    name: &SessionName,
    request: Request,
    missing: &str,
) -> Result<Response, ToolError> {
    connect(name, missing)?
        .request(request)
        .map_err(|e| ToolError::new(e.to_string()))
}

/// The reply a request must get, or an error naming what came instead.
pub(crate) fn unexpected(reply: Response) -> ToolError {
    ToolError::new(format!("unexpected reply from the supervisor: {reply:?}"))
}
