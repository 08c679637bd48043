//! The plugin side: implement [`Adapter`] for a type and export it with
//! [`export_native_adapter!`](crate::export_native_adapter).
//!
//! Every exported function runs the adapter inside `catch_unwind`: a panic
//! that unwound across the `extern "C"` boundary would abort the host
//! process (the host cannot catch it), so it comes back as
//! [`HookError::Panicked`] instead and the session carries on with the
//! profile's declarative rules. Do not build plugins with `panic = "abort"`:
//! there is nothing to catch then.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Once, OnceLock};

use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::{RBoxError, RErr, ROk, ROption, RSlice, RStr, RString, RVec};

use crate::interface::{
    Activity, HookError, HookResult, NativeAdapter, NativeAdapterRef, PluginInfo, Screen,
    SessionRef,
};

/// A native adapter. One value of the type is made with `Default` when the
/// host loads the plugin and answers every call after that, from any thread.
pub trait Adapter: Send + Sync + 'static {
    /// Name, version, and the provider versions it was checked against.
    fn info(&self) -> PluginInfo;

    /// Does the adapter claim this command line? `argv[0]` is the program as
    /// typed, possibly with a directory.
    fn claims(&self, argv: &[&str]) -> bool;

    /// Busy or idle, from the rendered screen.
    fn classify(&self, screen: &Screen) -> Activity;

    /// `argv` with "continue the latest session" replaced by session `id`,
    /// or `None` when nothing asks to continue.
    fn pin_resume(&self, argv: &[&str], id: &str) -> Option<Vec<String>> {
        let _ = (argv, id);
        None
    }

    /// The session the provider process `pid` is on, if the adapter can tell.
    fn discover_session(&self, pid: u32) -> Result<Option<SessionRef>, String> {
        let _ = pid;
        Ok(None)
    }
}

/// The one adapter this library exports.
static ADAPTER: OnceLock<Box<dyn Adapter>> = OnceLock::new();

/// The root module for `A`; called once, by the host's loader, through the
/// symbol `export_native_adapter!` defines. The only error is a panic in
/// `A::default()`, which the host reports as a failed load.
#[doc(hidden)]
pub fn root_module<A: Adapter + Default>() -> Result<NativeAdapterRef, RBoxError> {
    quiet_panics_in_hooks();
    let adapter = catch(A::default).map_err(|message| {
        let what = format!(
            "{}::default panicked: {message}",
            std::any::type_name::<A>()
        );
        RBoxError::from_fmt(&what)
    })?;
    ADAPTER.get_or_init(|| Box::new(adapter));
    Ok(NativeAdapter {
        info,
        claims,
        classify,
        pin_resume,
        discover_session,
    }
    .leak_into_prefix())
}

thread_local! {
    /// Set while adapter code runs on this thread.
    static IN_ADAPTER: Cell<bool> = const { Cell::new(false) };
    /// Where the last panic in adapter code happened.
    static PANICKED_AT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs adapter code; a panic in it comes back as its message and location.
fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    IN_ADAPTER.set(true);
    let outcome = catch_unwind(AssertUnwindSafe(f));
    IN_ADAPTER.set(false);
    outcome.map_err(|payload| {
        let message = panic_message(payload.as_ref());
        match PANICKED_AT.take() {
            Some(at) => format!("{message} (at {at})"),
            None => message,
        }
    })
}

/// Runs `hook` on the adapter; a panic becomes an error value.
fn guarded<T>(hook: impl FnOnce(&dyn Adapter) -> Result<T, String>) -> HookResult<T> {
    let run = || match ADAPTER.get() {
        Some(adapter) => hook(adapter.as_ref()),
        None => Err("the adapter was called before it was loaded".to_owned()),
    };
    match catch(run) {
        Ok(Ok(value)) => ROk(value),
        Ok(Err(message)) => RErr(HookError::Failed(message.into())),
        Err(panic) => RErr(HookError::Panicked(panic.into())),
    }
}

/// Keeps panics in adapter code off stderr — the host reports them, with
/// the location kept here, and a plugin that panics on every screen would
/// otherwise flood the session's log — and leaves every other panic to the
/// panic hook that was there before.
fn quiet_panics_in_hooks() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_ADAPTER.get() {
                PANICKED_AT.set(info.location().map(ToString::to_string));
            } else {
                previous(info);
            }
        }));
    });
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    match (
        payload.downcast_ref::<&str>(),
        payload.downcast_ref::<String>(),
    ) {
        (Some(s), _) => (*s).to_owned(),
        (_, Some(s)) => s.clone(),
        _ => "a panic without a message".to_owned(),
    }
}

fn strs<'a>(argv: &'a RSlice<'_, RString>) -> Vec<&'a str> {
    argv.iter().map(RString::as_str).collect()
}

extern "C" fn info() -> HookResult<PluginInfo> {
    guarded(|a| Ok(a.info()))
}

