//! REPL profiles: how `k` sets up shell integration for a known REPL.
//!
//! A profile is TOML (config/providers/*.toml, embedded at build time). It
//! says which commands it claims, what to type once at start so that the
//! REPL marks its prompt with OSC 133 sequences carrying a per-session token,
//! and how a cell's code is handed over (typed, or run from a private file).
//! The engine that reads the marks is provider-neutral and lives in core.

use serde::Deserialize;

/// Profiles shipped with agent-comms.
const BUILTIN: &[(&str, &str)] = &[
    (
        "bash.toml",
        include_str!("../../config/providers/bash.toml"),
    ),
    ("sh.toml", include_str!("../../config/providers/sh.toml")),
    ("zsh.toml", include_str!("../../config/providers/zsh.toml")),
    (
        "python.toml",
        include_str!("../../config/providers/python.toml"),
    ),
    (
        "node.toml",
        include_str!("../../config/providers/node.toml"),
    ),
    ("gdb.toml", include_str!("../../config/providers/gdb.toml")),
    (
        "sqlite3.toml",
        include_str!("../../config/providers/sqlite3.toml"),
    ),
    (
        "psql.toml",
        include_str!("../../config/providers/psql.toml"),
    ),
];

const SCHEMA: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("{file}: {message}")]
    Invalid { file: String, message: String },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplProfile {
    pub schema: u32,
    pub name: String,
    pub version: String,
    pub kind: String,
    /// Program basenames this profile claims; a trailing `*` matches any rest.
    pub commands: Vec<String>,
    /// Provider versions the profile was checked against (informational).
    #[serde(default)]
    pub checked: Option<String>,
    pub repl: ReplSection,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplSection {
    /// Typed once at start (lines are typed in order). `{token}` is the
    /// session's secret; `{script_b64}` is `setup_script`, with its own
    /// `{token}` filled in, in base64.
    pub setup: String,
    #[serde(default)]
    pub setup_script: Option<String>,
    /// Typed to run a cell from a file; `{file}` is its path.
    pub run_file: String,
    pub file_suffix: String,
    /// Written at the top of every cell file (before the code).
    #[serde(default)]
    pub file_prologue: String,
    /// One-line code without control characters may be typed as is.
    #[serde(default)]
    pub type_simple_lines: bool,
    /// The end mark carries the real status of the cell.
    #[serde(default)]
    pub exit_status: bool,
    /// The start mark is followed by a newline that is not output.
    #[serde(default)]
    pub newline_after_start: bool,
    /// Type the set-up only once the REPL printed this text (for REPLs that
    /// drop input typed before their line editor is ready); unset types it
    /// at once.
    #[serde(default)]
    pub setup_after: Option<String>,
}

impl ReplProfile {
    pub fn parse(file: &str, text: &str) -> Result<Self, ProfileError> {
        let invalid = |message: String| ProfileError::Invalid {
            file: file.to_owned(),
            message,
        };
        let profile: Self = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if profile.schema != SCHEMA {
            return Err(invalid(format!(
                "schema {} is not supported (this agent-comms reads schema {SCHEMA})",
                profile.schema
            )));
        }
        if profile.kind != "repl" {
            return Err(invalid(format!(
                "kind '{}' is not a REPL profile",
                profile.kind
            )));
        }
        Ok(profile)
    }

    pub fn claims(&self, program: &str) -> bool {
        self.commands.iter().any(|c| match c.strip_suffix('*') {
            Some(prefix) => program.starts_with(prefix),
            None => program == c,
        })
    }
}

/// Every built-in REPL profile. They are tested at build time, so a parse
/// error here is a bug in this crate.
pub fn builtin_repls() -> Vec<ReplProfile> {
    BUILTIN
        .iter()
        .map(|(file, text)| ReplProfile::parse(file, text).expect("built-in profile parses"))
        .collect()
}

/// The profile for the REPL a command line runs, if one claims it.
pub fn repl_for_command(command_line: &str) -> Option<ReplProfile> {
    let program = crate::program_of(command_line)?;
    builtin_repls().into_iter().find(|p| p.claims(&program))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_claim_their_commands() {
        assert_eq!(builtin_repls().len(), BUILTIN.len());
        assert_eq!(repl_for_command("python3.13 -q").unwrap().name, "python");
        assert_eq!(
            repl_for_command("env X=1 bash --norc").unwrap().name,
            "bash"
        );
        assert!(repl_for_command("vim").is_none());
    }

    #[test]
    fn unknown_fields_are_reported_with_the_file() {
        let err = ReplProfile::parse("x.toml", "schema = 1\nnmae = 'x'").unwrap_err();
        assert!(err.to_string().starts_with("x.toml: "), "{err}");
    }
}
