//! Fault test: a native adapter whose `classify` panics and whose
//! `discover_session` fails. The SDK must turn the panic into an error value
//! (unwinding into the host would abort it), and the plugin must keep
//! answering its other hooks afterwards.

use agent_comms_plugin_api::sdk::Adapter;
use agent_comms_plugin_api::{export_native_adapter, Activity, PluginInfo, Screen, SessionRef};

#[derive(Default)]
pub struct Panicky;

impl Adapter for Panicky {
    fn info(&self) -> PluginInfo {
        PluginInfo::new("panicky", env!("CARGO_PKG_VERSION"), "-")
    }

    fn claims(&self, argv: &[&str]) -> bool {
        argv.first() == Some(&"panicky")
    }

    fn classify(&self, screen: &Screen) -> Activity {
        panic!("classify was given {} rows and gave up", screen.lines.len());
    }

    fn discover_session(&self, pid: u32) -> Result<Option<SessionRef>, String> {
        Err(format!("cannot read the sessions of pid {pid}"))
    }
}

export_native_adapter!(Panicky);
