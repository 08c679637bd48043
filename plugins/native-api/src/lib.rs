//! The native plugin interface of agent-comms, and the SDK for writing one.
//!
//! This is the plugin author's side (`plugins/`, the *SDKs*). The host that
//! loads such a plugin is `core/src/plugin/` in `agent-comms-core`, the
//! adapter interface it serves is `core/src/adapter/`, and the built-in
//! adapters are the crate `agent-comms-adapters` (`adapters/`).
//!
//! A native adapter is a `cdylib` that depends on this crate, implements
//! [`sdk::Adapter`] for a type and exports it:
//!
//! ```
//! use agent_comms_plugin_api::{export_native_adapter, sdk::Adapter, Activity, PluginInfo, Screen};
//!
//! #[derive(Default)]
//! struct MyAgent;
//!
//! impl Adapter for MyAgent {
//!     fn info(&self) -> PluginInfo {
//!         PluginInfo::new("my-agent", env!("CARGO_PKG_VERSION"), "1.0")
//!     }
//!     fn claims(&self, argv: &[&str]) -> bool {
//!         argv.first().is_some_and(|p| p.rsplit('/').next() == Some("my-agent"))
//!     }
//!     fn classify(&self, screen: &Screen) -> Activity {
//!         if screen.bottom_rows(2).any(|r| r.contains("esc to interrupt")) {
//!             Activity::Busy
//!         } else {
//!             Activity::Unknown
//!         }
//!     }
//! }
//!
//! export_native_adapter!(MyAgent);
//! ```
//!
//! The export is an abi_stable root module ([`NativeAdapter`]). At load the
//! host checks the interface version ([`INTERFACE_VERSION`], same major)
//! and the layout of every type that crosses the boundary, and refuses a
//! mismatch with an error instead of crashing. The SDK catches panics in
//! every hook and returns them as [`HookError::Panicked`].

mod interface;
pub mod sdk;

pub use interface::*;

/// abi_stable, as this interface uses it (the export macro needs it).
pub use abi_stable;

/// The name of the symbol a native adapter exports: abi_stable's root
/// module loader. A literal because `export_name` takes one; checked
/// against abi_stable's own constant below.
#[doc(hidden)]
#[macro_export]
macro_rules! __root_module_symbol {
    () => {
        "_1as_0lib_1header_0root_bmodule_bloader"
    };
}

const _: () = assert!(
    const_str_eq(
        __root_module_symbol!(),
        abi_stable::library::ROOT_MODULE_LOADER_NAME
    ),
    "abi_stable renamed its root module symbol: update __root_module_symbol!"
);

const fn const_str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Exports `$adapter` (a type implementing [`sdk::Adapter`] and `Default`)
/// as this library's native adapter. Use it once, in a `cdylib`.
///
/// It writes what abi_stable's `#[export_root_module]` would, without
/// making the plugin depend on abi_stable itself: the library header the
/// host looks up by name, whose constructor builds the root module (a panic
/// in it, e.g. in `Default`, is caught and reported as a failed load).
#[macro_export]
macro_rules! export_native_adapter {
    ($adapter:ty) => {
        #[doc(hidden)]
        #[unsafe(export_name = $crate::__root_module_symbol!())]
        pub static AGENT_COMMS_NATIVE_ADAPTER: $crate::abi_stable::library::LibHeader = {
            extern "C" fn construct() -> $crate::abi_stable::library::RootModuleResult {
                $crate::abi_stable::library::__call_root_module_loader($crate::sdk::root_module::<$adapter>)
            }
            // SAFETY: `construct` returns the root module of type
            // `NativeAdapterRef`, the type the header is declared for.
            unsafe {
                $crate::abi_stable::library::LibHeader::from_constructor::<$crate::NativeAdapterRef>(
                    construct,
                    $crate::abi_stable::library::CheckTypeLayout::Yes,
                )
            }
        };
    };
}
