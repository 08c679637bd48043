//! Busy/idle classification from a profile's rules, and its debounce.
//!
//! Signals combine the way the delivery discipline needs: the program is
//! busy when any signal says busy, and idle when every signal it is giving
//! says idle. A kind of signal that says nothing at all — an OSC state a
//! provider version never sends, a title it never sets — does not hold idle
//! back. The debounce makes busy immediate and idle patient: a TUI that
//! blinks idle for a frame between two busy ones is still busy — unless
//! the idle comes from a rule the profile marks `authoritative`, the
//! program's own word that its turn ended (Codex's OSC 7501 `state=done`),
//! which is taken at once: a screen can blink, that signal does not.

use std::time::{Duration, Instant};

use regex::Regex;

use super::profile::{Anchor, Detect, Region, Rule};
use super::{Activity, ScreenView};

struct CompiledRule {
    state: Activity,
    kind: SignalKind,
    pattern: Regex,
    region: Option<Region>,
    osc_prefix: Option<Vec<u8>>,
    invert: bool,
    authoritative: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SignalKind {
    Screen,
    Title,
    Osc,
    Process,
}

/// A profile's detection rules, compiled.
pub struct Rules {
    rules: Vec<CompiledRule>,
    debounce: Duration,
}

impl Rules {
    /// Compiles `detect`; profiles are validated at load, so patterns compile.
    pub fn new(detect: &Detect) -> Result<Self, regex::Error> {
        let mut rules = Vec::new();
        for rule in &detect.rules {
            rules.extend(compile(rule)?);
        }
        Ok(Self {
            rules,
            debounce: Duration::from_millis(detect.debounce_ms),
        })
    }

    pub fn debounce(&self) -> Duration {
        self.debounce
    }

    /// The raw classification of one screen (no debounce).
    pub fn classify(&self, view: &ScreenView<'_>) -> Activity {
        self.read(view).activity
    }

    /// [`Rules::classify`], and whether its idle comes from an
    /// authoritative rule (then it needs no debounce), in one pass.
    pub fn read(&self, view: &ScreenView<'_>) -> Reading {
        let (mut busy, mut idle, mut authoritative) = (false, false, false);
        for rule in self.rules.iter().filter(|r| r.matches(view)) {
            match rule.state {
                Activity::Busy => busy = true,
                Activity::Idle => {
                    idle = true;
                    authoritative |= rule.authoritative;
                }
                Activity::Unknown => {}
            }
        }
        let activity = match (busy, idle) {
            (true, _) => Activity::Busy,
            (false, true) => Activity::Idle,
            (false, false) => Activity::Unknown,
        };
        Reading {
            activity,
            authoritative: activity == Activity::Idle && authoritative,
        }
    }
}

/// What the rules read on one screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Busy when any rule says busy, idle when one says idle and none busy.
    pub activity: Activity,
    /// The idle comes from a rule marked `authoritative`: the program's own
    /// word that its turn ended.
    pub authoritative: bool,
}

fn compile(rule: &Rule) -> Result<Vec<CompiledRule>, regex::Error> {
    let mut out = Vec::new();
    let mut add = |kind, pattern: &Option<toml::Spanned<String>>| -> Result<(), regex::Error> {
        if let Some(p) = pattern {
            out.push(CompiledRule {
                state: rule.state.into(),
                kind,
                pattern: Regex::new(p.get_ref())?,
                region: rule.region,
                osc_prefix: rule.osc_prefix.as_ref().map(|p| p.as_bytes().to_vec()),
                invert: rule.invert,
                authoritative: rule.authoritative,
            });
        }
        Ok(())
    };
    add(SignalKind::Screen, &rule.screen)?;
    add(SignalKind::Title, &rule.title)?;
    add(SignalKind::Osc, &rule.osc)?;
    add(SignalKind::Process, &rule.process)?;
    Ok(out)
}

impl CompiledRule {
    /// Whether the rule applies to `view`. A signal that is absent — no
    /// OSC sequence of the rule's kind yet, no known foreground process —
    /// applies to no rule, inverted or not: it says nothing.
    fn matches(&self, view: &ScreenView<'_>) -> bool {
        let found = match self.kind {
            SignalKind::Screen => region_rows(view.lines, view.cursor_row, self.region)
                .iter()
                .any(|row| self.pattern.is_match(row)),
            SignalKind::Title => self.pattern.is_match(view.title),
            SignalKind::Osc => {
                // The latest sequence of the kind this rule reads is the
                // program's current state.
                let latest = view
                    .osc
                    .iter()
                    .rev()
                    .find(|o| self.osc_prefix.as_ref().is_none_or(|p| o.starts_with(p)));
                match latest {
                    Some(o) => self.pattern.is_match(&String::from_utf8_lossy(o)),
                    None => return false,
                }
            }
            SignalKind::Process if view.foreground.is_empty() => return false,
            SignalKind::Process => self.pattern.is_match(view.foreground),
        };
        found != self.invert
    }
}

