//! A plugin that misbehaves on request, for the host's fault tests.
//!
//! `classify` does what the screen's title asks: `loop` runs forever,
//! `grow` allocates without end, `panic` panics, `unreachable` executes
//! the `unreachable` instruction; any other title gets `idle`. Probing the
//! host's file access goes through `pin-resume`: argv `["read"]` reads the
//! file named by `id` and answers `["ok", text]` or `["refused", reason]`.

use agent_comms_wasm_sdk::{
    export_adapter, log, program, read_file, Activity, Adapter, Level, PluginInfo, Screen,
};

#[derive(Default)]
struct Faults;

impl Adapter for Faults {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            name: "faults".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            checked: "-".into(),
        }
    }

    fn claims(&self, argv: &[String]) -> bool {
        program(argv) == Some("faults")
    }

    fn classify(&self, screen: &Screen) -> Activity {
        match screen.title.as_str() {
            "loop" => {
                let mut n = 0u64;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "grow" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(std::hint::black_box(vec![1; 1 << 20]));
                }
            }
            "panic" => panic!("asked to panic"),
            "unreachable" => core::arch::wasm32::unreachable(),
            _ => Activity::Idle,
        }
    }

    fn pin_resume(&self, argv: &[String], id: &str) -> Option<Vec<String>> {
        if argv != ["read"] {
            return None;
        }
        log(Level::Debug, &format!("reading {id}"));
        Some(match read_file(id) {
            Ok(text) => vec!["ok".into(), text],
            Err(reason) => vec!["refused".into(), reason],
        })
    }
}

export_adapter!(Faults);
