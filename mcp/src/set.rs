//! Tool sets: how much an agent given this server may do. The set is fixed
//! when the server starts (`--tools`); a tool outside it is not listed, and
//! a call naming it is refused as an unknown tool.

use std::fmt;
use std::str::FromStr;

/// Ordered: each set holds every tool of the sets before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum ToolSet {
    /// Lists, snapshots, reads and waits: nothing changes.
    Readonly,
    /// Adds runs, sends and messages; interrupting and killing only the
    /// cell sessions this server started.
    #[default]
    Default,
    /// Adds interrupting and killing any session.
    All,
}

impl ToolSet {
    pub const NAMES: &'static str = "readonly, default or all";

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Readonly => "readonly",
            Self::Default => "default",
            Self::All => "all",
        }
    }
}

impl fmt::Display for ToolSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown tool set '{0}'; use {names}", names = ToolSet::NAMES)]
pub struct UnknownToolSet(String);

impl FromStr for ToolSet {
    type Err = UnknownToolSet;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "readonly" => Ok(Self::Readonly),
            "default" => Ok(Self::Default),
            "all" => Ok(Self::All),
            other => Err(UnknownToolSet(other.to_owned())),
        }
    }
}
