//! Built-in adapters of agent-comms.
//!
//! An adapter answers every provider-specific question for one program so
//! that the host layers never name a provider. The built-ins are TOML
//! profiles in `config/providers/`, embedded here at build time; the
//! interface, the schema and the loading rules are in
//! `agent_comms_core::adapter`. What a profile cannot say — tying a live
//! provider process to its conversation — is code, in [`conversations`].
//!
//! Names that read alike: this crate (`adapters/`) holds the *built-in
//! adapters*; `core/src/adapter/` is the *interface* they answer;
//! `core/src/plugin/` is the *host* for adapters written as plugins, and
//! `plugins/` holds the *SDKs* to write one (docs/architecture.md#the-workspace).

pub mod conversations;
pub mod scaffold;

use agent_comms_core::adapter::{AdapterRegistry, ProjectProfiles};
use agent_comms_core::paths::{project_root, user_home};
use agent_comms_core::trust::{self, TrustList};

/// Profiles shipped with agent-comms: (file name, text).
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "claude-code.toml",
        include_str!("../../config/providers/claude-code.toml"),
    ),
    (
        "codex.toml",
        include_str!("../../config/providers/codex.toml"),
    ),
    (
        "opencode.toml",
        include_str!("../../config/providers/opencode.toml"),
    ),
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
    ("cmd.toml", include_str!("../../config/providers/cmd.toml")),
];

/// Every adapter in effect here: the project's (those the user trusts),
/// the user's and the built-ins, in that precedence. A trust list that
/// cannot be used trusts nothing, and says why once.
pub fn registry() -> AdapterRegistry {
    let user = user_home().join("providers");
    let trust = TrustList::load().unwrap_or_else(|e| {
        trust::say_list_unusable(&e);
        TrustList::default()
    });
    let project = project_profiles_dir();
    AdapterRegistry::load(
        BUILTIN,
        Some(&user),
        Some(ProjectProfiles {
            dir: &project,
            trust: &trust,
        }),
    )
}

/// The project's profile directory, as an absolute path: trust is
/// recorded by where a file is, whichever way the project was named.
pub fn project_profiles_dir() -> std::path::PathBuf {
    let root = project_root();
    std::fs::canonicalize(&root)
        .unwrap_or(root)
        .join(".agent-comms")
        .join("providers")
}

/// For each project profile `registry` left out as untrusted, one line on
/// standard error (once a process): for commands that pick an adapter by
/// the program they run, so that a person knows a project profile was
/// passed over. (A command given `--provider NAME` refuses an untrusted
/// NAME instead, in its error.)
pub fn say_untrusted(registry: &AdapterRegistry) {
    for untrusted in registry.untrusted() {
        for file in untrusted.files() {
            trust::say_untrusted(
                &file.path,
                &format!("the project's adapter {:?}", untrusted.profile.name),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use agent_comms_core::adapter::Profile;

    #[test]
    fn builtins_parse_and_claim_their_commands() {
        for (file, text) in super::BUILTIN {
            Profile::parse(file, text).unwrap_or_else(|e| panic!("{e}"));
        }
        let r = agent_comms_core::adapter::AdapterRegistry::load(super::BUILTIN, None, None);
        assert!(r.diagnostics().is_empty());
        assert_eq!(
            r.for_command("python3.13 -q").unwrap().profile.name,
            "python"
        );
        assert_eq!(
            r.for_command("env X=1 bash --norc").unwrap().profile.name,
            "bash"
        );
        assert!(r.for_command("vim").is_none());
        assert!(r.conflicts().is_empty(), "{:?}", r.conflicts());
    }

    /// Codex draws the composer's `›` and its dim placeholder in separate
    /// writes (the 0.171.0 recordings: `›`, a cursor move past the space,
    /// the placeholder). Without the placeholder the rendered row is `›`
    /// alone, its trailing space trimmed by the screen model, and that
    /// empty composer must still read idle (issue 11).
    #[test]
    fn an_empty_codex_composer_without_placeholder_reads_idle() {
        use agent_comms_core::adapter::{Activity, Rules, ScreenView};
        use agent_comms_core::screen::ScreenModel;

        let (_, text) = super::BUILTIN
            .iter()
            .find(|(file, _)| *file == "codex.toml")
            .unwrap();
        let profile = Profile::parse("codex.toml", text).unwrap();
        let rules = Rules::new(profile.detect.as_ref().unwrap()).unwrap();
        let mut model = ScreenModel::new(12, 80);
        model.feed(
            "\x1b[2;3H>_ OpenAI Codex (v0.171.0)\x1b[9;1H\x1b[1m›\x1b[22m \x1b[11;3Hmock-1 default · /tmp/w"
                .as_bytes(),
        );
        let lines = model.lines();
        assert_eq!(lines[8], "›", "the composer row as the screen model has it");
        let view = ScreenView {
            lines: &lines,
            title: model.title(),
            osc: &[],
            cursor_row: 8,
            foreground: "",
        };
        assert_eq!(rules.classify(&view), Activity::Idle);
    }

    /// Every built-in classifies its recorded sample screens as labelled.
    #[test]
    fn builtin_samples_classify_as_recorded() {
        for (file, text) in super::BUILTIN {
            let profile = Profile::parse(file, text).unwrap();
            for result in agent_comms_core::adapter::check::run_samples(&profile).unwrap() {
                assert!(
                    result.passed(),
                    "{file}: sample '{}' expected {:?}, got {:?}",
                    result.name,
                    result.expected,
                    result.got
                );
            }
        }
    }
}
