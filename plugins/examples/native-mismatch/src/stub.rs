//! A root module whose hooks are never meant to run: the host must refuse
//! the library at load. Shared by the fault-test plugins that compile a copy
//! of the interface (`interface` in the including crate).

use abi_stable::export_root_module;
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::{RErr, ROption, RSlice, RStr, RString, RVec};

use crate::interface::{
    Activity, HookError, HookResult, NativeAdapter, NativeAdapterRef, PluginInfo, Screen,
    SessionRef,
};

fn refused<T>() -> HookResult<T> {
    RErr(HookError::Failed(
        "this fault-test plugin should have been refused at load".into(),
    ))
}

extern "C" fn info() -> HookResult<PluginInfo> {
    refused()
}

extern "C" fn claims(_: RSlice<'_, RString>) -> HookResult<bool> {
    refused()
}

extern "C" fn classify(_: &Screen) -> HookResult<Activity> {
    refused()
}

extern "C" fn pin_resume(
    _: RSlice<'_, RString>,
    _: RStr<'_>,
) -> HookResult<ROption<RVec<RString>>> {
    refused()
}

extern "C" fn discover_session(_: u32) -> HookResult<ROption<SessionRef>> {
    refused()
}

#[export_root_module]
pub fn root_module() -> NativeAdapterRef {
    NativeAdapter {
        info,
        claims,
        classify,
        pin_resume,
        discover_session,
    }
    .leak_into_prefix()
}
