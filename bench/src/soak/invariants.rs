//! The soak's end: the drain, waited for on the messages' states, and the
//! invariants, checked through the CLI and the fake's log and printed with
//! every message that breaks one (its id, attempts and submissions), so a
//! failure can be chased rather than re-run.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use agent_comms_core::time::{iso_from_unix_millis, unix_millis_from_iso};
use anyhow::Context;
use serde_json::Value;

use super::chaos::{Chaos, Sample, Tally};
use super::senders::{Sent, KILL_WITHIN_MS};
use super::{count, invariant};
use crate::bench::Bench;
use crate::report::Row;
use crate::runtimes::{FakeLog, Project, Submit};
use crate::stats::{one, Quantity};

/// States a message leaves by itself while its runtime is served.
const UNSETTLED: [&str; 3] = ["PENDING", "DELIVERING", "UNAVAILABLE"];
/// The last serve's RSS after the drain may exceed its warm RSS by this
/// fraction (allocator arenas settle; a leak grows on).
const RSS_SLACK: f64 = 0.25;
/// Ids asked of one `message show`.
const SHOW_CHUNK: usize = 100;

/// Until no message is unsettled, the serve kept running; fails once none
/// changed state for `stall`.
pub fn drain(
    bench: &Bench,
    project: &Project,
    stall: Duration,
    chaos: &mut Chaos<'_>,
) -> Result<(), String> {
    let mut last: Option<Vec<(String, String)>> = None;
    let mut progress = Instant::now();
    loop {
        chaos.keep_serving().map_err(|e| format!("{e:#}"))?;
        let (_, listed) = project.list(bench, &[]).map_err(|e| format!("{e:#}"))?;
        let states: Vec<(String, String)> = listed
            .iter()
            .map(|m| (str_of(m, "id"), str_of(m, "status")))
            .collect();
        let unsettled: Vec<&(String, String)> = states
            .iter()
            .filter(|(_, s)| UNSETTLED.contains(&s.as_str()))
            .collect();
        if unsettled.is_empty() {
            return Ok(());
        }
        if last.as_ref() != Some(&states) {
            progress = Instant::now();
        } else if progress.elapsed() > stall {
            let first: Vec<String> = unsettled
                .iter()
                .take(5)
                .map(|(id, s)| format!("{id} {s}"))
                .collect();
            return Err(format!(
                "{} messages still unsettled after none changed state for {stall:?} (first: {})",
                unsettled.len(),
                first.join(", ")
            ));
        }
        last = Some(states);
        std::thread::sleep(Duration::from_millis(500));
    }
}

pub struct Inputs<'a> {
    pub bench: &'a Bench,
    pub project: &'a Project,
    pub log: &'a FakeLog,
    pub sent: Sent,
    pub tally: Tally,
    pub drained: Result<(), String>,
    pub drain: Duration,
    pub idle: Sample,
}

/// The rows of the section, and the invariants broken (each with the
/// messages that broke it).
pub struct Verdict {
    pub rows: Vec<Row>,
    pub broken: Vec<String>,
}

/// One delivery attempt, as `message show --json` lists it.
struct Attempt {
    outcome: String,
    started: u64,
    /// None while IN_PROGRESS.
    finished: Option<u64>,
    reason: String,
}

impl Attempt {
    fn from(v: &Value) -> Self {
        let ms = |key: &str| v[key].as_str().and_then(unix_millis_from_iso);
        Self {
            outcome: str_of(v, "outcome"),
            started: ms("started").unwrap_or_default(),
            finished: ms("finished"),
            reason: str_of(v, "reason"),
        }
    }

    fn contains(&self, t: u64) -> bool {
        self.started <= t && self.finished.is_none_or(|f| t <= f)
    }

    fn describe(&self) -> String {
        format!(
            "{} {}–{}{}",
            self.outcome,
            iso_from_unix_millis(self.started),
            self.finished
                .map_or_else(|| "…".to_owned(), iso_from_unix_millis),
            if self.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", self.reason)
            }
        )
    }
}

/// What one message's record and the fake's log say of it.
struct Seen<'a> {
    id: &'a str,
    sender: &'a str,
    status: String,
    reason: String,
    attempts: Vec<Attempt>,
    /// The fake's submissions that name it.
    submits: Vec<&'a Submit>,
}

