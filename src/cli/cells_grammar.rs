//! The command lines of `k` and `km` described as clap commands, for their
//! man pages and shell completions only: both binaries parse by hand (the
//! cells contract fixes every error text), so nothing here parses a real
//! invocation. A test checks that every verb `k`'s usage text names is here.

use clap::{Arg, ArgAction, Command};

/// `k`'s verbs as its usage text lists them.
pub fn k_command() -> Command {
    Command::new("k")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Persistent REPL cells on agent-comms supervisors (agent-tty 0.1.5 compatible)")
        .long_about(
            "Persistent REPL cells on agent-comms supervisors (agent-tty 0.1.5 compatible).\n\n\
             The session is the explicit argument, else $K_SESSION, else the only live k \
             session.",
        )
        .subcommands(cell_verbs())
        .subcommands(session_verbs())
}

fn session() -> Arg {
    Arg::new("session").value_name("SESSION")
}

fn timeout() -> Arg {
    Arg::new("timeout")
        .short('t')
        .value_name("N")
        .help("Seconds before the cell times out")
}

fn code() -> Arg {
    Arg::new("code").value_name("CODE").required(true)
}

/// The verbs that start a session or run code in it.
fn cell_verbs() -> Vec<Command> {
    vec![
        Command::new("new")
            .about("Start a session (default: bash); idempotent")
            .arg(session().required(true))
            .arg(Arg::new("cmd").value_name("CMD").num_args(0..))
            .arg(
                Arg::new("prompt")
                    .long("prompt")
                    .value_name("X")
                    .help("Frame detection: an exact prompt, or ./hook"),
            ),
        Command::new("fire")
            // The session comes first but may be left out.
            .allow_missing_positional(true)
            .about("Send code, return at once (default timeout 300 s)")
            .arg(timeout())
            .arg(session())
            .arg(code()),
        Command::new("poll")
            .about("State of a cell")
            .arg(session())
            .arg(Arg::new("cell_id").value_name("CELL_ID")),
        Command::new("run")
            // The session comes first but may be left out.
            .allow_missing_positional(true)
            .visible_alias("await")
            .about("Send code, wait for the frame end (default 30 s)")
            .arg(
                Arg::new("json")
                    .short('j')
                    .action(ArgAction::SetTrue)
                    .help("Print the cell as JSON"),
            )
            .arg(timeout())
            .arg(session())
            .arg(code()),
        Command::new("notify")
            // The session comes first but may be left out.
            .allow_missing_positional(true)
            .about("A note in the session's event stream")
            .arg(session())
            .arg(Arg::new("message").value_name("MESSAGE").required(true)),
    ]
}

/// The verbs that look at, interrupt or end a session.
fn session_verbs() -> Vec<Command> {
    vec![
        Command::new("int")
            .about("Ctrl-C; the running cell resolves as interrupted")
            .arg(session()),
        Command::new("kill")
            .about("End the session")
            .arg(session().required(true)),
        Command::new("ls").about("Live k sessions"),
        Command::new("status")
            .about("Health and the next useful command")
            .arg(session()),
        Command::new("watch")
            .about("Live filtered view (Ctrl-C stops)")
            .arg(session()),
        Command::new("history")
            .about("The last N*5 lines of that view (default 5)")
            .arg(Arg::new("n").short('n').value_name("N"))
            .arg(session()),
        Command::new("attach")
            .about("Take over the terminal; Ctrl-\\ detaches")
            .arg(session().required(true)),
    ]
}

/// `km`'s one form: a session, maybe a cell, maybe `-1`.
pub fn km_command() -> Command {
    Command::new("km")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Cell events of a k session, one JSON line each (agent-tty 0.1.5 compatible)")
        .long_about(
            "Cell events of a k session, one JSON line each (agent-tty 0.1.5 compatible).\n\n\
             Events: fired, done, timeout, interrupted, notify, closed, error (all with \"ts\").",
        )
        .arg(Arg::new("session").value_name("SESSION").required(true))
        .arg(Arg::new("cell_id").value_name("CELL_ID"))
        .arg(
            Arg::new("oneshot")
                .short('1')
                .action(ArgAction::SetTrue)
                .help(
                    "Exit after the first completion (of CELL_ID if given; a completion that \
                     already happened counts)",
                ),
        )
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_verb_of_k_usage_is_described() {
        let k = super::k_command();
        for line in super::super::k::USAGE.lines() {
            let Some(verb) = line
                .strip_prefix("  k ")
                .and_then(|l| l.split_whitespace().next())
            else {
                continue;
            };
            if verb.starts_with('-') {
                continue;
            }
            assert!(
                k.find_subcommand(verb).is_some(),
                "k {verb} is not described"
            );
        }
    }
}
