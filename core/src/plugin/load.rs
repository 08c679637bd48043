//! Loading the plugin a profile names, whatever its form.

use std::path::{Path, PathBuf};

use super::native::{self, NativePlugin};
use super::{PluginError, PluginHooks};
use crate::adapter::monitor::{ActivityMonitor, AdapterSpec};
use crate::adapter::Profile;

/// A loaded plugin, where it was found, and how its code was come by.
pub struct Loaded {
    pub plugin: Box<dyn PluginHooks>,
    pub path: PathBuf,
    /// For people: how the load went ("interface version and layout
    /// checked", "from the compile cache", …).
    pub how: &'static str,
}

/// Loads `path` (as a profile names it) for `profile`: a `.wasm` component,
/// or a native library looked up as `native::locate` describes. The error
/// comes back with the path that was tried.
pub fn load(path: &Path, profile: &Profile) -> Result<Loaded, (PathBuf, PluginError)> {
    if path.extension().is_some_and(|e| e == "wasm") {
        return load_wasm(path, profile)
            .map(|(plugin, how)| Loaded {
                plugin,
                path: path.to_owned(),
                how,
            })
            .map_err(|e| (path.to_owned(), e));
    }
    let found = native::locate(path).map_err(|e| (path.to_owned(), e))?;
    let plugin = NativePlugin::load(&found).map_err(|e| (found.clone(), e))?;
    Ok(Loaded {
        plugin: Box::new(plugin),
        path: found,
        how: "interface version and layout checked",
    })
}

/// The activity monitor for a session's adapter: its profile parsed from
/// the spec, and its plugin, if it names one, loaded here.
pub fn monitor(spec: &AdapterSpec) -> ActivityMonitor {
    let profile = Profile::parse(&spec.source, &spec.text).map_err(|e| e.to_string());
    let plugin = match (&profile, &spec.plugin) {
        (Ok(p), Some(path)) => Some(load(path, p).map(|l| l.plugin).map_err(|(_, e)| e)),
        _ => None,
    };
    ActivityMonitor::new(&spec.name, profile.as_ref().map_err(String::as_str), plugin)
}

/// Compiled code is cached under the user's home; the plugin may read only
/// the files the profile lists.
#[cfg(feature = "wasm")]
fn load_wasm(
    path: &Path,
    profile: &Profile,
) -> Result<(Box<dyn PluginHooks>, &'static str), PluginError> {
    use super::wasm::{default_cache_dir, CacheOutcome, WasmPlugin};

    let reads = profile.plugin_reads.iter().map(Into::into).collect();
    let plugin = WasmPlugin::load(path, reads, Some(&default_cache_dir()))?;
    let how = match plugin.cache_outcome() {
        CacheOutcome::Hit => "from the compile cache",
        CacheOutcome::Stored => "compiled, and cached for the next load",
        CacheOutcome::Compiled => "compiled (the compile cache is not writable)",
    };
    Ok((Box::new(plugin), how))
}

#[cfg(not(feature = "wasm"))]
fn load_wasm(
    path: &Path,
    profile: &Profile,
) -> Result<(Box<dyn PluginHooks>, &'static str), PluginError> {
    Err(PluginError::Other {
        name: profile.name.clone(),
        message: format!(
            "{}: this agent-comms was built without Wasm plugins (cargo feature `wasm`)",
            path.display()
        ),
    })
}
