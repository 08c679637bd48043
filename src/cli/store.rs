//! `agent-comms store check`: is the project's state database sound?

use agent_comms_core::control::store_path;
use agent_comms_core::store::check;
use clap::Subcommand;

#[derive(Subcommand)]
pub enum StoreCommand {
    /// Check the project's state database (changes nothing): that it is
    /// yours alone, its marker and schema, and SQLite's integrity check;
    /// prints ok, or each problem and how to start over.
    #[command(after_help = "Examples:
  agent-comms store check
  agent-comms store check --json | jq .ok

Exit status: 0 sound (or no store yet), 2 problems found, 1 the check could not run.")]
    Check {
        /// Print {"path", "exists", "ok", "schema", "problems", "repair"}.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: StoreCommand) -> anyhow::Result<i32> {
    let StoreCommand::Check { json } = cmd;
    let found = check(&store_path());
    let path = found.path.display();
    if json {
        println!("{}", serde_json::to_string(&found)?);
    } else if !found.exists {
        println!("{path}: no store yet (the first command that needs one creates it)");
    } else if found.ok {
        let schema = found.schema.unwrap_or_default();
        println!("{path}: ok (schema {schema}, integrity ok)");
    } else {
        println!("{path}: {} problem(s):", found.problems.len());
        for problem in &found.problems {
            println!("    {problem}");
        }
        if let Some(repair) = &found.repair {
            println!("    repair: {repair}");
        }
    }
    // As doctor: problems are the answer (exit 2), not a failure (1).
    Ok(if found.ok { 0 } else { 2 })
}
