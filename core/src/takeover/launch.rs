//! `--launch-terminal`: run the same command in a new terminal window.
//!
//! A takeover cannot run inside the session it ends (the provider is one of
//! its ancestors), so the person asks for a new window: the command line is
//! re-run there, minus this flag, and this process exits. The window is the
//! person's choice when they made one (`AGENT_COMMS_TERMINAL`, then
//! `TERMINAL`), else the first emulator found on `PATH`.

use std::process::{Command, Stdio};

use super::TakeoverError;
use crate::adapter::command::on_path;

/// Names a terminal-command prefix, e.g. `kitty` or `xterm -e`.
pub const TERMINAL_ENV: &str = "AGENT_COMMS_TERMINAL";

/// Emulators tried in order, with the arguments that make them run a
/// command (the command follows).
const EMULATORS: &[(&str, &[&str])] = &[
    ("x-terminal-emulator", &["-e"]),
    ("gnome-terminal", &["--"]),
    ("konsole", &["-e"]),
    ("xfce4-terminal", &["-x"]),
    ("wezterm", &["start", "--"]),
    ("kitty", &[]),
    ("alacritty", &["-e"]),
    ("foot", &[]),
    ("xterm", &["-e"]),
];

/// The terminal command that would run `argv`, or why there is none.
pub fn terminal_command(argv: &[String]) -> Result<Vec<String>, TakeoverError> {
    for var in [TERMINAL_ENV, "TERMINAL"] {
        if let Some(prefix) = std::env::var(var).ok().filter(|v| !v.trim().is_empty()) {
            let mut cmd = crate::adapter::command::shell_words(&prefix);
            if var == "TERMINAL" && cmd.len() == 1 {
                cmd.push("-e".into());
            }
            cmd.extend_from_slice(argv);
            return Ok(cmd);
        }
    }
    for (name, args) in EMULATORS {
        if let Some(path) = on_path(name) {
            let mut cmd = vec![path.display().to_string()];
            cmd.extend(args.iter().map(|a| (*a).to_owned()));
            cmd.extend_from_slice(argv);
            return Ok(cmd);
        }
    }
    Err(TakeoverError::Launch(format!(
        "no terminal emulator found (looked for {} on PATH); set {TERMINAL_ENV} to one, e.g. {TERMINAL_ENV}='xterm -e', or run the command in a new terminal yourself",
        EMULATORS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    )))
}

/// Starts `argv` in a new terminal window, detached from this one; returns
/// the command that was run.
pub fn launch(argv: &[String]) -> Result<Vec<String>, TakeoverError> {
    let cmd = terminal_command(argv)?;
    let mut command = Command::new(&cmd[0]);
    command
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own session: closing this terminal must not close the window.
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            command.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
    }
    command
        .spawn()
        .map_err(|e| TakeoverError::Launch(format!("cannot start {}: {e}", cmd[0])))?;
    Ok(cmd)
}
