//! Finding the library a profile's `plugin = "…"` names.
//!
//! A native adapter's profile sits in the crate that builds it, but cargo
//! puts the library in a target directory: the crate's own, a workspace's
//! further up, or wherever `CARGO_TARGET_DIR` says; and which of `release`
//! and `debug` is current depends on the last build. So a profile names the
//! library's file (`plugin = "libmy_agent.so"`, relative to the profile)
//! and, when there is no such file, the host looks for that file name in
//! `$CARGO_TARGET_DIR` if it is set, then in `target/` of the named file's
//! directory and of each directory above it — in `release/` and `debug/`,
//! where the one built last wins. The first target directory that has the
//! file decides, so a workspace's build is not shadowed by a stale one
//! further up.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::plugin::PluginError;

/// The library a profile's `plugin` names; `named` is that path resolved
/// against the profile's directory.
pub fn locate(named: &Path) -> Result<PathBuf, PluginError> {
    if named.is_file() {
        return Ok(named.to_owned());
    }
    let not_found = || {
        PluginError::NotAPlugin {
        path: named.display().to_string(),
        reason: "no such file, nor in target/release or target/debug of its directory or above (build it first?)".into(),
    }
    };
    let file = named.file_name().ok_or_else(not_found)?;
    let dir = match named.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let cargo_target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from);
    cargo_target
        .into_iter()
        .chain(dir.ancestors().map(|a| a.join("target")))
        .find_map(|target| newest_build(&target, file.as_ref()))
        .ok_or_else(not_found)
}

/// `target/{release,debug}/file`, whichever exists and was built last.
fn newest_build(target: &Path, file: &Path) -> Option<PathBuf> {
    ["release", "debug"]
        .iter()
        .map(|profile| target.join(profile).join(file))
        .filter_map(|p| Some((modified(&p)?, p)))
        .max_by_key(|(time, _)| *time)
        .map(|(_, p)| p)
}

fn modified(path: &Path) -> Option<SystemTime> {
    path.metadata()
        .ok()
        .filter(|m| m.is_file())?
        .modified()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_found_in_the_nearest_target_dir_built_last() {
        let root = tempfile::tempdir().unwrap();
        let crate_dir = root.path().join("ws/plugins/mine");
        std::fs::create_dir_all(&crate_dir).unwrap();
        let named = crate_dir.join("libmine.so");
        let build = |dir: &str| {
            let p = root.path().join(dir).join("libmine.so");
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"").unwrap();
            p.canonicalize().unwrap()
        };
        let outer = build("target/debug");
        assert_eq!(locate(&named).unwrap(), outer);
        let debug = build("ws/target/debug");
        assert_eq!(locate(&named).unwrap(), debug, "nearest first");
        let release = build("ws/target/release");
        // Make the debug build the older one, explicitly (no waiting for
        // the clock to tick between two writes).
        let earlier = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&debug)
            .and_then(|f| f.set_modified(earlier))
            .unwrap();
        assert_eq!(locate(&named).unwrap(), release, "built last");
        std::fs::write(&named, b"").unwrap();
        assert_eq!(
            locate(&named).unwrap(),
            named,
            "the named file itself first"
        );

        let e = locate(&crate_dir.join("libother.so")).unwrap_err();
        assert!(e.to_string().contains("build it first"), "{e}");
    }
}
