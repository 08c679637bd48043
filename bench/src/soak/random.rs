//! A small pseudo-random generator (xorshift64*): the soak's choices need
//! to be varied, not secure, and a seed printed in the report lets a run's
//! schedule be told apart from another's.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub struct Random(u64);

impl Random {
    /// A seed from the clock.
    pub fn seed() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1
    }

    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }

    /// True one time in `n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }

    /// A pause of `low..=high` ms.
    pub fn millis(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(self.between(low, high))
    }

    /// A terminal size: 10–60 rows, 40–200 columns.
    pub fn size(&mut self) -> (u16, u16) {
        (self.between(10, 60) as u16, self.between(40, 200) as u16)
    }
}
