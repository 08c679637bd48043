//! Deliveries in a row into a served real CLI, and what became of each:
//! the Enter-delay experiment (tests/enter_delay.rs) and the
//! exactly-once check with the profiles' own delays
//! (tests/real_providers.rs) count the same things.

use std::collections::BTreeSet;
use std::time::Instant;

use super::observe::turn_prompts_in;
use super::world::World;
use super::TURN;

/// What `n` deliveries in a row did.
pub struct Trials {
    /// Each delivery's text, in order (each one unique).
    pub texts: Vec<String>,
    /// Submitted by the first Enter.
    pub at_once: usize,
    /// Submitted, but only by an Enter pressed again.
    pub pressed_again: usize,
    /// Not submitted: the delivery failed, with its error.
    pub lost: Vec<String>,
    /// Call → submitted of the deliveries taken at once, sorted, in ms
    /// (each waited for the turn before it to end).
    pub took_ms: Vec<f64>,
    /// How the submitted texts went in, as their evidence says (`paste`,
    /// `typed`).
    pub styles: BTreeSet<String>,
}

impl Trials {
    /// `n` `runtime deliver`s of `label trial I` into runtime `id`, each
    /// called when the one before returned; returns once the CLI is idle
    /// after the last.
    pub fn run(w: &World, id: &str, label: &str, n: usize) -> Self {
        let mut trials = Self {
            texts: Vec::with_capacity(n),
            at_once: 0,
            pressed_again: 0,
            lost: Vec::new(),
            took_ms: Vec::new(),
            styles: BTreeSet::new(),
        };
        for i in 0..n {
            let text = format!("{label} trial {i}");
            let called = Instant::now();
            let delivered = w.deliver(id, &text, 60);
            if let Ok(ev) = &delivered {
                trials
                    .styles
                    .insert(ev["style"].as_str().unwrap_or("").to_owned());
            }
            match delivered {
                Ok(ev) if ev["enter_presses"] == 1 => {
                    trials.at_once += 1;
                    trials.took_ms.push(called.elapsed().as_secs_f64() * 1000.0);
                }
                Ok(_) => trials.pressed_again += 1,
                Err(e) => trials.lost.push(format!("trial {i}: {e}")),
            }
            trials.texts.push(text);
        }
        // A CLI may ask the model a moment after the Enter (opencode draws
        // its turn late, and reads idle meanwhile): the last text's request
        // first, then idle.
        if let Some(last) = trials.texts.last() {
            w.wait_request(last, TURN);
        }
        w.wait_activity(id, "idle", TURN, "after the last trial");
        trials.took_ms.sort_by(f64::total_cmp);
        trials
    }

    /// What the model received of the texts, from one read of the mock's
    /// log (it holds every request's whole conversation, so it grows with
    /// the square of the trials).
    pub fn at_model(&self, w: &World) -> AtModel<'_> {
        let log = w.mock_log_text();
        let prompts = turn_prompts_in(&log);
        let mut at_model = AtModel::default();
        for text in &self.texts {
            let turns = prompts
                .iter()
                .filter(|p| p.trim().ends_with(text.as_str()))
                .count();
            // The whole log is searched only for a text no turn ended with
            // (it grows with the square of the trials).
            match turns {
                1 => {}
                0 if log.contains(&format!("\"{text}\"")) => at_model.sent_with_next.push(text),
                _ => at_model.not_once.push(text),
            }
        }
        at_model
    }

    pub fn median_ms(&self) -> f64 {
        self.took_ms
            .get(self.took_ms.len() / 2)
            .copied()
            .unwrap_or(f64::NAN)
    }
}

/// What the model received of a run's texts.
#[derive(Default)]
pub struct AtModel<'a> {
    /// Texts that did not reach the model exactly once: that started more
    /// than one turn, or that no request holds at all.
    pub not_once: Vec<&'a str>,
    /// Texts that started no turn of their own but went to the model in
    /// the same request as the next (opencode does that with prompts typed
    /// before its first turn reaches the model): delivered once.
    pub sent_with_next: Vec<&'a str>,
}
