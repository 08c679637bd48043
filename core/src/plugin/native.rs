//! The native plugin host: adapters built as shared libraries against the
//! interface crate `plugins/native-api` (abi_stable's root-module pattern).
//!
//! [`NativePlugin::load`] checks a library before anything of it is called:
//! that it is a shared object at all, that it exports a native adapter, that
//! it was built for this host's interface version, and that the layout of
//! every type crossing the boundary is the host's. Each failure is its own
//! [`PluginError`]; none of them crashes the host. After that every hook
//! call returns a value: the plugin SDK catches a panic on its side of the
//! boundary (it would abort the process if it unwound into the host), and
//! it arrives here as [`PluginError::Panicked`].

mod load;
mod locate;

use std::path::{Path, PathBuf};

use abi_stable::std_types::{RSlice, RString, RVec};
use agent_comms_plugin_api as api;
use agent_comms_plugin_api::{HookError, HookResult, NativeAdapterRef};

pub use locate::locate;

use super::{ConversationRef, PluginError, PluginHooks, PluginInfo};
use crate::adapter::{Activity, ScreenView};

/// A loaded native adapter.
pub struct NativePlugin {
    module: NativeAdapterRef,
    info: PluginInfo,
    path: PathBuf,
}

impl std::fmt::Debug for NativePlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativePlugin")
            .field("info", &self.info)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl NativePlugin {
    /// Loads and checks the library at `path`, and asks it who it is.
    pub fn load(path: &Path) -> Result<Self, PluginError> {
        let module = load::root_module(path)?;
        let name = load::plugin_name(&path.display().to_string());
        let info = answer(&name, "info", module.info()())?;
        Ok(Self {
            module,
            info: PluginInfo {
                name: info.name.into(),
                version: info.version.into(),
                checked: info.checked.into(),
            },
            path: path.to_owned(),
        })
    }

    /// The library it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn answer<T>(&self, hook: &str, result: HookResult<T>) -> Result<T, PluginError> {
        answer(&self.info.name, hook, result)
    }
}

fn answer<T>(name: &str, hook: &str, result: HookResult<T>) -> Result<T, PluginError> {
    result.into_result().map_err(|e| match e {
        HookError::Panicked(message) => PluginError::Panicked {
            name: name.to_owned(),
            hook: hook.to_owned(),
            message: message.into(),
        },
        HookError::Failed(message) => PluginError::Other {
            name: name.to_owned(),
            message: format!("{hook}: {message}"),
        },
    })
}

impl PluginHooks for NativePlugin {
    fn info(&self) -> &PluginInfo {
        &self.info
    }

    fn claims(&mut self, argv: &[String]) -> Result<bool, PluginError> {
        let argv = rstrings(argv);
        self.answer("claims", self.module.claims()(RSlice::from_slice(&argv)))
    }

    fn classify(&mut self, view: &ScreenView<'_>) -> Result<Activity, PluginError> {
        let screen = api::Screen {
            lines: rstrings(view.lines),
            title: view.title.into(),
            osc: view.osc.iter().map(|o| RVec::from_slice(o)).collect(),
            cursor_row: view.cursor_row,
        };
        let activity = self.answer("classify", self.module.classify()(&screen))?;
        Ok(match activity {
            api::Activity::Busy => Activity::Busy,
            api::Activity::Idle => Activity::Idle,
            api::Activity::Unknown => Activity::Unknown,
        })
    }

    fn pin_resume(
        &mut self,
        argv: &[String],
        id: &str,
    ) -> Result<Option<Vec<String>>, PluginError> {
        let argv = rstrings(argv);
        let pinned = self.answer(
            "pin_resume",
            self.module.pin_resume()(RSlice::from_slice(&argv), id.into()),
        )?;
        Ok(pinned
            .into_option()
            .map(|v| v.into_iter().map(String::from).collect()))
    }

    fn discover_conversation(&mut self, pid: u32) -> Result<Option<ConversationRef>, PluginError> {
        // The frozen ABI names this hook `discover_session`: the provider's conversation.
        let found = self.answer("discover_session", self.module.discover_session()(pid))?;
        Ok(found.into_option().map(|s| ConversationRef {
            id: s.id.into(),
            cwd: s.cwd.into_option().map(String::from),
        }))
    }
}

fn rstrings(strings: &[String]) -> RVec<RString> {
    strings.iter().map(|s| RString::from(s.as_str())).collect()
}
