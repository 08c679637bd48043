//! How a session's cells are framed, chosen at `k new`: line modes, or the
//! REPL profile's shell integration rendered with the session's token.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::adapter::profile::{Profile, Repl};
use crate::ids::random_hex;

/// How a session's cells are framed, chosen at `k new`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum FrameMode {
    /// 5 Enters after the code; 5 identical lines end the frame.
    Repeat,
    /// A line equal to this prompt ends the frame.
    Prompt(String),
    /// This executable reads output lines; its exit ends the frame.
    Hook(PathBuf),
    /// The REPL's profile marks prompts with OSC 133 (see adapters).
    Integration(Integration),
}

/// A REPL profile's integration, rendered for one session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Integration {
    pub profile: String,
    /// Typed once at start; `{setup_file}` stands for a private file that
    /// holds `setup_script`.
    pub setup: String,
    pub setup_script: String,
    pub run_file: String,
    pub file_suffix: String,
    pub file_prologue: String,
    pub type_simple_lines: bool,
    pub exit_status: bool,
    pub newline_after_start: bool,
    pub setup_after: Option<String>,
    pub interrupt_barrier: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellsConfig {
    pub frame: FrameMode,
    /// Per-session secret carried by integration marks.
    pub token: String,
    /// Private (0700) directory for cell files.
    pub files_dir: PathBuf,
    /// Line modes: how the REPL runs multi-line code from a file, when its
    /// profile says (bash sources it); otherwise code is typed line by line.
    pub line_mode_file: Option<LineModeFile>,
}

/// A profile's `line_mode_run_file` with the suffix its files take.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LineModeFile {
    pub run_file: String,
    pub file_suffix: String,
}

impl CellsConfig {
    /// The configuration for a command that `profile` claims (if any
    /// does): integration when the profile sets a REPL up and no
    /// `--prompt` was given.
    pub fn for_command(
        profile: Option<&Profile>,
        prompt: Option<FrameMode>,
        files_dir: PathBuf,
    ) -> Self {
        // Eight hex digits: enough to tell our marks from any other program's
        // OSC 133, and short enough for sqlite3, which cuts prompts at 19
        // bytes (`ESC ]133;D;0;` + token + BEL is exactly that).
        let token = random_hex(4);
        let frame = prompt.unwrap_or_else(|| {
            match profile.and_then(|p| Some((p.name.as_str(), p.repl.as_ref()?))) {
                Some((name, repl)) => FrameMode::Integration(render(name, repl, &token)),
                None => FrameMode::Repeat,
            }
        });
        Self {
            frame,
            token,
            files_dir,
            line_mode_file: line_mode_file(profile),
        }
    }

    pub fn mode_name(&self) -> String {
        match &self.frame {
            FrameMode::Repeat => "repeat".into(),
            FrameMode::Prompt(p) => format!("prompt {p:?}"),
            FrameMode::Hook(h) => format!("hook {}", h.display()),
            FrameMode::Integration(i) => format!("integration ({})", i.profile),
        }
    }
}

fn line_mode_file(profile: Option<&Profile>) -> Option<LineModeFile> {
    let repl = profile?.repl.as_ref()?;
    Some(LineModeFile {
        run_file: repl.line_mode_run_file.clone()?,
        file_suffix: repl.file_suffix.clone(),
    })
}

fn render(name: &str, r: &Repl, token: &str) -> Integration {
    let script = r
        .setup_script
        .as_deref()
        .unwrap_or("")
        .replace("{token}", token);
    let setup = r
        .setup
        .replace("{token}", token)
        .replace("{script_b64}", &base64(script.as_bytes()));
    Integration {
        profile: name.to_owned(),
        setup,
        setup_script: script,
        run_file: r.run_file.clone(),
        file_suffix: r.file_suffix.clone(),
        file_prologue: r.file_prologue.replace("{token}", token),
        type_simple_lines: r.type_simple_lines,
        exit_status: r.exit_status,
        newline_after_start: r.newline_after_start,
        setup_after: r.setup_after.clone(),
        interrupt_barrier: r.interrupt_barrier.clone(),
    }
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
