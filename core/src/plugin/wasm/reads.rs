//! The files a Wasm plugin may read: those its profile lists in
//! `plugin_reads`, and nothing else.
//!
//! Conversation discovery needs a provider's own state files (Claude Code's
//! `~/.claude/sessions/<pid>.json`, say), so an entry's last path component
//! may hold `*` wildcards. A request is checked twice: as written (no `.`
//! or `..` components, parent and name must match an entry) and after
//! symlinks are resolved (the file it really is must match an entry too),
//! so neither `..` nor a symlink leads out of what the profile declared.

use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Larger files are refused: a plugin call has a deadline and a memory cap.
pub(super) const MAX_FILE_BYTES: u64 = 4 << 20;

#[derive(Debug, Default)]
pub(super) struct ReadAllowlist {
    entries: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    dir: PathBuf,
    /// The file name, `*` matching any run of characters.
    name: String,
}

impl ReadAllowlist {
    /// The allowlist for `declared` paths (`~` is the user's home).
    /// Entries that are not absolute file paths allow nothing.
    pub(super) fn new(declared: &[PathBuf]) -> Self {
        let entries = declared
            .iter()
            .filter_map(|p| {
                let path = expand_home(p)?;
                let name = path.file_name()?.to_str()?.to_owned();
                Some(Entry {
                    dir: path.parent()?.to_path_buf(),
                    name,
                })
            })
            .collect();
        Self { entries }
    }

    /// The text of `requested` if the profile allows it, else why not.
    pub(super) fn read(&self, requested: &str) -> Result<String, String> {
        let refused = || format!("{requested}: not listed in the adapter's plugin_reads");
        let path = expand_home(Path::new(requested)).ok_or_else(refused)?;
        let plain = path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        if !plain || !self.allows(&path) {
            return Err(refused());
        }
        let real = fs::canonicalize(&path).map_err(|e| format!("{requested}: {e}"))?;
        if !self.allows_resolved(&real) {
            return Err(format!(
                "{requested}: a link to a file outside the adapter's plugin_reads"
            ));
        }
        let file = fs::File::open(&real).map_err(|e| format!("{requested}: {e}"))?;
        let mut text = String::new();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| format!("{requested}: {e}"))?;
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(format!(
                "{requested}: larger than {} MiB",
                MAX_FILE_BYTES >> 20
            ));
        }
        Ok(text)
    }

    fn allows(&self, path: &Path) -> bool {
        self.entries.iter().any(|e| e.matches(path.parent(), path))
    }

    /// Like `allows`, with the entries' directories resolved as well.
    fn allows_resolved(&self, real: &Path) -> bool {
        self.entries.iter().any(|e| {
            let dir = fs::canonicalize(&e.dir).ok();
            dir.is_some_and(|dir| e.matches(Some(&dir), real))
        })
    }
}

impl Entry {
    fn matches(&self, dir: Option<&Path>, path: &Path) -> bool {
        let name = path.file_name().and_then(|n| n.to_str());
        dir == Some(self.dir.as_path()) && name.is_some_and(|n| wildcard_match(&self.name, n))
    }
}

/// `path` with a leading `~` replaced by `$HOME`; `None` unless absolute.
fn expand_home(path: &Path) -> Option<PathBuf> {
    let expanded = match path.strip_prefix("~") {
        Ok(rest) => PathBuf::from(std::env::var_os("HOME")?).join(rest),
        Err(_) => path.to_path_buf(),
    };
    expanded.is_absolute().then_some(expanded)
}

/// Does `name` match `pattern`, where `*` matches any run of characters?
fn wildcard_match(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let middle: Vec<&str> = parts.collect();
    let Some((last, middle)) = middle.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_within_the_file_name() {
        assert!(wildcard_match("*.json", "123.json"));
        assert!(wildcard_match(
            "rollout-*-*.jsonl",
            "rollout-2026-abc.jsonl"
        ));
        assert!(wildcard_match("exact", "exact"));
        assert!(!wildcard_match("exact", "exact2"));
        assert!(!wildcard_match("*.json", "123.jsonl"));
        assert!(!wildcard_match("a*a", "a"));
    }

    #[test]
    fn only_declared_files_are_read_and_links_do_not_lead_out() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("sessions");
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("42.json"), "{\"id\":\"x\"}").unwrap();
        fs::write(tmp.path().join("secret"), "no").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret"), dir.join("7.json")).unwrap();
        let reads = ReadAllowlist::new(&[dir.join("*.json")]);
        let at = |p: &Path| p.to_str().unwrap().to_owned();

        assert_eq!(
            reads.read(&at(&dir.join("42.json"))).unwrap(),
            "{\"id\":\"x\"}"
        );
        assert!(reads.read(&at(&tmp.path().join("secret"))).is_err());
        assert!(reads.read(&format!("{}/../secret", dir.display())).is_err());
        let link = reads.read(&at(&dir.join("7.json"))).unwrap_err();
        assert!(link.contains("outside"), "{link}");
        assert!(reads.read("relative/42.json").is_err());
        assert!(ReadAllowlist::default()
            .read(&at(&dir.join("42.json")))
            .is_err());
    }
}