/// The rows of `region` (the whole screen when there is none).
pub(crate) fn region_rows(lines: &[String], cursor_row: u16, region: Option<Region>) -> &[String] {
    match region {
        Some(region) => &lines[region_range(lines, cursor_row, region)],
        None => lines,
    }
}

/// Where `region` lies in `lines`, clamped to them.
pub(crate) fn region_range(
    lines: &[String],
    cursor_row: u16,
    region: Region,
) -> std::ops::Range<usize> {
    let n = lines.len() as i64;
    let start = match region.from {
        Anchor::Top => i64::from(region.offset),
        Anchor::Cursor => i64::from(cursor_row) + i64::from(region.offset),
        Anchor::Bottom => {
            let last = lines
                .iter()
                .rposition(|l| !l.trim().is_empty())
                .unwrap_or(0) as i64;
            last - i64::from(region.offset) - i64::from(region.rows) + 1
        }
    };
    let start = start.clamp(0, n);
    let end = (start + i64::from(region.rows)).clamp(0, n);
    start as usize..end as usize
}

/// Busy at once, idle only after the debounce period without busy.
pub struct BusyDetector {
    debounce: Duration,
    last_busy: Option<Instant>,
}

impl BusyDetector {
    pub fn new(debounce: Duration) -> Self {
        Self {
            debounce,
            last_busy: None,
        }
    }

    /// Feeds one raw classification made at `now`; returns the debounced
    /// one. `authoritative`: the idle is the program's own word (see
    /// [`Reading::authoritative`]), taken without the debounce.
    pub fn observe(&mut self, now: Instant, raw: Activity, authoritative: bool) -> Activity {
        match raw {
            Activity::Busy => {
                self.last_busy = Some(now);
                Activity::Busy
            }
            Activity::Idle if authoritative => {
                self.last_busy = None;
                Activity::Idle
            }
            other => match self.last_busy {
                Some(t) if now.duration_since(t) < self.debounce => Activity::Busy,
                _ => other,
            },
        }
    }

