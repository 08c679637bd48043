//! The environment knobs, a subset of the Python fakes' (tests/fakes/README.md).

use std::path::PathBuf;

pub struct Knobs {
    /// `FAKE_LOG`: the JSON-lines log.
    pub log: Option<PathBuf>,
    /// `FAKE_BUSY_MS`: busy time per message (a `BUSY=N` token overrides).
    pub busy_ms: u64,
    /// `FAKE_NO_BRACKETED`: never turn bracketed paste on.
    pub no_bracketed: bool,
    /// `FAKE_DROP_ENTER`: the first N Enters that would submit are lost.
    pub drop_enter: u64,
}

impl Knobs {
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let flag = |name: &str| var(name).is_some_and(|v| !v.is_empty() && v != "0");
        let number = |name: &str, default: u64| match var(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                format!("{name}={v:?} is not a whole number of milliseconds or Enters")
            }),
        };
        Ok(Self {
            log: var("FAKE_LOG").filter(|v| !v.is_empty()).map(PathBuf::from),
            busy_ms: number("FAKE_BUSY_MS", 300)?,
            no_bracketed: flag("FAKE_NO_BRACKETED"),
            drop_enter: number("FAKE_DROP_ENTER", 0)?,
        })
    }
}
