//! An example third-party native adapter: Gemini CLI (`gemini`).
//!
//! It shows the shape of a native adapter — a type implementing
//! `sdk::Adapter`, exported with `export_native_adapter!` — and answers what
//! `gemini-native.toml` declares as rules too, so the two can be checked
//! against each other (`agent-comms adapters check gemini-native.toml` runs
//! the profile's samples through both).
//!
//! The screen markers are plausible, not taken from a recording of a real
//! Gemini CLI session: a spinner line that ends in `(esc to cancel, 3s)`
//! while it works, and an input box whose empty prompt shows the placeholder
//! `>   Type your message or @path/to/file` while it waits. Check them
//! against the release you use before relying on them.

use agent_comms_plugin_api::sdk::Adapter;
use agent_comms_plugin_api::{export_native_adapter, Activity, PluginInfo, Screen};

/// The busy marker lives on the spinner line just above the input box; the
/// box and the footer under it take the rows below.
const BUSY_ROWS: usize = 6;

#[derive(Default)]
pub struct Gemini;

impl Adapter for Gemini {
    fn info(&self) -> PluginInfo {
        PluginInfo::new(
            "gemini-native",
            env!("CARGO_PKG_VERSION"),
            "illustrative (no release checked)",
        )
    }

    /// `gemini …`, however it is reached on the `PATH`.
    fn claims(&self, argv: &[&str]) -> bool {
        argv.first().and_then(|p| p.rsplit('/').next()) == Some("gemini")
    }

    fn classify(&self, screen: &Screen) -> Activity {
        if screen
            .bottom_rows(BUSY_ROWS)
            .any(|r| r.contains("esc to cancel"))
        {
            Activity::Busy
        } else if screen.rows().any(is_empty_prompt) {
            Activity::Idle
        } else {
            Activity::Unknown
        }
    }

    /// `--continue` (or `-c`) becomes `--resume <id>`, unless a session is
    /// already named — what the profile's `[resume]` says too. This
    /// illustrates the hook; check the flags of the release you use.
    fn pin_resume(&self, argv: &[&str], id: &str) -> Option<Vec<String>> {
        if argv.iter().any(|a| matches!(*a, "--resume" | "-r")) {
            return None;
        }
        let at = argv
            .iter()
            .position(|a| matches!(*a, "--continue" | "-c"))?;
        let mut out: Vec<String> = argv[..at].iter().map(|a| (*a).to_owned()).collect();
        out.extend(["--resume".to_owned(), id.to_owned()]);
        out.extend(argv[at + 1..].iter().map(|a| (*a).to_owned()));
        Some(out)
    }
}

/// The input box's prompt with its placeholder: nothing typed, waiting.
/// As the profile's rule `> +Type your message` has it: a `>`, spaces, the
/// placeholder, anywhere in the row.
fn is_empty_prompt(row: &str) -> bool {
    row.match_indices('>').any(|(i, _)| {
        let rest = &row[i + 1..];
        rest.starts_with(' ')
            && rest
                .trim_start_matches(' ')
                .starts_with("Type your message")
    })
}

export_native_adapter!(Gemini);
