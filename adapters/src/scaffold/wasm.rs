//! `adapters new --form wasm`: a guest crate on the Wasm SDK, and a profile
//! that names what it builds.

use std::path::{Path, PathBuf};

use super::{in_checkout, write_crate, ScaffoldError};

const CARGO_TOML: &str = include_str!("wasm/Cargo.toml.tmpl");
const LIB_RS: &str = include_str!("wasm/lib.rs.tmpl");
const PROFILE: &str = include_str!("wasm/profile.toml.tmpl");

/// Writes the crate `<dir>/<name>/` (Cargo.toml, src/lib.rs and the
/// profile `<name>.toml`) and returns the crate's directory.
pub fn wasm_crate(name: &str, dir: &Path) -> Result<PathBuf, ScaffoldError> {
    let files = [
        ("Cargo.toml", CARGO_TOML),
        ("src/lib.rs", LIB_RS),
        ("{name}.toml", PROFILE),
        (".gitignore", "/target\n"),
    ];
    write_crate(name, dir, &in_checkout("plugins/wasm-sdk"), &files)
}

#[cfg(test)]
mod tests {
    use agent_comms_core::adapter::{check::run_samples, Profile};

    #[test]
    fn the_wasm_scaffold_names_its_component_and_its_samples_pass_the_rules() {
        let dir = tempfile::tempdir().unwrap();
        let root = super::wasm_crate("my-agent", dir.path()).unwrap();
        let text = std::fs::read_to_string(root.join("my-agent.toml")).unwrap();
        let profile = Profile::parse("my-agent.toml", &text).unwrap();
        assert_eq!(
            profile.plugin.as_deref(),
            Some(std::path::Path::new(
                "target/wasm32-wasip2/release/my_agent.wasm"
            ))
        );
        assert!(run_samples(&profile).unwrap().iter().all(|r| r.passed()));
        let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
        assert!(lib.contains("export_adapter!(MyAgent);"), "{lib}");
        let cargo = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
        assert!(cargo.contains("plugins/wasm-sdk'"), "{cargo}");
        assert!(
            super::wasm_crate("my-agent", dir.path()).is_err(),
            "never overwrites"
        );
        let digit = super::wasm_crate("7z", dir.path()).unwrap();
        let lib = std::fs::read_to_string(digit.join("src/lib.rs")).unwrap();
        assert!(lib.contains("export_adapter!(Adapter7z);"), "{lib}");
    }
}
