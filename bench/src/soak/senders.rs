//! The soak's senders: threads that each run `send --json` one after the
//! other, a random pause apart, and SIGKILL one send in eight shortly after
//! starting it, as a user's Ctrl-C or a crashing script would.
//!
//! A killed send is its sender's own child, not yet waited for, so its pid
//! cannot have been reused when it is killed. What counts as sent is what a
//! send printed: a killed one may have stored its message or not, and may
//! have printed its id or not.

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::random::Random;
use crate::bench::Bench;
use crate::runtimes::{Project, RECEIVER};

/// What the senders did.
#[derive(Default)]
pub struct Sent {
    /// The ids the sends printed, with the sender and when (unix ms).
    pub ids: Vec<Printed>,
    pub sends: usize,
    pub killed: usize,
    /// Killed sends that had printed their id all the same.
    pub killed_printed: usize,
    /// Sends that failed on their own (not killed): what they said.
    pub failures: Vec<String>,
}

/// A killed send is killed this many ms after it started, at most: a send
/// to a served runtime takes about 10 ms (storing, then the nudge), one
/// with `--wait` until the delivery.
pub const KILL_WITHIN_MS: u64 = 30;

pub struct Printed {
    pub id: String,
    pub sender: String,
}

pub struct Senders<'scope> {
    stop: &'scope AtomicBool,
    threads: Vec<ScopedJoinHandle<'scope, Sent>>,
}

/// Starts `n` senders in threads of `scope`; each sends until stopped.
pub fn start<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    stop: &'scope AtomicBool,
    bench: &'env Bench,
    project: &'env Project,
    n: usize,
    seed: u64,
) -> Senders<'scope> {
    let threads = (0..n)
        .map(|i| {
            let sender = Sender {
                name: format!("sender-{}", i + 1),
                bench,
                project,
                random: Random::new(seed.wrapping_add(1 + i as u64)),
            };
            scope.spawn(move || sender.run(stop))
        })
        .collect();
    Senders { stop, threads }
}

impl Senders<'_> {
    /// Stops them once their send in flight has finished; what they did.
    pub fn stop(self) -> Sent {
        self.stop.store(true, Ordering::SeqCst);
        let mut all = Sent::default();
        for thread in self.threads {
            let Ok(sent) = thread.join() else {
                all.failures.push("a sender thread panicked".to_owned());
                continue;
            };
            all.ids.extend(sent.ids);
            all.sends += sent.sends;
            all.killed += sent.killed;
            all.killed_printed += sent.killed_printed;
            all.failures.extend(sent.failures);
        }
        all
    }
}

struct Sender<'env> {
    name: String,
    bench: &'env Bench,
    project: &'env Project,
    random: Random,
}

impl Sender<'_> {
    fn run(mut self, stop: &AtomicBool) -> Sent {
        let mut sent = Sent::default();
        let mut n = 0;
        while !stop.load(Ordering::SeqCst) {
            // Pacing, not waiting for an event: the pause is the workload.
            let pause = self.random.millis(2000, 16_000);
            let until = Instant::now() + pause;
            while Instant::now() < until && !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(100));
            }
            if stop.load(Ordering::SeqCst) {
                break;
            }
            n += 1;
            self.send_one(n, &mut sent);
        }
        sent
    }

    fn send_one(&mut self, n: usize, sent: &mut Sent) {
        let text = format!("soak {} #{n}: {}", self.name, "x".repeat(n % 50));
        let wait = self.random.one_in(4);
        let kill_after = self
            .random
            .one_in(8)
            .then(|| self.random.millis(0, KILL_WITHIN_MS));
        let mut cmd = self.project.agent_comms(self.bench);
        cmd.args(["--actor", &self.name, "send", "--to", RECEIVER, "--json"]);
        if wait {
            cmd.args(["--wait", "30"]);
        }
        cmd.arg(&text);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        sent.sends += 1;
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => {
                sent.failures.push(format!("cannot run send: {e}"));
                return;
            }
        };
        if let Some(after) = kill_after {
            std::thread::sleep(after);
            // Not waited for yet: the pid is still this child's.
            let _ = child.kill();
            sent.killed += 1;
        }
        let out = match child.wait_with_output() {
            Ok(out) => out,
            Err(e) => {
                sent.failures.push(format!("cannot wait for send: {e}"));
                return;
            }
        };
        let id = serde_json::from_slice::<Value>(&out.stdout)
            .ok()
            .and_then(|v| v["id"].as_str().map(str::to_owned));
        match id {
            Some(id) => {
                if kill_after.is_some() {
                    sent.killed_printed += 1;
                }
                sent.ids.push(Printed {
                    id,
                    sender: self.name.clone(),
                });
            }
            None if kill_after.is_some() => {}
            None => sent.failures.push(format!(
                "`send` by {} ({}) printed no id: {}",
                self.name,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        }
    }
}
