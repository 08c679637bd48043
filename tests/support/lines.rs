//! A command that keeps running and prints lines (`invocation list
//! --follow`, `session logs --follow`): its stdout read line by line as it
//! comes, and the process ended by its pid when the test is done with it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Instant;

use super::TIMEOUT;

pub struct Lines {
    child: Child,
    lines: Receiver<String>,
    what: String,
    /// Every line read so far, for failure messages.
    seen: Vec<String>,
}

impl Lines {
    pub fn spawn(mut cmd: Command, what: &str) -> Self {
        cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self {
            child,
            lines,
            what: what.to_owned(),
            seen: Vec::new(),
        }
    }

    /// The next line that `wanted` accepts (lines before it are skipped);
    /// fails the test after [`TIMEOUT`].
    #[track_caller]
    pub fn wait_for(&mut self, about: &str, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if wanted(&line) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "{} printed no line with {about} within {TIMEOUT:?}; it printed: {:#?}",
                    self.what, self.seen
                ),
            }
        }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
