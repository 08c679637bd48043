//! What a plugin instance's store holds, and the host functions it may call.
//!
//! Each instance gets a WASI context with nothing in it — no preopened
//! directories, no environment, no arguments, no network — because a Rust
//! guest built for `wasm32-wasip2` imports WASI through its standard library
//! even when it uses none of it. Its stderr is a small in-memory pipe, so a
//! panic message can go into the error the host reports. The only doors out
//! are the `host` interface: logging, and reading the files the profile
//! lists (see [`super::reads`]).

use std::sync::Arc;

use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxView, WasiView};

use super::bindings::agent_comms::adapter::host::{Host, Level};
use super::reads::ReadAllowlist;

/// Bytes of guest stderr kept (a panic message fits).
const STDERR_BYTES: usize = 4096;
/// Longer log messages are cut.
const LOG_BYTES: usize = 2048;

pub(super) struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    stderr: MemoryOutputPipe,
    pub(super) limiter: MemoryCap,
    plugin: String,
    reads: Arc<ReadAllowlist>,
}

impl State {
    pub(super) fn new(plugin: &str, reads: Arc<ReadAllowlist>, memory_cap: usize) -> Self {
        let stderr = MemoryOutputPipe::new(STDERR_BYTES);
        Self {
            wasi: WasiCtx::builder().stderr(stderr.clone()).build(),
            table: ResourceTable::new(),
            stderr,
            limiter: MemoryCap::new(memory_cap),
            plugin: plugin.to_owned(),
            reads,
        }
    }

    /// The last lines the guest wrote to stderr (a panic's message),
    /// without the hint about backtraces.
    pub(super) fn stderr_tail(&self) -> Option<String> {
        let text = String::from_utf8_lossy(&self.stderr.contents()).into_owned();
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("note: run with"))
            .collect();
        let tail = lines[lines.len().saturating_sub(2)..].join(" ");
        (!tail.is_empty()).then_some(tail)
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl Host for State {
    fn log(&mut self, level: Level, mut message: String) {
        if message.len() > LOG_BYTES {
            let cut = (0..=LOG_BYTES)
                .rev()
                .find(|&i| message.is_char_boundary(i))
                .unwrap_or(0);
            message.truncate(cut);
            message.push('…');
        }
        let plugin = self.plugin.as_str();
        match level {
            Level::Error => tracing::error!(plugin, "{message}"),
            Level::Warn => tracing::warn!(plugin, "{message}"),
            Level::Info => tracing::info!(plugin, "{message}"),
            Level::Debug => tracing::debug!(plugin, "{message}"),
            Level::Trace => tracing::trace!(plugin, "{message}"),
        }
    }

    fn read_file(&mut self, path: String) -> Result<String, String> {
        let result = self.reads.read(&path);
        if let Err(why) = &result {
            tracing::debug!(plugin = self.plugin.as_str(), "read-file refused: {why}");
        }
        result
    }
}

/// The store's limits, remembering whether memory growth was refused, so
/// the trap that follows reads as "over the memory cap", not as a bug.
pub(super) struct MemoryCap {
    limits: StoreLimits,
    pub(super) refused: bool,
}

impl MemoryCap {
    fn new(bytes: usize) -> Self {
        Self {
            limits: StoreLimitsBuilder::new()
                .memory_size(bytes)
                .trap_on_grow_failure(true)
                .build(),
            refused: false,
        }
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.limits.memory_growing(current, desired, maximum);
        self.refused |= !matches!(allowed, Ok(true));
        allowed
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}
