//! Where adapters come from, and which one wins.
//!
//! Profiles load from three places, in precedence order: the project
//! (`<project>/.agent-comms/providers/`), the user
//! (`$XDG_CONFIG_HOME/agent-comms/providers/`, or `$AGENT_COMMS_HOME/providers/`),
//! and the built-ins embedded in the binary. A profile overrides another of
//! the same name from a lower place. A profile that does not parse is
//! reported and skipped, so a broken user file never takes the built-ins
//! down with it.
//!
//! A project's profiles come with whatever the user cloned, so they take
//! part only once trusted ([`crate::trust`]): the profile as it is now and
//! the plugin it loads. An untrusted one is parsed, so that it can be shown
//! and its errors reported, and kept aside in [`AdapterRegistry::untrusted`];
//! it claims nothing and replaces nothing.

use std::path::{Path, PathBuf};

use super::profile::{Profile, ProfileError};
use super::Form;
use crate::regular_file::{self, MAX_PROFILE_BYTES};
use crate::trust::{self, ProjectFile, TrustList};

/// Where a profile was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Project(PathBuf),
    User(PathBuf),
    Builtin(&'static str),
}

impl Source {
    fn rank(&self) -> u8 {
        match self {
            Self::Project(_) => 0,
            Self::User(_) => 1,
            Self::Builtin(_) => 2,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Self::Project(_) => "project",
            Self::User(_) => "user",
            Self::Builtin(_) => "built-in",
        }
    }

    /// A path for people: the file, or `builtin:NAME` for embedded ones.
    pub fn display(&self) -> String {
        match self {
            Self::Project(p) | Self::User(p) => p.display().to_string(),
            Self::Builtin(f) => format!("builtin:{f}"),
        }
    }
}

/// One loaded adapter.
#[derive(Debug, Clone)]
pub struct Entry {
    pub profile: Profile,
    /// The profile's text, as read.
    pub text: String,
    pub source: Source,
    /// Lower-precedence profiles of the same name it overrides.
    pub overrides: Vec<Source>,
}

impl Entry {
    pub fn form(&self) -> Form {
        match self
            .profile
            .plugin
            .as_ref()
            .and_then(|p| p.extension())
            .and_then(|e| e.to_str())
        {
            Some("wasm") => Form::Wasm,
            Some(_) => Form::Native,
            None => Form::Toml,
        }
    }

    /// What a supervisor needs to monitor a session with this adapter.
    pub fn spec(&self) -> super::monitor::AdapterSpec {
        super::monitor::AdapterSpec {
            name: self.profile.name.clone(),
            source: self.source.display(),
            text: self.text.clone(),
            plugin: self.plugin_path(),
        }
    }

    /// The plugin's path, resolved against the profile's directory.
    pub fn plugin_path(&self) -> Option<PathBuf> {
        plugin_path(&self.profile, &self.source)
    }
}

fn plugin_path(profile: &Profile, source: &Source) -> Option<PathBuf> {
    let plugin = profile.plugin.as_ref()?;
    Some(match source {
        Source::Project(p) | Source::User(p) if plugin.is_relative() => {
            p.parent().unwrap_or(Path::new(".")).join(plugin)
        }
        _ => plugin.clone(),
    })
}

/// A project profile left out until the user trusts it.
#[derive(Debug, Clone)]
pub struct Untrusted {
    pub profile: Profile,
    pub file: ProjectFile,
    /// The plugin it would load.
    pub plugin: Option<ProjectFile>,
}

impl Untrusted {
    /// The files of it the user has yet to trust: the profile, its plugin
    /// or both.
    pub fn files(&self) -> impl Iterator<Item = &ProjectFile> {
        std::iter::once(&self.file)
            .chain(&self.plugin)
            .filter(|f| !f.trusted)
    }

