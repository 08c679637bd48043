//! The docs stand on their own: every relative link in the repository's
//! markdown leads to a file inside it (and an `#anchor` to a heading of that
//! file), and nothing cites the design notes that were kept outside the
//! repository, which a user of it does not have.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .canonicalize()
        .expect("the repository")
}

/// Every file of the repository, less build output and git's own.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("readable directory").flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && name != ".git" {
                files(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

/// The text outside fenced code blocks and inline code spans, where a `](`
/// or a `#` is code, not markdown.
fn prose(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            let outside_code: String = line.split('`').step_by(2).collect::<Vec<_>>().join("");
            lines.push(outside_code);
        }
    }
    lines
}

/// The anchors GitHub gives a file's headings: lower case, punctuation
/// dropped, spaces as hyphens, `-1`, `-2` … after a repeated one.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut seen = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let Some(title) = line.strip_prefix('#') else {
            continue;
        };
        if fenced || !(title.starts_with(' ') || title.starts_with('#')) {
            continue;
        }
        let slug: String = title
            .trim_start_matches('#')
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut unique = slug.clone();
        let mut n = 0;
        while seen.contains(&unique) {
            n += 1;
            unique = format!("{slug}-{n}");
        }
        seen.insert(unique);
    }
    seen
}

/// The targets of `[text](target)` links in a markdown text.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            out.push(target.to_owned());
            rest = &rest[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_in_the_docs_resolves_inside_the_repository() {
    let root = repo();
    let mut all = Vec::new();
    files(&root, &mut all);
    let docs: Vec<_> = all
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    assert!(
        docs.iter().any(|p| p.ends_with("docs/architecture.md")),
        "docs/architecture.md is missing"
    );
    let mut broken = Vec::new();
    for doc in docs {
        let text = fs::read_to_string(doc).expect("markdown is UTF-8");
        let shown = doc.strip_prefix(&root).unwrap().display().to_string();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") || link.is_empty() {
                continue;
            }
            let (path, anchor) = match link.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() {
                doc.to_path_buf()
            } else {
                doc.parent().unwrap().join(path)
            };
            let Ok(target) = target.canonicalize() else {
                broken.push(format!("{shown}: {link}: no such file"));
                continue;
            };
            if !target.starts_with(&root) {
                broken.push(format!("{shown}: {link}: outside the repository"));
                continue;
            }
            if let Some(anchor) = anchor {
                let headings = if target.extension().is_some_and(|e| e == "md") {
                    anchors(&fs::read_to_string(&target).unwrap_or_default())
                } else {
                    BTreeSet::new()
                };
                if !headings.contains(anchor) {
                    broken.push(format!("{shown}: {link}: no heading makes #{anchor}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn nothing_cites_the_design_notes_kept_outside_the_repository() {
    // Built from pieces, so that this file does not cite them itself.
    let outside = [
        concat!("..", "/shared/"),
        concat!("/work", "/shared"),
        concat!("shared", "/recordings"),
        concat!("DESIGN", ".md"),
        concat!("CELLS-", "CONTRACT", ".md"),
    ];
    let root = repo();
    let mut all = Vec::new();
    files(&root, &mut all);
    let mut hits = Vec::new();
    for file in &all {
        let Ok(text) = fs::read_to_string(file) else {
            continue; // not text
        };
        for (n, line) in text.lines().enumerate() {
            if let Some(cited) = outside.iter().find(|o| line.contains(*o)) {
                let shown = file.strip_prefix(&root).unwrap().display();
                hits.push(format!("{shown}:{}: cites {cited}", n + 1));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "cite docs/architecture.md or docs/cells-contract.md instead:\n{}",
        hits.join("\n")
    );
}

#[test]
fn anchors_follow_github() {
    let a = anchors("# Title\n## Paths, identities, environment\n### `k` / `km`\n## Title\n");
    let want = ["title", "paths-identities-environment", "k--km", "title-1"];
    assert_eq!(a, want.iter().map(|s| s.to_string()).collect());
}
