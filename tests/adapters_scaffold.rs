//! `adapters new` end to end, per plugin form: the scaffold builds with
//! cargo as generated, and `adapters check` loads what it built and passes
//! the profile's samples through both the rules and the plugin.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_agent-comms");

fn run(what: &str, cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn the_native_scaffold_builds_and_passes_check_as_generated() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    run(
        "adapters new",
        Command::new(BIN)
            .args(["adapters", "new", "probe", "--form", "native", "--dir"])
            .arg(tmp.path()),
    );
    let root = tmp.path().join("probe");

    // The workspace's lock pins the same dependency versions, so the build
    // needs no registry; a target directory kept under the workspace's
    // target/ keeps compiled dependencies from one run to the next.
    std::fs::copy(workspace.join("Cargo.lock"), root.join("Cargo.lock")).unwrap();
    let target = workspace.join("target").join("scaffold-native");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    run(
        "cargo build of the scaffold",
        Command::new(cargo)
            .args(["build", "--offline"])
            .current_dir(&root)
            .env("CARGO_TARGET_DIR", &target),
    );

    let out = run(
        "adapters check",
        Command::new(BIN)
            .args(["adapters", "check", "--json"])
            .arg(root.join("probe.toml"))
            .env("CARGO_TARGET_DIR", &target),
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let plugin = &report["plugin"];
    assert_eq!(plugin["form"], "native", "{report}");
    assert_eq!(plugin["loaded"], true, "{report}");
    assert_eq!(plugin["info"]["name"], "probe", "{report}");
    assert!(
        plugin["path"]
            .as_str()
            .unwrap()
            .starts_with(target.to_str().unwrap()),
        "{report}"
    );
    for samples in [&report["samples"], &plugin["samples"]] {
        let samples = samples.as_array().unwrap();
        assert_eq!(samples.len(), 2, "{report}");
        assert!(samples.iter().all(|s| s["passed"] == true), "{report}");
    }
}

#[test]
fn the_wasm_scaffold_builds_and_passes_check_as_generated() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    run(
        "adapters new",
        Command::new(BIN)
            .args(["adapters", "new", "probe", "--form", "wasm", "--dir"])
            .arg(tmp.path()),
    );
    let root = tmp.path().join("probe");

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
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    run(
        "cargo build of the scaffold",
        Command::new(cargo)
            .args([
                "build",
                "--offline",
                "--release",
                "--target",
                "wasm32-wasip2",
            ])
            .current_dir(&root)
            .env("CARGO_TARGET_DIR", &target),
    );
    // Where a plain `cargo build` in the crate would have left it.
    let built = root.join("target/wasm32-wasip2/release");
    std::fs::create_dir_all(&built).unwrap();
    std::fs::copy(
        target.join("wasm32-wasip2/release/probe.wasm"),
        built.join("probe.wasm"),
    )
    .unwrap();

    let out = run(
        "adapters check",
        Command::new(BIN)
            .args(["adapters", "check", "--json"])
            .arg(root.join("probe.toml"))
            .env("AGENT_COMMS_HOME", tmp.path().join("home")),
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let plugin = &report["plugin"];
    assert_eq!(plugin["form"], "wasm", "{report}");
    assert_eq!(plugin["loaded"], true, "{report}");
    assert_eq!(plugin["info"]["name"], "probe", "{report}");
    for samples in [&report["samples"], &plugin["samples"]] {
        let samples = samples.as_array().unwrap();
        assert_eq!(samples.len(), 2, "{report}");
        assert!(samples.iter().all(|s| s["passed"] == true), "{report}");
    }
}
