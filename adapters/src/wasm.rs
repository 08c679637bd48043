//! Loading the Wasm plugin a profile names.
//!
//! Here rather than in the CLI so that whether this build has a Wasm host
//! (the `wasm` feature) is decided in one place.

use std::path::Path;

use agent_comms_core::adapter::Profile;
use agent_comms_core::plugin::{PluginError, PluginHooks};

/// A loaded plugin, and how its compiled code was come by.
pub struct Loaded {
    pub plugin: Box<dyn PluginHooks>,
    /// For people: whether the load compiled the component or found it cached.
    pub load: &'static str,
}

/// Loads the component at `path` for `profile`, which lists the files the
/// plugin may read; compiled code is cached under the user's home.
#[cfg(feature = "wasm")]
pub fn load(path: &Path, profile: &Profile) -> Result<Loaded, PluginError> {
    use agent_comms_core::plugin::wasm::{default_cache_dir, CacheOutcome, WasmPlugin};

    let reads = profile.plugin_reads.iter().map(Into::into).collect();
    let plugin = WasmPlugin::load(path, reads, Some(&default_cache_dir()))?;
    let load = match plugin.cache_outcome() {
        CacheOutcome::Hit => "from the compile cache",
        CacheOutcome::Stored => "compiled, and cached for the next load",
        CacheOutcome::Compiled => "compiled (the compile cache is not writable)",
    };
    Ok(Loaded {
        plugin: Box::new(plugin),
        load,
    })
}

#[cfg(not(feature = "wasm"))]
pub fn load(path: &Path, profile: &Profile) -> Result<Loaded, PluginError> {
    Err(PluginError::Other {
        name: profile.name.clone(),
        message: format!(
            "{}: this agent-comms was built without Wasm plugins (cargo feature `wasm`)",
            path.display()
        ),
    })
}
