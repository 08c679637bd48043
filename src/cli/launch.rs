//! Starting detached sessions from the CLIs.

use std::path::PathBuf;

use agent_comms_core::paths::ensure_runtime_root;
use agent_comms_core::session::{Registry, SessionRecord};
use agent_comms_core::socket::is_dialable;
use agent_comms_core::supervisor::launch::spawn_detached;
use agent_comms_core::supervisor::SupervisorConfig;
use anyhow::{bail, Context};

/// Starts a detached supervisor for `config` and returns its record once
/// the session is ready.
pub fn start_detached(config: &SupervisorConfig) -> anyhow::Result<SessionRecord> {
    let exe = supervisor_binary()?;
    let root = ensure_runtime_root()?;
    let log = Registry::new(root, is_dialable).paths(&config.name).log;
    Ok(spawn_detached(&exe, config, &log)?)
}

/// Supervisors are the `agent-comms` binary re-executed. `k` finds it next
/// to itself rather than carrying the supervisor (and the plugin hosts it
/// loads) in its own image: `k` starts on every cell, and a smaller binary
/// starts faster.
fn supervisor_binary() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe().context("cannot find this executable")?;
    if me.file_stem().is_some_and(|s| s == "agent-comms") {
        return Ok(me);
    }
    let sibling = me.with_file_name(format!("agent-comms{}", std::env::consts::EXE_SUFFIX));
    if !sibling.is_file() {
        bail!(
            "{} not found: {} starts its sessions with the agent-comms binary, which must be installed next to it",
            sibling.display(),
            me.display()
        );
    }
    Ok(sibling)
}