impl Seen<'_> {
    fn timeline(&self) -> String {
        let attempts: Vec<String> = self.attempts.iter().map(Attempt::describe).collect();
        let submits: Vec<String> = self
            .submits
            .iter()
            .map(|s| iso_from_unix_millis(s.t))
            .collect();
        format!(
            "{} from {}: {}{}; attempts [{}]; submitted at [{}]",
            self.id,
            self.sender,
            self.status,
            if self.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", self.reason)
            },
            attempts.join("; "),
            submits.join(", ")
        )
    }

    /// Why it was not delivered once, if it was not.
    fn lost(&self) -> Option<String> {
        if self.status != "DELIVERED" {
            return Some(format!("not delivered: {}", self.timeline()));
        }
        if self.submits.is_empty() {
            return Some(format!(
                "DELIVERED, but no submission names it: {}",
                self.timeline()
            ));
        }
        None
    }

    /// Why it may have been delivered twice at once, if it may.
    fn doubled(&self) -> Option<String> {
        let mut by_start: Vec<&Attempt> = self.attempts.iter().collect();
        by_start.sort_by_key(|a| a.started);
        let overlap = by_start
            .windows(2)
            .any(|w| w[0].finished.is_none_or(|f| f > w[1].started));
        let delivered = self
            .attempts
            .iter()
            .filter(|a| a.outcome == "DELIVERED")
            .count();
        let outside = self
            .submits
            .iter()
            .filter(|s| !self.attempts.iter().any(|a| a.contains(s.t)))
            .count();
        let twice_in_one = self
            .attempts
            .iter()
            .any(|a| self.submits.iter().filter(|s| a.contains(s.t)).count() > 1);
        let why = [
            (overlap, "attempts overlap in time"),
            (delivered > 1, "more than one attempt DELIVERED"),
            (outside > 0, "submitted outside every attempt"),
            (twice_in_one, "submitted twice within one attempt"),
        ]
        .iter()
        .filter(|(yes, _)| *yes)
        .map(|(_, why)| *why)
        .collect::<Vec<_>>();
        (!why.is_empty()).then(|| format!("{}: {}", why.join(", "), self.timeline()))
    }
}

