//! The adapter interface: everything provider-specific, answered by adapters.
//!
//! The host layers never name a provider. They ask an [`Adapter`] which
//! commands it claims, whether a screen shows the program busy or idle, how
//! to type into it, which environment to give it, how to pin a resume to a
//! conversation id (the provider's own session), and — for REPLs — how to
//! set up shell integration. An adapter
//! is a TOML [`profile`] (declarative, enough for most programs), optionally
//! backed by a plugin (native or Wasm) for the hooks a profile cannot
//! express. [`registry`] loads them in precedence order: project, user,
//! built-in.
//!
//! Three folders have like names. This one, `core/src/adapter/`, is the
//! *interface*: what a host asks, the profile schema, the registry and
//! detection; it also declares the hook interface a plugin answers
//! (`PluginHooks`, `PluginInfo`). `adapters/` (crate `agent-comms-adapters`)
//! holds the *built-in adapters* that answer it. `core/src/plugin/` is the
//! *plugin host* that implements the hook interface for native and Wasm
//! plugins, and `plugins/` holds the *SDKs* third parties build plugins with
//! (docs/architecture.md#the-workspace).

pub mod check;
pub mod command;
pub mod detect;
pub mod hooks;
pub mod input_line;
pub mod monitor;
pub mod profile;
pub mod registry;
pub mod version;

use serde::{Deserialize, Serialize};

pub use command::program_of;
pub use detect::{BusyDetector, Reading, Rules};
pub use profile::{AcpQuirks, AcpSpec, Profile, ProfileError};
pub use registry::{AdapterRegistry, Entry, NotUsable, ProjectProfiles, Source, Untrusted};

/// What a screen says about the program behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activity {
    Busy,
    Idle,
    /// No signal the adapter reads is present (yet).
    Unknown,
}

impl Activity {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Busy => "busy",
            Self::Idle => "idle",
            Self::Unknown => "unknown",
        }
    }
}

/// What detectors may look at: the rendered screen, never raw bytes.
#[derive(Debug, Clone, Copy)]
pub struct ScreenView<'a> {
    /// Visible rows, trailing blanks trimmed.
    pub lines: &'a [String],
    pub title: &'a str,
    /// Recent OSC payloads (parameters joined with `;`), oldest first.
    pub osc: &'a [Vec<u8>],
    /// The cursor's row: where the input line is.
    pub cursor_row: u16,
    /// The command name of the terminal's foreground process group leader
    /// (what a shell is running now); empty when unknown.
    pub foreground: &'a str,
}

/// How an adapter is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Form {
    Toml,
    Native,
    Wasm,
}

impl Form {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Toml => "toml",
            Self::Native => "native",
            Self::Wasm => "wasm",
        }
    }
}
