//! An example third-party adapter for aider, as a Wasm component.
//!
//! Illustrative: the markers below are plausible for aider's line-oriented
//! interface (a `>` prompt, optionally after the chat mode, and a "Waiting
//! for <model>" spinner while a request is out) but were not checked
//! against recordings of a real aider. `aider.toml` is the profile that
//! names this plugin; its samples are what `adapters check` runs.

use agent_comms_wasm_sdk::{export_adapter, program, Activity, Adapter, PluginInfo, Screen};

/// Shown near the bottom while aider waits for the model.
const BUSY_MARKERS: &[&str] = &["Waiting for ", "Thinking"];

#[derive(Default)]
struct Aider;

impl Adapter for Aider {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            name: "aider".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            checked: "illustrative, not checked against a release".into(),
        }
    }

    fn claims(&self, argv: &[String]) -> bool {
        program(argv) == Some("aider")
    }

    fn classify(&self, screen: &Screen) -> Activity {
        let busy = screen
            .bottom_rows(3)
            .iter()
            .any(|row| BUSY_MARKERS.iter().any(|m| row.contains(m)));
        if busy {
            Activity::Busy
        } else if is_prompt(screen.cursor_line()) {
            Activity::Idle
        } else {
            Activity::Unknown
        }
    }
}

/// `> `, or a chat mode before it (`ask> `, `architect> `), maybe with input.
fn is_prompt(line: &str) -> bool {
    let rest = line.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '-');
    rest == ">" || rest.starts_with("> ")
}

export_adapter!(Aider);
