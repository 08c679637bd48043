//! The hooks an adapter may answer with code rather than rules: the
//! interface every plugin form implements.
//!
//! It lives here, in the adapter layer, because the layer that *uses* the
//! hooks (the activity monitor, `adapters check`) must not depend on the
//! layer that loads plugins: `plugin/` implements this trait for native and
//! Wasm plugins and hands the adapter layer a loaded `Box<dyn PluginHooks>`.

use serde::{Deserialize, Serialize};

use super::{Activity, ScreenView};

/// What a plugin says about itself at load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginInfo {
    pub name: String,
    pub version: String,
    /// Provider versions the plugin was checked against.
    pub checked: String,
}

/// The conversation a provider process is on (the provider's own session
/// or thread, found by conversation discovery).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationRef {
    pub id: String,
    pub cwd: Option<String>,
}

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum PluginError {
    #[error("{path}: not a plugin: {reason}")]
    NotAPlugin { path: String, reason: String },
    #[error("{path}: built for plugin interface {found}, this agent-comms speaks {expected}; rebuild the plugin against the matching SDK")]
    Version {
        path: String,
        found: String,
        expected: String,
    },
    #[error("{path}: interface layout mismatch: {summary}")]
    Layout { path: String, summary: String },
    #[error("{path}: missing symbol {symbol}")]
    MissingSymbol { path: String, symbol: String },
    #[error("plugin {name} panicked in {hook}: {message}")]
    Panicked {
        name: String,
        hook: String,
        message: String,
    },
    #[error("plugin {name} ran past its {limit_ms} ms deadline in {hook} and was stopped")]
    Deadline {
        name: String,
        hook: String,
        limit_ms: u64,
    },
    #[error("plugin {name} exceeded its memory cap of {cap_mb} MiB in {hook} and was stopped")]
    Memory {
        name: String,
        hook: String,
        cap_mb: u64,
    },
    #[error("plugin {name} trapped in {hook}: {message}")]
    Trapped {
        name: String,
        hook: String,
        message: String,
    },
    #[error("plugin {name}: {message}")]
    Other { name: String, message: String },
}

/// The hooks every plugin form answers. Each call may fail; a failed call
/// never takes the host down.
pub trait PluginHooks: Send {
    fn info(&self) -> &PluginInfo;
    /// Does this adapter claim the command (argv as given)?
    fn claims(&mut self, argv: &[String]) -> Result<bool, PluginError>;
    /// Busy or idle, from the rendered screen.
    fn classify(&mut self, view: &ScreenView<'_>) -> Result<Activity, PluginError>;
    /// `argv` with "continue the latest" replaced by conversation `id`.
    fn pin_resume(&mut self, argv: &[String], id: &str)
        -> Result<Option<Vec<String>>, PluginError>;
    /// The conversation the provider process `pid` is on, if the plugin can
    /// tell. (The frozen plugin ABI and WIT call this hook `discover_session`.)
    fn discover_conversation(&mut self, pid: u32) -> Result<Option<ConversationRef>, PluginError>;
}
