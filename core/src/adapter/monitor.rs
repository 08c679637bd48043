//! A live session's activity, as its adapter reads the screen.
//!
//! The monitor asks the adapter's plugin when it has one, and the profile's
//! rules otherwise. A plugin that fails — panics, runs past its deadline,
//! exceeds its memory, traps — is reported once and set aside for the rest
//! of the session, which goes on with the rules: a third party's bug costs
//! precision, never the session.

use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::detect::{BusyDetector, Reading, Rules};
use super::hooks::{PluginError, PluginHooks};
use super::profile::Profile;
use super::{Activity, ScreenView};

/// What a supervisor needs to build its monitor: the profile as text (it
/// travels in the supervisor's start-up configuration) and where it came
/// from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdapterSpec {
    pub name: String,
    /// Where the profile came from, for messages.
    pub source: String,
    pub text: String,
    /// The plugin, resolved against the profile's directory.
    pub plugin: Option<PathBuf>,
}

/// Who answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Classifier {
    Plugin,
    Rules,
    /// The adapter has neither rules nor a working plugin.
    Nothing,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActivityReport {
    /// Debounced: busy at once, idle only after the quiet period.
    pub activity: Activity,
    /// This screen alone.
    pub raw: Activity,
    pub adapter: String,
    pub by: Classifier,
    /// Why the plugin is not (or no longer) used, if it is not.
    pub plugin_error: Option<String>,
    /// While `activity` is unknown: for how long it has been, in ms. A
    /// program that stays unreadable never becomes deliverable, and says
    /// so only through this (see `doctor`'s `SCREEN_UNREADABLE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown_for_ms: Option<u64>,
}

pub struct ActivityMonitor {
    adapter: String,
    rules: Option<Rules>,
    plugin: Option<Box<dyn PluginHooks>>,
    plugin_error: Option<String>,
    detector: BusyDetector,
    /// When the debounced activity last became unknown, while it is.
    unknown_since: Option<Instant>,
    /// When a screen (or the program's report) last read busy.
    busy_at: Option<Instant>,
}

impl ActivityMonitor {
    /// Builds the monitor from the parsed profile and the plugin the
    /// plugin host loaded for it (`None`: the profile names none). A
    /// profile or plugin that failed to load is reported in every answer
    /// rather than refusing the session.
    pub fn new(
        adapter: &str,
        profile: Result<&Profile, &str>,
        plugin: Option<Result<Box<dyn PluginHooks>, PluginError>>,
    ) -> Self {
        let rules = profile
            .as_ref()
            .ok()
            .and_then(|p| p.detect.as_ref())
            .and_then(|d| Rules::new(d).ok());
        let debounce = rules.as_ref().map(Rules::debounce).unwrap_or_default();
        let (plugin, plugin_error) = match (profile, plugin) {
            (Err(e), _) => (None, Some(format!("profile: {e}"))),
            (Ok(_), None) => (None, None),
            (Ok(_), Some(Ok(plugin))) => (Some(plugin), None),
            (Ok(_), Some(Err(e))) => {
                tracing::error!("{e}; using the profile's rules instead");
                (None, Some(e.to_string()))
            }
        };
        Self {
            adapter: adapter.to_owned(),
            rules,
            plugin,
            plugin_error,
            detector: BusyDetector::new(debounce),
            unknown_since: None,
            busy_at: None,
        }
    }

    /// When a screen (or the program's report) last read busy, however
    /// briefly: the supervisor shows the monitor every screen, so a turn
    /// that came and went between two deliveries is still seen here.
    pub fn busy_at(&self) -> Option<Instant> {
        self.busy_at
    }

    /// Classifies `view` as seen at `now`. `reported` reads what the program
    /// itself says it is doing (its own state file), when it says: its busy
    /// is busy, and its idle, with the screen not saying busy, is
    /// authoritative. It is read only when the screen does not already say
    /// busy, which it could not change.
    pub fn observe(
        &mut self,
        view: &ScreenView<'_>,
        now: Instant,
        reported: impl FnOnce() -> Option<Activity>,
    ) -> ActivityReport {
        let (screen, by) = self.classify(view);
        let reported = match screen.activity {
            Activity::Busy => None,
            _ => reported(),
        };
        let raw = match reported {
            Some(Activity::Busy) => Activity::Busy,
            _ => screen.activity,
        };
        if raw == Activity::Busy {
            self.busy_at = Some(now);
        }
        let authoritative =
            raw == Activity::Idle && (screen.authoritative || reported == Some(Activity::Idle));
        let activity = self.detector.observe(now, raw, authoritative);
        let unknown_for_ms = match activity {
            Activity::Unknown => {
                let since = *self.unknown_since.get_or_insert(now);
                Some(now.duration_since(since).as_millis() as u64)
            }
            _ => {
                self.unknown_since = None;
                None
            }
        };
        ActivityReport {
            activity,
            raw,
            adapter: self.adapter.clone(),
            by,
            plugin_error: self.plugin_error.clone(),
            unknown_for_ms,
        }
    }

