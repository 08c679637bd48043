//! Write an agent-comms adapter as a Wasm component.
//!
//! This is the plugin author's side (`plugins/`, the *SDKs*), generated from
//! the WIT package in `plugins/wit/`. The host that runs such a component is
//! `core/src/plugin/` in `agent-comms-core`, the adapter interface it serves
//! is `core/src/adapter/`, and the built-in adapters are the crate
//! `agent-comms-adapters` (`adapters/`).
//!
//! Implement [`Adapter`] for a type with a [`Default`], export it with
//! [`export_adapter!`], and build with
//! `cargo build --target wasm32-wasip2 --release`:
//!
//! ```ignore
//! use agent_comms_wasm_sdk::{export_adapter, program, Activity, Adapter, PluginInfo, Screen};
//!
//! #[derive(Default)]
//! struct MyAgent;
//!
//! impl Adapter for MyAgent {
//!     fn info(&self) -> PluginInfo {
//!         PluginInfo { name: "my-agent".into(), version: "0.1.0".into(), checked: "1.0".into() }
//!     }
//!     fn claims(&self, argv: &[String]) -> bool {
//!         program(argv) == Some("my-agent")
//!     }
//!     fn classify(&self, screen: &Screen) -> Activity {
//!         if screen.bottom_rows(2).iter().any(|r| r.contains("esc to interrupt")) {
//!             Activity::Busy
//!         } else {
//!             Activity::Unknown
//!         }
//!     }
//! }
//!
//! export_adapter!(MyAgent);
//! ```
//!
//! The crate speaks `agent-comms:adapter@1.0.0` (`plugins/wit/v1`). The host
//! runs every call under a deadline and a memory cap and replaces the
//! instance after a failed call, so keep calls short and treat state as a
//! cache that may be lost.

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit/v1",
        world: "adapter",
        pub_export_macro: true,
    });
}

pub use bindings::agent_comms::adapter::host::Level;
pub use bindings::exports::agent_comms::adapter::plugin::{
    Activity, PluginInfo, Screen, SessionRef,
};

/// The hooks of one adapter. `info`, `claims` and `classify` are required;
/// a plugin without resume pinning or session discovery keeps the defaults.
pub trait Adapter {
    fn info(&self) -> PluginInfo;

    /// Does this adapter claim the command (argv as given, program first)?
    fn claims(&self, argv: &[String]) -> bool;

    /// Busy or idle, from the rendered screen.
    fn classify(&self, screen: &Screen) -> Activity;

    /// `argv` with "continue the latest session" replaced by session `id`.
    fn pin_resume(&self, _argv: &[String], _id: &str) -> Option<Vec<String>> {
        None
    }

    /// The session the provider process `pid` is on.
    fn discover_session(&self, _pid: u32) -> Option<SessionRef> {
        None
    }
}

/// Exports `$ty` (an [`Adapter`] with a [`Default`]) as the plugin. The
/// value is made on the first call and lives as long as the instance.
#[macro_export]
macro_rules! export_adapter {
    ($ty:ty) => {
        const _: () = {
            use $crate::bindings::exports::agent_comms::adapter::plugin as wit;

            fn adapter() -> &'static $ty {
                static ADAPTER: ::std::sync::OnceLock<$ty> = ::std::sync::OnceLock::new();
                ADAPTER.get_or_init(<$ty as ::std::default::Default>::default)
            }

            struct Export;

            impl wit::Guest for Export {
                fn info() -> wit::PluginInfo {
                    $crate::Adapter::info(adapter())
                }
                fn claims(argv: ::std::vec::Vec<::std::string::String>) -> bool {
                    $crate::Adapter::claims(adapter(), &argv)
                }
                fn classify(screen: wit::Screen) -> wit::Activity {
                    $crate::Adapter::classify(adapter(), &screen)
                }
                fn pin_resume(
                    argv: ::std::vec::Vec<::std::string::String>,
                    id: ::std::string::String,
                ) -> ::std::option::Option<::std::vec::Vec<::std::string::String>> {
                    $crate::Adapter::pin_resume(adapter(), &argv, &id)
                }
                fn discover_session(pid: u32) -> ::std::option::Option<wit::SessionRef> {
                    $crate::Adapter::discover_session(adapter(), pid)
                }
            }

    $crate::bindings::export!(Export with_types_in $crate::bindings);
        };
    };
}

/// A line for the agent-comms log, tagged with the plugin's name.
pub fn log(level: Level, message: &str) {
    bindings::agent_comms::adapter::host::log(level, message);
}

/// The text of a file the profile lists in `plugin_reads` (`~` allowed);
/// any other path is refused with the reason.
pub fn read_file(path: &str) -> Result<String, String> {
    bindings::agent_comms::adapter::host::read_file(path)
}

/// The program's basename: `aider` for `/usr/local/bin/aider --model x`.
pub fn program(argv: &[String]) -> Option<&str> {
    let first = argv.first()?;
    first.rsplit('/').next().filter(|p| !p.is_empty())
}

impl Screen {
    /// The row the cursor is on: where the input line is.
    pub fn cursor_line(&self) -> &str {
        self.lines
            .get(usize::from(self.cursor_row))
            .map_or("", String::as_str)
    }

    /// The last `n` rows that end with the last row holding text (inline
    /// programs draw above the cursor, not at the screen's bottom).
    pub fn bottom_rows(&self, n: usize) -> &[String] {
        let end = self
            .lines
            .iter()
            .rposition(|l| !l.trim().is_empty())
            .map_or(0, |i| i + 1);
        &self.lines[end.saturating_sub(n)..end]
    }
}