pub fn check(inputs: Inputs<'_>) -> anyhow::Result<Verdict> {
    let Inputs {
        bench,
        project,
        log,
        sent,
        tally,
        drained,
        drain,
        idle,
    } = inputs;
    let (_, listed) = project.list(bench, &[])?;
    let stored: HashMap<String, &Value> = listed.iter().map(|m| (str_of(m, "id"), m)).collect();
    let printed: Vec<&str> = sent
        .ids
        .iter()
        .map(|p| p.id.as_str())
        .filter(|id| stored.contains_key(*id))
        .collect();
    let shown = show(bench, project, &printed)?;
    let submits = log.submits()?;
    let seen: Vec<Seen> = sent
        .ids
        .iter()
        .map(|p| {
            let record = shown.get(&p.id);
            Seen {
                id: &p.id,
                sender: &p.sender,
                status: record
                    .map_or_else(|| "not in the store".to_owned(), |v| str_of(v, "status")),
                reason: record.map_or_else(String::new, |v| str_of(v, "reason")),
                attempts: record
                    .and_then(|v| v["delivery_attempts"].as_array())
                    .map(|a| a.iter().map(Attempt::from).collect())
                    .unwrap_or_default(),
                submits: submits.iter().filter(|s| names(&s.text, &p.id)).collect(),
            }
        })
        .collect();
    let lost: Vec<String> = seen.iter().filter_map(Seen::lost).collect();
    let doubled: Vec<String> = seen.iter().filter_map(Seen::doubled).collect();
    let again = seen.iter().filter(|s| s.submits.len() > 1).count();
    let abandoned = seen
        .iter()
        .flat_map(|s| &s.attempts)
        .filter(|a| a.outcome == "ABANDONED")
        .count();
    let unprinted: Vec<&Value> = listed
        .iter()
        .filter(|m| !sent.ids.iter().any(|p| p.id == str_of(m, "id")))
        .collect();
    let unprinted_delivered = unprinted
        .iter()
        .filter(|m| m["status"] == "DELIVERED")
        .count();

    let n = sent.ids.len();
    let sys = "agent-comms";
    let mut rows = vec![
        count("sends run by the 8 senders", "`send --json`", sent.sends),
        count("… that printed an id (the messages counted)", "`send --json`", n),
        count(
            &format!(
                "… SIGKILLed 0–{KILL_WITHIN_MS} ms in ({} printed their id all the same)",
                sent.killed_printed
            ),
            "`send --json`",
            sent.killed,
        ),
        count(
            "… that printed no id without being killed",
            "`send --json`",
            sent.failures.len(),
        ),
        count(
            &format!(
                "messages stored by a killed send that printed no id ({unprinted_delivered} of them DELIVERED)"
            ),
            sys,
            unprinted.len(),
        ),
        count("serve SIGKILLed", "chaos", tally.serve_kills),
        count("provider SIGKILLed", "chaos", tally.provider_kills),
        count(
            "… of these kills, with a message DELIVERING at the time",
            "chaos",
            tally.kills_mid_delivery,
        ),
        count(
            "delivery attempts ABANDONED (their serve gone)",
            sys,
            abandoned,
        ),
        count("serves started (the first and every restart)", "chaos", tally.starts),
        count("serve terminal resized", "chaos", tally.serve_resizes),
        count("clients attached (`session attach`)", "chaos", tally.attaches),
        count("attached clients resized", "chaos", tally.client_resizes),
        count(
            &format!("clients detached with the key ({} did not exit)", tally.detach_ignored),
            "chaos",
            tally.detaches,
        ),
        count("clients SIGKILLed", "chaos", tally.client_kills),
        Row::new(
            "drain after the chaos, to no message unsettled",
            sys,
            drained
                .clone()
                .map(|()| one(Quantity::Seconds(drain.as_secs_f64()))),
        ),
        invariant(
            "no message lost: printed ids DELIVERED, and a submission names each",
            sys,
            n - lost.len(),
            &format!("all {n}"),
            lost.is_empty() && drained.is_ok(),
        ),
        invariant(
            "messages delivered twice concurrently (attempts overlapping, two DELIVERED, a submission outside its attempts or two in one)",
            sys,
            doubled.len(),
            "0",
            doubled.is_empty(),
        ),
        count(
            "messages announced again after a kill, one attempt after the other",
            sys,
            again,
        ),
        invariant(
            "serves that ended on their own",
            sys,
            tally.serve_ended.len(),
            "0",
            tally.serve_ended.is_empty(),
        ),
        invariant(
            "providers left running after their serve ended (then killed)",
            sys,
            tally.stale_providers.len(),
            "0",
            tally.stale_providers.is_empty(),
        ),
    ];
    let mut broken = Vec::new();
    if let Err(why) = &drained {
        broken.push(format!("the drain: {why}"));
    }
    broken.extend(lost.iter().map(|l| format!("message lost: {l}")));
    broken.extend(doubled.iter().map(|d| format!("delivered twice: {d}")));
    broken.extend(
        tally
            .serve_ended
            .iter()
            .map(|e| format!("a serve ended on its own: {e}")),
    );
    broken.extend(
        tally
            .stale_providers
            .iter()
            .map(|p| format!("provider {p} outlived its serve")),
    );
    growth(&tally.warm, &idle, &mut rows, &mut broken);
    for failure in &sent.failures {
        eprintln!("soak: a send printed no id: {failure}");
    }
    for row in &rows {
        let result = row
            .result
            .as_ref()
            .map_or_else(|e| format!("failed: {e}"), |s| s.median.to_string());
        eprintln!("soak: {}: {result} {}", row.measurement, row.target);
    }
    Ok(Verdict { rows, broken })
}

