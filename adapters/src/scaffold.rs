//! `adapters new`: a starting point that builds and passes `adapters check`
//! as generated.

mod native;
mod wasm;

use std::path::{Path, PathBuf};

pub use native::native_crate;
pub use wasm::wasm_crate;

#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("adapter names are lowercase letters, digits and '-' (got '{0}')")]
    BadName(String),
    #[error("{0} already exists; pick another name or remove it")]
    Exists(PathBuf),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Writes `<dir>/<name>.toml`, a profile with one rule pair and a sample
/// for each, and returns its path.
pub fn toml_profile(name: &str, dir: &Path) -> Result<PathBuf, ScaffoldError> {
    check_name(name)?;
    let path = dir.join(format!("{name}.toml"));
    if path.exists() {
        return Err(ScaffoldError::Exists(path));
    }
    let text = TOML_TEMPLATE.replace("{name}", name);
    std::fs::write(&path, text).map_err(|source| ScaffoldError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

fn check_name(name: &str) -> Result<(), ScaffoldError> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-');
    ok.then_some(())
        .ok_or_else(|| ScaffoldError::BadName(name.to_owned()))
}

/// A directory of this checkout, which plugin scaffolds depend on by path.
fn in_checkout(relative: &str) -> PathBuf {
    let adapters = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = adapters.parent().unwrap_or(adapters).join(relative);
    dir.canonicalize().unwrap_or(dir)
}

/// Writes the plugin crate `<dir>/<name>/` from `files` (path in the crate,
/// template; both may hold the placeholders below) and returns its
/// directory. `sdk` is the crate it depends on.
fn write_crate(
    name: &str,
    dir: &Path,
    sdk: &Path,
    files: &[(&str, &str)],
) -> Result<PathBuf, ScaffoldError> {
    check_name(name)?;
    let root = dir.join(name);
    if root.exists() {
        return Err(ScaffoldError::Exists(root));
    }
    // Cargo refuses package names that start with a digit.
    let package = match name.starts_with(|c: char| c.is_ascii_digit()) {
        true => format!("adapter-{name}"),
        false => name.to_owned(),
    };
    let crate_file = package.replace('-', "_");
    let library = format!(
        "{}{crate_file}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let fill = |template: &str| {
        template
            .replace("{name}", name)
            .replace("{package}", &package)
            .replace("{type_name}", &type_name(&package))
            .replace("{crate_file}", &crate_file)
            .replace("{library}", &library)
            .replace("{sdk}", &sdk.display().to_string())
    };
    for (file, template) in files {
        let path = root.join(fill(file));
        let text = fill(template);
        let write = |path: &Path| {
            std::fs::create_dir_all(path.parent().unwrap_or(&root))?;
            std::fs::write(path, &text)
        };
        write(&path).map_err(|source| ScaffoldError::Write { path, source })?;
    }
    Ok(root)
}

/// `my-agent` → `MyAgent`.
fn type_name(package: &str) -> String {
    package
        .split('-')
        .flat_map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase())
                .into_iter()
                .chain(chars)
        })
        .collect()
}

const TOML_TEMPLATE: &str = r#"# Adapter profile for {name}. Reference: docs/adapters.md.
schema = 1
name = "{name}"
version = "0.1.0"
kind = "agent"
# The program basenames this adapter claims.
commands = ["{name}"]
# The versions of {name} you checked these rules against.
checked = "1.0.0"

[detect]
# Idle is reported only after this long without a busy signal.
debounce_ms = 300

# Busy while the last line with text says so (edit the pattern).
[[detect.rules]]
state = "busy"
screen = "esc to (interrupt|cancel)"
region = { from = "bottom", rows = 2 }

# Idle when the prompt is back, empty.
[[detect.rules]]
state = "idle"
screen = '^>\s*$'
region = { from = "cursor", rows = 1 }

[input]
style = "paste"
enter_delay_ms = 100

# Screens recorded from the real program, with the answer expected;
# `agent-comms adapters check` runs them.
[[samples]]
name = "working"
expect = "busy"
screen = '''
> explain this repository
  Thinking… (esc to interrupt)
'''

[[samples]]
name = "waiting for input"
expect = "idle"
screen = '''
The answer.
> 
'''
"#;

#[cfg(test)]
mod tests {
    #[test]
    fn the_toml_scaffold_parses_and_passes_its_samples() {
        let dir = tempfile::tempdir().unwrap();
        let path = super::toml_profile("my-agent", dir.path()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let profile = agent_comms_core::adapter::Profile::parse("my-agent.toml", &text).unwrap();
        let results = agent_comms_core::adapter::check::run_samples(&profile).unwrap();
        assert_eq!(results.len(), 2);
        assert!(results.iter().all(|r| r.passed()), "{results:?}");
        assert!(
            super::toml_profile("my-agent", dir.path()).is_err(),
            "never overwrites"
        );
        assert!(super::toml_profile("Bad Name", dir.path()).is_err());
    }
}