    fn classify(&mut self, view: &ScreenView<'_>) -> (Reading, Classifier) {
        if let Some(plugin) = self.plugin.as_mut() {
            match plugin.classify(view) {
                Ok(activity) => {
                    let reading = Reading {
                        activity,
                        authoritative: false,
                    };
                    return (reading, Classifier::Plugin);
                }
                Err(e) => {
                    tracing::error!("{e}; the session goes on with the profile's rules");
                    self.plugin_error = Some(e.to_string());
                    self.plugin = None;
                }
            }
        }
        match &self.rules {
            Some(rules) => (rules.read(view), Classifier::Rules),
            None => (
                Reading {
                    activity: Activity::Unknown,
                    authoritative: false,
                },
                Classifier::Nothing,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A screen of `lines` and nothing else.
    fn screen_of(lines: &[String]) -> ScreenView<'_> {
        ScreenView {
            lines,
            title: "",
            osc: &[],
            cursor_row: 0,
            foreground: "",
        }
    }

    #[test]
    fn says_how_long_the_screen_has_been_unreadable() {
        let text = "schema = 1\nname = \"t\"\nversion = \"1\"\nkind = \"agent\"\ncommands = [\"t\"]\n\
                    [detect]\ndebounce_ms = 0\n[[detect.rules]]\nstate = \"idle\"\nscreen = '^> '\n";
        let profile = Profile::parse("t.toml", text).unwrap();
        let mut monitor = ActivityMonitor::new("t", Ok(&profile), None);
        let look = |monitor: &mut ActivityMonitor, row: &str, at| {
            let lines = [row.to_owned()];
            monitor.observe(&screen_of(&lines), at, || None)
        };
        let t0 = Instant::now();
        assert_eq!(look(&mut monitor, "Sign in", t0).unknown_for_ms, Some(0));
        let later = look(&mut monitor, "Sign in", t0 + Duration::from_secs(3));
        assert_eq!(later.activity, Activity::Unknown);
        assert_eq!(later.unknown_for_ms, Some(3000));
        let idle = look(&mut monitor, "> ready", t0 + Duration::from_secs(4));
        assert_eq!(idle.unknown_for_ms, None);
        let again = look(&mut monitor, "Sign in", t0 + Duration::from_secs(5));
        assert_eq!(again.unknown_for_ms, Some(0), "counted afresh");
    }

    /// The program's own report: its busy overrides an idle screen, and its
    /// idle needs no debounce — unless the screen still says busy.
    #[test]
    fn what_the_program_reports_outweighs_the_screen() {
        let text = "schema = 1\nname = \"t\"\nversion = \"1\"\nkind = \"agent\"\ncommands = [\"t\"]\n\
                    [detect]\ndebounce_ms = 400\n[[detect.rules]]\nstate = \"idle\"\nscreen = '^> '\n\
                    [[detect.rules]]\nstate = \"busy\"\nscreen = 'esc to interrupt'\n";
        let profile = Profile::parse("t.toml", text).unwrap();
        let mut monitor = ActivityMonitor::new("t", Ok(&profile), None);
        let mut look = |row: &str, at, reported| {
            let lines = [row.to_owned()];
            monitor
                .observe(&screen_of(&lines), at, || reported)
                .activity
        };
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        assert_eq!(look("> ready", ms(0), Some(Activity::Busy)), Activity::Busy);
        // The screen alone would wait out the debounce after that busy.
        assert_eq!(look("> ready", ms(10), None), Activity::Busy);
        assert_eq!(
            look("> ready", ms(20), Some(Activity::Idle)),
            Activity::Idle
        );
        assert_eq!(
            look("esc to interrupt", ms(30), Some(Activity::Idle)),
            Activity::Busy
        );
        assert_eq!(
            look("> ready", ms(40), Some(Activity::Idle)),
            Activity::Idle
        );
    }
}
