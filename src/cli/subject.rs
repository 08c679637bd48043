//! The id of the thing a command acts on, named the one way every command
//! names it: positionally (`runtime show bob`). `--id bob` is still
//! accepted, hidden from the help, because scripts and printed repairs
//! written before use it; both given and different is refused.

use anyhow::bail;
use clap::Args;

#[derive(Args, Clone)]
pub struct Subject {
    /// The runtime's id (`--id ID` is accepted too).
    #[arg(value_name = "ID", required_unless_present = "id_flag")]
    id: Option<String>,
    /// The same id, the older way of giving it.
    #[arg(long = "id", value_name = "ID", hide = true)]
    id_flag: Option<String>,
}

impl Subject {
    /// The id, from either form.
    pub fn id(&self) -> anyhow::Result<&str> {
        match (&self.id, &self.id_flag) {
            (Some(a), Some(b)) if a != b => {
                bail!("the id is given twice, as {a} and as --id {b}; give it once")
            }
            (Some(a), _) | (None, Some(a)) => Ok(a),
            (None, None) => bail!("give the id of what to act on"),
        }
    }

    /// Whether the two forms agree (or only one is given).
    pub fn agrees(&self) -> bool {
        self.id().is_ok()
    }

    /// The id and the positional argument after it, for a command that
    /// takes one more (`runtime deliver ID TEXT`): with `--id ID TEXT`,
    /// clap hands TEXT to the first positional slot, so it moves on.
    pub fn id_then(self, next: Option<String>) -> anyhow::Result<(String, Option<String>)> {
        match (self.id, self.id_flag, next) {
            (Some(first), Some(flag), None) => Ok((flag, Some(first))),
            (id, id_flag, next) => {
                let subject = Subject { id, id_flag };
                Ok((subject.id()?.to_owned(), next))
            }
        }
    }
}
