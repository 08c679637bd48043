//! `adapters check`: a profile's own sample screens as a self-test.

use super::detect::Rules;
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

/// The classification `rules` give a sample screen.
pub fn classify_sample(rules: &Rules, sample: &Sample) -> Activity {
    let lines: Vec<String> = sample.screen.lines().map(|l| l.trim_end().to_owned()).collect();
    let osc: Vec<Vec<u8>> = sample.osc.iter().map(|o| o.as_bytes().to_vec()).collect();
    let cursor_row = sample
        .cursor_row
        .unwrap_or_else(|| lines.iter().rposition(|l| !l.is_empty()).unwrap_or(0) as u16);
    rules.classify(&ScreenView {
        lines: &lines,
        title: &sample.title,
        osc: &osc,
        cursor_row,
    })
}
