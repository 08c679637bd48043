//! Shell completions and manual pages through the binaries: the script
//! `completions bash` prints is loaded into a real bash, whose completion
//! function is called as bash calls it on Tab, and must offer the names
//! that exist in this test's world (a live session, a runtime and agent in
//! the store, a k cell session); the roff pages must format without a
//! warning; the install script must put both in place.

mod support;

use std::path::Path;
use std::process::Command;

use support::env::TestEnv;
use support::run::run_bounded;
use support::BIN;

/// What bash offers for `LINE<Tab>` (the last word of LINE is the one being
/// completed; a trailing space starts an empty one), with the script of
/// `agent-comms completions bash` loaded and `func` the completion function
/// bash would call.
/// What was offered, without the flags.
fn names_only(offered: &[String]) -> Vec<&str> {
    offered
        .iter()
        .map(String::as_str)
        .filter(|o| !o.starts_with('-'))
        .collect()
}

fn complete(env: &TestEnv, func: &str, line: &str) -> Vec<String> {
    let mut words: Vec<&str> = line.split(' ').collect();
    let current = words.last().copied().unwrap_or("");
    let previous = words.len().checked_sub(2).map_or("", |i| words[i]);
    let quoted: Vec<String> = words.drain(..).map(|w| format!("'{w}'")).collect();
    let script = format!(
        "source <('{BIN}' completions bash) || exit 9\n\
         COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_TYPE=9; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}\n\
         {func} '{cmd}' '{current}' '{previous}'\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        words = quoted.join(" "),
        cword = quoted.len() - 1,
        cmd = line.split(' ').next().unwrap(),
    );
    let run = run_bounded(
        env.command_of("bash", &["--norc", "--noprofile", "-c", &script]),
        &format!("bash completing {line:?}"),
    )
    .ok();
    run.stdout
        .lines()
        .map(|l| l.trim_end().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn bash_completes_live_session_names() {
    let env = TestEnv::new();
    env.start_bash("work-1");
    let offered = complete(
        &env,
        "_clap_complete_agent_comms",
        "agent-comms session attach wo",
    );
    assert_eq!(offered, ["work-1"], "completing a session name");
    // A name before other positionals (`session send NAME TEXT…`).
    let offered = complete(
        &env,
        "_clap_complete_agent_comms",
        "agent-comms session send w",
    );
    assert_eq!(
        offered,
        ["work-1"],
        "completing the first of two positionals"
    );
    // Commands complete too: the script carries the whole command line.
    let offered = complete(&env, "_clap_complete_agent_comms", "agent-comms sess");
    assert_eq!(offered, ["session"]);
}

#[test]
fn bash_completes_runtime_and_agent_names_from_the_store() {
    let env = TestEnv::new();
    env.run_ok(&["--actor", "bob", "runtime", "configure", "bob-rt"]);
    let offered = complete(
        &env,
        "_clap_complete_agent_comms",
        "agent-comms runtime show ",
    );
    // The id is positional: the flags are offered beside the names.
    assert_eq!(names_only(&offered), ["bob-rt"]);
    let offered = complete(
        &env,
        "_clap_complete_agent_comms",
        "agent-comms send --to b",
    );
    assert_eq!(offered, ["bob"]);
}

#[test]
fn with_no_store_nothing_is_offered_and_none_is_created() {
    let env = TestEnv::new();
    let offered = complete(
        &env,
        "_clap_complete_agent_comms",
        "agent-comms runtime show ",
    );
    assert!(names_only(&offered).is_empty(), "{offered:?}");
    assert!(
        !env.project.join(".agent-comms").exists(),
        "a Tab press created the store"
    );
}

#[test]
fn k_completes_cell_sessions_only() {
    let env = TestEnv::new();
    env.start_bash("plain");
    let k = Path::new(BIN).with_file_name("k");
    let run = run_bounded(
        env.command_of(&k, &["new", "cells", "bash"]),
        "k new cells bash",
    )
    .ok();
    assert!(run.stdout.contains("cells"), "{run:#?}");
    let offered = complete(&env, "_clap_complete_k", "k attach ");
    let _ = run_bounded(env.command_of(&k, &["kill", "cells"]), "k kill cells");
    let names: Vec<&String> = offered.iter().filter(|w| !w.starts_with('-')).collect();
    assert_eq!(names, ["cells"], "k offers its cell sessions, not others");
}

/// `groff -ww -z` reports every formatting problem on stderr (`-k` reads
/// UTF-8 as `man` does).
fn groff_warnings(page: &[u8]) -> String {
    use std::io::Write;
    let mut groff = Command::new("groff")
        .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("groff is installed (apt-get install groff-base)");
    groff.stdin.take().unwrap().write_all(page).unwrap();
    let out = groff.wait_with_output().unwrap();
    assert!(out.status.success(), "groff failed: {out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn man_pages_format_without_warnings() {
    let env = TestEnv::new();
    for (page, title, names) in [
        ("agent-comms", "agent-comms", ["session", "completions"]),
        ("k", "k", ["fire", "attach"]),
        ("km", "km", ["SESSION", "CELL_ID"]),
    ] {
        let run = env.run_ok(&["man", page]);
        assert!(
            run.stdout.contains(&format!(".TH {title} 1")),
            "{page}: no title line"
        );
        for name in names {
            assert!(run.stdout.contains(name), "{page} does not mention {name}");
        }
        assert_eq!(groff_warnings(run.stdout.as_bytes()), "", "{page}");
    }
}

#[test]
fn install_script_installs_completions_and_every_page() {
    let env = TestEnv::new();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install-shell-extras");
    let home = env.user_home();
    let mut cmd = env.command_of(&script, &[]);
    cmd.env("AGENT_COMMS", BIN)
        .env_remove("ZDOTDIR")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CONFIG_HOME");
    let first = run_bounded(cmd, "install-shell-extras").ok();
    let bashrc = std::fs::read_to_string(home.join(".bashrc")).unwrap();
    assert_eq!(bashrc, format!("source <({BIN} completions bash)\n"));
    let man = home.join(".local/share/man/man1");
    for page in [
        "agent-comms.1",
        "agent-comms-session-attach.1",
        "k.1",
        "k-fire.1",
        "km.1",
    ] {
        let text =
            std::fs::read(man.join(page)).unwrap_or_else(|e| panic!("{page}: {e}: {first:#?}"));
        assert_eq!(groff_warnings(&text), "", "{page}");
    }
    // Again: nothing added twice.
    let mut cmd = env.command_of(&script, &[]);
    cmd.env("AGENT_COMMS", BIN);
    run_bounded(cmd, "install-shell-extras again").ok();
    assert_eq!(
        std::fs::read_to_string(home.join(".bashrc")).unwrap(),
        bashrc
    );
}

/// The line registering a binary (its name, and that name as an
/// identifier) in one shell's script.
type Registration = fn(&str, &str) -> String;

#[test]
fn every_shell_gets_a_registration_for_all_three_binaries() {
    let env = TestEnv::new();
    let dir = Path::new(BIN).parent().unwrap().display().to_string();
    let registrations: [(&str, Registration); 4] = [
        ("bash", |bin, f| format!("-F _clap_complete_{f} {bin}\n")),
        ("zsh", |bin, f| {
            format!("compdef _clap_dynamic_completer_{f} {bin}\n")
        }),
        ("fish", |bin, _| {
            format!("complete --keep-order --exclusive --command {bin} ")
        }),
        ("powershell", |bin, _| {
            format!("Register-ArgumentCompleter -Native -CommandName {bin} ")
        }),
    ];
    for (shell, registration) in registrations {
        let script = env.run_ok(&["completions", shell]).stdout;
        for bin in ["agent-comms", "k", "km"] {
            let line = registration(bin, &bin.replace('-', "_"));
            assert!(script.contains(&line), "{shell}: no {line:?} in:\n{script}");
            // It calls back the binary beside the one that printed it.
            let callback = format!("{dir}/{bin}");
            assert!(
                script.contains(&callback),
                "{shell}: {bin} is not called back as {callback}"
            );
        }
    }
}
