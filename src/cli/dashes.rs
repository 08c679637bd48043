//! A forgotten `--` before a program: `session new work bash -i` parses
//! `-i` as an option of ours (refused), and `runtime interactive-serve --id
//! x claude` reads `claude` as a second id. Clap would say "unexpected
//! argument"; the fix is one `--`, so the corrected command is printed.

use agent_comms_core::display::shell_word;

use super::agent_comms::Cli;

/// The command line with `--` put where it makes `args` (argv, program
/// first) a command `fits` accepts, when it has no `--` already.
pub fn missing(args: &[String], fits: impl Fn(&Cli) -> bool) -> Option<String> {
    if args.iter().any(|a| a == "--") {
        return None;
    }
    (2..args.len()).find_map(|at| {
        let mut fixed = args.to_vec();
        fixed.insert(at, "--".to_owned());
        let cli = super::agent_comms::parse(&fixed).ok()?;
        fits(&cli).then(|| shell_line(&fixed))
    })
}

/// The words as one line a shell reads back as the same words.
fn shell_line(args: &[String]) -> String {
    let mut words = vec!["agent-comms".to_owned()];
    words.extend(args[1..].iter().map(|w| shell_word(w)));
    words.join(" ")
}
