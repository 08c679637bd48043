//! `adapters new --form native`: a `cdylib` crate on the native plugin SDK
//! (`plugins/native-api` of this checkout), and a profile that names the
//! library it builds.

use std::path::{Path, PathBuf};

use super::{in_checkout, write_crate, ScaffoldError};

const CARGO_TOML: &str = include_str!("native/Cargo.toml.tmpl");
const LIB_RS: &str = include_str!("native/lib.rs.tmpl");
const PROFILE: &str = include_str!("native/profile.toml.tmpl");

/// Writes the crate `<dir>/<name>/` (Cargo.toml, src/lib.rs and the
/// profile `<name>.toml`) and returns the crate's directory.
pub fn native_crate(name: &str, dir: &Path) -> Result<PathBuf, ScaffoldError> {
    let files = [
        ("Cargo.toml", CARGO_TOML),
        ("src/lib.rs", LIB_RS),
        ("{name}.toml", PROFILE),
        (".gitignore", "/target\n"),
    ];
    write_crate(name, dir, &in_checkout("plugins/native-api"), &files)
}

#[cfg(test)]
mod tests {
    use agent_comms_core::adapter::{check::run_samples, Profile};

    /// Building it and running its samples through the built plugin is the
    /// CLI's test (tests/adapters_scaffold.rs).
    #[test]
    fn the_native_scaffold_names_its_library_and_its_samples_pass_the_rules() {
        let dir = tempfile::tempdir().unwrap();
        let root = super::native_crate("my-agent", dir.path()).unwrap();
        let text = std::fs::read_to_string(root.join("my-agent.toml")).unwrap();
        let profile = Profile::parse("my-agent.toml", &text).unwrap();
        let library = format!(
            "{}my_agent{}",
            std::env::consts::DLL_PREFIX,
            std::env::consts::DLL_SUFFIX
        );
        assert_eq!(
            profile.plugin.as_deref(),
            Some(std::path::Path::new(&library))
        );
        assert!(run_samples(&profile).unwrap().iter().all(|r| r.passed()));
        let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
        assert!(lib.contains("export_native_adapter!(MyAgent);"), "{lib}");
        let cargo = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
        assert!(cargo.contains("plugins/native-api'"), "{cargo}");
        assert!(
            super::native_crate("my-agent", dir.path()).is_err(),
            "never overwrites"
        );
    }
}