    /// What it would do once trusted, one line each: the programs it
    /// claims, the code it loads, the arguments and commands it runs, the
    /// environment it changes.
    pub fn effects(&self) -> Vec<String> {
        let p = &self.profile;
        let words = |v: &[String]| v.join(" ");
        let mut effects = vec![format!(
            "adapter {:?} ({}) for the programs: {}",
            p.name,
            match p.kind {
                super::profile::Kind::Agent => "an agent",
                super::profile::Kind::Repl => "a REPL",
            },
            p.commands.join(", ")
        )];
        if let Some(plugin) = &self.plugin {
            effects.push(format!(
                "loads {} into every session it supervises: {}",
                match plugin.path.extension().and_then(|e| e.to_str()) {
                    Some("wasm") => "the Wasm plugin",
                    _ => "the native library (code run as you)",
                },
                plugin.path.display()
            ));
        }
        if let Some(permissions) = &p.permissions {
            effects.push(format!(
                "--allow-agent-comms appends: {}",
                words(&permissions.args)
            ));
        }
        if let Some(acp) = &p.acp {
            effects.push(format!("runtime acp-serve runs: {}", words(&acp.command)));
        }
        if let Some(resume) = &p.resume {
            for (what, args) in [
                ("resuming", &resume.continue_args),
                ("resuming a pinned conversation", &resume.pinned),
                ("starting a conversation", &resume.start),
            ] {
                if !args.is_empty() {
                    effects.push(format!("{what} adds: {}", words(args)));
                }
            }
        }
        for (key, value) in &p.env.set {
            effects.push(format!("sets {key}={value}"));
        }
        if !p.env.remove.is_empty() {
            effects.push(format!("removes {}", p.env.remove.join(", ")));
        }
        effects
    }
}

/// Why [`AdapterRegistry::named`] found no adapter to use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotUsable {
    #[error("no adapter named '{0}'; see them with: agent-comms adapters list")]
    Unknown(String),
    #[error("the adapter '{name}' is the project's {}, which is not trusted yet; review it and trust it with: agent-comms trust", path.display())]
    Untrusted { name: String, path: PathBuf },
}

/// A project's profile directory and the user's trust list.
#[derive(Debug, Clone, Copy)]
pub struct ProjectProfiles<'a> {
    pub dir: &'a Path,
    pub trust: &'a TrustList,
}

/// Two or more adapters claim one program; `winner` is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub program: String,
    pub winner: String,
    pub others: Vec<String>,
}

#[derive(Debug, Default)]
pub struct AdapterRegistry {
    entries: Vec<Entry>,
    untrusted: Vec<Untrusted>,
    diagnostics: Vec<ProfileError>,
}

impl AdapterRegistry {
    /// Loads `builtin` profiles (file name, text) and the `*.toml` files of
    /// the user and project directories that exist; the project's only as
    /// far as `project.trust` trusts them.
    pub fn load(
        builtin: &[(&'static str, &'static str)],
        user: Option<&Path>,
        project: Option<ProjectProfiles<'_>>,
    ) -> Self {
        let mut registry = Self::default();
        for (file, text) in builtin {
            registry.add(Source::Builtin(file), file, text);
        }
        for (dir, make) in [
            (user, Source::User as fn(PathBuf) -> Source),
            (project.map(|p| p.dir), Source::Project),
        ] {
            for path in dir.map(toml_files).unwrap_or_default() {
                let shown = path.display().to_string();
                match regular_file::read_text(&path, MAX_PROFILE_BYTES, "a profile") {
                    Ok(text) => match (make(path), project) {
                        (Source::Project(path), Some(project)) => {
                            registry.add_project(path, &shown, &text, project.trust)
                        }
                        (source, _) => registry.add(source, &shown, &text),
                    },
                    Err(e) => registry.diagnostics.push(ProfileError {
                        file: shown,
                        line: 1,
                        column: 1,
                        message: e.to_string(),
                    }),
                }
            }
        }
        registry
            .entries
            .sort_by(|a, b| a.profile.name.cmp(&b.profile.name));
        registry
    }

    /// A project profile: in effect once it and its plugin are trusted as
    /// they are now, else kept aside.
    fn add_project(&mut self, path: PathBuf, file: &str, text: &str, trust: &TrustList) {
        let profile = match Profile::parse(file, text) {
            Ok(p) => p,
            Err(e) => return self.diagnostics.push(e),
        };
        let source = Source::Project(path.clone());
        let plugin = plugin_path(&profile, &source).map(|plugin| {
            let sha256 = trust::digest_file(&plugin).map_err(|e| e.to_string());
            ProjectFile::new(plugin, sha256, trust)
        });
        let file = ProjectFile::new(path, Ok(trust::digest(text.as_bytes())), trust);
        if file.trusted && plugin.as_ref().is_none_or(|p| p.trusted) {
            self.insert(source, profile, text);
        } else {
            self.untrusted.push(Untrusted {
                profile,
                file,
                plugin,
            });
        }
    }

    fn add(&mut self, source: Source, file: &str, text: &str) {
        match Profile::parse(file, text) {
            Ok(profile) => self.insert(source, profile, text),
            Err(e) => self.diagnostics.push(e),
        }
    }

