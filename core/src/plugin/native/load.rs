//! Opening a native plugin, one check at a time, so that each way a file
//! can be wrong gets its own error: not a shared object, no root module,
//! another interface version, another layout, a constructor that failed.

use std::path::Path;

use abi_stable::library::{
    abi_header_from_raw_library, AbiHeader, LibraryError, RawLibrary, RootModule, RootModuleError,
};
use abi_stable::sabi_types::{VersionNumber, VersionStrings};
use agent_comms_plugin_api::{NativeAdapterRef, INTERFACE_VERSION};

use crate::plugin::PluginError;

/// The checked root module of the library at `path`.
///
/// Once the library's own code has run it stays loaded for the life of the
/// process, even when it is refused: abi_stable hands out `'static`
/// references into it, which unloading would leave dangling.
pub(super) fn root_module(path: &Path) -> Result<NativeAdapterRef, PluginError> {
    let shown = path.display().to_string();
    let not_a_plugin = |reason: String| PluginError::NotAPlugin {
        path: shown.clone(),
        reason,
    };
    if !path.is_file() {
        return Err(not_a_plugin("no such file (build it first?)".into()));
    }
    let raw = RawLibrary::load_at(path).map_err(|e| not_a_plugin(open_failure(&e, &shown)))?;
    // SAFETY: the symbol abi_stable looks up is, by its contract, a
    // `LibHeader` that starts with an `AbiHeader`; the reference is used
    // only while `raw` is loaded (it is leaked below before it outlives it).
    let header = unsafe { abi_header_from_raw_library(&raw) }.map_err(|_| {
        not_a_plugin("a shared object without a native adapter in it (no abi_stable root module); export one with export_native_adapter!".into())
    })?;
    if !header.is_valid() {
        return Err(PluginError::Version {
            path: shown,
            found: format!(
                "? (abi_stable ABI {}.{})",
                header.abi_major, header.abi_minor
            ),
            expected: format!(
                "{INTERFACE_VERSION} (abi_stable ABI {}.{})",
                AbiHeader::VALUE.abi_major,
                AbiHeader::VALUE.abi_minor
            ),
        });
    }
    std::mem::forget(raw);
    let library = header.upgrade().map_err(|e| refused(&shown, e))?;
    check_version(&shown, library.version_strings())?;
    library
        .init_root_module::<NativeAdapterRef>()
        .map_err(|e| refused(&shown, e))
}

/// The host loads any plugin of its own major interface version: within
/// it, hooks are only ever added at the end of the root module (a prefix
/// type), which the layout check accepts from a newer plugin.
fn check_version(shown: &str, found: VersionStrings) -> Result<(), PluginError> {
    let host = VersionNumber::new(NativeAdapterRef::VERSION_STRINGS);
    match (host, VersionNumber::new(found)) {
        (Ok(host), Ok(plugin)) if host.major == plugin.major => Ok(()),
        _ => Err(PluginError::Version {
            path: shown.to_owned(),
            found: found.to_string(),
            expected: INTERFACE_VERSION.to_owned(),
        }),
    }
}

/// dlopen's reason, without the path it repeats.
fn open_failure(e: &LibraryError, shown: &str) -> String {
    let LibraryError::OpenError { err, .. } = e else {
        return one_line(&e.to_string());
    };
    let text = err.to_string();
    let reason = text
        .rsplit_once(&format!("{shown}: "))
        .map_or(text.as_str(), |(_, r)| r);
    format!("not a shared object this system can load ({reason})")
}

/// A refusal after the library was opened, as the host's error.
fn refused(shown: &str, e: LibraryError) -> PluginError {
    let path = shown.to_owned();
    match e {
        LibraryError::IncompatibleVersionNumber { actual_version, .. } => PluginError::Version {
            path,
            found: actual_version.to_string(),
            expected: INTERFACE_VERSION.into(),
        },
        LibraryError::ParseVersionError(e) => PluginError::Version {
            path,
            found: format!("an unreadable version ({})", one_line(&e.to_string())),
            expected: INTERFACE_VERSION.into(),
        },
        LibraryError::AbiInstability(details) => PluginError::Layout {
            path,
            summary: summarise_layout(&details.to_string()),
        },
        LibraryError::InvalidCAbi { .. } => PluginError::Layout {
            path,
            summary: "its C ABI differs from the host's (built by an incompatible compiler?)"
                .into(),
        },
        // The SDK returns an error when the adapter's `Default` panicked;
        // abi_stable reports a panic anywhere else in the constructor.
        LibraryError::RootModule {
            err: RootModuleError::Returned(e),
            ..
        } => PluginError::Other {
            name: plugin_name(shown),
            message: format!("load: {}", one_line(&e.to_string())),
        },
        LibraryError::RootModule {
            err: RootModuleError::Unwound,
            ..
        } => PluginError::Panicked {
            name: plugin_name(shown),
            hook: "load".into(),
            message: "the plugin's root module constructor panicked".into(),
        },
        LibraryError::Many(errors) => match errors.into_iter().next() {
            Some(first) => refused(shown, first),
            None => PluginError::Other {
                name: plugin_name(shown),
                message: "refused at load for no stated reason".into(),
            },
        },
        other => PluginError::NotAPlugin {
            path,
            reason: one_line(&other.to_string()),
        },
    }
}

