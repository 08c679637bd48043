//! The configuration that gives an agent CLI this server (`agent-comms mcp
//! config --for AGENT`), in each CLI's own format.
//!
//! The server is named by absolute path, and the `AGENT_COMMS_*` variables
//! in effect now (which runtime directory, home and project) are written
//! into the entry: CLIs start MCP servers with an environment of their own
//! choosing (Codex passes only a short list of variables), and a server
//! looking at another runtime directory would see none of the sessions.

use std::fmt::Write as _;
use std::path::Path;
use std::str::FromStr;

use agent_comms_core::ids::Id;
use agent_comms_core::paths::{HOME_ENV, PROJECT_ENV, RUNTIME_DIR_ENV};
use serde_json::{json, Map, Value};

use crate::ToolSet;

/// The name the server is registered under; the CLIs prefix its tools
/// with it (`mcp__agent-comms__cell_run` in Claude Code).
pub const SERVER_NAME: &str = "agent-comms";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    Claude,
    Codex,
    Opencode,
}

#[derive(Debug, thiserror::Error)]
#[error("unknown agent '{0}'; use claude, codex or opencode")]
pub struct UnknownAgent(String);

impl FromStr for Agent {
    type Err = UnknownAgent;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "claude" => Ok(Self::Claude),
            "codex" => Ok(Self::Codex),
            "opencode" => Ok(Self::Opencode),
            other => Err(UnknownAgent(other.to_owned())),
        }
    }
}

impl Agent {
    /// The agent a built-in adapter is for (its `name`: Claude Code's is
    /// `claude-code`, the others' the command's), or `None` for an adapter
    /// of something else.
    pub fn of_adapter(name: &str) -> Option<Agent> {
        match name {
            "claude-code" => Some(Self::Claude),
            "codex" => Some(Self::Codex),
            "opencode" => Some(Self::Opencode),
            _ => None,
        }
    }
}

/// A configuration and how to use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    /// The part the CLI reads (JSON or TOML).
    pub config: String,
    /// Where it goes, and the one-run alternative.
    pub how: String,
}

impl Snippet {
    /// The instructions, then the configuration.
    pub fn explained(&self) -> String {
        format!("{}\n{}", self.how, self.config)
    }
}

