//! The providers' ACP agents in a world (`runtime acp-serve` tests): the
//! command the adapter's `[acp]` declares, and what it needs here besides
//! the world's own environment.
//!
//! What each needed, found by driving it offline as root (initialize,
//! session/new, a prompt that reached the mock model):
//!
//! - opencode (`opencode acp`): nothing more than the world of the
//!   interactive CLI (the seeded `opencode.json`, the `OPENCODE_DISABLE_*`
//!   variables).
//! - Claude (`claude-agent-acp`): `CLAUDE_CODE_EXECUTABLE`, the pinned
//!   Claude Code — scripts/install-providers leaves out the SDK's own copy,
//!   and without it `session/new` fails with "Claude native binary not
//!   found"; `CLAUDE_AGENT_LOGS`, a directory kept with the test's
//!   artifacts. As root it needs no `IS_SANDBOX` (0.101.0 leaves the
//!   bypass mode out by itself there).
//! - Codex (`codex-acp`): `CODEX_PATH`, the pinned Codex — its own
//!   @openai/codex is installed without the native CLI, and without it
//!   `initialize` fails ("Missing optional dependency").
//!
//! The agent runs in the world's network namespace, as the interactive CLIs
//! do: [`AcpAgent::command`] wraps a program in `nsenter`. Run the
//! supervisor itself that way, so that the agent it spawns is in the
//! namespace too (its endpoint, a path-based unix socket, is reachable from
//! outside it):
//!
//! ```ignore
//! let acp = world.acp_agent();
//! let mut serve = acp.command(BIN, &["runtime", "acp-serve", "--id", id, "--"]);
//! serve.args(&acp.argv);
//! ```
//!
//! Everything it starts carries the world's HOME, so [`World::cleanup`]
//! ends it by pid.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use agent_comms_core::adapter::AdapterRegistry;

use serde_json::Value;

use super::world::World;
use super::Cli;

/// How long an agent may take to start (initialize and session/new).
pub const ACP_START: Duration = Duration::from_secs(120);

/// Provider P's ACP agent in a world: see the module documentation.
#[derive(Debug, Clone)]
pub struct AcpAgent {
    /// The adapter's `[acp]` command, as its built-in profile declares it
    /// (`["opencode", "acp"]`); found on the world's PATH.
    pub argv: Vec<String>,
    /// The whole environment to run it with: [`World::vars`] and what the
    /// agent needs here. The adapter's own `[acp]` environment is not in
    /// it: applying that is the supervisor's job.
    pub env: Vec<(String, String)>,
    /// The world's work directory: the ACP session's cwd.
    pub cwd: PathBuf,
    /// `nsenter --net=/proc/<pid>/ns/net --`: the prefix that runs a
    /// program in the world's network namespace.
    pub netns: Vec<String>,
}

impl AcpAgent {
    /// `program ARGS…` in the world's network namespace, with exactly
    /// [`AcpAgent::env`], in [`AcpAgent::cwd`]; stdio as the caller sets it.
    pub fn command(&self, program: impl AsRef<OsStr>, args: &[&str]) -> Command {
        let (nsenter, prefix) = self.netns.split_first().expect("an nsenter prefix");
        let mut cmd = Command::new(nsenter);
        cmd.args(prefix).arg(program).args(args);
        cmd.env_clear().envs(self.env.iter().cloned());
        cmd.current_dir(&self.cwd);
        cmd
    }

    /// The agent itself, started the way a supervisor would start it (for
    /// a test that speaks ACP to it directly).
    pub fn agent_command(&self) -> Command {
        let (program, args) = self.argv.split_first().expect("an ACP command");
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.command(program, &args)
    }
}

impl World {
    /// This world's provider's ACP agent. Panics, saying what to do, when
    /// the adapter declares none or the bin dir lacks its program.
    pub fn acp_agent(&self) -> AcpAgent {
        let builtin = AdapterRegistry::load(agent_comms_adapters::BUILTIN, None, None);
        let adapter = self.cli.adapter();
        let acp = builtin
            .get(adapter)
            .and_then(|e| e.profile.acp.clone())
            .unwrap_or_else(|| panic!("the built-in {adapter} profile has no [acp] section"));
        let program = &acp.command[0];
        assert!(
            self.bins.join(program).is_file(),
            "{} has no {program}: run scripts/install-providers again (it installs the ACP agents too)",
            self.bins.display()
        );
        let mut env = self.vars();
        let pinned = |cli: Cli| self.bins.join(cli.program()).display().to_string();
        match self.cli {
            Cli::Claude => {
                let logs = self.artifacts.join("claude-agent-logs");
                std::fs::create_dir_all(&logs).expect("create CLAUDE_AGENT_LOGS");
                env.push(("CLAUDE_CODE_EXECUTABLE".into(), pinned(Cli::Claude)));
                env.push(("CLAUDE_AGENT_LOGS".into(), logs.display().to_string()));
            }
            Cli::Codex => env.push(("CODEX_PATH".into(), pinned(Cli::Codex))),
            Cli::Opencode => {}
        }
        AcpAgent {
            argv: acp.command,
            env,
            cwd: self.work.clone(),
            netns: vec![
                "nsenter".into(),
                format!("--net=/proc/{}/ns/net", self.ns_pid()),
                "--".into(),
            ],
        }
    }
}

impl World {
    /// `--actor ID runtime acp-serve --id ID --json EXTRA… -- <the agent>`
    /// in this world's namespace: the JSON of what started, or the error.
    pub fn acp_serve(&self, id: &str, extra: &[&str]) -> Result<Value, String> {
        let acp = self.acp_agent();
        let mut args = vec!["--actor", id, "runtime", "acp-serve", "--id", id, "--json"];
        args.extend_from_slice(extra);
        args.push("--");
        let mut cmd = acp.command(crate::support::BIN, &args);
        cmd.args(&acp.argv);
        let out = crate::support::run::try_run_within(cmd, "acp-serve", ACP_START)
            .map_err(|e| e.to_string())?;
        if !out.success() {
            return Err(format!("{}{}", out.stdout, out.stderr));
        }
        serde_json::from_str(out.stdout.trim()).map_err(|e| format!("{e}: {}", out.stdout))
    }
}
