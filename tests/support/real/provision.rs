//! Provisioning a world: each provider's configuration in the fresh HOME,
//! and the mock model server started in (and holding) the test's own
//! network namespace.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::world::World;
use super::{Cli, API_KEY, PORT};

impl World {
    /// Writes the provider's configuration into the fresh HOME.
    pub(super) fn seed(&self) {
        let work = self.work.display().to_string();
        let base = format!("http://127.0.0.1:{PORT}");
        match self.cli {
            Cli::Claude => {
                let approved = &API_KEY[API_KEY.len() - 20..];
                let config = serde_json::json!({
                    "hasCompletedOnboarding": true,
                    "numStartups": 1,
                    "lastReleaseNotesSeen": "2.1.197",
                    "customApiKeyResponses": {"approved": [approved], "rejected": []},
                    "projects": {work: {"hasTrustDialogAccepted": true}},
                });
                fs::write(self.user_home.join(".claude.json"), config.to_string()).unwrap();
            }
            Cli::Codex => {
                let home = self.codex_home();
                fs::create_dir_all(&home).unwrap();
                let config = format!(
                    r#"model = "mock-1"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.mock]
name = "mock"
base_url = "{base}/v1"
wire_api = "responses"
env_key = "MOCK_API_KEY"

[projects."{work}"]
trust_level = "trusted"
"#
                );
                fs::write(home.join("config.toml"), config).unwrap();
                // Codex copies itself (~420 MB) into $CODEX_HOME/packages on
                // a first start; scripts/install-providers prepares that
                // directory once, hard-linked to the npm install.
                let warm = self.bins.join("..").join("codex-home-packages");
                if warm.join("app-server-daemon/current/bin/codex").is_file() {
                    std::os::unix::fs::symlink(warm.canonicalize().unwrap(), home.join("packages"))
                        .unwrap();
                } else {
                    println!(
                        "{}: no prepared {} (scripts/install-providers makes it): Codex copies ~420 MB into this test's CODEX_HOME",
                        self.test,
                        warm.display()
                    );
                }
            }
            Cli::Opencode => {
                let dir = self.user_home.join(".config/opencode");
                fs::create_dir_all(&dir).unwrap();
                let config = serde_json::json!({
                    "$schema": "https://opencode.ai/config.json",
                    "autoupdate": false,
                    "share": "disabled",
                    "model": "mock/mock-1",
                    "small_model": "mock/mock-1",
                    "provider": {"mock": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "Mock",
                        "options": {"baseURL": format!("{base}/v1"), "apiKey": "dummy"},
                        "models": {"mock-1": {"name": "Mock 1"}},
                    }},
                });
                fs::write(dir.join("opencode.json"), config.to_string()).unwrap();
            }
        }
    }

    /// Makes the namespace: the mock server, started inside it, holds it.
    pub(super) fn start_mock(&mut self, exe: &Path) {
        let mut cmd = Command::new("unshare");
        cmd.args([
            "-n",
            "sh",
            "-c",
            r#"ip link set lo up && exec "$0" --port "$1" --log "$2""#,
        ])
        .arg(exe)
        .arg(PORT.to_string())
        .arg(&self.mock_log);
        cmd.env_clear();
        for (k, v) in self.vars() {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start the mock server in a namespace");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
        if !line.starts_with("listening on") {
            let _ = child.kill();
            let out = child.wait_with_output().ok();
            panic!(
                "the mock server did not start in its namespace (first line {line:?}): {:?}",
                out.map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
            );
        }
        self.holder = Some(child);
    }
}
