//! Starting detached sessions from the CLIs.

use agent_comms_core::paths::ensure_runtime_root;
use agent_comms_core::session::{Registry, SessionRecord};
use agent_comms_core::supervisor::launch::spawn_detached;
use agent_comms_core::supervisor::SupervisorConfig;
use anyhow::Context;

/// Starts a detached supervisor for `config` and returns its record once
/// the session is ready.
pub fn start_detached(config: &SupervisorConfig) -> anyhow::Result<SessionRecord> {
    let exe = std::env::current_exe().context("cannot find the agent-comms executable")?;
    let root = ensure_runtime_root()?;
    let log = Registry::new(root).paths(&config.name).log;
    Ok(spawn_detached(&exe, config, &log)?)
}
