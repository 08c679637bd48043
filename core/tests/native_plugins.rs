//! Native plugins end to end: the example adapter through every hook, and
//! every way a load can be refused, each with its own error and none of
//! them taking the test process down.
//!
//! The plugins are dev-dependencies of this crate, so cargo builds their
//! shared libraries into `deps/` next to this test binary before it runs.

mod support;

use std::path::{Path, PathBuf};

use agent_comms_core::adapter::check::{run_plugin_samples, run_samples};
use agent_comms_core::adapter::{Activity, Profile};
use agent_comms_core::plugin::native::NativePlugin;
use agent_comms_core::plugin::{PluginError, PluginHooks};
use support::{argv, native_library, screen, view};

fn library(name: &str) -> PathBuf {
    native_library(name)
}

fn load(name: &str) -> NativePlugin {
    NativePlugin::load(&library(name)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_example_answers_every_hook() {
    let mut gemini = load("native-gemini");
    assert_eq!(gemini.info().name, "gemini-native");
    assert_eq!(gemini.info().version, "0.1.0");

    assert!(gemini.claims(&argv("gemini -m gemini-2.5-pro")).unwrap());
    assert!(gemini.claims(&argv("/usr/local/bin/gemini")).unwrap());
    assert!(!gemini.claims(&argv("claude --continue")).unwrap());

    let busy = screen("> fix it\n\n⠏ Thinking (esc to cancel, 2s)\n\n╭──╮\n│ >   Type your message or @path/to/file │\n╰──╯\n~/w  no sandbox");
    let idle =
        screen("✦ Done.\n╭──╮\n│ >   Type your message or @path/to/file │\n╰──╯\n~/w  no sandbox");
    assert_eq!(gemini.classify(&view(&busy)).unwrap(), Activity::Busy);
    assert_eq!(gemini.classify(&view(&idle)).unwrap(), Activity::Idle);
    assert_eq!(gemini.classify(&view(&[])).unwrap(), Activity::Unknown);

    assert_eq!(
        gemini
            .pin_resume(&argv("gemini --continue -m x"), "abc-123")
            .unwrap(),
        Some(argv("gemini --resume abc-123 -m x"))
    );
    assert_eq!(
        gemini.pin_resume(&argv("gemini -c"), "abc").unwrap(),
        Some(argv("gemini --resume abc"))
    );
    assert_eq!(
        gemini
            .pin_resume(&argv("gemini --resume 7"), "abc")
            .unwrap(),
        None
    );
    assert_eq!(
        gemini.discover_conversation(std::process::id()).unwrap(),
        None
    );
}

/// The example's profile says in rules what its plugin says in code; both
/// must pass the profile's samples with the same answers.
#[test]
fn the_example_profile_and_its_plugin_agree_on_the_samples() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/examples/native-gemini/gemini-native.toml");
    let profile = Profile::parse(
        "gemini-native.toml",
        &std::fs::read_to_string(file).unwrap(),
    )
    .unwrap();
    assert_eq!(
        profile.plugin.as_deref(),
        Some(library("native-gemini").file_name().unwrap().as_ref())
    );
    let by_rules = run_samples(&profile).unwrap();
    let by_plugin = run_plugin_samples(&profile, &mut load("native-gemini"));
    assert_eq!(by_rules.len(), 3);
    for (rules, plugin) in by_rules.iter().zip(&by_plugin) {
        assert!(rules.passed(), "{rules:?}");
        assert!(plugin.passed(), "{plugin:?}");
        assert_eq!(Ok(rules.got), plugin.got);
    }
}

#[test]
fn a_file_that_is_not_a_shared_object_is_not_a_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("libnotes.so");
    std::fs::write(&path, "schema = 1\n").unwrap();
    match NativePlugin::load(&path).unwrap_err() {
        PluginError::NotAPlugin { reason, .. } => {
            assert!(reason.starts_with("not a shared object"), "{reason}")
        }
        other => panic!("{other}"),
    }
    match NativePlugin::load(&dir.path().join("libmissing.so")).unwrap_err() {
        PluginError::NotAPlugin { reason, .. } => {
            assert!(reason.starts_with("no such file"), "{reason}")
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_shared_object_without_a_root_module_is_not_a_plugin() {
    // The C library this process already runs on: a shared object, and no
    // native adapter.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let libc = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            Path::new(p)
                .file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with("libc.so"))
        })
        .expect("libc is mapped");
    match NativePlugin::load(Path::new(libc)).unwrap_err() {
        PluginError::NotAPlugin { reason, .. } => {
            assert!(reason.contains("no abi_stable root module"), "{reason}")
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_plugin_built_for_another_interface_version_is_refused() {
    let e = NativePlugin::load(&library("native-mismatch")).unwrap_err();
    let PluginError::Version {
        found, expected, ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(
        (found.as_str(), expected.as_str()),
        ("2.0.0", agent_comms_plugin_api::INTERFACE_VERSION)
    );
    assert!(e.to_string().contains("rebuild the plugin"), "{e}");
}

#[test]
fn a_layout_mismatch_is_refused_in_one_line() {
    let e = NativePlugin::load(&library("native-layout")).unwrap_err();
    let PluginError::Layout { summary, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(
        summary,
        "NativeAdapter: mismatched package (expected agent-comms-plugin-api, found native-layout)"
    );
    assert!(!e.to_string().contains('\n'), "{e}");
}

#[test]
fn a_panic_in_a_plugin_comes_back_as_an_error_and_the_plugin_keeps_working() {
    let mut plugin = load("native-panic");
    let lines = screen("a\nb");
    for _ in 0..3 {
        match plugin.classify(&view(&lines)).unwrap_err() {
            PluginError::Panicked {
                name,
                hook,
                message,
            } => {
                assert_eq!((name.as_str(), hook.as_str()), ("panicky", "classify"));
                assert!(
                    message.starts_with("classify was given 2 rows and gave up (at "),
                    "{message}"
                );
                assert!(
                    message.contains("native-panic/src/lib.rs:"),
                    "the panic's location: {message}"
                );
            }
            other => panic!("{other}"),
        }
    }
    assert!(
        plugin.claims(&argv("panicky")).unwrap(),
        "other hooks still answer"
    );
    match plugin.discover_conversation(42).unwrap_err() {
        PluginError::Other { message, .. } => assert_eq!(
            message,
            "discover_session: cannot read the sessions of pid 42"
        ),
        other => panic!("{other}"),
    }
}