    /// When a pending idle becomes reportable, if one is pending.
    pub fn settles_at(&self) -> Option<Instant> {
        self.last_busy.map(|t| t + self.debounce)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::profile::Profile;

    fn rules(body: &str) -> Rules {
        let text = format!("schema = 1\nname = \"t\"\nversion = \"1\"\nkind = \"agent\"\ncommands = [\"t\"]\n{body}");
        Rules::new(
            Profile::parse("t.toml", &text)
                .unwrap()
                .detect
                .as_ref()
                .unwrap(),
        )
        .unwrap()
    }

    fn view<'a>(lines: &'a [String], title: &'a str, osc: &'a [Vec<u8>]) -> ScreenView<'a> {
        ScreenView {
            lines,
            title,
            osc,
            cursor_row: 0,
            foreground: "",
        }
    }

    #[test]
    fn any_busy_wins_and_silent_signals_do_not_hold_idle_back() {
        let r = rules(
            "[detect]\n[[detect.rules]]\nstate = \"busy\"\nosc = \"state=working\"\nosc_prefix = \"7501;\"\n\
             [[detect.rules]]\nstate = \"idle\"\nosc = \"state=(done|idle)\"\nosc_prefix = \"7501;\"\n\
             [[detect.rules]]\nstate = \"busy\"\ntitle = \"^[\\u2801-\\u28ff]\"\n",
        );
        let lines = vec!["› Ask Codex to do anything".to_owned()];
        let working = vec![b"7501;state=working:app=codex".to_vec()];
        let done = vec![
            b"7501;state=working:app=codex".to_vec(),
            b"7501;state=done:app=codex".to_vec(),
        ];
        assert_eq!(r.classify(&view(&lines, "", &working)), Activity::Busy);
        assert_eq!(
            r.classify(&view(&lines, "Mock title", &done)),
            Activity::Idle
        );
        assert_eq!(
            r.classify(&view(&lines, "⠙ Mock title", &done)),
            Activity::Busy
        );
        assert_eq!(r.classify(&view(&lines, "", &[])), Activity::Unknown);
    }

    #[test]
    fn regions_are_relative_to_the_last_row_with_text() {
        let r = rules(
            "[detect]\n[[detect.rules]]\nstate = \"busy\"\nscreen = \"esc interrupt\"\nregion = { from = \"bottom\", rows = 1 }\n",
        );
        let mut lines: Vec<String> = (0..5).map(|i| format!("row {i} esc interrupt")).collect();
        lines.push("  ⬝■■⬝  esc interrupt".into());
        lines.push(String::new());
        assert_eq!(r.classify(&view(&lines, "", &[])), Activity::Busy);
        lines[5] = "  /tmp/work".into();
        assert_eq!(r.classify(&view(&lines, "", &[])), Activity::Unknown);
    }

    #[test]
    fn a_shell_is_busy_while_it_runs_anything_but_itself() {
        let r = rules(
            "[detect]\n[[detect.rules]]\nstate = \"idle\"\nprocess = \"^bash$\"\n\
             [[detect.rules]]\nstate = \"busy\"\nprocess = \"^bash$\"\ninvert = true\n",
        );
        let lines = vec!["$ make".to_owned()];
        let with = |foreground| ScreenView {
            foreground,
            ..view(&lines, "", &[])
        };
        assert_eq!(r.classify(&with("bash")), Activity::Idle);
        assert_eq!(r.classify(&with("make")), Activity::Busy);
        assert_eq!(
            r.classify(&with("")),
            Activity::Unknown,
            "unknown says nothing"
        );
    }

    #[test]
    fn debounce_makes_busy_immediate_and_idle_patient() {
        let mut d = BusyDetector::new(Duration::from_millis(300));
        let t0 = Instant::now();
        assert_eq!(d.observe(t0, Activity::Busy, false), Activity::Busy);
        assert_eq!(
            d.observe(t0 + Duration::from_millis(100), Activity::Idle, false),
            Activity::Busy
        );
        assert_eq!(
            d.observe(t0 + Duration::from_millis(300), Activity::Idle, false),
            Activity::Idle
        );
    }

    #[test]
    fn an_authoritative_idle_needs_no_debounce_and_busy_still_wins() {
        let r = rules(
            "[detect]
debounce_ms = 400
[[detect.rules]]
state = \"busy\"
osc = \"state=working\"
osc_prefix = \"7501;\"
\
             [[detect.rules]]
state = \"idle\"
osc = \"state=(done|idle)\"
osc_prefix = \"7501;\"
authoritative = true
\
             [[detect.rules]]
state = \"busy\"
title = \"^[\\u2801-\\u28ff]\"
\
             [[detect.rules]]
state = \"idle\"
screen = \"^› \"
",
        );
        let lines = vec!["› Ask Codex to do anything".to_owned()];
        let working = vec![b"7501;state=working:app=codex".to_vec()];
        let done = vec![b"7501;state=done:app=codex".to_vec()];
        assert!(r.read(&view(&lines, "", &done)).authoritative);
        assert!(!r.read(&view(&lines, "", &working)).authoritative);
        // The composer alone says idle, but not authoritatively.
        assert!(!r.read(&view(&lines, "", &[])).authoritative);

        let mut d = BusyDetector::new(r.debounce());
        let t0 = Instant::now();
        assert_eq!(d.observe(t0, Activity::Busy, false), Activity::Busy);
        let soon = t0 + Duration::from_millis(10);
        assert_eq!(d.observe(soon, Activity::Idle, false), Activity::Busy);
        assert_eq!(d.observe(soon, Activity::Idle, true), Activity::Idle);
        // A spinner still in the title keeps it busy: busy wins.
        let spinning = view(&lines, "⠙ fake", &done);
        assert_eq!(r.classify(&spinning), Activity::Busy);
    }

    #[test]
    fn only_an_idle_rule_can_be_authoritative() {
        let text = "schema = 1\nname = \"t\"\nversion = \"1\"\nkind = \"agent\"\ncommands = [\"t\"]\n\
                    [detect]\n[[detect.rules]]\nstate = \"busy\"\nosc = \"x\"\nauthoritative = true\n";
        let e = Profile::parse("t.toml", text).unwrap_err().to_string();
        assert!(
            e.contains("t.toml:10:1:") && e.contains("only an idle rule can be authoritative"),
            "{e}"
        );
    }
}
