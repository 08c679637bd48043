//! What crosses the boundary between agent-comms and a native adapter.
//!
//! Every type here is `#[repr(C)]` and derives `StableAbi`, so the host can
//! compare the layout a plugin was compiled with against its own at load
//! time and refuse a mismatch instead of crashing. This file depends on
//! nothing but `abi_stable`: the fault-test plugins compile it again under
//! another package to stand for a plugin built against a different
//! interface.

use abi_stable::library::RootModule;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{ROption, RResult, RSlice, RStr, RString, RVec};
use abi_stable::{declare_root_module_statics, package_version_strings, StableAbi};

/// The interface version: this package's version. The host loads a plugin
/// only when its major version is the host's; adding a hook after the last
/// one is a minor change, anything else is a major one.
pub const INTERFACE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The rendered screen: the rows a terminal shows, never raw bytes.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Default, PartialEq, Eq)]
pub struct Screen {
    /// Visible rows, trailing blanks trimmed.
    pub lines: RVec<RString>,
    /// The window title the program set.
    pub title: RString,
    /// Recent OSC payloads (parameters joined with `;`), oldest first.
    pub osc: RVec<RVec<u8>>,
    /// The cursor's row: where the input line is.
    pub cursor_row: u16,
}

/// What a screen says about the program behind it.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    Busy,
    Idle,
    /// No signal the adapter reads is present (yet).
    Unknown,
}

/// What a plugin says about itself.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct PluginInfo {
    pub name: RString,
    /// The adapter's own version.
    pub version: RString,
    /// Provider versions the adapter was checked against.
    pub checked: RString,
}

impl PluginInfo {
    pub fn new(name: &str, version: &str, checked: &str) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            checked: checked.into(),
        }
    }
}

/// The session a provider process is on.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct SessionRef {
    pub id: RString,
    pub cwd: ROption<RString>,
}

impl SessionRef {
    pub fn new(id: &str, cwd: Option<&str>) -> Self {
        Self {
            id: id.into(),
            cwd: cwd.map(RString::from).into(),
        }
    }
}

/// Why a hook gave no answer.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub enum HookError {
    /// The hook panicked; the SDK caught it before it reached the boundary
    /// (unwinding across it would abort the host).
    Panicked(RString),
    /// The hook reported a failure of its own.
    Failed(RString),
}

/// What every hook returns.
pub type HookResult<T> = RResult<T, HookError>;

/// The root module a native adapter exports: one function per hook.
///
/// A prefix type: a plugin built against a later minor version, with more
/// hooks at the end, still loads in an older host, which ignores them.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = NativeAdapterRef, prefix_fields = NativeAdapterPrefix)))]
pub struct NativeAdapter {
    pub info: extern "C" fn() -> HookResult<PluginInfo>,
    /// Does the adapter claim this command line?
    pub claims: extern "C" fn(argv: RSlice<'_, RString>) -> HookResult<bool>,
    /// Busy or idle, from the screen.
    pub classify: extern "C" fn(screen: &Screen) -> HookResult<Activity>,
    /// `argv` with "continue the latest" replaced by session `id`, if it asks
    /// to continue.
    pub pin_resume: extern "C" fn(
        argv: RSlice<'_, RString>,
        id: RStr<'_>,
    ) -> HookResult<ROption<RVec<RString>>>,
    /// The session the provider process `pid` is on, if the adapter can tell.
    #[sabi(last_prefix_field)]
    pub discover_session: extern "C" fn(pid: u32) -> HookResult<ROption<SessionRef>>,
}

impl RootModule for NativeAdapterRef {
    declare_root_module_statics! {NativeAdapterRef}
    const BASE_NAME: &'static str = "agent_comms_native_adapter";
    const NAME: &'static str = "agent-comms native adapter";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
