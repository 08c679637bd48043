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

// The hook interface is the adapter layer's (a plugin is one way to answer
// an adapter's hooks); it is re-exported here for the plugin hosts and SDKs.
pub use crate::adapter::hooks::{ConversationRef, PluginError, PluginHooks, PluginInfo};
