//! `agent-comms mcp`: the MCP server on standard input and output, and
//! `mcp config`, the snippet that gives it to an agent.

use agent_comms_core::ids::Id;
use agent_comms_core::session::SessionName;
use agent_comms_core::supervisor::SESSION_ENV;
use agent_comms_mcp::config::{snippet, Agent};
use agent_comms_mcp::{Options, ToolSet};
use std::time::Duration;

use agent_comms_core::adapter::Entry as Adapter;
use agent_comms_mcp::config::{one_run, Launch, OneRun};
use anyhow::{bail, Context};
use clap::{Args, Subcommand};

#[derive(Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Examples:
  agent-comms mcp                                   # what an agent's MCP config names
  agent-comms mcp --tools readonly                  # lists, reads and waits only
  agent-comms --actor alice mcp                     # messages as agent alice
  agent-comms mcp config --for claude               # the snippet for Claude Code
  claude --mcp-config \"$(agent-comms mcp config --for claude --json)\"

Tool sets: readonly (lists, snapshots, reads, waits), default (adds runs,
sends, messages; interrupt and kill only sessions this server started), all
(interrupt and kill any session). docs/mcp.md lists the tools."
)]
pub struct McpArgs {
    #[command(subcommand)]
    command: Option<McpCommand>,
    /// Which tools to offer: readonly, default or all.
    #[arg(long, default_value = "default", value_name = "SET")]
    tools: ToolSet,
}

#[derive(Subcommand)]
enum McpCommand {
    /// Print the configuration that gives an agent this MCP server: Claude
    /// Code's --mcp-config JSON and `claude mcp add` line, Codex's
    /// [mcp_servers] table, opencode's `mcp` entry.
    #[command(after_help = "Examples:
  agent-comms mcp config --for claude
  agent-comms --actor alice mcp config --for codex --tools readonly
  agent-comms mcp config --for opencode --json")]
    Config {
        /// The agent to configure: claude, codex or opencode.
        #[arg(long = "for", value_name = "AGENT")]
        agent: Agent,
        /// The tool set the configured server offers.
        #[arg(long, default_value = "default", value_name = "SET")]
        tools: ToolSet,
        /// Only the machine-readable part (the JSON or TOML), for a flag
        /// or a file.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: McpArgs, actor: Option<Id>) -> anyhow::Result<i32> {
    let exe = std::env::current_exe().context("cannot find this executable")?;
    match args.command {
        Some(McpCommand::Config { agent, tools, json }) => {
            let snippet = snippet(agent, &exe, actor.as_ref(), tools);
            print!(
                "{}",
                if json {
                    snippet.config
                } else {
                    snippet.explained()
                }
            );
            Ok(0)
        }
        None => {
            let inside = std::env::var(SESSION_ENV)
                .ok()
                .and_then(|s| SessionName::parse(&s).ok());
            let options = Options {
                tools: args.tools,
                actor,
                supervisor: exe,
                inside,
            };
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the server's event loop")?;
            let served = runtime.block_on(agent_comms_mcp::serve_stdio(options));
            // A wait still blocked in a tool (the client left mid-call)
            // must not keep the process: its caller is gone.
            runtime.shutdown_timeout(Duration::from_millis(100));
            served?;
            Ok(0)
        }
    }
}

/// `runtime interactive-serve --mcp`: what the provider's command line and
/// environment get, by its adapter.
pub(super) fn for_provider(adapter: Option<&Adapter>, agent: &str) -> anyhow::Result<OneRun> {
    let Some(adapter) = adapter else {
        bail!("--mcp needs to know the provider; name its adapter with --provider (claude-code, codex or opencode)");
    };
    let Some(kind) = Agent::of_adapter(&adapter.profile.name) else {
        bail!(
            "--mcp knows how to configure claude, codex and opencode, not {}; give it the snippet of `agent-comms mcp config` yourself",
            adapter.profile.name
        );
    };
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .context("cannot resolve the agent-comms executable's path")?;
    let actor = Id::agent(agent)?;
    Ok(one_run(
        kind,
        &Launch::new(&exe, Some(&actor), ToolSet::Default),
    ))
}
