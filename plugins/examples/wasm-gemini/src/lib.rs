//! Gemini CLI as a Wasm component: the twin of `native-gemini` and of the
//! rules in `native-gemini/gemini-native.toml`. The conformance suite
//! (core/tests/conformance.rs) runs the same screens and argument vectors
//! through all three forms and expects the same answers. The markers are
//! illustrative; see native-gemini.

use agent_comms_wasm_sdk::{export_adapter, program, Activity, Adapter, PluginInfo, Screen};

/// The spinner line sits among the last rows with text.
const BUSY_ROWS: usize = 6;

#[derive(Default)]
struct Gemini;

impl Adapter for Gemini {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            name: "gemini-wasm".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            checked: "illustrative (no release checked)".into(),
        }
    }

    fn claims(&self, argv: &[String]) -> bool {
        program(argv) == Some("gemini")
    }

    fn classify(&self, screen: &Screen) -> Activity {
        if screen.bottom_rows(BUSY_ROWS).iter().any(|r| r.contains("esc to cancel")) {
            Activity::Busy
        } else if screen.lines.iter().any(|r| is_empty_prompt(r)) {
            Activity::Idle
        } else {
            Activity::Unknown
        }
    }

    /// `--continue`/`-c` becomes `--resume <id>`, unless a session is named.
    fn pin_resume(&self, argv: &[String], id: &str) -> Option<Vec<String>> {
        if argv.iter().any(|a| a == "--resume" || a == "-r") {
            return None;
        }
        let at = argv.iter().position(|a| a == "--continue" || a == "-c")?;
        let mut out = argv[..at].to_vec();
        out.extend(["--resume".to_owned(), id.to_owned()]);
        out.extend_from_slice(&argv[at + 1..]);
        Some(out)
    }
}

/// `>` then spaces then the placeholder: the empty input box.
fn is_empty_prompt(row: &str) -> bool {
    row.match_indices('>').any(|(i, _)| {
        let rest = &row[i + 1..];
        rest.starts_with(' ') && rest.trim_start_matches(' ').starts_with("Type your message")
    })
}

export_adapter!(Gemini);
