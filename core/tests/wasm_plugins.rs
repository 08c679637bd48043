//! The Wasm plugin host against real components: the aider example and a
//! guest that misbehaves on request (plugins/examples/wasm-faults).
//!
//! The components are built by `scripts/build-plugins`; a missing one fails
//! the test with that advice rather than skipping it.
#![cfg(feature = "wasm")]

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_comms_core::adapter::check::run_plugin_samples;
use agent_comms_core::adapter::{Activity, Profile, ScreenView};
use agent_comms_core::plugin::wasm::{CacheOutcome, Limits, WasmPlugin};
use agent_comms_core::plugin::{PluginError, PluginHooks};
use support::{repo, wasm_cache, wasm_component, PATIENT};

/// Limits for tests that are not about the deadline.
fn patient() -> Limits {
    Limits {
        deadline: PATIENT,
        ..Limits::default()
    }
}

/// Loads `crate_name`'s component, compiled once and kept in target/.
fn load(crate_name: &str, reads: Vec<PathBuf>, limits: Limits) -> WasmPlugin {
    WasmPlugin::load_with(
        &wasm_component(crate_name),
        reads,
        Some(&wasm_cache()),
        limits,
    )
    .unwrap()
}

fn faults(reads: Vec<PathBuf>) -> WasmPlugin {
    load("wasm_faults", reads, patient())
}

/// Classifies an otherwise empty screen whose title tells the fault guest
/// what to do.
fn classify_titled(plugin: &mut WasmPlugin, title: &str) -> Result<Activity, PluginError> {
    let lines = vec!["> ".to_owned()];
    plugin.classify(&ScreenView {
        lines: &lines,
        title,
        osc: &[],
        cursor_row: 0,
        foreground: "",
    })
}

#[test]
fn the_aider_example_classifies_its_samples() {
    let profile_path = repo().join("plugins/examples/wasm-aider/aider.toml");
    let profile = Profile::parse(
        "aider.toml",
        &std::fs::read_to_string(&profile_path).unwrap(),
    )
    .unwrap();
    let mut plugin = load("wasm_aider", Vec::new(), patient());
    assert_eq!(plugin.info().name, "aider");
    let results = run_plugin_samples(&profile, &mut plugin);
    assert_eq!(results.len(), profile.samples.len());
    for r in results {
        assert!(
            r.passed(),
            "sample '{}': expected {:?}, got {:?}",
            r.name,
            r.expected,
            r.got
        );
    }
    let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
    assert!(plugin
        .claims(&argv("/usr/local/bin/aider --model x"))
        .unwrap());
    assert!(!plugin.claims(&argv("claude")).unwrap());
    assert_eq!(plugin.pin_resume(&argv("aider"), "id").unwrap(), None);
    assert_eq!(plugin.discover_conversation(1).unwrap(), None);
}

#[test]
fn a_looping_plugin_is_stopped_at_its_deadline_and_works_again_after() {
    let deadline = Duration::from_millis(200);
    let limits = Limits {
        deadline,
        ..Limits::default()
    };
    let mut plugin = load("wasm_faults", Vec::new(), limits);
    let started = Instant::now();
    let err = classify_titled(&mut plugin, "loop").unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(err, PluginError::Deadline { limit_ms: 200, .. }),
        "{err}"
    );
    assert!(took >= deadline, "stopped early, after {took:?}");
    assert!(took < Duration::from_secs(2), "stopped only after {took:?}");
    assert_eq!(
        classify_titled(&mut plugin, "").unwrap(),
        Activity::Idle,
        "a fresh instance answers"
    );
}

#[test]
fn a_plugin_growing_past_its_memory_cap_is_stopped() {
    let mut plugin = faults(Vec::new());
    let err = classify_titled(&mut plugin, "grow").unwrap_err();
    assert!(
        matches!(err, PluginError::Memory { cap_mb: 32, .. }),
        "{err}"
    );
    assert_eq!(classify_titled(&mut plugin, "").unwrap(), Activity::Idle);
}

#[test]
fn a_trapping_plugin_is_reported_with_its_panic_message() {
    let mut plugin = faults(Vec::new());
    let err = classify_titled(&mut plugin, "panic").unwrap_err();
    match &err {
        PluginError::Trapped {
            name,
            hook,
            message,
        } => {
            assert_eq!((name.as_str(), hook.as_str()), ("faults", "classify"));
            assert!(message.contains("asked to panic"), "{message}");
        }
        other => panic!("expected a trap, got {other}"),
    }
    assert_eq!(classify_titled(&mut plugin, "").unwrap(), Activity::Idle);
    let err = classify_titled(&mut plugin, "unreachable").unwrap_err();
    assert!(matches!(err, PluginError::Trapped { .. }), "{err}");
    assert_eq!(classify_titled(&mut plugin, "").unwrap(), Activity::Idle);
}

