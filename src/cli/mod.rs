mod acp;
mod adapters;
pub mod agent_comms;
#[cfg_attr(unix, path = "bridge.rs")]
#[cfg_attr(not(unix), path = "bridge_none.rs")]
mod bridge;
mod cells_format;
mod cells_grammar;
pub mod completions;
mod dashes;
mod doctor;
mod follow;
mod interrupt;
pub mod k;
pub mod km;
mod launch;
mod logs;
mod look;
mod man;
mod mcp;
mod messages;
mod runtime;
mod store;
mod subject;
mod top;
mod trust;
mod waiting;

/// Every binary starts here: a detached supervisor is one of our binaries
/// re-executed with a hidden first argument.
pub fn supervisor_entry() -> Option<i32> {
    let first = std::env::args_os().nth(1)?;
    if first == agent_comms_core::control::acp_serve::ACP_SUPERVISOR_ARG {
        return Some(agent_comms_core::control::acp_serve::daemon_main(
            init_logging,
        ));
    }
    (first == agent_comms_core::supervisor::launch::SUPERVISOR_ARG).then(|| {
        agent_comms_core::supervisor::launch::daemon_main(
            init_logging,
            agent_comms_adapters::conversations::discovery_named,
        )
    })
}

/// Logging for supervisors (to their log file); `AGENT_COMMS_LOG` filters.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AGENT_COMMS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

/// `path` made absolute against the current directory (a supervisor may
/// run elsewhere).
fn absolute(path: std::path::PathBuf) -> std::path::PathBuf {
    if path.is_absolute() {
        return path;
    }
    std::env::current_dir().map_or(path.clone(), |cwd| cwd.join(path))
}
