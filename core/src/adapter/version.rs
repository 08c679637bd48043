//! Provider versions: what an installed CLI says it is, and whether that is
//! within what its adapter was checked against.
//!
//! Detection rules read screens, and screens change between releases; an
//! adapter records the versions it was checked against (`checked` in its
//! profile: one version, or constraints such as `">=2.1.190, <2.2"`), and
//! `doctor` warns when the installed CLI is outside them.

use std::cmp::Ordering;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A dotted version, compared numerically (`2.1.197`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version(Vec<u64>);

impl Version {
    /// The first dotted number in `text` (`claude 2.1.197 (Claude Code)`).
    pub fn find(text: &str) -> Option<Self> {
        text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|w| w.contains('.'))
            .find_map(|w| Self::parse(w.trim_matches('.')))
    }

    pub fn parse(text: &str) -> Option<Self> {
        let parts: Option<Vec<u64>> = text.split('.').map(|p| p.parse().ok()).collect();
        parts.filter(|p| !p.is_empty()).map(Self)
    }

    fn cmp_padded(&self, other: &Self) -> Ordering {
        let n = self.0.len().max(other.0.len());
        let at = |v: &Self, i: usize| v.0.get(i).copied().unwrap_or(0);
        (0..n)
            .map(|i| at(self, i).cmp(&at(other, i)))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u64::to_string).collect();
        f.write_str(&parts.join("."))
    }
}

/// Whether `version` satisfies `checked`: comma-separated constraints, each
/// `>=V`, `<=V`, `>V`, `<V`, `=V` or a bare `V` (exactly V). `None` when
/// `checked` cannot be read.
pub fn within(version: &Version, checked: &str) -> Option<bool> {
    let mut all = true;
    for constraint in checked.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        let (op, v) = ["<=", ">=", "<", ">", "="]
            .iter()
            .find_map(|op| constraint.strip_prefix(op).map(|rest| (*op, rest)))
            .unwrap_or(("=", constraint));
        let bound = Version::parse(v.trim())?;
        let o = version.cmp_padded(&bound);
        all &= match op {
            "<=" => o.is_le(),
            ">=" => o.is_ge(),
            "<" => o.is_lt(),
            ">" => o.is_gt(),
            _ => o.is_eq(),
        };
    }
    Some(all)
}

/// How long `<program> --version` may take (Node CLIs start slowly).
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// What `program --version` prints, as a version; `None` when it is not
/// installed, fails, or says nothing like one.
pub fn installed(program: &Path) -> Option<Version> {
    reported(program, &["--version".to_owned()])
}

/// What `program ARGS…` prints within [`VERSION_TIMEOUT`], as a version;
/// `None` when it cannot run, takes longer, or says nothing like one.
pub fn reported(program: &Path, args: &[String]) -> Option<Version> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let stdout = child.stdout.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::BufReader::new(stdout), &mut text);
        let _ = tx.send(text);
    });
    let text = rx.recv_timeout(VERSION_TIMEOUT).ok();
    let _ = child.kill();
    let _ = child.wait();
    Version::find(&text?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_compares_versions() {
        let v = Version::find("2.1.197 (Claude Code)").unwrap();
        assert_eq!(v.to_string(), "2.1.197");
        assert_eq!(
            Version::find("codex-cli 0.171.0").unwrap().to_string(),
            "0.171.0"
        );
        assert_eq!(within(&v, "2.1.197"), Some(true));
        assert_eq!(within(&v, "2.1.196"), Some(false));
        assert_eq!(within(&v, ">=2.1.190, <2.2"), Some(true));
        assert_eq!(
            within(&Version::parse("2.2").unwrap(), ">=2.1.190, <2.2"),
            Some(false)
        );
        assert_eq!(within(&v, "latest"), None);
    }
}