extern "C" fn claims(argv: RSlice<'_, RString>) -> HookResult<bool> {
    guarded(|a| Ok(a.claims(&strs(&argv))))
}

extern "C" fn classify(screen: &Screen) -> HookResult<Activity> {
    guarded(|a| Ok(a.classify(screen)))
}

extern "C" fn pin_resume(
    argv: RSlice<'_, RString>,
    id: RStr<'_>,
) -> HookResult<ROption<RVec<RString>>> {
    guarded(|a| {
        let pinned = a.pin_resume(&strs(&argv), id.as_str());
        Ok(pinned
            .map(|v| v.into_iter().map(RString::from).collect())
            .into())
    })
}

extern "C" fn discover_session(pid: u32) -> HookResult<ROption<SessionRef>> {
    guarded(|a| a.discover_session(pid).map(ROption::from))
}

/// Reading a screen the way TOML profile rules do.
impl Screen {
    /// Every row, top first.
    pub fn rows(&self) -> impl DoubleEndedIterator<Item = &str> {
        self.lines.iter().map(RString::as_str)
    }

    /// The last `n` rows up to the last one that holds any text: where a
    /// TUI's footer is, even when an inline one leaves blank rows below
    /// (TOML: `region = { from = "bottom", rows = n }`).
    pub fn bottom_rows(&self, n: usize) -> impl Iterator<Item = &str> {
        let end = self
            .lines
            .iter()
            .rposition(|l| !l.trim().is_empty())
            .map_or(0, |i| i + 1);
        self.lines[end.saturating_sub(n)..end]
            .iter()
            .map(RString::as_str)
    }

    /// The cursor's row: the input line.
    pub fn cursor_line(&self) -> &str {
        self.lines
            .get(usize::from(self.cursor_row))
            .map_or("", RString::as_str)
    }

    /// The latest OSC payload that starts with `prefix` (e.g. `b"7501;"`).
    pub fn latest_osc(&self, prefix: &[u8]) -> Option<&[u8]> {
        self.osc
            .iter()
            .rev()
            .map(RVec::as_slice)
            .find(|o| o.starts_with(prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen(rows: &[&str], cursor_row: u16) -> Screen {
        Screen {
            lines: rows.iter().map(|r| RString::from(*r)).collect(),
            cursor_row,
            ..Screen::default()
        }
    }

    #[test]
    fn screens_read_like_profile_regions() {
        let s = screen(&["top", "> ", "footer", "", ""], 1);
        assert_eq!(s.bottom_rows(2).collect::<Vec<_>>(), ["> ", "footer"]);
        assert_eq!(s.bottom_rows(9).count(), 3);
        assert_eq!(s.cursor_line(), "> ");
        assert_eq!(screen(&[], 4).cursor_line(), "");
        let mut s = screen(&[], 0);
        s.osc = [
            b"7501;state=working".as_slice(),
            b"0;title",
            b"7501;state=idle",
        ]
        .iter()
        .map(|o| RVec::from_slice(o))
        .collect();
        assert_eq!(s.latest_osc(b"7501;"), Some(b"7501;state=idle".as_slice()));
        assert_eq!(s.latest_osc(b"133;"), None);
    }

    #[derive(Default)]
    struct Panicky;

    impl Adapter for Panicky {
        fn info(&self) -> PluginInfo {
            PluginInfo::new("panicky", "0", "-")
        }
        fn claims(&self, _: &[&str]) -> bool {
            true
        }
        fn classify(&self, _: &Screen) -> Activity {
            panic!("no screen for me")
        }
    }

    /// The root module as the host calls it, without loading a library.
    #[test]
    fn a_panicking_hook_returns_an_error_value_with_its_location() {
        let module = root_module::<Panicky>().unwrap();
        match module.classify()(&Screen::default()) {
            RErr(HookError::Panicked(message)) => {
                assert!(message.starts_with("no screen for me (at "), "{message}");
                assert!(message.contains("sdk.rs:"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            module.claims()(RSlice::from_slice(&[])),
            ROk(true),
            "still answers"
        );
        assert_eq!(
            module.discover_session()(1),
            ROk(ROption::RNone),
            "the default"
        );
        assert_eq!(
            module.pin_resume()(RSlice::from_slice(&[]), "x".into()),
            ROk(ROption::RNone)
        );
    }

    struct Unmakeable;

    impl Default for Unmakeable {
        fn default() -> Self {
            panic!("no config")
        }
    }

    impl Adapter for Unmakeable {
        fn info(&self) -> PluginInfo {
            unreachable!()
        }
        fn claims(&self, _: &[&str]) -> bool {
            unreachable!()
        }
        fn classify(&self, _: &Screen) -> Activity {
            unreachable!()
        }
    }

    #[test]
    fn a_panic_in_default_fails_the_load_with_its_message() {
        let Err(e) = root_module::<Unmakeable>() else {
            panic!("loaded")
        };
        let e = e.to_string();
        assert!(
            e.contains("Unmakeable::default panicked: no config (at "),
            "{e}"
        );
    }
}
