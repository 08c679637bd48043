//! `agent-comms man [PAGE]`: the roff manual pages of each binary, made by
//! clap_mangen from the same definitions their help and completions come
//! from, so a page cannot tell of a flag that does not exist.
//!
//! A binary's page lists its subcommands as pages of their own
//! (`agent-comms-session(1)`); `--out-dir` writes all of them, which is
//! what scripts/install-shell-extras installs. Without it one page goes to
//! standard output, for `agent-comms man | man -l -`.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Command, ValueEnum};
use clap_mangen::Man;

#[derive(Clone, Copy, ValueEnum)]
pub enum Page {
    #[value(name = "agent-comms")]
    AgentComms,
    K,
    Km,
}

pub fn run(page: Option<Page>, out_dir: Option<PathBuf>) -> anyhow::Result<i32> {
    let Some(dir) = out_dir else {
        let mut out = Vec::new();
        man(command(page.unwrap_or(Page::AgentComms))).render(&mut out)?;
        std::io::stdout().write_all(&out)?;
        return Ok(0);
    };
    let pages = page.map_or(vec![Page::AgentComms, Page::K, Page::Km], |p| vec![p]);
    std::fs::create_dir_all(&dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let mut written = 0;
    for page in pages {
        let mut cmd = command(page).disable_help_subcommand(true);
        cmd.build();
        written += write_all(&cmd, &dir)?;
    }
    println!("wrote {written} pages to {}", dir.display());
    Ok(0)
}

fn command(page: Page) -> Command {
    match page {
        Page::AgentComms => super::agent_comms::command(),
        Page::K => super::cells_grammar::k_command(),
        Page::Km => super::cells_grammar::km_command(),
    }
}

fn man(cmd: Command) -> Man {
    Man::new(cmd)
        .source(format!("agent-comms {}", env!("CARGO_PKG_VERSION")))
        .manual("agent-comms manual")
}

/// `cmd`'s page and those of its visible subcommands, as `<name>.1` files.
fn write_all(cmd: &Command, dir: &Path) -> anyhow::Result<usize> {
    let mut written = 0;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        written += write_all(sub, dir)?;
    }
    let page = man(cmd.clone());
    page.generate_to(dir).map_err(|e| {
        anyhow::anyhow!(
            "cannot write {}: {e}",
            dir.join(page.get_filename()).display()
        )
    })?;
    Ok(written + 1)
}