/// The plugin's name before it could say it: the library's file stem.
pub(super) fn plugin_name(shown: &str) -> String {
    let stem = Path::new(shown)
        .file_stem()
        .map_or(shown.into(), |s| s.to_string_lossy());
    stem.strip_prefix("lib").unwrap_or(&stem).to_owned()
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// abi_stable's layout report runs to pages (both layouts in full, for
/// every type on the way down); keep the first difference: the type it is
/// in, what differs, and the expected and found values. The whole report
/// goes to the debug log.
fn summarise_layout(report: &str) -> String {
    tracing::debug!(target: "agent_comms::plugin", "native plugin layout report:\n{report}");
    let mut in_type = None;
    let mut differences = Vec::new();
    let mut lines = report.lines().map(str::trim).peekable();
    while let Some(line) = lines.next() {
        if line == "Layout of expected type:" {
            in_type = lines.find_map(|l| l.strip_prefix("type:"));
        } else if let Some(what) = line.strip_prefix("Error:") {
            let mut section = |header: &str| {
                let mut text = Vec::new();
                if lines.next_if_eq(&header).is_some() {
                    while let Some(l) = lines
                        .next_if(|l| !l.is_empty() && *l != "Found:" && !l.starts_with("Error:"))
                    {
                        text.push(l);
                    }
                }
                shorten(&text.join(" "))
            };
            let (expected, found) = (section("Expected:"), section("Found:"));
            differences.push(format!(
                "{}: {what} (expected {expected}, found {found})",
                in_type.unwrap_or("root module")
            ));
        }
    }
    match differences.len() {
        0 => "the layouts differ (abi_stable named no field; run with AGENT_COMMS_LOG=debug for its report)".into(),
        1 => differences.remove(0),
        n => format!("{} (and {} more)", differences[0], n - 1),
    }
}

fn shorten(text: &str) -> String {
    const MAX: usize = 60;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tail of a real report: a plugin that compiled its own copy of
    /// the interface (the layouts above it are elided).
    const REPORT: &str = "Compared <this>:\n    --- Type Layout ---\n    type:PrefixRef<'a, NativeAdapter>\n\
        0 error(s).\n\n1 error(s)inside:\n    <other>\n\n    field_name:0\n    type:NativeAdapter\n\n\
        Layout of expected type:\n    --- Type Layout ---\n    type:NativeAdapter\n    size:40 align:8\n\
        package:'agent-comms-plugin-api' version:'1.0.0'\n\n\
        Layout of found type:\n    --- Type Layout ---\n    type:NativeAdapter\n\n\n\
        Error:mismatched package\nExpected:\n    agent-comms-plugin-api\nFound:\n    native-layout\n\n";

    #[test]
    fn a_layout_report_becomes_one_line() {
        assert_eq!(
            summarise_layout(REPORT),
            "NativeAdapter: mismatched package (expected agent-comms-plugin-api, found native-layout)"
        );
        let two =
            format!("{REPORT}Error:incompatible type size\nExpected:\n    40\nFound:\n    48\n");
        assert!(
            summarise_layout(&two).ends_with("native-layout) (and 1 more)"),
            "{}",
            summarise_layout(&two)
        );
        assert!(summarise_layout("garbage").starts_with("the layouts differ"));
    }

    #[test]
    fn plugin_names_come_from_the_file_stem() {
        assert_eq!(
            plugin_name("/x/target/debug/libnative_gemini.so"),
            "native_gemini"
        );
        assert_eq!(plugin_name("gemini.dll"), "gemini");
    }
}