#[test]
fn a_second_load_maps_the_cached_compilation() {
    let cache = tempfile::tempdir().unwrap();
    let path = wasm_component("wasm_aider");

    let started = Instant::now();
    let first = WasmPlugin::load_with(&path, Vec::new(), Some(cache.path()), patient()).unwrap();
    let cold = started.elapsed();
    assert_eq!(first.cache_outcome(), CacheOutcome::Stored);
    let file = first.cache_file().unwrap().to_path_buf();
    assert!(
        file.is_file() && file.starts_with(cache.path()),
        "{}",
        file.display()
    );

    let started = Instant::now();
    let second = WasmPlugin::load_with(&path, Vec::new(), Some(cache.path()), patient()).unwrap();
    let cached = started.elapsed();
    assert_eq!(second.cache_outcome(), CacheOutcome::Hit);
    assert_eq!(second.cache_file(), Some(file.as_path()));
    assert!(
        cached < cold,
        "cached load {cached:?} is not faster than compiling {cold:?}"
    );
}

#[test]
fn read_file_reaches_only_the_declared_files() {
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().join("session.json");
    let secret = dir.path().join("secret");
    std::fs::write(&allowed, "{\"id\":\"abc\"}").unwrap();
    std::fs::write(&secret, "no").unwrap();
    let mut plugin = faults(vec![allowed.clone()]);
    let read = |plugin: &mut WasmPlugin, path: &Path| {
        plugin
            .pin_resume(&["read".to_owned()], path.to_str().unwrap())
            .unwrap()
            .unwrap()
    };
    assert_eq!(read(&mut plugin, &allowed), ["ok", "{\"id\":\"abc\"}"]);
    let refused = read(&mut plugin, &secret);
    assert_eq!(refused[0], "refused");
    assert!(refused[1].contains("plugin_reads"), "{refused:?}");
    assert_eq!(read(&mut plugin, Path::new("/etc/passwd"))[0], "refused");
}

#[test]
fn files_that_are_not_plugins_are_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let core_module = dir.path().join("module.wasm");
    std::fs::write(&core_module, b"\0asm\x01\0\0\0").unwrap();
    let err = WasmPlugin::load(&core_module, Vec::new(), None)
        .err()
        .unwrap();
    assert!(err.to_string().contains("not a component"), "{err}");
    let err = WasmPlugin::load(&dir.path().join("missing.wasm"), Vec::new(), None)
        .err()
        .unwrap();
    assert!(matches!(err, PluginError::NotAPlugin { .. }), "{err}");
}

#[test]
fn a_plugin_for_another_interface_version_is_refused_with_both_versions() {
    // The fault guest as if built against agent-comms:adapter@9.0.0: the
    // version is spelled out in its import and export names.
    let bytes = std::fs::read(wasm_component("wasm_faults")).unwrap();
    let (from, to) = (b"agent-comms:adapter/", b"@1.0.0");
    let mut patched = bytes.clone();
    for at in 0..bytes.len() {
        let rest = &bytes[at..];
        if rest.starts_with(from) {
            let name_end = rest.iter().position(|b| *b == b'@').unwrap();
            if rest[name_end..].starts_with(to) {
                patched[at + name_end + 1] = b'9';
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v9.wasm");
    std::fs::write(&path, patched).unwrap();
    match WasmPlugin::load(&path, Vec::new(), None).err().unwrap() {
        PluginError::Version {
            found, expected, ..
        } => assert_eq!((found.as_str(), expected.as_str()), ("9.0.0", "1.0.0")),
        other => panic!("expected a version error, got {other}"),
    }
}

/// Costs for docs/benchmarks.md, printed rather than asserted. Run with
/// `cargo test -p agent-comms-core --release --test wasm_plugins -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a test"]
fn measure_costs() {
    let path = wasm_component("wasm_aider");
    let median = |mut samples: Vec<Duration>| {
        samples.sort();
        samples[samples.len() / 2]
    };
    let time = |f: &mut dyn FnMut()| {
        let started = Instant::now();
        f();
        started.elapsed()
    };

    let cold = median(
        (0..5)
            .map(|_| time(&mut || drop(WasmPlugin::load(&path, Vec::new(), None).unwrap())))
            .collect(),
    );
    let cache = tempfile::tempdir().unwrap();
    WasmPlugin::load(&path, Vec::new(), Some(cache.path())).unwrap();
    let cached = median(
        (0..50)
            .map(|_| {
                time(&mut || drop(WasmPlugin::load(&path, Vec::new(), Some(cache.path())).unwrap()))
            })
            .collect(),
    );

    let mut plugin = WasmPlugin::load(&path, Vec::new(), Some(cache.path())).unwrap();
    let mut lines: Vec<String> = (0..23)
        .map(|i| format!("{i:>3} {}", "x".repeat(116)))
        .collect();
    lines.push("> ".to_owned());
    let view = ScreenView {
        lines: &lines,
        title: "aider",
        osc: &[],
        cursor_row: 23,
        foreground: "",
    };
    let classify = median(
        (0..10_000)
            .map(|_| time(&mut || assert_eq!(plugin.classify(&view).unwrap(), Activity::Idle)))
            .collect(),
    );
    println!("wasm load, compiling (median of 5): {cold:?}");
    println!("wasm load, from the compile cache (median of 50): {cached:?}");
    println!("wasm classify, 24x120 screen (median of 10000): {classify:?}");
}
