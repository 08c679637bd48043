//! The adapters' `[acp]` sections as a user meets them: `adapters show`
//! prints them, a broken one is reported with its file, line and column,
//! and `doctor` says when an ACP runtime's agent command is missing or
//! outside the versions its adapter was checked against.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::env::TestEnv;
use support::run::{run_bounded, Run};

/// A user profile `tool` whose `[acp]` command is `tool-acp`, checked
/// against 1.0.x; `version_args` as given (TOML array items).
fn install_tool_profile(env: &TestEnv, version_args: &str) -> PathBuf {
    let dir = env.home.join("providers");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tool.toml");
    let text = format!(
        "schema = 1\nname = \"tool\"\nversion = \"0.1.0\"\nkind = \"agent\"\ncommands = [\"tool\"]\n\
         [acp]\ncommand = [\"tool-acp\"]\nchecked = \">=1.0, <1.1\"\nversion_args = [{version_args}]\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Runtime `id` of agent bob registered as an ACP runtime of adapter
/// `tool`, as `runtime acp-serve` leaves it (the provider is recorded by
/// the supervisor, so it is written into the store here).
fn acp_runtime(env: &TestEnv, id: &str) {
    env.run_ok(&[
        "--actor",
        "bob",
        "runtime",
        "configure",
        "--id",
        id,
        "--kind",
        "ACP",
        "--connector",
        "ACP",
    ]);
    let db = env.project.join(".agent-comms/state.db");
    let conn = rusqlite::Connection::open(db).unwrap();
    let changed = conn
        .execute("UPDATE runtimes SET provider = 'tool' WHERE id = ?1", [id])
        .unwrap();
    assert_eq!(changed, 1);
}

/// `doctor --json` with `PATH` set to `path` (and the usual directories
/// after it, for the shell tools), its findings about adapter tool.
fn tool_findings(env: &TestEnv, path: &Path) -> Vec<Value> {
    let mut cmd = env.command(&["doctor", "--json"]);
    cmd.env("PATH", format!("{}:/usr/bin:/bin", path.display()));
    let run: Run = run_bounded(cmd, "agent-comms doctor --json");
    run.json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["subject"] == "adapter tool")
        .cloned()
        .collect()
}

/// A directory holding `tool-acp`, which is `echo`: it prints its
/// arguments, so the profile's version_args say which version it reports.
fn tool_acp_dir(env: &TestEnv) -> PathBuf {
    let dir = env.base().join("tool-bin");
    std::fs::create_dir_all(&dir).unwrap();
    let echo = ["/usr/bin/echo", "/bin/echo"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .expect("echo in /usr/bin or /bin");
    std::os::unix::fs::symlink(echo, dir.join("tool-acp")).unwrap();
    dir
}

#[test]
fn adapters_show_prints_each_providers_acp_section() {
    let env = TestEnv::new();
    let expected: [(&str, &[&str], &str, bool); 3] = [
        ("opencode", &["opencode", "acp"], "1.18.33", true),
        ("claude-code", &["claude-agent-acp"], "0.101.0", false),
        ("codex", &["codex-acp"], "2.6.0", false),
    ];
    for (name, command, checked, holds_back) in expected {
        let shown = env.run_ok(&["adapters", "show", name, "--json"]).json();
        let acp = &shown["profile"]["acp"];
        assert_eq!(acp["command"], serde_json::json!(command), "{name}: {acp}");
        assert_eq!(acp["checked"], checked, "{name}: {acp}");
        assert_eq!(
            acp["version_args"],
            serde_json::json!(["--version"]),
            "{name}"
        );
        assert_eq!(acp["quirks"]["load_replays"], true, "{name}: {acp}");
        assert_eq!(
            acp["quirks"]["holds_back_responses"], holds_back,
            "{name}: {acp}"
        );

        // The human form is the profile as TOML, after comment lines.
        let human = env.run_ok(&["adapters", "show", name]).stdout;
        let table: toml::Table = toml::from_str(&human).unwrap_or_else(|e| panic!("{e}: {human}"));
        let acp_table = serde_json::to_value(&table["acp"]).unwrap();
        assert_eq!(&acp_table, acp, "{name}: the human form says the same");
    }
}

#[test]
fn a_misspelt_acp_key_names_the_file_line_and_column() {
    let env = TestEnv::new();
    let path = install_tool_profile(&env, "");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("[acp.quirks]\nload_replay = true\n");
    std::fs::write(&path, text).unwrap();
    let shown = path.display().to_string();

    let check = env.run(&["adapters", "check", &shown]);
    assert_eq!(check.code(), 1, "{check:#?}");
    let reported = format!("{shown}:11:1: unknown field `load_replay`");
    assert!(check.stdout.contains(&reported), "{check:#?}");

    let doctor = env.run(&["doctor", "--json"]).json();
    let invalid = doctor
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "INVALID_PROFILE")
        .unwrap_or_else(|| panic!("{doctor}"));
    assert!(
        invalid["message"].as_str().unwrap().starts_with(&reported),
        "{invalid}"
    );
}

#[test]
fn doctor_reports_an_acp_runtimes_agent_command_missing_from_path() {
    let env = TestEnv::new();
    install_tool_profile(&env, "\"1.0.4\"");
    let empty = env.base().join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    assert_eq!(
        tool_findings(&env, &empty),
        Vec::<Value>::new(),
        "no ACP runtime uses the adapter yet"
    );

    acp_runtime(&env, "bob");
    let findings = tool_findings(&env, &empty);
    assert_eq!(findings.len(), 1, "{findings:?}");
    let f = &findings[0];
    assert_eq!(f["code"], "ACP_COMMAND_MISSING", "{f}");
    assert_eq!(f["severity"], "error", "{f}");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("`tool-acp` is not on PATH"),
        "{f}"
    );
    assert!(
        f["repair"]
            .as_str()
            .unwrap()
            .ends_with("agent-comms runtime acp-serve bob -- <ACP command>"),
        "{f}"
    );

    let with_tool = tool_acp_dir(&env);
    assert_eq!(
        tool_findings(&env, &with_tool),
        Vec::<Value>::new(),
        "tool-acp is on PATH and reports 1.0.4, a checked version"
    );
}

#[test]
fn doctor_reports_an_acp_agent_outside_its_checked_versions() {
    let env = TestEnv::new();
    install_tool_profile(&env, "\"tool-acp\", \"1.1.0\"");
    acp_runtime(&env, "bob");
    let findings = tool_findings(&env, &tool_acp_dir(&env));
    assert_eq!(findings.len(), 1, "{findings:?}");
    let f = &findings[0];
    assert_eq!(f["code"], "ACP_VERSION_UNCHECKED", "{f}");
    assert_eq!(f["severity"], "warning", "{f}");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("is 1.1.0; the adapter's [acp] was checked against >=1.0, <1.1"),
        "{f}"
    );
    assert!(
        f["repair"].as_str().unwrap().contains("adapters show tool"),
        "{f}"
    );
}
