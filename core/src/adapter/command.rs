//! Which program a shell command line runs, and where it is.

use std::path::{Path, PathBuf};

/// The program a command line runs, by its [`program_name`]: `env VAR=1 python3 -i`
/// runs `python3`. Flags of `env` and variable assignments are skipped.
pub fn program_of(command_line: &str) -> Option<String> {
    let words = shell_words(command_line);
    let mut words = words.iter().map(String::as_str);
    let mut first = words.next()?;
    if program_name(first) == "env" {
        first = words.find(|w| !w.starts_with('-') && !is_assignment(w))?;
    } else {
        while is_assignment(first) {
            first = words.next()?;
        }
    }
    Some(program_name(first).to_owned())
}

/// The words of a command line as a POSIX shell splits them: blanks
/// separate, single and double quotes group, a backslash escapes the next
/// character, on Unix only (on Windows it separates a path's parts).
/// Enough to find the program; expansions are not performed.
pub fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(word.take()),
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                w.extend(chars.by_ref().take_while(|&c| c != '\''));
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' if !cfg!(windows) => w.extend(chars.next()),
                        c => w.push(c),
                    }
                }
            }
            '\\' if !cfg!(windows) => word.get_or_insert_with(String::new).extend(chars.next()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        }
        None => false,
    }
}

/// The program's name in a path or command word, as adapters claim it:
/// after the last `/` or `\` (Windows' separator; process paths are
/// split the same way on every platform), and on Windows without `.exe`
/// (`C:\bin\claude.exe` is `claude`).
pub fn program_name(word: &str) -> &str {
    let name = word.rsplit(['/', '\\']).next().unwrap_or(word);
    if !cfg!(windows) {
        return name;
    }
    let stem = name
        .len()
        .checked_sub(4)
        .filter(|&at| name.is_char_boundary(at) && name[at..].eq_ignore_ascii_case(".exe"));
    stem.map_or(name, |at| &name[..at])
}

/// The first executable named `name` in a `PATH` directory.
pub fn on_path(name: &str) -> Option<PathBuf> {
    on_search_path(name, &std::env::var_os("PATH")?)
}

/// The program `name` as a shell finds it with search path `path`: a name
/// with a `/` is taken as it is, any other is looked up in `path`'s
/// directories.
pub fn on_search_path(name: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name)).filter(|p| is_executable(p));
    }
    std::env::split_paths(path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    path.is_file() && crate::os::is_executable(path)
}

#[cfg(test)]
mod tests {
    use super::program_of;

    #[test]
    fn splits_words_as_a_shell_does() {
        assert_eq!(
            super::shell_words(r#"env PS1='ok> ' "a b"c d\ e"#),
            ["env", "PS1=ok> ", "a bc", "d e"]
        );
        assert_eq!(program_of("env PS1='ok> ' sh").as_deref(), Some("sh"));
    }

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
