//! Getting a REPL ready for cells: typing the profile's shell integration
//! when it is due, or — in line modes — waiting until the REPL has started.

use std::time::{Duration, Instant};

use super::{write_private, CellEngine, FrameMode};

/// How long set-up waits for its cue before it is typed anyway.
const SETUP_CUE_WAIT: Duration = Duration::from_secs(2);

/// Line modes (repeat, exact prompt, hook) have no set-up to wait for, but
/// code typed before the REPL has started is echoed twice (by the terminal,
/// then by the REPL's line editor) or lost, and the REPL's first prompt
/// would end the frame at once. So cells wait until the REPL has started:
/// it showed the prompt (exact-prompt mode), or its start-up output has been
/// quiet for [`STARTUP_QUIET`] (repeat and hook modes); at most
/// [`STARTUP_WAIT`].
#[derive(Default)]
pub(super) struct LineStartup {
    pub(super) last_output: Option<Instant>,
    /// The line in progress (exact-prompt mode), bounded.
    line: Vec<u8>,
}

impl LineStartup {
    /// Start-up output; true once it shows `prompt`.
    pub(super) fn output(&mut self, text: &[u8], prompt: Option<&str>) -> bool {
        self.last_output = Some(Instant::now());
        let Some(prompt) = prompt else {
            return false;
        };
        let is_prompt = |line: &[u8]| String::from_utf8_lossy(line).trim() == prompt;
        for &b in text {
            if b == b'\n' {
                if is_prompt(&self.line) {
                    return true;
                }
                self.line.clear();
            } else if self.line.len() < 4096 {
                self.line.push(b);
            }
        }
        is_prompt(&self.line)
    }
}

impl CellEngine {
    /// Types the integration set-up once it is due: at once, or — for
    /// REPLs that discard what was typed before their line editor started —
    /// once the REPL has printed something and gone quiet.
    pub(super) fn type_setup_if_due(&mut self, now: Instant) {
        let Some(due) = self.setup_due() else { return };
        if now < due {
            return;
        }
        let FrameMode::Integration(i) = &self.config.frame else {
            return;
        };
        let mut setup = i.setup.clone();
        if setup.contains("{setup_file}") {
            let path = self
                .config
                .files_dir
                .join(format!("setup{}", i.file_suffix));
            if let Err(e) = write_private(&path, &i.setup_script) {
                tracing::error!("cannot write the set-up file {}: {e}", path.display());
            }
            setup = setup.replace("{setup_file}", &path.display().to_string());
        }
        let mut out = Vec::new();
        for line in setup.lines() {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\r');
        }
        self.writer.write(out);
        self.setup_typed = true;
    }

    pub(super) fn setup_due(&self) -> Option<Instant> {
        let FrameMode::Integration(i) = &self.config.frame else {
            return None;
        };
        if self.setup_typed {
            return None;
        }
        match &i.setup_after {
            None => Some(self.created),
            Some(_) if self.setup_cue_seen => Some(self.created),
            // Never wait forever for a cue a REPL version may not print.
            Some(_) => Some(self.created + SETUP_CUE_WAIT),
        }
    }

    /// Looks for the text after which the set-up may be typed, across chunk
    /// boundaries.
    pub(super) fn watch_setup_cue(&mut self, bytes: &[u8]) {
        let FrameMode::Integration(i) = &self.config.frame else {
            return;
        };
        let Some(cue) = i
            .setup_after
            .as_deref()
            .filter(|_| !self.setup_typed && !self.setup_cue_seen)
        else {
            return;
        };
        self.cue_window.extend_from_slice(bytes);
        if self
            .cue_window
            .windows(cue.len())
            .any(|w| w == cue.as_bytes())
        {
            self.setup_cue_seen = true;
            self.cue_window = Vec::new();
            self.type_setup_if_due(Instant::now());
        } else {
            let keep = self.cue_window.len().saturating_sub(cue.len());
            self.cue_window.drain(..keep);
        }
    }

    /// Called once the supervisor runs: types an immediate set-up.
    pub fn start(&mut self) {
        self.type_setup_if_due(Instant::now());
    }

    /// Ready for cells: set-up complete, or (line modes) the REPL started.
    pub fn is_ready(&self) -> bool {
        self.at_prompt
    }
}
