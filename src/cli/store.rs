//! `agent-comms store …`: the project's store. `check` examines a SQLite
//! file, `status` whichever store the project uses, `migrate` copies a
//! project's SQLite state into a PostgreSQL database. Problems found are
//! the answer (exit 2), as with doctor; a command that could not run
//! fails (exit 1).

use agent_comms_core::control::registration::effective_status;
use agent_comms_core::control::{state_dir, store_location};
use agent_comms_core::display;
use agent_comms_core::store::check;
use agent_comms_core::store::copy::{self, Migrated};
use agent_comms_core::store::location::{Location, CONFIG_FILE, PASSWORD_ENV, STORE_ENV};
use agent_comms_core::store::postgres::Target;
use agent_comms_core::store::status::{status, StoreStatus};
use agent_comms_core::time::iso_from_unix_millis;
use anyhow::bail;
use clap::Subcommand;

#[derive(Subcommand)]
pub enum StoreCommand {
    /// Check the project's SQLite state database (changes nothing): that
    /// it is yours alone, its marker and schema, and SQLite's integrity
    /// check; prints ok, or each problem and how to start over. A project
    /// whose store is PostgreSQL gets `store status`'s checks instead.
    #[command(after_help = "Examples:
  agent-comms store check
  agent-comms store check --json | jq .ok

With a PostgreSQL store it says so and prints what `store status` prints
(with --json, its JSON).

Exit status: 0 sound (or no store yet), 2 problems found, 1 the check could not run.")]
    Check {
        /// Print {"path", "exists", "ok", "schema", "problems", "repair"}.
        #[arg(long)]
        json: bool,
    },
    /// Show the project's store (changes nothing): SQLite or PostgreSQL,
    /// where, whether it answers and how fast, its schema against this
    /// build's, its runtimes and messages by status, and for PostgreSQL
    /// the hosts that use it.
    #[command(after_help = "Examples:
  agent-comms store status
  agent-comms store status --json | jq .messages
  AGENT_COMMS_STORE=postgres://agents@db.internal/agent_comms agent-comms store status

A database's password comes from AGENT_COMMS_STORE_PASSWORD (or the URL, or
password_file in .agent-comms/config.toml). A database that does not answer
within a few seconds is reported unreachable, on one line.

Exit status: 0 reachable with this build's schema (or no store yet), 2
problems found (unreachable, another schema), 1 the status could not be taken.")]
    Status {
        /// Print {"backend", "location", "exists", "reachable", "error",
        /// "schema", "schema_expected", "latency_ms", "runtimes",
        /// "messages", "hosts", "ok", "problems"}: runtimes and messages
        /// count each status ({"PENDING": 3, …}); hosts (PostgreSQL only,
        /// else null) are [{"id", "name", "version", "schema", "skew_ms",
        /// "seen"}].
        #[arg(long)]
        json: bool,
    },
    /// Copy this project's SQLite state into a PostgreSQL database in one
    /// transaction: agents, runtimes, and messages with their ids, order,
    /// status and every delivery attempt. The SQLite file is left as it
    /// was. Safe to run again: a database already holding exactly this
    /// state is left alone, one holding anything else is refused.
    #[command(after_help = "Examples:
  agent-comms store migrate --to postgres://agents@db.internal:5432/agent_comms
  agent-comms store migrate --to 'postgres://agents@db.internal/agent_comms?sslmode=require' --json
  agent-comms store migrate --to postgres://agents@db.internal/agent_comms --force

The password comes from AGENT_COMMS_STORE_PASSWORD (or the URL). It prints
what it copied and how to point the project at the database (store =
\"postgres://…\" and password_file in .agent-comms/config.toml, or
AGENT_COMMS_STORE); then restart the project's runtimes.

Exit status: 0 copied, or already there; 1 nothing copied (no SQLite state,
the project already uses PostgreSQL, the database holds other data, or an
error).")]
    Migrate {
        /// The database: postgres://USER@HOST[:PORT]/DATABASE[?sslmode=require];
        /// the password from AGENT_COMMS_STORE_PASSWORD, or in the URL
        /// (visible to other users in the process list). Never printed.
        #[arg(long, value_name = "URL")]
        to: String,
        /// Delete what the database holds (agents, runtimes, messages,
        /// attempts; not the hosts it has seen) and copy this project's in
        /// its place, in the same transaction.
        #[arg(long)]
        force: bool,
        /// Print {"source", "target", "already", "replaced", "copied"}:
        /// copied (and replaced, else null) is {"agents", "runtimes",
        /// "messages", "by_status", "attempts"}, by_status counting each
        /// message status.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: StoreCommand) -> anyhow::Result<i32> {
    match cmd {
        StoreCommand::Check { json } => check_store(json),
        StoreCommand::Status { json } => show_status(&store_location()?, json),
        StoreCommand::Migrate { to, force, json } => migrate(&to, force, json),
    }
}

