//! The two rules of core's layout that the compiler cannot keep:
//!
//! - core names no provider: everything provider-specific is an adapter's
//!   (a profile, a plugin, or the built-ins in `adapters/`), so a new
//!   provider never needs a change here;
//! - core's top-level modules depend one way: the graph of `crate::X`
//!   references between them has no cycle (docs/architecture.md draws it).
//!
//! Both read core's sources as text. Comments and test modules are left
//! out: a comment may say which provider motivated a rule, and a test may
//! use a real program.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn core_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file's code lines with their numbers: `//` comments removed, and
/// nothing from the first test-only item on (test modules end our files).
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    let text = fs::read_to_string(path).unwrap();
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(") && trimmed.contains("test") {
            break;
        }
        let code = match line.find("//") {
            // A `//` inside a string literal (a URL) is not a comment:
            // count the quotes before it.
            Some(at) if line[..at].matches('"').count() % 2 == 0 => &line[..at],
            _ => line,
        };
        lines.push((n + 1, code.to_owned()));
    }
    lines
}

/// The built-in profiles' names and the commands they claim.
fn builtin_names() -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/providers");
    let mut names = BTreeSet::new();
    for entry in fs::read_dir(dir).unwrap() {
        let text = fs::read_to_string(entry.unwrap().path()).unwrap();
        let profile: toml::Value = toml::from_str(&text).unwrap();
        names.insert(profile["name"].as_str().unwrap().to_owned());
        for command in profile["commands"].as_array().unwrap() {
            names.insert(command.as_str().unwrap().to_owned());
        }
    }
    names
}

/// Quoted names core may hold, and why: they name no adapter.
const ALLOWED: &[(&str, &str)] = &[
    // Interpreters whose first script argument is the real program (how
    // takeover recognises a CLI written in JavaScript or Python).
    ("takeover/process.rs", "\"node\""),
    ("takeover/process.rs", "\"nodejs\""),
    ("takeover/process.rs", "\"python\""),
    // Windows' own shell, as /bin/sh is Unix's: what a cell's command line
    // with shell syntax runs under.
    ("supervisor/cell_session.rs", "\"cmd.exe\""),
];

#[test]
fn core_code_names_no_provider() {
    let mut files = Vec::new();
    rust_files(&core_src(), &mut files);
    let quoted: Vec<String> = builtin_names().iter().map(|n| format!("\"{n}\"")).collect();
    let mut hits = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(core_src()).unwrap().display().to_string();
        for (n, line) in code_lines(file) {
            let lower = line.to_lowercase();
            let agents = ["claude", "codex", "opencode"];
            let mut named: Vec<&str> = agents
                .iter()
                .copied()
                .filter(|a| lower.contains(a))
                .collect();
            named.extend(
                quoted
                    .iter()
                    .map(String::as_str)
                    .filter(|q| line.contains(*q) && !ALLOWED.contains(&(rel.as_str(), *q))),
            );
            if !named.is_empty() {
                hits.push(format!(
                    "{rel}:{n}: {} in `{}`",
                    named.join(", "),
                    line.trim()
                ));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "core names providers (move this to the adapter's profile or plugin):\n{}",
        hits.join("\n")
    );
}

/// Each top-level module of core and the modules it refers to.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = Vec::new();
    rust_files(&core_src(), &mut files);
    let reference = regex::Regex::new(r"crate::([a-z_]+)").unwrap();
    for file in &files {
        let rel = file.strip_prefix(core_src()).unwrap();
        let first = rel.components().next().unwrap().as_os_str();
        let module = first.to_string_lossy().trim_end_matches(".rs").to_owned();
        if module == "lib" {
            continue;
        }
        let deps = graph.entry(module.clone()).or_default();
        for (_, line) in code_lines(file) {
            for dep in reference.captures_iter(&line) {
                if dep[1] != module {
                    deps.insert(dep[1].to_owned());
                }
            }
        }
    }
    graph
}

/// A cycle through `start`, if there is one (depth-first).
fn cycle_from(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    fn walk(
        graph: &BTreeMap<String, BTreeSet<String>>,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        let here = path.last().unwrap().clone();
        for next in graph.get(&here).into_iter().flatten() {
            if next == start {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_owned()];
    walk(graph, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn core_modules_depend_one_way() {
    let graph = module_graph();
    assert!(graph.contains_key("delivery") && graph.contains_key("os"));
    let cycles: Vec<String> = graph
        .keys()
        .filter_map(|m| cycle_from(&graph, m))
        .map(|c| c.join(" -> "))
        .collect();
    assert!(
        cycles.is_empty(),
        "import cycles between core's modules:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let mut graph = BTreeMap::new();
    graph.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
    graph.insert("b".to_owned(), BTreeSet::from(["a".to_owned()]));
    graph.insert("c".to_owned(), BTreeSet::from(["a".to_owned()]));
    assert_eq!(cycle_from(&graph, "a").unwrap(), ["a", "b", "a"]);
    assert_eq!(cycle_from(&graph, "c"), None);
}

/// Longest function body, in lines, before it needs a reason: a comment
/// line starting `// Long:` just above the function says why.
const MAX_FUNCTION_LINES: usize = 80;

/// Functions of `path` longer than [`MAX_FUNCTION_LINES`] with no reason
/// given: (first line, length, signature). Braces are counted outside
/// string and character literals, which is enough for rustfmt'd code.
fn long_functions(path: &Path) -> Vec<(usize, usize, String)> {
    let text = fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let signature =
        regex::Regex::new(r"^\s*(pub(\([a-z]+\))? )?(async )?(unsafe )?fn \w+").unwrap();
    let literals = regex::Regex::new(r#""(\\.|[^"\\])*"|'(\\.|[^'\\])'"#).unwrap();
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        if !signature.is_match(line) {
            continue;
        }
        let (mut depth, mut opened, mut end) = (0i32, false, start);
        for (n, line) in lines.iter().enumerate().skip(start) {
            let code = literals.replace_all(line, "\"\"");
            let code = code.split("//").next().unwrap_or_default();
            for c in code.chars() {
                match c {
                    '{' => (depth, opened) = (depth + 1, true),
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            end = n;
            if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
                break;
            }
        }
        let length = end - start + 1;
        let reasoned = lines[..start]
            .iter()
            .rev()
            .take_while(|l| {
                let l = l.trim_start();
                l.starts_with("//") || l.starts_with("#[")
            })
            .any(|l| l.trim_start().starts_with("// Long:"));
        if length > MAX_FUNCTION_LINES && !reasoned {
            found.push((start + 1, length, line.trim().to_owned()));
        }
    }
    found
}

#[test]
fn functions_in_core_and_the_cli_are_short_or_say_why() {
    let mut files = Vec::new();
    rust_files(&core_src(), &mut files);
    rust_files(&core_src().join("../../src"), &mut files);
    let mut long = Vec::new();
    for file in &files {
        for (line, length, signature) in long_functions(file) {
            long.push(format!(
                "{}:{line}: {length} lines: {signature}",
                file.display()
            ));
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split them, or say why in a `// Long:` comment above):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_length_check_measures_a_function() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.rs");
    let body = "    let x = \"}\";\n".repeat(MAX_FUNCTION_LINES);
    fs::write(
        &file,
        format!("fn long() {{\n{body}}}\n\n// Long: a table.\nfn reasoned() {{\n{body}}}\n"),
    )
    .unwrap();
    let found = long_functions(&file);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, 1);
    assert_eq!(found[0].1, MAX_FUNCTION_LINES + 2);
}