    fn insert(&mut self, source: Source, profile: Profile, text: &str) {
        match self
            .entries
            .iter_mut()
            .find(|e| e.profile.name == profile.name)
        {
            Some(existing) if source.rank() < existing.source.rank() => {
                let old = std::mem::replace(&mut existing.source, source);
                existing.profile = profile;
                existing.text = text.to_owned();
                existing.overrides.push(old);
            }
            Some(existing) => existing.overrides.push(source),
            None => self.entries.push(Entry {
                profile,
                text: text.to_owned(),
                source,
                overrides: Vec::new(),
            }),
        }
    }

    /// Adapters by name.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Profiles that could not be loaded.
    pub fn diagnostics(&self) -> &[ProfileError] {
        &self.diagnostics
    }

    /// The project's profiles left out until the user trusts them.
    pub fn untrusted(&self) -> &[Untrusted] {
        &self.untrusted
    }

    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.profile.name == name)
    }

    /// The adapter a person named (`--provider NAME`). A name an untrusted
    /// project profile claims is refused even where a lower one exists:
    /// whoever named it meant the project's, and must not get another in
    /// its place unseen.
    pub fn named(&self, name: &str) -> Result<&Entry, NotUsable> {
        if let Some(u) = self.untrusted.iter().find(|u| u.profile.name == name) {
            return Err(NotUsable::Untrusted {
                name: name.to_owned(),
                path: u.file.path.clone(),
            });
        }
        self.get(name)
            .ok_or_else(|| NotUsable::Unknown(name.to_owned()))
    }

    /// The adapter for the program a command line runs: the claimant from
    /// the highest-precedence place, by name within one place.
    pub fn for_program(&self, program: &str) -> Option<&Entry> {
        self.claimants(program).into_iter().next()
    }

    pub fn for_command(&self, command_line: &str) -> Option<&Entry> {
        self.for_program(&super::command::program_of(command_line)?)
    }

    /// The adapter whose `[acp]` command `argv` runs (`runtime acp-serve --
    /// CMD…`): the same program by basename and the same leading arguments,
    /// from the highest-precedence place.
    pub fn for_acp_command(&self, argv: &[String]) -> Option<&Entry> {
        self.entries
            .iter()
            .filter(|e| e.profile.acp.as_ref().is_some_and(|acp| acp.runs(argv)))
            .min_by_key(|e| e.source.rank())
    }

    fn claimants(&self, program: &str) -> Vec<&Entry> {
        let mut found: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| e.profile.claims(program))
            .collect();
        found.sort_by_key(|e| e.source.rank());
        found
    }

    /// Programs claimed by more than one adapter, and who wins each.
    pub fn conflicts(&self) -> Vec<Conflict> {
        let mut programs: Vec<&str> = self
            .entries
            .iter()
            .flat_map(|e| e.profile.commands.iter().map(String::as_str))
            .filter(|c| !c.ends_with('*'))
            .collect();
        programs.sort_unstable();
        programs.dedup();
        programs
            .into_iter()
            .filter_map(|program| {
                let claimants = self.claimants(program);
                let (winner, others) = claimants.split_first()?;
                (!others.is_empty()).then(|| Conflict {
                    program: program.to_owned(),
                    winner: winner.profile.name.clone(),
                    others: others.iter().map(|e| e.profile.name.clone()).collect(),
                })
            })
            .collect()
    }
}

fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(name: &str, commands: &str) -> String {
        format!("schema = 1\nname = \"{name}\"\nversion = \"1\"\nkind = \"agent\"\ncommands = [{commands}]\n")
    }

    /// A trust list that trusts `files` as they are now.
    fn trusting(files: &[&Path]) -> TrustList {
        let mut trust = TrustList::default();
        for f in files {
            trust.trust(f, &trust::digest_file(f).unwrap());
        }
        trust
    }

    #[test]
    fn project_beats_user_beats_builtin_and_broken_files_are_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let user = tmp.path().join("user");
        let project = tmp.path().join("project");
        std::fs::create_dir_all(&user).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(user.join("a.toml"), profile("a", "\"a-user\"")).unwrap();
        std::fs::write(user.join("broken.toml"), "schema = 1\nname = ").unwrap();
        std::fs::write(project.join("a.toml"), profile("a", "\"a-project\"")).unwrap();
        let builtin_a: &'static str = Box::leak(profile("a", "\"a\"").into_boxed_str());
        let builtin_b: &'static str = Box::leak(profile("b", "\"a\", \"b\"").into_boxed_str());
        let trust = trusting(&[&project.join("a.toml")]);
        let r = AdapterRegistry::load(
            &[("a.toml", builtin_a), ("b.toml", builtin_b)],
            Some(&user),
            Some(ProjectProfiles {
                dir: &project,
                trust: &trust,
            }),
        );
        let a = r.get("a").unwrap();
        assert_eq!(a.source.kind(), "project");
        assert_eq!(a.overrides.len(), 2);
        assert!(a.profile.claims("a-project"));
        assert_eq!(r.get("b").unwrap().source, Source::Builtin("b.toml"));
        assert_eq!(r.diagnostics().len(), 1);
        assert!(r.diagnostics()[0].file.ends_with("broken.toml"));
        assert!(
            r.conflicts().is_empty(),
            "a's project profile no longer claims 'a'"
        );
        assert_eq!(r.for_program("a").unwrap().profile.name, "b");
    }

    #[test]
    fn an_untrusted_project_profile_claims_nothing_and_a_changed_plugin_untrusts_it() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("providers");
        std::fs::create_dir_all(&project).unwrap();
        let evil = format!(
            "{}plugin = \"libevil.so\"\n[permissions]\nargs = [\"--dangerously-skip-permissions\"]\n",
            profile("a", "\"a\"")
        );
        std::fs::write(project.join("a.toml"), &evil).unwrap();
        std::fs::write(project.join("libevil.so"), b"code").unwrap();
        let builtin: &'static str = Box::leak(profile("a", "\"a\"").into_boxed_str());
        let load = |trust: &TrustList| {
            AdapterRegistry::load(
                &[("a.toml", builtin)],
                None,
                Some(ProjectProfiles {
                    dir: &project,
                    trust,
                }),
            )
        };

        let r = load(&TrustList::default());
        assert_eq!(r.get("a").unwrap().source, Source::Builtin("a.toml"));
        assert!(r.get("a").unwrap().overrides.is_empty());
        assert_eq!(r.for_program("a").unwrap().source.kind(), "built-in");
        let untrusted = &r.untrusted()[0];
        assert_eq!(untrusted.files().count(), 2, "the profile and its plugin");
        let effects = untrusted.effects().join("\n");
        assert!(effects.contains("native library"), "{effects}");
        assert!(
            effects.contains("--dangerously-skip-permissions"),
            "{effects}"
        );
        assert!(matches!(r.named("a"), Err(NotUsable::Untrusted { .. })));

        let trust = trusting(&[&project.join("a.toml"), &project.join("libevil.so")]);
        assert_eq!(load(&trust).named("a").unwrap().source.kind(), "project");

        std::fs::write(project.join("libevil.so"), b"other code").unwrap();
        let r = load(&trust);
        assert_eq!(r.get("a").unwrap().source.kind(), "built-in");
        let left: Vec<_> = r.untrusted()[0].files().map(|f| f.path.clone()).collect();
        assert_eq!(
            left,
            [project.join("libevil.so")],
            "only the plugin changed"
        );
    }

    #[test]
    fn an_acp_command_line_finds_the_adapter_that_declares_it() {
        let with_acp = |name: &str, command: &str| -> &'static str {
            let text = format!("{}[acp]\ncommand = [{command}]\n", profile(name, "\"p\""));
            Box::leak(text.into_boxed_str())
        };
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("b.toml"), with_acp("b-user", "\"b-acp\"")).unwrap();
        let r = AdapterRegistry::load(
            &[
                ("a.toml", with_acp("a", "\"a\", \"acp\"")),
                ("b.toml", with_acp("b", "\"b-acp\"")),
                ("c.toml", Box::leak(profile("c", "\"c\"").into_boxed_str())),
            ],
            Some(tmp.path()),
            None,
        );
        let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        let found = |s: &str| r.for_acp_command(&argv(s)).map(|e| e.profile.name.as_str());
        assert_eq!(found("/usr/bin/a acp"), Some("a"));
        assert_eq!(found("a"), None, "a without `acp` is its interactive CLI");
        assert_eq!(
            found("b-acp --verbose"),
            Some("b-user"),
            "the user's profile wins"
        );
        assert_eq!(found("c"), None, "c has no [acp]");
    }

    #[test]
    fn two_claimants_of_one_program_are_reported_with_the_winner() {
        let a: &'static str = Box::leak(profile("a", "\"tool\"").into_boxed_str());
        let b: &'static str = Box::leak(profile("b", "\"tool\"").into_boxed_str());
        let r = AdapterRegistry::load(&[("a.toml", a), ("b.toml", b)], None, None);
        assert_eq!(
            r.conflicts(),
            vec![Conflict {
                program: "tool".into(),
                winner: "a".into(),
                others: vec!["b".into()]
            }]
        );
    }
}
