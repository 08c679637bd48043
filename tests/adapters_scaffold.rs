//! `adapters new` end to end, per plugin form: the scaffold builds with
//! cargo as generated, and `adapters check` loads what it built and passes
//! the profile's samples through both the rules and the plugin.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::env::TestEnv;
use support::run::{run_within, Run};

/// Bound for one step: a cold cargo build of a scaffold takes minutes.
const STEP: Duration = Duration::from_secs(600);

/// Runs one step to completion, asserting that it succeeds.
fn run(what: &str, cmd: Command) -> Run {
    run_within(cmd, what, STEP).ok()
}

/// `adapters new probe --form FORM` into the test's directory; the
/// scaffold's crate root.
fn scaffold(env: &TestEnv, form: &str) -> PathBuf {
    let mut cmd = env.command(&["adapters", "new", "probe", "--form", form, "--dir"]);
    cmd.arg(env.base());
    run("adapters new", cmd);
    env.base().join("probe")
}

/// `cargo ARGS…` in the scaffold's crate, into `target`.
fn cargo_build(root: &Path, target: &Path, args: &[&str]) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(args)
        .current_dir(root)
        .env("CARGO_TARGET_DIR", target);
    run("cargo build of the scaffold", cmd);
}

/// `adapters check --json PROFILE`, parsed.
fn check(env: &TestEnv, profile: &Path, vars: &[(&str, &Path)]) -> serde_json::Value {
    let mut cmd = env.command(&["adapters", "check", "--json"]);
    cmd.arg(profile);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = run("adapters check", cmd);
    serde_json::from_str(&out.stdout).unwrap()
}

/// Asserts that `report` loaded the scaffold's plugin of `form` and that
/// both of its samples pass, through the rules and through the plugin.
fn assert_loaded(report: &serde_json::Value, form: &str) {
    let plugin = &report["plugin"];
    assert_eq!(plugin["form"], form, "{report}");
    assert_eq!(plugin["loaded"], true, "{report}");
    assert_eq!(plugin["info"]["name"], "probe", "{report}");
    for samples in [&report["samples"], &plugin["samples"]] {
        let samples = samples.as_array().unwrap();
        assert_eq!(samples.len(), 2, "{report}");
        assert!(samples.iter().all(|s| s["passed"] == true), "{report}");
    }
}

#[test]
fn the_native_scaffold_builds_and_passes_check_as_generated() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let env = TestEnv::new();
    let root = scaffold(&env, "native");

    // The workspace's lock pins the same dependency versions, so the build
    // needs no registry; a target directory kept under the workspace's
    // target/ keeps compiled dependencies from one run to the next.
    std::fs::copy(workspace.join("Cargo.lock"), root.join("Cargo.lock")).unwrap();
    let target = workspace.join("target").join("scaffold-native");
    cargo_build(&root, &target, &["build", "--offline"]);

    let report = check(
        &env,
        &root.join("probe.toml"),
        &[("CARGO_TARGET_DIR", &target)],
    );
    assert_loaded(&report, "native");
    assert!(
        report["plugin"]["path"]
            .as_str()
            .unwrap()
            .starts_with(target.to_str().unwrap()),
        "{report}"
    );
}

#[test]
fn the_wasm_scaffold_builds_and_passes_check_as_generated() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let env = TestEnv::new();
    let root = scaffold(&env, "wasm");

    // The example guests pin the same dependencies, so the build needs no
    // registry; building into scripts/build-plugins' target directory
    // reuses the SDK it compiled.
    let lock = workspace.join("plugins/examples/wasm-aider/Cargo.lock");
    std::fs::copy(lock, root.join("Cargo.lock")).unwrap();
    let target = workspace.join("target").join("wasm");
    assert!(
        target
            .join("wasm32-wasip2/release/wasm_aider.wasm")
            .is_file(),
        "the Wasm guests are not built: run scripts/build-plugins"
    );
    let release = [
        "build",
        "--offline",
        "--release",
        "--target",
        "wasm32-wasip2",
    ];
    cargo_build(&root, &target, &release);
    // Where a plain `cargo build` in the crate would have left it.
    let built = root.join("target/wasm32-wasip2/release");
    std::fs::create_dir_all(&built).unwrap();
    std::fs::copy(
        target.join("wasm32-wasip2/release/probe.wasm"),
        built.join("probe.wasm"),
    )
    .unwrap();

    assert_loaded(&check(&env, &root.join("probe.toml"), &[]), "wasm");
}
