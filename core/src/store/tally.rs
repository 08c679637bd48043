//! [`Tally`]: how many rows are in each state, for what `store status` and
//! `store migrate` print.
//!
//! Every state is kept, zero or not, so the JSON of a tally always has the
//! same keys (a script can read `.messages.FAILED` without checking for
//! it), while the text for people names only the states that occur.

use std::fmt;

use serde::ser::{Serialize, SerializeMap, Serializer};

/// A count per state of an enum, in the enum's own order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally<S: 'static> {
    counts: Vec<(S, usize)>,
}

impl<S: Copy + PartialEq + fmt::Display> Tally<S> {
    /// Counts `items` over `all` (an enum's `ALL`).
    pub fn of(all: &'static [S], items: impl IntoIterator<Item = S>) -> Self {
        Self::from_counts(all, items.into_iter().map(|s| (s, 1)))
    }

    /// Adds up `counts` (a state may come more than once) over `all`.
    pub fn from_counts(all: &'static [S], counts: impl IntoIterator<Item = (S, usize)>) -> Self {
        let mut tally = Tally {
            counts: all.iter().map(|&s| (s, 0)).collect(),
        };
        for (state, n) in counts {
            if let Some(slot) = tally.counts.iter_mut().find(|(s, _)| *s == state) {
                slot.1 += n;
            }
        }
        tally
    }

    pub fn get(&self, state: S) -> usize {
        self.counts
            .iter()
            .find(|(s, _)| *s == state)
            .map_or(0, |&(_, n)| n)
    }

    pub fn total(&self) -> usize {
        self.counts.iter().map(|&(_, n)| n).sum()
    }
}

/// "400 DELIVERED, 3 PENDING": the states that occur, or "none".
impl<S: Copy + PartialEq + fmt::Display> fmt::Display for Tally<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .counts
            .iter()
            .filter(|&&(_, n)| n > 0)
            .map(|(s, n)| format!("{n} {s}"))
            .collect();
        if parts.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// `{"PENDING": 3, "DELIVERING": 0, …}`, every state.
impl<S: Copy + PartialEq + fmt::Display> Serialize for Tally<S> {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        let mut map = serializer.serialize_map(Some(self.counts.len()))?;
        for (state, n) in &self.counts {
            map.serialize_entry(&state.to_string(), n)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::InvocationStatus::{self, Delivered, Failed, Pending};

    #[test]
    fn every_state_is_in_the_json_and_only_those_that_occur_in_the_text() {
        let tally = Tally::of(InvocationStatus::ALL, [Pending, Delivered, Pending]);
        assert_eq!(tally.get(Pending), 2);
        assert_eq!(tally.total(), 3);
        assert_eq!(tally.to_string(), "2 PENDING, 1 DELIVERED");
        assert_eq!(
            serde_json::to_string(&tally).unwrap(),
            r#"{"PENDING":2,"DELIVERING":0,"DELIVERED":1,"UNAVAILABLE":0,"FAILED":0}"#
        );
        let none = Tally::from_counts(InvocationStatus::ALL, [(Failed, 0)]);
        assert_eq!(none.to_string(), "none");
    }
}
