//! Which program a shell command line runs.

/// The program a command line runs, as a basename: `env VAR=1 python3 -i`
/// runs `python3`. Flags of `env` and variable assignments are skipped.
pub fn program_of(command_line: &str) -> Option<String> {
    let mut words = command_line.split_whitespace().peekable();
    let mut first = words.next()?;
    if basename(first) == "env" {
        first = words.find(|w| !w.starts_with('-') && !is_assignment(w))?;
    } else {
        while is_assignment(first) {
            first = words.next()?;
        }
    }
    Some(basename(first).to_owned())
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        }
        None => false,
    }
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

#[cfg(test)]
mod tests {
    use super::program_of;

    #[test]
    fn finds_the_program_behind_env_prefixes() {
        assert_eq!(program_of("bash").as_deref(), Some("bash"));
        assert_eq!(
            program_of("/usr/bin/python3 -i").as_deref(),
            Some("python3")
        );
        assert_eq!(
            program_of("env PYTHON_BASIC_REPL=1 python3 -i").as_deref(),
            Some("python3")
        );
        assert_eq!(program_of("env -i A=b gdb -q").as_deref(), Some("gdb"));
        assert_eq!(program_of("LANG=C sqlite3").as_deref(), Some("sqlite3"));
        assert_eq!(program_of("   "), None);
    }
}
