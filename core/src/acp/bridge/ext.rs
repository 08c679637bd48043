//! The bridge's ACP extension, for clients that know it (plain ACP clients
//! never need to). Methods start with `_`, as ACP reserves for extensions.
//!
//! - `_agent_comms/attach` (request): join the running session with a role
//!   and a history policy, or from a position after a dropped connection.
//! - `_agent_comms/observe` (notification): this connection only watches
//!   from now on (what `acp attach --read-only` sends first).
//! - `_agent_comms/permission_resolved` (notification, to clients): a
//!   permission request this client was asked was answered elsewhere.

use agent_client_protocol::{JsonRpcNotification, JsonRpcRequest, JsonRpcResponse};
use serde::{Deserialize, Serialize};

pub use super::asks::RESOLVED;

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_agent_comms/attach", response = AttachResponse)]
#[serde(rename_all = "camelCase")]
pub struct AttachRequest {
    /// The running session's id; any other is refused.
    #[serde(default)]
    pub session_id: Option<String>,
    /// `controller` (the most the connection may be) or `observer`.
    #[serde(default)]
    pub role: Option<String>,
    /// `full`, `pending_only` or `none` (the default: `full`).
    #[serde(default)]
    pub history: Option<String>,
    /// Replay what came after this position (the `_meta.agentComms.seq`
    /// of the last update received); overrides `history`.
    #[serde(default)]
    pub after: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcResponse)]
#[serde(rename_all = "camelCase")]
pub struct AttachResponse {
    pub session_id: String,
    pub role: String,
    /// Where the live stream starts: updates before it were replayed.
    pub position: u64,
    /// This connection's name in the transcript (`client-N`).
    pub seat: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonRpcNotification)]
#[notification(method = "_agent_comms/observe")]
pub struct ObserveNotification {}