/// The last serve's fds and RSS, warm against idle.
fn growth(warm: &Option<Sample>, idle: &Sample, rows: &mut Vec<Row>, broken: &mut Vec<String>) {
    let system = format!("the last serve (pid {})", idle.pid);
    let Some(warm) = warm.filter(|w| w.pid == idle.pid) else {
        rows.push(Row::new(
            "the last serve's fds and RSS, warm against idle",
            &system,
            Err("it never got warm (no submission before the drain)".to_owned()),
        ));
        broken.push("no warm sample of the last serve to compare with".to_owned());
        return;
    };
    rows.push(count("the last serve's open fds, warm", &system, warm.fds));
    let fds_held = idle.fds <= warm.fds;
    rows.push(invariant(
        "the last serve's open fds, idle after the drain",
        &system,
        idle.fds,
        &format!("no more than warm ({})", warm.fds),
        fds_held,
    ));
    rows.push(Row::new(
        "the last serve's RSS, warm",
        &system,
        Ok(one(Quantity::Megabytes(warm.rss_mb))),
    ));
    let limit = warm.rss_mb * (1.0 + RSS_SLACK);
    let rss_held = idle.rss_mb <= limit;
    let mut rss = Row::new(
        "the last serve's RSS, idle after the drain",
        &system,
        Ok(one(Quantity::Megabytes(idle.rss_mb))),
    );
    rss.target = crate::report::judge(
        &format!("≤ warm + {:.0} % ({limit:.1} MB)", RSS_SLACK * 100.0),
        Some(rss_held),
    );
    rows.push(rss);
    if !fds_held {
        broken.push(format!(
            "fd growth: the last serve (pid {}) had {} open fds warm and {} idle",
            idle.pid, warm.fds, idle.fds
        ));
    }
    if !rss_held {
        broken.push(format!(
            "memory growth: the last serve (pid {}) had {:.1} MB warm and {:.1} MB idle",
            idle.pid, warm.rss_mb, idle.rss_mb
        ));
    }
}

/// `message show IDS… --json`, by id.
fn show(bench: &Bench, project: &Project, ids: &[&str]) -> anyhow::Result<HashMap<String, Value>> {
    let mut shown = HashMap::new();
    for chunk in ids.chunks(SHOW_CHUNK) {
        let args: Vec<&str> = ["message", "show", "--json"]
            .into_iter()
            .chain(chunk.iter().copied())
            .collect();
        let (_, stdout) = project.run(bench, &args)?;
        for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(line)
                .with_context(|| format!("`message show --json` printed {line:?}"))?;
            shown.insert(str_of(&v, "id"), v);
        }
    }
    Ok(shown)
}

/// Whether `text` names message `id` (not merely a longer id it begins).
fn names(text: &str, id: &str) -> bool {
    text.match_indices(id).any(|(at, _)| {
        !text[at + id.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn str_of(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(outcome: &str, started: u64, finished: Option<u64>) -> Attempt {
        Attempt {
            outcome: outcome.to_owned(),
            started,
            finished,
            reason: String::new(),
        }
    }

    fn submit(t: u64) -> Submit {
        Submit {
            text: "[agent-comms] message inv_a from s".to_owned(),
            t,
            while_busy: false,
        }
    }

    fn seen<'a>(attempts: Vec<Attempt>, submits: &'a [Submit]) -> Seen<'a> {
        Seen {
            id: "inv_a",
            sender: "s",
            status: "DELIVERED".to_owned(),
            reason: String::new(),
            attempts,
            submits: submits.iter().collect(),
        }
    }

    #[test]
    fn a_redelivery_after_an_abandoned_attempt_is_not_doubled() {
        let submits = [submit(150), submit(450)];
        let s = seen(
            vec![
                attempt("ABANDONED", 100, Some(300)),
                attempt("DELIVERED", 400, Some(500)),
            ],
            &submits,
        );
        assert_eq!(s.doubled(), None);
        assert_eq!(s.lost(), None);
    }

    #[test]
    fn overlapping_attempts_and_stray_submissions_are_doubled() {
        let submits = [submit(150)];
        let overlapping = seen(
            vec![
                attempt("ABANDONED", 100, Some(300)),
                attempt("DELIVERED", 200, Some(500)),
            ],
            &submits,
        );
        assert!(overlapping.doubled().unwrap().contains("attempts overlap"));
        let outside = [submit(350)];
        let stray = seen(
            vec![
                attempt("FAILED", 100, Some(300)),
                attempt("DELIVERED", 400, Some(500)),
            ],
            &outside,
        );
        assert!(stray.doubled().unwrap().contains("outside every attempt"));
        let twice = [submit(410), submit(420)];
        let in_one = seen(vec![attempt("DELIVERED", 400, Some(500))], &twice);
        assert!(in_one.doubled().unwrap().contains("twice within one"));
    }

    #[test]
    fn delivered_without_a_submission_is_lost() {
        let s = seen(vec![attempt("DELIVERED", 400, Some(500))], &[]);
        assert!(s.lost().unwrap().contains("no submission names it"));
    }

    #[test]
    fn a_message_is_named_only_by_its_whole_id() {
        assert!(names("message inv_ab from x; show inv_ab", "inv_ab"));
        assert!(!names("message inv_abc from x", "inv_ab"));
        assert!(names("messages inv_x, inv_ab", "inv_ab"));
    }
}
