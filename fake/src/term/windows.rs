//! A Windows console: no line input, echo or Ctrl-C processing, keys as VT
//! sequences (`ENABLE_VIRTUAL_TERMINAL_INPUT`), UTF-8 in, and the screen
//! drawn through the console API, as Windows console programs have always
//! drawn: Wine 8's console does not take VT sequences for output (it prints
//! `ESC[2K` as `2K`), and the pseudo console turns the buffer into VT for
//! the host either way.
//!
//! Not reproduced here: the alternate screen, bracketed paste being turned
//! on (a pseudo console keeps such modes to itself) and OSC 7501 (it would
//! be printed as text).

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

use windows_sys::core::BOOL;
use windows_sys::Win32::Foundation::HANDLE;
use windows_sys::Win32::System::Console::{
    FillConsoleOutputCharacterW, GetConsoleMode, GetConsoleScreenBufferInfo, GetStdHandle,
    SetConsoleCP, SetConsoleCtrlHandler, SetConsoleCursorPosition, SetConsoleMode,
    SetConsoleTitleW, WriteConsoleOutputCharacterW, CONSOLE_SCREEN_BUFFER_INFO, COORD,
    CTRL_BREAK_EVENT, CTRL_CLOSE_EVENT, CTRL_C_EVENT, ENABLE_VIRTUAL_TERMINAL_INPUT,
    ENABLE_WINDOW_INPUT, STD_INPUT_HANDLE, STD_OUTPUT_HANDLE,
};

use crate::screen::{cells, plain, Frame};

const CP_UTF8: u32 = 65001;

/// The console's last control event, `u32::MAX` for none.
static EVENT: AtomicU32 = AtomicU32::new(u32::MAX);

/// A console may turn Ctrl-C into an event even with processed input off
/// (Wine's does); closing the pseudo console is one too. Both are taken
/// here, so that the main loop ends the fake as on Unix: restored, logged.
unsafe extern "system" fn on_event(event: u32) -> BOOL {
    EVENT.store(event, Ordering::SeqCst);
    1
}

pub struct Terminal {
    input: HANDLE,
    output: HANDLE,
    saved_input_mode: u32,
}

impl Terminal {
    pub fn raw() -> io::Result<Self> {
        // SAFETY: standard handles of this process.
        let (input, output) = unsafe {
            (
                GetStdHandle(STD_INPUT_HANDLE),
                GetStdHandle(STD_OUTPUT_HANDLE),
            )
        };
        let mut saved_input_mode = 0;
        // SAFETY: the input handle and a valid out pointer.
        unsafe {
            if GetConsoleMode(input, &mut saved_input_mode) == 0 {
                return Err(io::Error::last_os_error());
            }
            SetConsoleCP(CP_UTF8);
            if SetConsoleMode(input, ENABLE_VIRTUAL_TERMINAL_INPUT | ENABLE_WINDOW_INPUT) == 0 {
                return Err(io::Error::last_os_error());
            }
            SetConsoleCtrlHandler(Some(on_event), 1);
        }
        Ok(Self {
            input,
            output,
            saved_input_mode,
        })
    }

    fn window(&self) -> Option<CONSOLE_SCREEN_BUFFER_INFO> {
        // SAFETY: plain data, filled by the call.
        let mut info: CONSOLE_SCREEN_BUFFER_INFO = unsafe { std::mem::zeroed() };
        // SAFETY: the output handle and a valid pointer.
        (unsafe { GetConsoleScreenBufferInfo(self.output, &mut info) } != 0).then_some(info)
    }

    pub fn size(&self) -> (usize, usize) {
        self.window().map_or((24, 80), |info| {
            let w = info.srWindow;
            (
                (w.Bottom - w.Top + 1) as usize,
                (w.Right - w.Left + 1) as usize,
            )
        })
    }

    pub fn enter(&mut self, _alt_screen: bool, _bracketed_paste: bool) {}

    pub fn leave(&mut self, _alt_screen: bool, _bracketed_paste: bool) {}

    /// Writes the rows that changed in place, blanks the rest of the
    /// window, places the cursor and sets the title. `codes` (OSC 7501) are
    /// dropped: see the module's note.
    pub fn draw(
        &mut self,
        _codes: &str,
        shown: Option<&Frame>,
        frame: &Frame,
        size: (usize, usize),
    ) {
        if shown == Some(frame) {
            return;
        }
        let (height, width) = size;
        let top = self.window().map_or(0, |info| info.srWindow.Top);
        let at = |col: usize, row: usize| COORD {
            X: col as i16,
            Y: top + row as i16,
        };
        let blank = String::new();
        for n in 0..height {
            let row = plain(frame.rows.get(n).unwrap_or(&blank), width);
            if shown.and_then(|s| s.rows.get(n)).map(|r| plain(r, width)) == Some(row.clone()) {
                continue;
            }
            let text: Vec<u16> = row.encode_utf16().collect();
            let used = cells(&row);
            let mut written = 0;
            // SAFETY: the output handle, a buffer of the given length and a
            // valid out pointer.
            unsafe {
                WriteConsoleOutputCharacterW(
                    self.output,
                    text.as_ptr(),
                    text.len() as u32,
                    at(0, n),
                    &mut written,
                );
                FillConsoleOutputCharacterW(
                    self.output,
                    u16::from(b' '),
                    width.saturating_sub(used) as u32,
                    at(used, n),
                    &mut written,
                );
            }
        }
        let (row, col) = frame.cursor;
        // SAFETY: the output handle.
        unsafe { SetConsoleCursorPosition(self.output, at(col, row)) };
        if shown.map(|s| &s.title) != Some(&frame.title) {
            let title: Vec<u16> = frame.title.encode_utf16().chain([0]).collect();
            // SAFETY: a NUL-terminated wide string.
            unsafe { SetConsoleTitleW(title.as_ptr()) };
        }
    }

    /// Why the fake must quit now, if the console said so.
    pub fn ended(&self) -> Option<&'static str> {
        match EVENT.load(Ordering::SeqCst) {
            CTRL_C_EVENT | CTRL_BREAK_EVENT => Some("ctrl-c"),
            CTRL_CLOSE_EVENT => Some("hangup"),
            _ => None,
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // SAFETY: the input handle and the mode saved at start.
        unsafe { SetConsoleMode(self.input, self.saved_input_mode) };
    }
}
