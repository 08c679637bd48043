//! The supervisor configuration of a cell session: what `k new` and the MCP
//! server's `cell_new` both start, so the two front ends cannot drift apart
//! in how a REPL is spawned and framed.

use std::path::{Path, PathBuf};

use super::{SupervisorConfig, DEFAULT_KEYBOARD_QUIET_MS, DEFAULT_KILL_GRACE};
use crate::adapter::profile::Profile;
use crate::cells::{CellsConfig, FrameMode};
use crate::pty::SpawnSpec;
use crate::session::{SessionKind, SessionName};

/// A cell session to start.
pub struct CellSession<'a> {
    pub name: SessionName,
    /// The REPL's command line, run by `/bin/sh -c` (on Windows, see
    /// [`shell_argv`]).
    pub command_line: String,
    pub cwd: PathBuf,
    /// The profile that claims the command (its shell integration frames
    /// cells exactly), if one does.
    pub profile: Option<&'a Profile>,
    /// An explicit frame mode (`--prompt`); else the profile's integration
    /// or repeat mode.
    pub frame: Option<FrameMode>,
    /// Record the session as asciicast to this file.
    pub record: Option<PathBuf>,
    /// Where the engine keeps its per-cell files.
    pub files_dir: PathBuf,
}

impl CellSession<'_> {
    pub fn config(self) -> SupervisorConfig {
        SupervisorConfig {
            name: self.name,
            kind: SessionKind::Cell,
            spawn: SpawnSpec {
                argv: shell_argv(&self.command_line),
                cwd: self.cwd,
                env: Vec::new(),
                // A cell session is not "inside" the session that started it.
                env_remove: vec!["K_SESSION".into()],
                rows: 50,
                cols: 200,
                record: self.record,
            },
            command_line: self.command_line,
            kill_grace_ms: DEFAULT_KILL_GRACE.as_millis() as u64,
            cells: Some(CellsConfig::for_command(
                self.profile,
                self.frame,
                self.files_dir,
            )),
            adapter: None,
            keyboard_quiet_ms: DEFAULT_KEYBOARD_QUIET_MS,
        }
    }
}

/// The command line runs in a shell; a simple command is exec'd so the REPL
/// itself leads the session (signals and exit status reach it directly).
#[cfg(unix)]
fn shell_argv(command_line: &str) -> Vec<String> {
    let compound = command_line.contains(|c| {
        matches!(
            c,
            ';' | '&' | '|' | '\n' | '(' | ')' | '`' | '$' | '<' | '>'
        )
    });
    let script = if compound {
        command_line.to_owned()
    } else {
        format!("exec {command_line}")
    };
    vec!["/bin/sh".into(), "-c".into(), script]
}

/// Windows has neither /bin/sh nor exec: a simple command line (words
/// separated by blanks) is the REPL's own argv, so the REPL leads the
/// session as on Unix; anything cmd.exe would parse (operators, quotes,
/// variables, paths with backslashes) runs under `cmd.exe /d /c`.
#[cfg(windows)]
fn shell_argv(command_line: &str) -> Vec<String> {
    let simple = !command_line.contains(|c| {
        matches!(
            c,
            '&' | '|' | '<' | '>' | '^' | '(' | ')' | '%' | '!' | '"' | '\\' | '\n'
        )
    });
    if simple {
        return command_line.split_whitespace().map(str::to_owned).collect();
    }
    vec![
        "cmd.exe".into(),
        "/d".into(),
        "/c".into(),
        command_line.to_owned(),
    ]
}

/// The program of a simple command line when it is not on PATH (or, given
/// as a path, does not exist): said before the session starts, not found
/// out from a REPL that never came up.
pub fn missing_program(command_line: &str) -> Option<String> {
    let program = crate::adapter::program_of(command_line)?;
    let words = crate::adapter::command::shell_words(command_line);
    let word = words
        .iter()
        .find(|w| crate::adapter::command::program_name(w) == program)?;
    if word.contains('/') {
        return (!Path::new(word).exists()).then(|| word.to_owned());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|dir| dir.join(word).is_file());
    (!found).then(|| word.to_owned())
}
