//! The adapters section (issue 4): what an adapter costs, per form.
//!
//! One provider, Gemini CLI, exists in all three forms (the conformance
//! twins: the rules of `gemini-native.toml`, the `native-gemini` library and
//! the `wasm-gemini` component), so the forms are compared doing the same
//! work on the same 24×120 screen. Classification runs in-process, as the
//! supervisor runs it, and is timed per call over many calls. Loads are
//! timed as a supervisor pays them at start: a Wasm component compiled
//! (empty cache) and loaded from the compile cache, and a native library.

use std::path::Path;
use std::time::{Duration, Instant};

use agent_comms_core::adapter::{Activity, Profile, Rules, ScreenView};
use agent_comms_core::plugin::native::NativePlugin;
use agent_comms_core::plugin::wasm::{Limits, WasmPlugin};
use agent_comms_core::plugin::PluginHooks;
use anyhow::{ensure, Context};

use crate::bench::Bench;
use crate::progress;
use crate::report::{judge, Row, Section};
use crate::stats::{latencies, Summary};

const TITLE: &str = "Adapters: one classification and one load, per form (issue 4)";
const ROWS: usize = 24;
const COLS: usize = 120;

/// A Gemini-like screen mid-turn: the busy marker sits near the bottom, so
/// every form scans most of the screen before it answers.
fn screen() -> Vec<String> {
    let mut lines: Vec<String> = (0..ROWS - 6)
        .map(|i| {
            format!("{i:>3} │ {}", "lorem ipsum dolor sit amet ".repeat(4))[..COLS.min(112)]
                .to_owned()
        })
        .collect();
    lines.push("⠏ Reading the source tree (esc to cancel, 4s)".into());
    lines.push(String::new());
    lines.push(format!("╭{}╮", "─".repeat(COLS - 2)));
    lines.push(format!(
        "│ >   Type your message or @path/to/file{}│",
        " ".repeat(COLS - 41)
    ));
    lines.push(format!("╰{}╯", "─".repeat(COLS - 2)));
    lines.push("~/work/demo (main*)     no sandbox     gemini-2.5-pro (99% context left)".into());
    lines
}

pub fn section(bench: &Bench) -> Section {
    progress("adapters");
    let repo = bench.repo();
    let calls = bench.plan.classifications;
    let mut rows = Vec::new();
    let target = "median under 10 µs";
    for (form, result) in [
        ("TOML rules", classify_rules(&repo, calls)),
        (
            "native plugin",
            native(&bench.target_dir).and_then(|mut p| classify_plugin(&mut p, calls)),
        ),
        (
            "Wasm plugin",
            tempfile::tempdir()
                .context("cache dir")
                .and_then(|cache| wasm(&repo, cache.path()))
                .and_then(|mut p| classify_plugin(&mut p, calls)),
        ),
    ] {
        let met = result.as_ref().ok().map(|s| s.median.value() < 0.010);
        let mut row = Row::new(
            "classify a 24×120 screen",
            form,
            result.map_err(|e| format!("{e:#}")),
        );
        row.target = judge(target, met);
        rows.push(row);
    }
    let loads = bench.plan.plugin_loads;
    rows.push(Row::new(
        "load",
        "native plugin",
        time_loads(loads, || native(&bench.target_dir).map(drop)).map_err(|e| format!("{e:#}")),
    ));
    rows.push(Row::new(
        "load, compiling (empty cache)",
        "Wasm plugin",
        time_loads(loads.min(5), || {
            let cache = tempfile::tempdir()?;
            wasm(&repo, cache.path()).map(drop)
        })
        .map_err(|e| format!("{e:#}")),
    ));
    let cached = tempfile::tempdir().context("cache dir").and_then(|cache| {
        wasm(&repo, cache.path())?;
        time_loads(loads, || wasm(&repo, cache.path()).map(drop))
    });
    let met = cached.as_ref().ok().map(|s| s.median.value() < 5.0);
    let mut row = Row::new(
        "load from the compile cache",
        "Wasm plugin",
        cached.map_err(|e| format!("{e:#}")),
    );
    row.target = judge("median under 5 ms", met);
    rows.push(row);
    Section {
        title: TITLE.into(),
        intro: "The same adapter (Gemini CLI) as a TOML profile's rules, a native plugin and a Wasm \
                plugin — the conformance suite's three forms."
            .into(),
        rows,
        method: vec![
            format!(
                "**classify**: {calls} calls on one 24×120 screen whose busy marker is near the bottom, \
                 each timed alone, in this process (as the supervisor calls it); the answer is checked."
            ),
            "**load**: a native library with `NativePlugin::load` (abi_stable, with its layout check); \
             a Wasm component with `WasmPlugin::load`, once into an empty compile cache (compile, link, \
             instantiate, `info`) and then from a warm cache (map, link, instantiate, `info`)."
                .into(),
            "The plugins are the release builds: `cargo build --release --workspace` builds `native-gemini`, \
             `scripts/build-plugins` builds `wasm-gemini`."
                .into(),
        ],
    }
}

fn classify_rules(repo: &Path, calls: usize) -> anyhow::Result<Summary> {
    let path = repo.join("plugins/examples/native-gemini/gemini-native.toml");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let profile = Profile::parse(&path.display().to_string(), &text)?;
    let rules = Rules::new(profile.detect.as_ref().context("no [detect]")?)?;
    time_classify(calls, |view| Ok(rules.classify(view)))
}

fn classify_plugin(plugin: &mut dyn PluginHooks, calls: usize) -> anyhow::Result<Summary> {
    time_classify(calls, |view| Ok(plugin.classify(view)?))
}

fn time_classify(
    calls: usize,
    mut classify: impl FnMut(&ScreenView<'_>) -> anyhow::Result<Activity>,
) -> anyhow::Result<Summary> {
    let lines = screen();
    let view = ScreenView {
        lines: &lines,
        title: "",
        osc: &[],
        cursor_row: (ROWS - 3) as u16,
        foreground: "",
    };
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        let answer = classify(&view)?;
        samples.push(start.elapsed());
        ensure!(
            answer == Activity::Busy,
            "classified the busy screen as {answer:?}"
        );
    }
    Ok(latencies(&samples))
}

fn time_loads(
    loads: usize,
    mut load: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Summary> {
    let mut samples: Vec<Duration> = Vec::with_capacity(loads);
    for _ in 0..loads {
        let start = Instant::now();
        load()?;
        samples.push(start.elapsed());
    }
    Ok(latencies(&samples))
}

fn native(target_dir: &Path) -> anyhow::Result<NativePlugin> {
    let path = target_dir.join("release").join(format!(
        "{}native_gemini{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    ensure!(
        path.is_file(),
        "{} not found: cargo build --release --workspace",
        path.display()
    );
    Ok(NativePlugin::load(&path)?)
}

/// The Wasm twin, compiled into (or loaded from) the compile cache `cache`.
fn wasm(repo: &Path, cache: &Path) -> anyhow::Result<WasmPlugin> {
    let path = repo.join("target/wasm/wasm32-wasip2/release/wasm_gemini.wasm");
    ensure!(
        path.is_file(),
        "{} not found: scripts/build-plugins",
        path.display()
    );
    Ok(WasmPlugin::load_with(
        &path,
        Vec::new(),
        Some(cache),
        Limits::default(),
    )?)
}
