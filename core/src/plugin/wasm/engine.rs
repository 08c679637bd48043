//! One wasmtime engine per process, and the clock its deadlines run on.
//!
//! Deadlines use epoch interruption: compiled code checks a shared counter
//! at function entries and loop heads, which costs far less than fuel
//! metering. A ticker thread advances the counter every [`TICK`]. It parks
//! after a second without plugin calls, so an idle supervisor is not woken
//! a hundred times a second for plugins it is not calling, and a burst of
//! calls does not pay a thread wake-up each.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, OnceLock};
use std::thread::{self, Thread};
use std::time::Duration;

use wasmtime::{Config, Engine};

/// The epoch period: deadlines are kept to within about two of these.
pub(super) const TICK: Duration = Duration::from_millis(5);
/// Ticks without a call before the ticker parks.
const IDLE_TICKS: u32 = 200;

pub(super) struct Runtime {
    pub(super) engine: Engine,
    clock: Arc<Clock>,
    ticker: Thread,
}

#[derive(Default)]
struct Clock {
    in_flight: AtomicUsize,
    parked: AtomicBool,
}

/// The process's engine, created on first use.
pub(super) fn runtime() -> Result<&'static Runtime, String> {
    static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(Runtime::new)
        .as_ref()
        .map_err(Clone::clone)
}

impl Runtime {
    fn new() -> Result<Self, String> {
        let mut config = Config::new();
        config.wasm_component_model(true).epoch_interruption(true);
        let engine = Engine::new(&config).map_err(|e| format!("cannot start wasmtime: {e}"))?;
        let clock = Arc::new(Clock::default());
        let ticker = {
            let (engine, clock) = (engine.clone(), clock.clone());
            thread::Builder::new()
                .name("wasm-epoch".into())
                .spawn(move || tick(&engine, &clock))
                .map_err(|e| format!("cannot start the plugin deadline clock: {e}"))?
                .thread()
                .clone()
        };
        Ok(Self {
            engine,
            clock,
            ticker,
        })
    }

    /// Epoch ticks that cover `deadline`: the first tick of a call can come
    /// at once, so one more than the deadline's length.
    pub(super) fn ticks(deadline: Duration) -> u64 {
        (deadline.as_nanos().div_ceil(TICK.as_nanos()) as u64).max(1) + 1
    }

    /// Runs `call` with the deadline clock running.
    pub(super) fn ticking<R>(&self, call: impl FnOnce() -> R) -> R {
        self.clock.in_flight.fetch_add(1, SeqCst);
        if self.clock.parked.load(SeqCst) {
            self.ticker.unpark();
        }
        let _done = InFlight(&self.clock);
        call()
    }
}

/// Ends one call's claim on the clock, also when the call unwinds.
struct InFlight<'a>(&'a Clock);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, SeqCst);
    }
}

fn tick(engine: &Engine, clock: &Clock) {
    let mut idle = 0;
    loop {
        thread::sleep(TICK);
        engine.increment_epoch();
        if clock.in_flight.load(SeqCst) > 0 {
            idle = 0;
            continue;
        }
        idle += 1;
        if idle < IDLE_TICKS {
            continue;
        }
        // Publish `parked` before the last look at `in_flight`: a call that
        // starts after this look sees the flag and unparks us, and one that
        // started before it is seen here (park's token covers the gap).
        clock.parked.store(true, SeqCst);
        if clock.in_flight.load(SeqCst) == 0 {
            thread::park();
        }
        clock.parked.store(false, SeqCst);
        idle = 0;
    }
}