fn check_store(json: bool) -> anyhow::Result<i32> {
    let path = match store_location()? {
        Location::Sqlite(path) => path,
        shared @ Location::Postgres(_) => {
            if !json {
                println!(
                    "the project's store is PostgreSQL, not a SQLite file: its status instead (agent-comms store status)"
                );
            }
            return show_status(&shared, json);
        }
    };
    let found = check(&path);
    let path = found.path.display();
    if json {
        println!("{}", agent_comms_core::display::json(&found)?);
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

fn show_status(location: &Location, json: bool) -> anyhow::Result<i32> {
    let found = status(location, &|r, now| effective_status(r, now).0);
    if json {
        println!("{}", agent_comms_core::display::json(&found)?);
    } else {
        print_status(&found);
    }
    Ok(if found.ok { 0 } else { 2 })
}

fn print_status(s: &StoreStatus) {
    if !s.reachable && s.backend == "postgres" {
        // The error names the database, says it is unreachable and what
        // to check: one line.
        println!(
            "{}",
            display::one_line(s.error.as_deref().unwrap_or_default())
        );
        return;
    }
    println!("store:     {} {}", s.backend, s.location);
    match (s.exists, s.latency_ms) {
        (_, Some(ms)) => println!("reachable: yes, {ms} ms round trip"),
        (Some(false), None) => {
            println!("no store yet (the first command that needs one creates it)")
        }
        _ => {}
    }
    match s.schema {
        Some(0) if s.exists == Some(false) => println!(
            "schema:    none yet (the first command that opens it creates agent-comms' tables)"
        ),
        Some(schema) => println!("schema:    {schema} (this build: {})", s.schema_expected),
        None => {}
    }
    if let Some(runtimes) = &s.runtimes {
        println!("runtimes:  {runtimes}");
    }
    if let Some(messages) = &s.messages {
        println!("messages:  {messages}");
    }
    if let Some(hosts) = &s.hosts {
        if hosts.is_empty() {
            println!("hosts:     none recorded yet");
        }
        for (n, h) in hosts.iter().enumerate() {
            println!(
                "{}{} ({}, agent-comms {}, schema {}, clock {:+} ms, seen {})",
                if n == 0 { "hosts:     " } else { "           " },
                display::one_line(&h.id),
                display::one_line(&h.name),
                display::one_line(&h.version),
                h.schema,
                h.skew_ms,
                iso_from_unix_millis(h.seen)
            );
        }
    }
    if s.problems.is_empty() {
        println!("ok");
    } else {
        println!("{} problem(s):", s.problems.len());
        for problem in &s.problems {
            println!("    {}", display::one_line(problem));
        }
    }
}

fn migrate(to: &str, force: bool, json: bool) -> anyhow::Result<i32> {
    let password = std::env::var(PASSWORD_ENV).ok().filter(|p| !p.is_empty());
    let target = Target::parse(to, password.as_deref())?;
    let source = match store_location()? {
        Location::Sqlite(path) => path,
        Location::Postgres(current) => bail!(already_shared(current.shown(), target.shown())),
    };
    let done = copy::migrate(&source, target, force)?;
    if json {
        println!("{}", agent_comms_core::display::json(&done)?);
    } else {
        print_migrated(&done);
    }
    Ok(0)
}

/// Why a project whose store is the database at `current` has nothing to
/// migrate into `target`.
fn already_shared(current: &str, target: &str) -> String {
    let named_by = if std::env::var(STORE_ENV).is_ok_and(|s| !s.is_empty()) {
        STORE_ENV.to_owned()
    } else {
        state_dir().join(CONFIG_FILE).display().to_string()
    };
    if current == target {
        format!(
            "the project's store already is the PostgreSQL database at {current} (named by {named_by}): it cannot be copied into itself, and its SQLite file is no longer the project's state"
        )
    } else {
        format!(
            "the project's store is the PostgreSQL database at {current} (named by {named_by}), not its SQLite file; to copy the SQLite file into {target} anyway, run: AGENT_COMMS_STORE=sqlite agent-comms store migrate --to {target}"
        )
    }
}

fn print_migrated(done: &Migrated) {
    let target = &done.target;
    if done.already {
        println!(
            "already migrated: {target} holds exactly this project's {}; nothing was changed",
            done.copied
        );
    } else {
        println!(
            "copied {} into {target}, in one transaction: {}",
            done.source.display(),
            done.copied
        );
        if let Some(replaced) = &done.replaced {
            println!("    replacing what it held: {replaced}");
        }
    }
    println!("the SQLite file is left as it was.");
    println!(
        "next, point the project at the database, in {}:",
        state_dir().join(CONFIG_FILE).display()
    );
    println!("    store = \"{target}\"");
    println!("    password_file = \"~/.config/agent-comms/db-password\"   # the password alone, in a file of mode 600");
    println!("  and trust the file as you wrote it: agent-comms trust");
    println!("  or in one shell: export {STORE_ENV}='{target}' {PASSWORD_ENV}=…");
    println!("then restart the project's runtimes (until then they keep using the SQLite file); check with: agent-comms store status");
}
