//! Wasm plugins: WebAssembly components built against the WIT package in
//! `plugins/wit/`, run by wasmtime under a deadline and a memory cap.
//!
//! A plugin is third-party code running inside the supervisor, so it gets
//! nothing by default: no files, no environment, no network (see
//! [`host`]). Each call runs under an epoch deadline ([`engine`]) and a
//! memory cap; a call that runs past the deadline, grows memory past the
//! cap or traps is stopped and comes back as a [`PluginError`] naming which
//! of the three happened. A stopped instance cannot be entered again, so
//! the next call gets a fresh one: the plugin keeps working, minus whatever
//! state it had. Compiled components are cached on disk ([`cache`]), which
//! turns a load from tens of milliseconds into well under one.

mod cache;
mod engine;
mod host;
mod reads;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Engine, Store, Trap};

pub use self::cache::CacheOutcome;
use self::engine::Runtime;
use self::host::State;
use self::reads::ReadAllowlist;
use super::{ConversationRef, PluginError, PluginHooks, PluginInfo};
use crate::adapter::{Activity, ScreenView};

mod bindings {
    wasmtime::component::bindgen!({
        path: "../plugins/wit/v1",
        world: "adapter",
    });
}

use self::bindings::exports::agent_comms::adapter::plugin as wit;

/// The version of `agent-comms:adapter` this host speaks (`plugins/wit/v1`).
pub const INTERFACE_VERSION: &str = "1.0.0";
/// The export every plugin has, followed by its interface version.
const PLUGIN_EXPORT: &str = "agent-comms:adapter/plugin@";

/// What one plugin call may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time per call (kept to within about 10 ms).
    pub deadline: Duration,
    /// Linear memory of the instance, in bytes.
    pub memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            deadline: Duration::from_millis(50),
            memory_bytes: 32 << 20,
        }
    }
}

/// Where compiled plugins are kept: `$AGENT_COMMS_HOME/cache/wasm`.
pub fn default_cache_dir() -> PathBuf {
    crate::paths::user_home().join("cache").join("wasm")
}

/// A loaded Wasm plugin.
pub struct WasmPlugin {
    info: PluginInfo,
    runner: Runner,
    cache: CacheOutcome,
    cache_file: Option<PathBuf>,
}

impl WasmPlugin {
    /// Loads the component at `path` with the default [`Limits`]. `reads`
    /// are the files it may read (the profile's `plugin_reads`, `~` allowed);
    /// compiled code is cached in `cache_dir` when one is given.
    pub fn load(
        path: &Path,
        reads: Vec<PathBuf>,
        cache_dir: Option<&Path>,
    ) -> Result<Self, PluginError> {
        Self::load_with(path, reads, cache_dir, Limits::default())
    }

    /// Like [`load`](Self::load), with `limits` for every call (the `info`
    /// call made at load included).
    pub fn load_with(
        path: &Path,
        reads: Vec<PathBuf>,
        cache_dir: Option<&Path>,
        limits: Limits,
    ) -> Result<Self, PluginError> {
        let shown = path.display().to_string();
        let not_a_plugin = |reason: String| PluginError::NotAPlugin {
            path: shown.clone(),
            reason,
        };
        let runtime = engine::runtime().map_err(|message| PluginError::Other {
            name: shown.clone(),
            message,
        })?;
        let bytes =
            std::fs::read(path).map_err(|e| not_a_plugin(format!("cannot read it: {e}")))?;
        check_header(&bytes).map_err(not_a_plugin)?;
        let (component, cache, cache_file) = cache::load(&runtime.engine, &bytes, cache_dir)
            .map_err(|e| not_a_plugin(format!("{e:#}")))?;
        check_interface(&runtime.engine, &component, &shown)?;
        let pre = link(&runtime.engine, &component).map_err(|e| not_a_plugin(format!("{e:#}")))?;
        let mut runner = Runner {
            name: path
                .file_stem()
                .map_or(shown.clone(), |s| s.to_string_lossy().into_owned()),
            pre,
            reads: Arc::new(ReadAllowlist::new(&reads)),
            limits,
            live: None,
            runtime,
        };
        let info: PluginInfo = runner
            .call("info", |plugin, store| plugin.call_info(store))?
            .into();
        runner.name.clone_from(&info.name);
        Ok(Self {
            info,
            runner,
            cache,
            cache_file,
        })
    }

    /// Whether this load compiled the component or found it cached.
    pub fn cache_outcome(&self) -> CacheOutcome {
        self.cache
    }

    /// The compiled component on disk, if it is cached.
    pub fn cache_file(&self) -> Option<&Path> {
        self.cache_file.as_deref()
    }
}

impl PluginHooks for WasmPlugin {
    fn info(&self) -> &PluginInfo {
        &self.info
    }

    fn claims(&mut self, argv: &[String]) -> Result<bool, PluginError> {
        self.runner
            .call("claims", |plugin, store| plugin.call_claims(store, argv))
    }

    fn classify(&mut self, view: &ScreenView<'_>) -> Result<Activity, PluginError> {
        let screen = wit::Screen {
            lines: view.lines.to_vec(),
            title: view.title.to_owned(),
            osc: view
                .osc
                .iter()
                .map(|o| String::from_utf8_lossy(o).into_owned())
                .collect(),
            cursor_row: view.cursor_row,
        };
        let activity = self.runner.call("classify", |plugin, store| {
            plugin.call_classify(store, &screen)
        })?;
        Ok(activity.into())
    }

    fn pin_resume(
        &mut self,
        argv: &[String],
        id: &str,
    ) -> Result<Option<Vec<String>>, PluginError> {
        self.runner.call("pin-resume", |plugin, store| {
            plugin.call_pin_resume(store, argv, id)
        })
    }