/// The command line and environment the CLI starts the server with.
pub struct Launch {
    pub command: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl Launch {
    pub fn new(exe: &Path, actor: Option<&Id>, tools: ToolSet) -> Self {
        let mut args = Vec::new();
        if let Some(actor) = actor {
            args.extend(["--actor".to_owned(), actor.to_string()]);
        }
        args.push("mcp".to_owned());
        if tools != ToolSet::Default {
            args.extend(["--tools".to_owned(), tools.to_string()]);
        }
        let env = [RUNTIME_DIR_ENV, HOME_ENV, PROJECT_ENV]
            .iter()
            .filter_map(|k| Some((k.to_string(), std::env::var(k).ok()?)))
            .collect();
        Self {
            command: exe.display().to_string(),
            args,
            env,
        }
    }

    fn env_object(&self) -> Map<String, Value> {
        self.env
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect()
    }
}

pub fn snippet(agent: Agent, exe: &Path, actor: Option<&Id>, tools: ToolSet) -> Snippet {
    let launch = Launch::new(exe, actor, tools);
    match agent {
        Agent::Claude => claude(&launch),
        Agent::Codex => codex(&launch),
        Agent::Opencode => opencode(&launch),
    }
}

/// Claude Code: `--mcp-config` takes this JSON (a file or the text).
pub fn claude_config(launch: &Launch) -> Value {
    json!({"mcpServers": {SERVER_NAME: {
        "type": "stdio",
        "command": launch.command,
        "args": launch.args,
        "env": launch.env_object(),
    }}})
}

/// Claude Code asks before every MCP tool call unless a rule allows it;
/// this one allows the server's tools (the tool set bounds them).
const CLAUDE_ALLOW: &str = "mcp__agent-comms";

fn claude(launch: &Launch) -> Snippet {
    let config = format!("{}\n", claude_config(launch));
    let mut add = format!("claude mcp add --scope user {SERVER_NAME}");
    for (k, v) in &launch.env {
        let _ = write!(add, " -e {k}={}", shell_quote(v));
    }
    let _ = write!(add, " -- {}", shell_quote(&launch.command));
    for a in &launch.args {
        let _ = write!(add, " {}", shell_quote(a));
    }
    let how = format!(
        "# Claude Code, for one run:\n\
         #   claude --mcp-config='<the JSON below>' --allowedTools {CLAUDE_ALLOW}\n\
         # or for every run:\n\
         #   {add}\n"
    );
    Snippet { config, how }
}

/// Codex: a `[mcp_servers.agent-comms]` table for `~/.codex/config.toml`.
pub fn codex_config(launch: &Launch) -> String {
    let mut toml = format!(
        "[mcp_servers.{SERVER_NAME}]\ncommand = {}\nargs = [{}]\n",
        toml_string(&launch.command),
        launch
            .args
            .iter()
            .map(|a| toml_string(a))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Cell runs and waits may take long; Codex's own default is a minute.
    let _ = writeln!(
        toml,
        "startup_timeout_sec = 20\ntool_timeout_sec = {TOOL_TIMEOUT_S}"
    );
    if !launch.env.is_empty() {
        let _ = writeln!(toml, "\n[mcp_servers.{SERVER_NAME}.env]");
        for (k, v) in &launch.env {
            let _ = writeln!(toml, "{k} = {}", toml_string(v));
        }
    }
    toml
}

fn codex(launch: &Launch) -> Snippet {
    let how = format!(
        "# Codex: add this to ~/.codex/config.toml (or $CODEX_HOME/config.toml);\n\
         # to run its tools without asking, add: default_tools_approval_mode = \"approve\"\n\
         # for one run instead: codex {}\n",
        codex_overrides(launch)
            .iter()
            .map(|a| shell_quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    );
    Snippet {
        config: codex_config(launch),
        how,
    }
}

/// The longest a tool call may take before the CLI gives up on it: the
/// longest timeout a tool takes.
const TOOL_TIMEOUT_S: u64 = 3600;

/// Codex's `-c` overrides that add the server for one run (TOML values).
fn codex_overrides(launch: &Launch) -> Vec<String> {
    let key = format!("mcp_servers.{SERVER_NAME}");
    let args = launch
        .args
        .iter()
        .map(|a| toml_string(a))
        .collect::<Vec<_>>()
        .join(",");
    let env = launch
        .env
        .iter()
        .map(|(k, v)| format!("{k}={}", toml_string(v)))
        .collect::<Vec<_>>()
        .join(",");
    [
        format!("{key}.command={}", toml_string(&launch.command)),
        format!("{key}.args=[{args}]"),
        format!("{key}.env={{{env}}}"),
        format!("{key}.tool_timeout_sec={TOOL_TIMEOUT_S}"),
        format!("{key}.default_tools_approval_mode=\"approve\""),
    ]
    .into_iter()
    .flat_map(|o| ["-c".to_owned(), o])
    .collect()
}

/// What to add to an agent's command line and environment so that this
/// run of it (`runtime interactive-serve --mcp`) has the server, its tools
/// allowed, without touching the user's files.
pub struct OneRun {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

pub fn one_run(agent: Agent, launch: &Launch) -> OneRun {
    match agent {
        Agent::Claude => OneRun {
            args: vec![
                format!("--mcp-config={}", claude_config(launch)),
                "--allowedTools".into(),
                CLAUDE_ALLOW.into(),
            ],
            env: Vec::new(),
        },
        Agent::Codex => OneRun {
            args: codex_overrides(launch),
            env: Vec::new(),
        },
        // opencode merges this over the user's configuration.
        Agent::Opencode => OneRun {
            args: Vec::new(),
            env: vec![(
                "OPENCODE_CONFIG_CONTENT".into(),
                opencode_config(launch).to_string(),
            )],
        },
    }
}

/// opencode: the `mcp` entry of `opencode.json`.
pub fn opencode_config(launch: &Launch) -> Value {
    let mut command = vec![launch.command.clone()];
    command.extend(launch.args.iter().cloned());
    json!({"mcp": {SERVER_NAME: {
        "type": "local",
        "command": command,
        "environment": launch.env_object(),
        "enabled": true,
        "timeout": TOOL_TIMEOUT_S * 1000,
    }}})
}

fn opencode(launch: &Launch) -> Snippet {
    let how = "# opencode: merge this into opencode.json (the project's, or ~/.config/opencode/opencode.json);\n\
               # for one run, pass it as OPENCODE_CONFIG_CONTENT='<the JSON below>'\n"
        .to_owned();
    Snippet {
        config: format!("{}\n", opencode_config(launch)),
        how,
    }
}

/// A TOML basic string (the same escapes as JSON's for what can occur in
/// a path or an id).
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialize")
}

/// A word as a POSIX shell reads it back unchanged.
fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%+,".contains(&b));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch() -> Launch {
        Launch {
            command: "/opt/agent comms/agent-comms".into(),
            args: vec!["--actor".into(), "alice".into(), "mcp".into()],
            env: vec![("AGENT_COMMS_HOME".into(), "/h".into())],
        }
    }

    #[test]
    fn claude_gets_its_mcp_servers_json() {
        let v = claude_config(&launch());
        let server = &v["mcpServers"]["agent-comms"];
        assert_eq!(server["command"], "/opt/agent comms/agent-comms");
        assert_eq!(server["args"], json!(["--actor", "alice", "mcp"]));
        assert_eq!(server["env"]["AGENT_COMMS_HOME"], "/h");
        let how = claude(&launch()).how;
        assert!(
            how.contains("-- '/opt/agent comms/agent-comms' --actor alice mcp"),
            "{how}"
        );
    }

    #[test]
    fn codex_gets_a_table_that_parses_back() {
        let text = codex_config(&launch());
        let parsed: toml::Value = toml::from_str(&text).unwrap();
        let server = &parsed["mcp_servers"]["agent-comms"];
        assert_eq!(
            server["command"].as_str(),
            Some("/opt/agent comms/agent-comms")
        );
        assert_eq!(server["args"].as_array().unwrap().len(), 3);
        assert_eq!(server["env"]["AGENT_COMMS_HOME"].as_str(), Some("/h"));
        // The one-run overrides are the same values, each a TOML value.
        let overrides = codex_overrides(&launch());
        for pair in overrides.chunks(2) {
            assert_eq!(pair[0], "-c");
            let (key, value) = pair[1].split_once('=').unwrap();
            let parsed: toml::Value = toml::from_str(&format!("v = {value}")).unwrap();
            if key.ends_with(".args") {
                assert_eq!(parsed["v"].as_array().unwrap().len(), 3);
            }
        }
    }

    #[test]
    fn the_built_in_adapters_name_their_agents() {
        assert_eq!(Agent::of_adapter("claude-code"), Some(Agent::Claude));
        assert_eq!(Agent::of_adapter("codex"), Some(Agent::Codex));
        assert_eq!(Agent::of_adapter("opencode"), Some(Agent::Opencode));
        assert_eq!(Agent::of_adapter("python"), None);
    }

    #[test]
    fn opencode_gets_one_command_array() {
        let v = opencode_config(&launch());
        let server = &v["mcp"]["agent-comms"];
        assert_eq!(server["type"], "local");
        assert_eq!(server["command"][0], "/opt/agent comms/agent-comms");
        assert_eq!(server["command"][3], "mcp");
    }
}
