//! The bridge's commands (`acp attach`, `acp serve-web`, `acp-serve
//! --listen`) where runtimes have no bridge socket yet (see core's bridge
//! `listen_none.rs`): each says so.

use std::net::SocketAddr;

use anyhow::bail;

use super::acp::RemoteArgs;

const NOT_HERE: &str =
    "the ACP bridge is not built for this platform yet: its ACP runtimes have no bridge socket";

pub fn attach(_: Option<&str>, _: Option<std::path::PathBuf>, _: bool) -> anyhow::Result<i32> {
    bail!(NOT_HERE)
}

pub fn check_listen(_: SocketAddr, _: &RemoteArgs) -> anyhow::Result<()> {
    bail!(NOT_HERE)
}

pub fn serve_web(_: &str, _: SocketAddr, _: &RemoteArgs, _: bool) -> anyhow::Result<i32> {
    bail!(NOT_HERE)
}

pub fn launch(
    _: &std::path::Path,
    _: &str,
    _: SocketAddr,
    _: &RemoteArgs,
) -> anyhow::Result<serde_json::Value> {
    bail!(NOT_HERE)
}