    fn discover_conversation(&mut self, pid: u32) -> Result<Option<ConversationRef>, PluginError> {
        // The frozen WIT names this hook `discover-session`: the provider's conversation.
        let found = self.runner.call("discover-session", |plugin, store| {
            plugin.call_discover_session(store, pid)
        })?;
        Ok(found.map(Into::into))
    }
}

/// Calls into one plugin: its instance, and what to do when a call fails.
struct Runner {
    /// The plugin's name for errors and logs (its file's before `info`).
    name: String,
    pre: bindings::AdapterPre<State>,
    reads: Arc<ReadAllowlist>,
    limits: Limits,
    /// The instance calls go to; `None` after a failure, until the next call.
    live: Option<Live>,
    runtime: &'static Runtime,
}

struct Live {
    store: Store<State>,
    bindings: bindings::Adapter,
}

impl Runner {
    fn call<R>(
        &mut self,
        hook: &str,
        f: impl FnOnce(&wit::Guest, &mut Store<State>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        let (mut store, bindings) = match self.live.take() {
            Some(live) => (live.store, Some(live.bindings)),
            None => (self.new_store(), None),
        };
        store.set_epoch_deadline(Runtime::ticks(self.limits.deadline));
        let result = self.runtime.ticking(|| {
            let bindings = match bindings {
                Some(b) => b,
                None => self.pre.instantiate(&mut store)?,
            };
            let out = f(bindings.agent_comms_adapter_plugin(), &mut store)?;
            Ok((bindings, out))
        });
        match result {
            Ok((bindings, out)) => {
                self.live = Some(Live { store, bindings });
                Ok(out)
            }
            Err(error) => {
                let failure = self.failure(hook, &error, store.data());
                tracing::warn!("{failure}; its next call gets a fresh instance");
                Err(failure)
            }
        }
    }

    fn new_store(&self) -> Store<State> {
        let state = State::new(&self.name, self.reads.clone(), self.limits.memory_bytes);
        let mut store = Store::new(&self.runtime.engine, state);
        store.limiter(|state| &mut state.limiter);
        store
    }

    /// Which of deadline, memory cap or trap stopped a call.
    fn failure(&self, hook: &str, error: &wasmtime::Error, state: &State) -> PluginError {
        let (name, hook) = (self.name.clone(), hook.to_owned());
        if state.limiter.refused {
            return PluginError::Memory {
                name,
                hook,
                cap_mb: (self.limits.memory_bytes >> 20) as u64,
            };
        }
        let trap = error.downcast_ref::<Trap>();
        if trap == Some(&Trap::Interrupt) {
            return PluginError::Deadline {
                name,
                hook,
                limit_ms: self.limits.deadline.as_millis() as u64,
            };
        }
        // The trap itself, not the backtrace wasmtime wraps around it.
        let mut message = trap.map_or_else(|| error.to_string(), Trap::to_string);
        if let Some(stderr) = state.stderr_tail() {
            message = format!("{message} ({stderr})");
        }
        PluginError::Trapped {
            name,
            hook,
            message,
        }
    }
}

/// Tells a component from a core module or something else entirely: the
/// binary format puts the difference in the first eight bytes.
fn check_header(bytes: &[u8]) -> Result<(), String> {
    match bytes.get(..8) {
        Some([0, b'a', b's', b'm', 0x0d, 0, 1, 0]) => Ok(()),
        Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => Err(
            "a core WebAssembly module, not a component: build it for the wasm32-wasip2 target"
                .into(),
        ),
        _ => Err("not a WebAssembly component".into()),
    }
}

/// The component must export the plugin interface of the version we speak.
fn check_interface(engine: &Engine, component: &Component, shown: &str) -> Result<(), PluginError> {
    let versions: Vec<String> = component
        .component_type()
        .exports(engine)
        .filter_map(|(name, _)| name.strip_prefix(PLUGIN_EXPORT).map(str::to_owned))
        .collect();
    if versions.iter().any(|v| v == INTERFACE_VERSION) {
        return Ok(());
    }
    Err(match versions.into_iter().next() {
        Some(found) => PluginError::Version {
            path: shown.to_owned(),
            found,
            expected: INTERFACE_VERSION.to_owned(),
        },
        None => PluginError::NotAPlugin {
            path: shown.to_owned(),
            reason: format!("it does not export {PLUGIN_EXPORT}{INTERFACE_VERSION}"),
        },
    })
}

/// Links WASI (empty, see [`host`]) and the host interface.
fn link(engine: &Engine, component: &Component) -> wasmtime::Result<bindings::AdapterPre<State>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    bindings::Adapter::add_to_linker::<State, HasSelf<State>>(&mut linker, |state| state)?;
    bindings::AdapterPre::new(linker.instantiate_pre(component)?)
}

impl From<wit::PluginInfo> for PluginInfo {
    fn from(info: wit::PluginInfo) -> Self {
        Self {
            name: info.name,
            version: info.version,
            checked: info.checked,
        }
    }
}

impl From<wit::Activity> for Activity {
    fn from(activity: wit::Activity) -> Self {
        match activity {
            wit::Activity::Busy => Self::Busy,
            wit::Activity::Idle => Self::Idle,
            wit::Activity::Unknown => Self::Unknown,
        }
    }
}

/// The WIT's `session-ref` (a frozen name) is the provider's conversation.
impl From<wit::SessionRef> for ConversationRef {
    fn from(conversation: wit::SessionRef) -> Self {
        Self {
            id: conversation.id,
            cwd: conversation.cwd,
        }
    }
}
