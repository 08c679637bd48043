//! `session activity` sampled on a thread while a turn runs, and the
//! samples read as runs and times.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::now_ms;
use super::world::World;
use crate::support::run::try_run_within;
use crate::support::BIN;

/// Samples `session activity` every ~100 ms on a thread until stopped.
pub struct Sampler {
    stop: Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<Vec<(f64, String)>>>,
}

impl Sampler {
    pub fn start(world: &World, name: &str) -> Sampler {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let cmd_env: Vec<(&'static str, PathBuf)> = world.env.vars();
        let name = name.to_owned();
        let handle = std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let mut cmd = Command::new(BIN);
                cmd.args(["session", "activity", &name, "--json"]);
                for (k, v) in &cmd_env {
                    cmd.env(k, v);
                }
                let out = try_run_within(cmd, "session activity", Duration::from_secs(10))
                    .map(|run| run.stdout)
                    .unwrap_or_default();
                let v: Value = serde_json::from_str(out.trim()).unwrap_or(Value::Null);
                samples.push((
                    now_ms(),
                    v["activity"].as_str().unwrap_or("error").to_owned(),
                ));
                std::thread::sleep(Duration::from_millis(100));
            }
            samples
        });
        Sampler {
            stop,
            handle: Some(handle),
        }
    }

    /// Stops sampling; (Unix ms, activity) pairs.
    pub fn stop(mut self) -> Vec<(f64, String)> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A mock log time field (Unix seconds, f64) as Unix milliseconds.
pub fn ms(v: &Value) -> f64 {
    v.as_f64().map(|s| s * 1000.0).unwrap_or(f64::NAN)
}

/// The samples as runs: `idle×3 busy×12 idle×20`.
pub fn runs(samples: &[(f64, String)]) -> String {
    let mut out: Vec<(String, usize)> = Vec::new();
    for (_, a) in samples {
        match out.last_mut() {
            Some((last, n)) if last == a => *n += 1,
            _ => out.push((a.clone(), 1)),
        }
    }
    out.iter()
        .map(|(a, n)| format!("{a}×{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}
