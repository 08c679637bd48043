//! `adapters check`: a profile's own sample screens as a self-test.

use super::detect::Rules;
use super::hooks::{PluginError, PluginHooks};
use super::profile::{Profile, Sample};
use super::{Activity, ScreenView};

/// The outcome of one sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleResult {
    pub name: String,
    pub expected: Activity,
    pub got: Activity,
}

impl SampleResult {
    pub fn passed(&self) -> bool {
        self.expected == self.got
    }
}

/// Classifies every sample of `profile` with its rules.
pub fn run_samples(profile: &Profile) -> Result<Vec<SampleResult>, regex::Error> {
    let Some(detect) = &profile.detect else {
        return Ok(Vec::new());
    };
    let rules = Rules::new(detect)?;
    Ok(profile
        .samples
        .iter()
        .map(|s| SampleResult {
            name: s.name.clone(),
            expected: s.expect,
            got: classify_sample(&rules, s),
        })
        .collect())
}

/// The outcome of one sample run through a plugin's `classify`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSampleResult {
    pub name: String,
    pub expected: Activity,
    pub got: Result<Activity, PluginError>,
}

impl PluginSampleResult {
    pub fn passed(&self) -> bool {
        self.got.as_ref() == Ok(&self.expected)
    }
}

/// Classifies every sample of `profile` with `plugin`, whatever its form.
pub fn run_plugin_samples(
    profile: &Profile,
    plugin: &mut dyn PluginHooks,
) -> Vec<PluginSampleResult> {
    profile
        .samples
        .iter()
        .map(|s| PluginSampleResult {
            name: s.name.clone(),
            expected: s.expect,
            got: with_sample_view(s, |view| plugin.classify(view)),
        })
        .collect()
}

/// The classification `rules` give a sample screen.
pub fn classify_sample(rules: &Rules, sample: &Sample) -> Activity {
    with_sample_view(sample, |view| rules.classify(view))
}

/// Calls `f` with the screen a sample records.
fn with_sample_view<R>(sample: &Sample, f: impl FnOnce(&ScreenView<'_>) -> R) -> R {
    let lines: Vec<String> = sample
        .screen
        .lines()
        .map(|l| l.trim_end().to_owned())
        .collect();
    let osc: Vec<Vec<u8>> = sample.osc.iter().map(|o| o.as_bytes().to_vec()).collect();
    let cursor_row = sample
        .cursor_row
        .unwrap_or_else(|| lines.iter().rposition(|l| !l.is_empty()).unwrap_or(0) as u16);
    f(&ScreenView {
        lines: &lines,
        title: &sample.title,
        osc: &osc,
        cursor_row,
        foreground: &sample.foreground,
    })
}
