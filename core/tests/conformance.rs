//! One provider, three forms, one set of answers.
//!
//! Gemini CLI is described three ways: the rules of
//! `plugins/examples/native-gemini/gemini-native.toml`, the native plugin
//! built from that crate, and the Wasm component `plugins/examples/wasm-gemini`.
//! The same screens and argument vectors go through each, and every answer
//! — claims, classification, resume pinning — must be the same. A third
//! party can therefore pick whichever form suits them and get the behaviour
//! of the others.
#![cfg(feature = "wasm")]

mod support;

use agent_comms_core::adapter::{command::program_of, Activity, Profile, Rules};
use agent_comms_core::plugin::native::NativePlugin;
use agent_comms_core::plugin::wasm::{Limits, WasmPlugin};
use agent_comms_core::plugin::PluginHooks;
use support::{argv, native_library, repo, screen, view, wasm_cache, wasm_component, PATIENT};

/// The declarative form, with the same questions as the plugins answer.
struct TomlForm {
    profile: Profile,
    rules: Rules,
}

impl TomlForm {
    fn load() -> Self {
        let path = repo().join("plugins/examples/native-gemini/gemini-native.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let profile = Profile::parse(&path.display().to_string(), &text).unwrap();
        let rules = Rules::new(profile.detect.as_ref().unwrap()).unwrap();
        Self { profile, rules }
    }
}

/// The plugin forms, by name.
type Plugins = Vec<(&'static str, Box<dyn PluginHooks>)>;

fn forms() -> (TomlForm, Plugins) {
    let native = NativePlugin::load(&native_library("native-gemini")).unwrap();
    let limits = Limits {
        deadline: PATIENT,
        ..Limits::default()
    };
    let wasm = WasmPlugin::load_with(
        &wasm_component("wasm_gemini"),
        Vec::new(),
        Some(&wasm_cache()),
        limits,
    )
    .unwrap();
    (
        TomlForm::load(),
        vec![("native", Box::new(native)), ("wasm", Box::new(wasm))],
    )
}

const SCREENS: &[(&str, &str)] = &[
    (
        "working",
        "> explain this repository\n\n⠏ Reading the source tree (esc to cancel, 4s)\n\n╭────╮\n│ >   Type your message or @path/to/file │\n╰────╯\n~/work  no sandbox  gemini-2.5-pro",
    ),
    (
        "done, box empty",
        "✦ Done.\n\n╭────╮\n│ >   Type your message or @path/to/file │\n╰────╯\n~/work  no sandbox",
    ),
    ("typing", "✦ Done.\n╭────╮\n│ > fix the tests                        │\n╰────╯\n~/work"),
    (
        "busy marker scrolled out of the footer rows",
        "⠏ (esc to cancel, 9s)\n1\n2\n3\n4\n5\n6\n│ >   Type your message │",
    ),
    ("blank lines under the footer", "⠏ thinking (esc to cancel, 1s)\n│ > x │\n\n\n\n"),
    ("placeholder without a space", "│ >Type your message │"),
    ("empty", ""),
];

const ARGVS: &[&str] = &[
    "gemini",
    "gemini -c",
    "gemini --continue -m pro",
    "/usr/local/bin/gemini -c --yolo",
    "gemini --resume 42 -c",
    "gemini -r 42",
    "geminix -c",
    "node gemini -c",
];

#[test]
fn every_form_classifies_every_screen_alike() {
    let (toml, mut plugins) = forms();
    for (name, text) in SCREENS {
        let lines = screen(text);
        let expected = toml.rules.classify(&view(&lines));
        for (form, plugin) in &mut plugins {
            assert_eq!(
                plugin.classify(&view(&lines)).unwrap(),
                expected,
                "{form} on screen '{name}'"
            );
        }
    }
    // The suite must tell the states apart, or agreeing proves nothing.
    let answers: Vec<Activity> = SCREENS
        .iter()
        .map(|(_, t)| toml.rules.classify(&view(&screen(t))))
        .collect();
    for state in [Activity::Busy, Activity::Idle, Activity::Unknown] {
        assert!(
            answers.contains(&state),
            "no screen classifies as {state:?}"
        );
    }
}

#[test]
fn every_form_claims_and_pins_alike() {
    let (toml, mut plugins) = forms();
    for line in ARGVS {
        let args = argv(line);
        let claims = program_of(line).is_some_and(|p| toml.profile.claims(&p));
        let pinned = toml.profile.pin_resume(&args, "ses-7");
        for (form, plugin) in &mut plugins {
            assert_eq!(
                plugin.claims(&args).unwrap(),
                claims,
                "{form} claims '{line}'"
            );
            assert_eq!(
                plugin.pin_resume(&args, "ses-7").unwrap(),
                pinned,
                "{form} pins '{line}'"
            );
        }
    }
    assert_eq!(
        toml.profile
            .pin_resume(&argv("gemini --continue -m pro"), "ses-7"),
        Some(argv("gemini --resume ses-7 -m pro"))
    );
}
