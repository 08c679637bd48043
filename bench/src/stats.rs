//! Summaries of repeated measurements.
//!
//! Medians rather than means: a single scheduling hiccup on a 2-core machine
//! moves a mean a lot and a median not at all. p99 is the nearest-rank
//! percentile (an observed value, never interpolated), so with fewer than
//! 100 samples it is simply the worst one.

use std::time::Duration;

/// What one row reports: a median, a p99 where repetition makes one
/// meaningful, and how many samples they summarize.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub median: Quantity,
    pub p99: Option<Quantity>,
    pub samples: usize,
}

#[derive(Debug, Clone, Copy)]
pub enum Quantity {
    Millis(f64),
    Seconds(f64),
    MegabytesPerSec(f64),
    Megabytes(f64),
    MessagesPerSec(f64),
    /// How many times something happened (or how many there are).
    Count(f64),
}

impl Quantity {
    pub fn value(self) -> f64 {
        match self {
            Self::Millis(v)
            | Self::Seconds(v)
            | Self::MegabytesPerSec(v)
            | Self::Megabytes(v)
            | Self::MessagesPerSec(v)
            | Self::Count(v) => v,
        }
    }
}

impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::Millis(ms) if ms < 1.0 => write!(f, "{:.0} µs", ms * 1000.0),
            Self::Millis(ms) if ms < 100.0 => write!(f, "{ms:.2} ms"),
            Self::Millis(ms) => write!(f, "{ms:.0} ms"),
            Self::Seconds(s) => write!(f, "{s:.1} s"),
            Self::MegabytesPerSec(v) => write!(f, "{v:.1} MB/s"),
            Self::Megabytes(v) if v < 1.0 => write!(f, "{v:.2} MB"),
            Self::Megabytes(v) => write!(f, "{v:.1} MB"),
            Self::MessagesPerSec(v) => write!(f, "{v:.2} msg/s"),
            Self::Count(v) => write!(f, "{v:.0}"),
        }
    }
}

/// The durations of repeated runs, or why they stopped.
pub type Runs = Result<Vec<Duration>, String>;

/// Adds one run's result (a duration, for [`Runs`]), or keeps the first
/// failure.
pub fn push<T>(runs: &mut Result<Vec<T>, String>, run: anyhow::Result<T>) {
    if let Ok(done) = runs {
        match run {
            Ok(d) => done.push(d),
            Err(e) => *runs = Err(format!("{e:#}")),
        }
    }
}

/// Median and p99 of durations.
pub fn latencies(samples: &[Duration]) -> Summary {
    let ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    Summary {
        median: Quantity::Millis(median(&ms)),
        p99: Some(Quantity::Millis(percentile(&ms, 99.0))),
        samples: ms.len(),
    }
}

/// Median rate of runs that each moved `megabytes`; no p99 for a handful of
/// runs.
pub fn rates(megabytes: f64, runs: &[Duration]) -> Summary {
    let rates: Vec<f64> = runs.iter().map(|d| megabytes / d.as_secs_f64()).collect();
    Summary {
        median: Quantity::MegabytesPerSec(median(&rates)),
        p99: None,
        samples: rates.len(),
    }
}

/// One size reading.
pub fn size(megabytes: f64) -> Summary {
    one(Quantity::Megabytes(megabytes))
}

/// Median and p99 of sizes read from several processes.
pub fn sizes(megabytes: &[f64]) -> Summary {
    Summary {
        median: Quantity::Megabytes(median(megabytes)),
        p99: Some(Quantity::Megabytes(percentile(megabytes, 99.0))),
        samples: megabytes.len(),
    }
}

/// One reading of anything: a run measured once as a whole.
pub fn one(quantity: Quantity) -> Summary {
    Summary {
        median: quantity,
        p99: None,
        samples: 1,
    }
}

fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

fn median(values: &[f64]) -> f64 {
    let v = sorted(values);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn percentile(values: &[f64], p: f64) -> f64 {
    let v = sorted(values);
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_nearest_rank_p99() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&hundred, 99.0), 99.0);
        assert_eq!(percentile(&[5.0, 1.0], 99.0), 5.0);
    }
}
