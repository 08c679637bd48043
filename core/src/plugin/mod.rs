//! The plugin host: adapters whose hooks are code, not rules.
//!
//! A profile names a plugin for what it cannot say declaratively. Both
//! plugin forms answer the same hooks through [`PluginHooks`]: a native
//! plugin (a `cdylib` built against `plugins/native-api`, loaded with
//! abi_stable, layout-checked at load) and a Wasm component (built against
//! the WIT package in `plugins/wit/`, run by wasmtime with a deadline and a
//! memory cap). Whatever a plugin does — panic, loop, trap, allocate without
//! end — the host gets an error value, reports it, and falls back to the
//! profile's declarative rules; the session keeps working.
//!
//! This folder, `core/src/plugin/`, is the *host* side: it loads plugins and
//! implements the hook interface that the adapter layer declares
//! (`core/src/adapter/`, the *interface*). The *SDKs* a plugin is built with
//! — `plugins/native-api`, `plugins/wit/`, `plugins/wasm-sdk` — and example
//! plugins are in `plugins/`; the *built-in adapters* are in `adapters/`
//! (docs/architecture.md#the-workspace).

pub mod load;
pub mod native;
#[cfg(feature = "wasm")]
pub mod wasm;

use serde::{Deserialize, Serialize};

use crate::adapter::{Activity, ScreenView};

/// What a plugin says about itself at load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginInfo {
    pub name: String,
    pub version: String,
    /// Provider versions the plugin was checked against.
    pub checked: String,
}

/// A session a provider process is on (session-id discovery).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRef {
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
    /// `argv` with "continue the latest" replaced by session `id`.
    fn pin_resume(&mut self, argv: &[String], id: &str)
        -> Result<Option<Vec<String>>, PluginError>;
    /// The session the provider process `pid` is on, if the plugin can tell.
    fn discover_session(&mut self, pid: u32) -> Result<Option<SessionRef>, PluginError>;
}
