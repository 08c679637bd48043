"""Fake provider TUIs for agent-comms end-to-end tests.

Why these fakes exist: the end-to-end tests must deliver messages into
Claude Code, Codex and opencode without installing them, logging in or
spending tokens, and without depending on network or model latency.  A fake
reproduces only what matters to the host, and nothing more:

* what the screen and the window title show while busy and while idle (the
  rows the adapters' detection rules in ``config/providers/*.toml`` read);
* the out-of-band signals (Codex's OSC 7501 state events);
* the input quirks that make delivering a message hard: an Enter swallowed
  when it arrives with typed text (Claude Code), typed text taken for a paste
  and its Enter turned into a newline (Codex), a cursor position query that
  must be answered (Codex);
* the resume arguments and the session files each CLI keeps under its home
  directory, from which the host finds out which provider session a process
  is on (taking over a live session in place).

Every behaviour names the documented behaviour of the real program it
reproduces ("Reproduces: ...").  The facts come from the project's design
notes and from recordings of Claude Code 2.1.197, Codex 0.171.0 and opencode
1.18.33 (the samples in ``config/providers/claude-code.toml``, ``codex.toml``
and ``opencode.toml`` are excerpts of those recordings).

The fakes are run as ``tests/fakes/bin/{claude,codex,opencode}``: the host
picks its adapter from the program's basename.  They are configured with
``FAKE_*`` environment variables and write a JSON-lines log that tests
assert on; see ``tests/fakes/README.md``.

Python 3.11, standard library only.
"""

from __future__ import annotations

import codecs
import glob
import json
import math
import os
import pwd
import re
import secrets
import select
import signal
import sys
import termios
import time
import tty
import unicodedata
import uuid
from dataclasses import dataclass

ESC = "\x1b"
BEL = "\x07"
ST = ESC + "\\"

# Animation period of spinners and squares, and how long a lone ESC may wait
# for the rest of its escape sequence before it is taken as the Esc key.
ANIMATION_MS = 100
ESC_TIMEOUT_MS = 50

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"


def wall_ms() -> int:
    """Unix time in milliseconds (the log's ``t``)."""
    return int(time.time() * 1000)


def mono_ms() -> float:
    """Monotonic time in milliseconds (all timers)."""
    return time.monotonic() * 1000.0


# ---------------------------------------------------------------------------
# Knobs (environment) and the event log
# ---------------------------------------------------------------------------


class KnobError(Exception):
    """A FAKE_* variable has a value the fake does not understand."""


def _flag(env: dict, name: str) -> bool:
    return env.get(name, "") not in ("", "0")


def _int(env: dict, name: str, default: int | None) -> int | None:
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise KnobError(f"{name} must be a non-negative integer, got {raw!r}") from None
    if value < 0:
        raise KnobError(f"{name} must be a non-negative integer, got {raw!r}")
    return value


def _autobusy(env: dict) -> tuple[int, int] | None:
    raw = env.get("FAKE_AUTOBUSY", "")
    if raw == "":
        return None
    try:
        idle, busy = (int(part) for part in raw.split(","))
    except ValueError:
        raise KnobError(f"FAKE_AUTOBUSY must be IDLE_MS,BUSY_MS, got {raw!r}") from None
    if idle <= 0 or busy <= 0:
        raise KnobError(f"FAKE_AUTOBUSY needs two positive durations, got {raw!r}")
    return idle, busy


@dataclass(frozen=True)
class Knobs:
    log_path: str | None
    busy_ms: int
    bracketed: bool
    autobusy: tuple[int, int] | None
    hide_input: bool
    no_placeholder: bool
    drop_enter: int
    cpr_timeout_ms: int
    codex_working_ms: int | None
    codex_sign_in: bool
    ignore_term: bool
    opencode_draw_delay_ms: int

    @classmethod
    def from_env(cls, env: dict) -> "Knobs":
        return cls(
            log_path=env.get("FAKE_LOG") or None,
            busy_ms=_int(env, "FAKE_BUSY_MS", 300),
            bracketed=not _flag(env, "FAKE_NO_BRACKETED"),
            autobusy=_autobusy(env),
            hide_input=_flag(env, "FAKE_HIDE_INPUT"),
            no_placeholder=_flag(env, "FAKE_NO_PLACEHOLDER"),
            drop_enter=_int(env, "FAKE_DROP_ENTER", 0),
            cpr_timeout_ms=_int(env, "FAKE_CPR_TIMEOUT_MS", 2000),
            codex_working_ms=_int(env, "FAKE_CODEX_WORKING_MS", None),
            codex_sign_in=_flag(env, "FAKE_CODEX_SIGN_IN"),
            ignore_term=_flag(env, "FAKE_IGNORE_TERM"),
            opencode_draw_delay_ms=_int(env, "FAKE_OPENCODE_DRAW_DELAY_MS", 0),
        )


class EventLog:
    """JSON lines, one whole line per ``os.write`` on an O_APPEND file, so
    that lines from several fakes sharing one log never interleave."""

    def __init__(self, path: str | None):
        self.fd = None
        if path:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            self.fd = os.open(path, flags, 0o644)

    def write(self, event: str, **fields) -> None:
        if self.fd is None:
            return
        record = {"event": event, **fields, "t": wall_ms()}
        os.write(self.fd, (json.dumps(record, ensure_ascii=False) + "\n").encode())


# ---------------------------------------------------------------------------
# Input: bytes from the terminal to key events
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One input event.

    kind: ``text`` (typed printable text), ``paste`` (a bracketed paste),
    ``enter`` (CR), ``newline`` (LF, i.e. Ctrl-J), ``backspace``, ``clear``
    (Ctrl-U), ``interrupt`` (Ctrl-C), ``eof`` (Ctrl-D), ``esc`` (the Esc
    key alone), ``key`` (any other key: arrows, Tab, Alt-x...; ignored), ``report`` (focus events and
    terminal replies; not a key, ignored), ``cpr`` (a cursor position report
    ``ESC[row;colR``).
    """

    kind: str
    text: str = ""
    row: int = 0
    col: int = 0


# Events that are keys the user pressed (Codex's "next key" is one of these).
KEY_KINDS = frozenset(
    {"text", "paste", "enter", "newline", "backspace", "clear", "interrupt", "eof", "key"}
)

CONTROL_KINDS = {0x0D: "enter", 0x0A: "newline", 0x7F: "backspace", 0x08: "backspace",
                 0x15: "clear", 0x03: "interrupt", 0x04: "eof"}


def _escape_length(buf: bytes, i: int) -> int | None:
    """Length of the escape sequence at ``buf[i]`` (an ESC), or None when the
    buffer ends before the sequence does."""
    n = len(buf)
    if i + 1 >= n:
        return None
    kind = buf[i + 1]
    if kind == 0x5B:  # CSI: parameters and intermediates, then a final byte
        j = i + 2
        while j < n and 0x20 <= buf[j] <= 0x3F:
            j += 1
        if j >= n:
            return None
        return j + 1 - i if 0x40 <= buf[j] <= 0x7E else j - i
    if kind == 0x4F:  # SS3 (F1-F4, application-mode arrows)
        return 3 if i + 2 < n else None
    if kind in b"]P_^X":  # strings (OSC, DCS...) ended by BEL or ST
        j = i + 2
        while j < n:
            if buf[j] == 0x07:
                return j + 1 - i
            if buf[j] == 0x1B:
                if j + 1 >= n:
                    return None
                if buf[j + 1] == 0x5C:
                    return j + 2 - i
            j += 1
        return None
    if kind == 0x1B:  # ESC ESC: the first one is a lone Esc key
        return 1
    return 2  # Alt + key


def _partial_suffix(buf: bytes, start: int, marker: bytes) -> int:
    """Length of the longest tail of ``buf[start:]`` that begins ``marker``."""
    for k in range(min(len(marker) - 1, len(buf) - start), 0, -1):
        if buf.endswith(marker[:k]):
            return k
    return 0


def _paste_text(raw: bytes) -> str:
    """A paste's content as input text: CRLF, CR and LF each become one newline."""
    text = raw.decode("utf-8", "replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")


class InputParser:
    """Incremental parser: feed it each ``os.read`` chunk as it comes.

    Keeps between chunks: an escape sequence cut in two, a UTF-8 character
    cut in two, and a bracketed paste whose end marker has not come yet.
    """

    def __init__(self):
        self._pending = b""
        self._paste: bytearray | None = None
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")

    @property
    def has_partial_escape(self) -> bool:
        return self._paste is None and self._pending.startswith(b"\x1b")

    def flush_stale(self) -> list[Event]:
        """An escape sequence that never completed: it was the Esc key."""
        if not self.has_partial_escape:
            return []
        self._pending = b""
        return [Event("esc")]

    def feed(self, data: bytes) -> list[Event]:
        buf, self._pending = self._pending + data, b""
        out: list[Event] = []
        i = 0
        while i < len(buf):
            if self._paste is not None:
                i = self._feed_paste(buf, i, out)
                continue
            byte = buf[i]
            if byte == 0x1B:
                self._flush_text(out)
                length = _escape_length(buf, i)
                if length is None:
                    self._pending = buf[i:]
                    break
                self._escape(buf[i:i + length], out)
                i += length
            elif byte < 0x20 or byte == 0x7F:
                self._flush_text(out)
                out.append(Event(CONTROL_KINDS.get(byte, "key")))
                i += 1
            else:
                j = i
                while j < len(buf) and buf[j] >= 0x20 and buf[j] not in (0x7F, 0x1B):
                    j += 1
                self._add_text(out, self._utf8.decode(buf[i:j]))
                i = j
        return out

    def _feed_paste(self, buf: bytes, i: int, out: list[Event]) -> int:
        end = buf.find(PASTE_END, i)
        if end < 0:
            stop = len(buf) - _partial_suffix(buf, i, PASTE_END)
            self._paste += buf[i:stop]
            self._pending = buf[stop:]
            return len(buf)
        self._paste += buf[i:end]
        out.append(Event("paste", _paste_text(bytes(self._paste))))
        self._paste = None
        return end + len(PASTE_END)

    def _flush_text(self, out: list[Event]) -> None:
        """A control byte or ESC ends any UTF-8 character left incomplete."""
        self._add_text(out, self._utf8.decode(b"", final=True))
        self._utf8.reset()

    @staticmethod
    def _add_text(out: list[Event], text: str) -> None:
        if not text:
            return
        if out and out[-1].kind == "text":
            out[-1] = Event("text", out[-1].text + text)
        else:
            out.append(Event("text", text))

    def _escape(self, seq: bytes, out: list[Event]) -> None:
        if seq == PASTE_START:
            self._paste = bytearray()
        elif seq.startswith(b"\x1b[") and seq.endswith(b"R"):
            out.append(self._cursor_report(seq))
        elif seq in (b"\x1b[I", b"\x1b[O") or seq[1:2] in (b"]", b"P", b"_", b"^", b"X"):
            out.append(Event("report"))
        elif seq.startswith(b"\x1b[") and seq[2:3] in (b"?", b">", b"="):
            out.append(Event("report"))  # mode / device attribute replies
        elif seq == ESC.encode():
            out.append(Event("esc"))
        else:
            out.append(Event("key"))

    @staticmethod
    def _cursor_report(seq: bytes) -> Event:
        try:
            row, col = (int(part) for part in seq[2:-1].split(b";"))
        except ValueError:
            return Event("report")
        return Event("cpr", row=row, col=col)


# ---------------------------------------------------------------------------
# Text layout helpers
# ---------------------------------------------------------------------------


def char_cells(ch: str) -> int:
    if unicodedata.combining(ch) or ch in "\u200b\u200c\u200d":
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def cells(text: str) -> int:
    """Terminal columns taken by ``text`` (SGR sequences take none)."""
    total, in_sgr = 0, False
    for ch in text:
        if ch == ESC:
            in_sgr = True
        elif in_sgr:
            in_sgr = ch != "m"
        else:
            total += char_cells(ch)
    return total


def clip(row: str, width: int) -> str:
    """``row`` cut to ``width`` columns, keeping its SGR sequences."""
    if cells(row) <= width:
        return row
    out, used, in_sgr = [], 0, False
    for ch in row:
        if ch == ESC or in_sgr:
            in_sgr = ch != "m"
            out.append(ch)
            continue
        used += char_cells(ch)
        if used > width:
            break
        out.append(ch)
    return "".join(out) + (ESC + "[0m" if ESC in row else "")


def wrap(text: str, prefix: str, cont: str, width: int) -> list[str]:
    """Rows for ``text``: its first line after ``prefix``, each further line
    (and each row a long line wraps onto) after ``cont``."""
    rows: list[str] = []
    for n, line in enumerate(text.split("\n")):
        row = prefix if n == 0 else cont
        for ch in line:
            if cells(row) + char_cells(ch) > width and cells(row) > cells(cont):
                rows.append(row)
                row = cont
            row += ch
        rows.append(row)
    return rows


def dim(text: str) -> str:
    return f"{ESC}[2m{text}{ESC}[0m"


def stack(above: list[str], bottom: list[str], height: int, fill: bool) -> tuple[list[str], int]:
    """The rows of a screen: all of ``bottom`` last (cut from its top only if
    the screen is shorter than it), preceded by as many of the last rows of
    ``above`` as fit.  ``fill`` pads the gap between them with blank rows so
    that ``bottom`` ends on the screen's last row (full-screen TUIs).

    Returns the rows and the screen row (0-based, may be negative if cut) of
    ``bottom[0]``.
    """
    kept = bottom[-height:] if height > 0 else []
    room = height - len(kept)
    shown = above[-room:] if room > 0 else []
    gap = [""] * (room - len(shown)) if fill else []
    origin = len(shown) + len(gap) - (len(bottom) - len(kept))
    return shown + gap + kept, origin


@dataclass
class Frame:
    rows: list[str]
    cursor: tuple[int, int]  # 0-based row, 0-based column
    title: str


# ---------------------------------------------------------------------------
# Sessions: resume arguments and the session files each CLI keeps
# ---------------------------------------------------------------------------
#
# The host takes over a live provider session in place (``--takeover-pid``):
# from a pid alone it must find out which session that process is on, and it
# can only do so through the files the real CLI keeps.  So each fake parses
# the real CLI's resume arguments and keeps the same files in the same
# places, under the home directories the real programs take from the
# environment.  The file formats are cut down to the fields the host reads.


class UsageError(Exception):
    """Arguments the fake does not accept (it exits 2 with the message)."""


def home_dir(env: dict) -> str:
    """Reproduces: all three CLIs take the home directory from ``HOME``
    (Node's ``os.homedir()``, Rust's ``home_dir()``), else the password
    database."""
    return env.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir


def scan_args(args: list[str], flags: set[str], valued: set[str]) -> dict[str, object]:
    """The options of ``args`` the fake cares about: each name in ``flags``
    maps to True, each name in ``valued`` to its value (``--opt VALUE`` or
    ``--opt=VALUE``; the last one wins).  Everything else (other options,
    their values, positional arguments) is skipped.  Scanning ends at
    ``--``."""
    found: dict[str, object] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            break
        name, eq, inline = arg.partition("=")
        if arg in flags:
            found[arg] = True
        elif arg in valued or (eq and name.startswith("--") and name in valued):
            if eq:
                found[name] = inline
            elif i + 1 < len(args) and not args[i + 1].startswith("-"):
                i += 1
                found[arg] = args[i]
            else:
                raise UsageError(f"{arg} needs a session id (the fake has no session picker)")
        i += 1
    return found


def utc_iso(t: float) -> str:
    """``2026-11-29T14:00:00.123Z``: UTC, milliseconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


def write_atomically(path: str, data: str) -> None:
    """Replace ``path`` in one rename, so a reader never sees half a file.
    The temporary name starts with a dot and does not end like the real
    file (``*.json``, ``*.lock``), so a reader's glob never picks it up."""
    directory, base = os.path.split(path)
    tmp = os.path.join(directory, f".{base}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(data)
    os.replace(tmp, path)


def append_line(path: str, record: dict) -> None:
    """One JSON line, written whole with one ``os.write`` on an O_APPEND
    file (two processes on one session append without interleaving)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, (json.dumps(record, ensure_ascii=False) + "\n").encode())
    finally:
        os.close(fd)


def touch(path: str) -> None:
    """Create ``path`` if missing; an existing file is left as it is (its
    mtime too)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))


def newest(paths: list[str]) -> str | None:
    """The path modified last (ties: the greatest path), or None."""
    best: tuple[int, str] | None = None
    for path in paths:
        try:
            key = (os.stat(path).st_mtime_ns, path)
        except OSError:
            continue
        if best is None or key > best:
            best = key
    return best[1] if best else None


class Sessions:
    """A provider's session: which one this run is on (from the arguments)
    and the files that say so.  This base class keeps no files; the fake's
    engine calls ``open`` once the program is up, ``busy`` when it becomes
    busy or idle, ``submitted`` for each message, and ``close`` on every
    way out (SIGKILL aside, as for the real programs)."""

    def __init__(self, session_id: str = "fake-session", resumed: bool = False):
        self.session_id, self.resumed = session_id, resumed
        self.pid = os.getpid()

    def open(self) -> None:
        pass

    def busy(self, busy: bool) -> None:
        pass

    def submitted(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def claude_project_slug(cwd: str) -> str:
    """Reproduces Claude Code's project directory name: ``cwd`` with every
    character that is not an ASCII letter or digit replaced by ``-`` (so
    ``/`` becomes ``-``: ``/work/main`` -> ``-work-main``; ``.``, ``_`` and
    spaces do too).  It runs ``replace(/[^a-zA-Z0-9]/g, "-")`` on a
    JavaScript string, so a character outside the BMP (two UTF-16 units)
    becomes two dashes.  (The truncation Claude Code applies to very long
    paths is not reproduced.)"""
    out = []
    for ch in cwd:
        if ch.isascii() and ch.isalnum():
            out.append(ch)
        else:
            out.append("--" if ord(ch) > 0xFFFF else "-")
    return "".join(out)


class ClaudeSessions(Sessions):
    """Claude Code 2.1.197's session files.

    Reproduces: the config directory is ``$CLAUDE_CONFIG_DIR``, by default
    ``$HOME/.claude``.

    * ``<config>/sessions/<pid>.json``: one per running process, written at
      start, rewritten when its ``status`` changes (``busy``/``idle``: the
      real CLI's authoritative busy signal), removed on exit.  SIGKILL
      leaves it behind, as it does the real one's: a reader must check
      that the pid is alive and started before ``startedAt``.
    * ``<config>/projects/<slug of cwd>/<id>.jsonl``: the transcript, one
      line per message (cut down here to ``{"type":"user","text":...}``).
      There is no lock: two processes on one session both append (the
      real CLI lets a second ``--resume`` of a live session run, and both
      branch the transcript)."""

    def __init__(self, argv: list[str], env: dict, cwd: str):
        self.config = env.get("CLAUDE_CONFIG_DIR") or os.path.join(home_dir(env), ".claude")
        self.cwd = cwd
        self.project = os.path.join(self.config, "projects", claude_project_slug(cwd))
        opts = scan_args(argv[1:], flags={"--continue", "-c"},
                         valued={"--resume", "-r", "--session-id"})
        resume = opts.get("--resume", opts.get("-r"))
        if resume is not None:
            # Reproduces: --resume ID / -r ID resumes session ID.  (The real
            # CLI refuses an id it has no transcript for in this project;
            # the fake starts the transcript, so tests can make up ids.)
            super().__init__(str(resume), resumed=True)
            return
        if opts.get("--continue") or opts.get("-c"):
            # Reproduces: --continue / -c continues the most recent
            # conversation in the current directory: the transcript of this
            # cwd's project modified last; none: a new session.
            latest = newest(glob.glob(os.path.join(glob.escape(self.project), "*.jsonl")))
            if latest is not None:
                super().__init__(os.path.basename(latest)[:-len(".jsonl")], resumed=True)
                return
        # Reproduces: --session-id ID starts a new session with that id;
        # otherwise a new session gets a random UUID (version 4).
        super().__init__(str(opts.get("--session-id") or uuid.uuid4()))

    @property
    def status_path(self) -> str:
        return os.path.join(self.config, "sessions", f"{self.pid}.json")

    @property
    def transcript(self) -> str:
        return os.path.join(self.project, f"{self.session_id}.jsonl")

    def _write_status(self, status: str) -> None:
        write_atomically(self.status_path, json.dumps({
            "pid": self.pid, "sessionId": self.session_id, "cwd": self.cwd,
            "startedAt": self.started_at, "status": status,
        }) + "\n")

    def open(self) -> None:
        self.started_at = wall_ms()
        os.makedirs(os.path.dirname(self.status_path), exist_ok=True)
        os.makedirs(self.project, exist_ok=True)
        # The transcript exists from the start, so that --continue finds it.
        touch(self.transcript)
        self._write_status("idle")

    def busy(self, busy: bool) -> None:
        self._write_status("busy" if busy else "idle")

    def submitted(self, text: str) -> None:
        append_line(self.transcript, {"type": "user", "text": text})

    def close(self) -> None:
        try:
            os.unlink(self.status_path)
        except FileNotFoundError:
            pass


ROLLOUT_NAME = re.compile(r"^rollout-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-(.+)\.jsonl$")


class CodexSessions(Sessions):
    """Codex 0.171.0's session files.

    Reproduces: the home is ``$CODEX_HOME``, by default ``$HOME/.codex``.

    * ``<home>/sessions/YYYY/MM/DD/rollout-<YYYY-MM-DDTHH-MM-SS>-<id>.jsonl``
      (local time, as Codex names them): the thread's rollout, first line
      ``{"type":"session_meta","payload":{"id","cwd","timestamp"}}``, then
      one line per message (cut down here to
      ``{"type":"user_message","text":...}``).  A resumed thread appends to
      its existing rollout.
    * ``<home>/thread-writer-locks/<id>.lock``: the thread's writer lock.
      The real Codex holds it in its app-server daemon, which outlives the
      TUI; the fake has no daemon and writes it itself (content: its pid),
      after the process started, and leaves it in place on exit: the lock
      outlives the TUI.  Its mtime is what ties it to a process start."""

    def __init__(self, argv: list[str], env: dict, cwd: str):
        self.home = env.get("CODEX_HOME") or os.path.join(home_dir(env), ".codex")
        self.cwd = cwd
        self.rollout: str | None = None
        args = argv[1:]
        if "resume" not in args:
            # Reproduces: plain `codex` starts a new thread.
            super().__init__(str(uuid.uuid4()))
            return
        # Reproduces: `codex resume ID` resumes thread ID; `codex resume
        # --last` the most recent rollout.  Options after `resume` other than
        # --last are skipped; with --last a positional is the prompt.
        after = args[args.index("resume") + 1:]
        if "--last" in after:
            pattern = os.path.join(glob.escape(self.home), "sessions", "**", "rollout-*.jsonl")
            self.rollout = newest(glob.glob(pattern, recursive=True))
            match = ROLLOUT_NAME.match(os.path.basename(self.rollout)) if self.rollout else None
            if match is None:
                # No rollout yet: a new thread.
                self.rollout = None
                super().__init__(str(uuid.uuid4()))
            else:
                super().__init__(match.group(1), resumed=True)
            return
        ids = [a for a in after if not a.startswith("-")]
        if not ids:
            raise UsageError("resume needs a thread id or --last (the fake has no session picker)")
        super().__init__(ids[0], resumed=True)
        pattern = os.path.join(glob.escape(self.home), "sessions", "**",
                               f"rollout-*-{glob.escape(self.session_id)}.jsonl")
        # (The real Codex refuses an id it has no rollout for; the fake
        # starts a rollout under that id, so tests can make up ids.)
        self.rollout = newest(glob.glob(pattern, recursive=True))

    @property
    def lock_path(self) -> str:
        return os.path.join(self.home, "thread-writer-locks", f"{self.session_id}.lock")

    def open(self) -> None:
        os.makedirs(os.path.dirname(self.lock_path), exist_ok=True)
        write_atomically(self.lock_path, str(self.pid))
        if self.rollout is None:
            now = time.time()
            local = time.localtime(now)
            directory = os.path.join(self.home, "sessions", time.strftime("%Y/%m/%d", local))
            os.makedirs(directory, exist_ok=True)
            name = f"rollout-{time.strftime('%Y-%m-%dT%H-%M-%S', local)}-{self.session_id}.jsonl"
            self.rollout = os.path.join(directory, name)
            append_line(self.rollout, {"type": "session_meta", "payload": {
                "id": self.session_id, "cwd": self.cwd, "timestamp": utc_iso(now)}})

    def submitted(self, text: str) -> None:
        append_line(self.rollout, {"type": "user_message", "text": text})

    # close(): nothing; the lock stays (see the class docstring).


OPENCODE_LOG_LINE = re.compile(r"^timestamp=(\S+)\s.*\bsession\.id=(\S+)")


class OpenCodeSessions(Sessions):
    """opencode 1.18.33's log.

    Reproduces (as seen from the real 1.18.33 in tests/real_providers.rs):
    the data directory is ``$XDG_DATA_HOME/opencode``, by default
    ``$HOME/.local/share/opencode``; every run appends to
    ``<data>/log/opencode.log`` lines ``timestamp=<ISO> level=INFO
    run=<8 hex> message=<what> key=value...``, the run tag random per
    process. A session shows up as ``session.id=ses_…`` on the lines of its
    prompts. The fake writes:

        timestamp=<iso> level=INFO run=<tag> message="creating instance" directory=<cwd>
        timestamp=<iso> level=INFO run=<tag> message=loop session.id=<id> step=0   (each message)

    (The fake also logs ``message=resumed session.id=<id>`` when started on a
    session, so that ``--continue`` finds it before any new prompt; the real
    program keeps that in its database.) The host matches a run to a process
    by start time: the log has no pid."""

    def __init__(self, argv: list[str], env: dict, cwd: str):
        data = env.get("XDG_DATA_HOME") or os.path.join(home_dir(env), ".local", "share")
        self.log_dir = os.path.join(data, "opencode", "log")
        self.run_tag = secrets.token_hex(4)
        self.fd: int | None = None
        opts = scan_args(argv[1:], flags={"--continue", "-c"}, valued={"--session", "-s"})
        session = opts.get("--session", opts.get("-s"))
        if session is not None:
            # Reproduces: --session ID / -s ID continues session ID.
            super().__init__(str(session), resumed=True)
            return
        if opts.get("--continue") or opts.get("-c"):
            # Reproduces: --continue / -c continues the most recently updated
            # session; the fake's record of sessions is its log, so that is
            # the session.id of the latest line (by its time) in any log.
            latest = self._latest_logged()
            if latest is not None:
                super().__init__(latest, resumed=True)
                return
        # Reproduces: a new session id is `ses_` and 26 characters (the fake
        # uses hex).
        super().__init__("ses_" + secrets.token_hex(13))

    def _latest_logged(self) -> str | None:
        best: tuple[str, str] | None = None
        for path in sorted(glob.glob(os.path.join(glob.escape(self.log_dir), "*.log"))):
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    for line in f:
                        match = OPENCODE_LOG_LINE.match(line)
                        if match and (best is None or match.group(1) >= best[0]):
                            best = (match.group(1), match.group(2))
            except OSError:
                continue
        return best[1] if best else None

    def _line(self, t: float, text: str) -> None:
        line = f"timestamp={utc_iso(t)} level=INFO run={self.run_tag} {text}\n"
        os.write(self.fd, line.encode())

    def open(self) -> None:
        started = time.time()
        os.makedirs(self.log_dir, exist_ok=True)
        name = "opencode.log"
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        self.fd = os.open(os.path.join(self.log_dir, name), flags, 0o644)
        self._line(started, f'message="creating instance" directory={os.getcwd()}')
        if self.resumed:
            self._line(time.time(), f"message=resumed session.id={self.session_id}")

    def submitted(self, text: str) -> None:
        if self.fd is not None:
            self._line(time.time(), f"message=loop session.id={self.session_id} step=0")

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


SESSIONS = {"claude": ClaudeSessions, "codex": CodexSessions, "opencode": OpenCodeSessions}


# ---------------------------------------------------------------------------
# The engine shared by all fakes
# ---------------------------------------------------------------------------


class Quit(Exception):
    """Leave the main loop: exit ``status``; print ``stdout``/``stderr``
    once the terminal is restored."""

    def __init__(self, status: int, reason: str, stdout: str = "", stderr: str = ""):
        super().__init__(reason)
        self.status, self.reason, self.stdout, self.stderr = status, reason, stdout, stderr


@dataclass
class Turn:
    """A busy period: a submitted message being answered, or (text None) a
    period of work the agent started by itself (FAKE_AUTOBUSY)."""

    duration: float
    reply: str
    text: str | None = None
    start: float = 0.0

    @property
    def end(self) -> float:
        return self.start + self.duration


AUTOBUSY_REPLY = "working on my own"


def busy_ms_for(text: str, default: int) -> int:
    """A ``BUSY=N`` token in the message sets its busy time to N ms."""
    for token in text.split():
        if token.startswith("BUSY=") and token[5:].isdigit():
            return int(token[5:])
    return default


def reply_for(text: str) -> str:
    """The reply line: ``reply to: `` and the first 40 characters of the
    message (its newlines as spaces, so that the reply is one line)."""
    return "reply to: " + text[:40].replace("\n", " ")


@dataclass
class Chunk:
    """What one ``os.read`` brought: its arrival time, and whether typed
    (non-pasted) text came before the event being handled."""

    t: float
    typed_text: bool = False


class FakeProvider:
    """Everything common to the three fakes: the terminal, the input line,
    turns and busy periods, the log.  Subclasses draw their screen
    (``render``) and add their provider's quirks through the hooks."""

    name = "fake"
    alt_screen = False

    def __init__(self, knobs: Knobs, log: EventLog, argv: list[str], cwd: str,
                 fd_in: int = 0, fd_out: int = 1, sessions: Sessions | None = None):
        self.knobs, self.log = knobs, log
        self.argv, self.cwd = argv, cwd
        self.sessions = sessions if sessions is not None else Sessions()
        self.sessions_open = False
        self.fd_in, self.fd_out = fd_in, fd_out
        self.parser = InputParser()
        self.input = ""
        self.history: list[tuple[str, str]] = []  # ("user" | "reply", text)
        self.turn: Turn | None = None
        self.queue: list[Turn] = []
        self.drops_left = knobs.drop_enter
        self.auto_busy = False
        self.auto_since = 0.0
        self.auto_next: float | None = None
        self.was_busy = False
        self.width, self.height = 80, 24
        self.shown: Frame | None = None
        self.rows_drawn = 0
        self.title_shown: str | None = None
        self.saved_tty = None
        self.screen_entered = False
        self.exiting = False
        self.last_read = 0.0
        self.signals: list[int] = []
        self.wake_r = self.wake_w = -1

    # Printed once the terminal is restored after SIGTERM/SIGHUP; ``{id}``
    # is the conversation's real id.
    hangup_template = ""

    @property
    def hangup_message(self) -> str:
        if not self.hangup_template:
            return ""
        return self.hangup_template.format(id=self.sessions.session_id)

    # -- lifecycle -----------------------------------------------------------

    def run(self) -> int:
        self.log.write("start", provider=self.name, pid=os.getpid(), argv=self.argv, cwd=self.cwd,
                       session=self.sessions.session_id)
        try:
            self.saved_tty = termios.tcgetattr(self.fd_in)
        except termios.error:
            sys.stderr.write(f"{self.name} (fake): standard input is not a terminal\n")
            return 2
        self._install_signals()
        # TCSANOW, not setraw's default TCSAFLUSH: input the host typed
        # before we got here must not be thrown away.
        tty.setraw(self.fd_in, termios.TCSANOW)
        quit_ = Quit(0, "quit")
        try:
            self.resize()
            early = self.startup()
            self.open_sessions()
            self.enter_screen()
            for events, t in early:
                self.handle_chunk(events, t)
            self.main_loop()
        except Quit as q:
            quit_ = q
        finally:
            self.exiting = True
            try:
                self.close_sessions()
            finally:
                self.leave_screen()
                termios.tcsetattr(self.fd_in, termios.TCSANOW, self.saved_tty)
        self.log.write("exit", status=quit_.status, reason=quit_.reason)
        for stream, text in ((sys.stdout, quit_.stdout), (sys.stderr, quit_.stderr)):
            if text:
                try:
                    stream.write(text)
                    stream.flush()
                except OSError:
                    pass
        return quit_.status

    def startup(self) -> list[tuple[list[Event], float]]:
        """Work before the screen is drawn; returns input read meanwhile."""
        return []

    def open_sessions(self) -> None:
        """The session files appear once the program is up (for codex: once
        its cursor query was answered), before the screen is drawn."""
        try:
            self.sessions.open()
        except OSError as err:
            raise Quit(1, "session-files", stderr=f"{self.name} (fake): session files: {err}\n") from None
        self.sessions_open = True

    def session_update(self, update, arg) -> None:
        """A session file that can no longer be written (a test removed the
        directory, say) is logged, not fatal."""
        try:
            update(arg)
        except OSError as err:
            self.log.write("session-error", error=str(err))

    def close_sessions(self) -> None:
        """On every way out (quit keys, SIGTERM, SIGHUP, a lost terminal,
        an exception), before the exit is logged."""
        if self.sessions_open:
            self.sessions_open = False
            try:
                self.sessions.close()
            except OSError:
                pass

    def enter_screen(self) -> None:
        """Common behaviour: bracketed paste on unless FAKE_NO_BRACKETED."""
        seq = ""
        if self.knobs.bracketed:
            seq += f"{ESC}[?2004h"
        seq += f"{ESC}[?1049h" if self.alt_screen else ""
        self.out(seq + f"{ESC}[H{ESC}[2J")
        self.screen_entered = True

    def leave_screen(self) -> None:
        seq = f"{ESC}[0m{ESC}[?25h"
        if self.screen_entered:
            if self.knobs.bracketed:
                seq += f"{ESC}[?2004l"
            if self.alt_screen:
                seq += f"{ESC}[?1049l"
            else:
                # Inline TUI: leave the drawing on screen, continue below it.
                seq += f"{ESC}[{max(1, self.rows_drawn)};1H\r\n"
        self.out(seq)

    # -- terminal I/O --------------------------------------------------------

    def out(self, text: str) -> None:
        data = text.encode()
        while data:
            try:
                written = os.write(self.fd_out, data)
            except OSError:
                if self.exiting:
                    return
                raise Quit(0, "hangup") from None
            data = data[written:]

    def resize(self) -> None:
        for fd in (self.fd_out, self.fd_in):
            try:
                self.width, self.height = os.get_terminal_size(fd)
                break
            except OSError:
                continue
        self.shown = None  # force a full redraw

    def _install_signals(self) -> None:
        self.wake_r, self.wake_w = os.pipe()
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGWINCH):
            signal.signal(signum, lambda num, _frame: self.signals.append(num))

    def handle_signals(self) -> None:
        """Common behaviour: SIGWINCH redraws at the new size; SIGTERM and
        SIGHUP restore the terminal and exit 0.  Knob FAKE_IGNORE_TERM: a
        program that will not die politely; SIGTERM is logged and ignored
        (SIGHUP still ends it, SIGKILL always does)."""
        while self.signals:
            signum = self.signals.pop(0)
            if signum == signal.SIGWINCH:
                self.resize()
            elif signum == signal.SIGTERM and self.knobs.ignore_term:
                self.log.write("ignored-sigterm")
            else:
                name = signal.Signals(signum).name.lower()
                raise Quit(0, name, stdout=self.hangup_message)

    def wait(self, timeout_ms: float | None) -> bool:
        """Wait for input or a signal; True when the terminal is readable."""
        timeout = None if timeout_ms is None else max(0.0, timeout_ms) / 1000.0
        ready, _, _ = select.select([self.fd_in, self.wake_r], [], [], timeout)
        if self.wake_r in ready:
            try:
                while os.read(self.wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        return self.fd_in in ready

    def read_chunk(self) -> tuple[list[Event], float]:
        try:
            data = os.read(self.fd_in, 4096)
        except OSError:
            raise Quit(0, "hangup") from None
        if not data:
            raise Quit(0, "eof")
        self.last_read = mono_ms()
        return self.parser.feed(data), self.last_read

    def main_loop(self) -> None:
        while True:
            now = mono_ms()
            self.tick(now)
            self.redraw(now)
            readable = self.wait(self.next_timeout(now))
            self.handle_signals()
            if readable:
                self.handle_chunk(*self.read_chunk())
            elif self.parser.has_partial_escape and mono_ms() - self.last_read >= ESC_TIMEOUT_MS:
                self.handle_chunk(self.parser.flush_stale(), mono_ms())

    def next_timeout(self, now: float) -> float | None:
        deadlines = []
        if self.turn is not None:
            deadlines.append(self.turn.end)
        if self.auto_next is not None:
            deadlines.append(self.auto_next)
        if self.is_busy():
            deadlines.append((now // ANIMATION_MS + 1) * ANIMATION_MS)
        if self.parser.has_partial_escape:
            deadlines.append(self.last_read + ESC_TIMEOUT_MS)
        return min(deadlines) - now if deadlines else None

    # -- input ---------------------------------------------------------------

    def handle_chunk(self, events: list[Event], t: float) -> None:
        chunk = Chunk(t)
        for event in events:
            self.before_event(event, chunk)
            self.handle_event(event, chunk)
            if event.kind == "text":
                chunk.typed_text = True

    def before_event(self, event: Event, chunk: Chunk) -> None:
        """Hook: a provider watches input before the common handling."""

    def handle_event(self, event: Event, chunk: Chunk) -> None:
        """Common behaviour: line editing.  Keys edit the input line even
        while busy (the real CLIs let you type ahead)."""
        kind = event.kind
        if kind in ("text", "paste"):
            self.input += event.text
        elif kind == "newline":
            self.input += "\n"
        elif kind == "backspace":
            self.input = self.input[:-1]
        elif kind == "clear":
            self.input = ""
        elif kind == "interrupt":
            if not self.input:
                raise Quit(0, "ctrl-c")
            self.input = ""
        elif kind == "eof":
            if not self.input:
                raise Quit(0, "ctrl-d")
        elif kind == "enter":
            self.enter(chunk)
        elif kind == "esc":
            self.interrupt_turn(chunk.t)
        # key, report, cpr: consumed and ignored

    def interrupt_turn(self, t: float) -> None:
        """Esc while a turn runs ends it now, as the footer's "esc to
        interrupt" says the real CLIs do; the turns queued behind it still
        run. Idle, Esc does nothing."""
        if self.turn is None:
            return
        self.log.write("interrupted", text=self.turn.text)
        self.turn.duration = max(0.0, t - self.turn.start)

    def intercept_enter(self, chunk: Chunk) -> bool:
        """Hook: True when the provider's quirk takes this Enter."""
        return False

    def enter(self, chunk: Chunk) -> None:
        if self.intercept_enter(chunk):
            return
        if not self.input:
            self.log.write("empty-enter")
            return
        if self.drops_left > 0:
            # Knob FAKE_DROP_ENTER: a lost Enter.
            self.drops_left -= 1
            self.log.write("dropped-enter")
            return
        self.submit(chunk.t)

    def submit(self, t: float) -> None:
        """Common behaviour: the message goes to the history and the log, the
        input line empties, and a turn starts (queued behind the current one
        if busy, as the real CLIs queue a message sent while they work)."""
        text, self.input = self.input, ""
        busy = self.activity()
        # How long the agent had been busy, and whether with work it started
        # by itself: an Enter already on its way when that work began could
        # not have been held back (see the FAKE_AUTOBUSY tests).
        since = {} if busy is None else {"busy_for_ms": round(t - busy.start), "own_work": busy.text is None}
        self.log.write("submit", text=text, while_busy=busy is not None, **since)
        self.session_update(self.sessions.submitted, text)
        self.history.append(("user", text))
        turn = Turn(duration=busy_ms_for(text, self.knobs.busy_ms), reply=reply_for(text), text=text)
        if self.turn is None:
            turn.start = t
            self.turn = turn
        else:
            self.queue.append(turn)

    # -- busy and idle -------------------------------------------------------

    def is_busy(self) -> bool:
        return self.turn is not None or self.auto_busy

    def activity(self) -> Turn | None:
        """What the agent is busy with: the current turn, else the current
        FAKE_AUTOBUSY period."""
        if self.turn is not None:
            return self.turn
        if self.auto_busy:
            return Turn(duration=self.knobs.autobusy[1], reply=AUTOBUSY_REPLY, start=self.auto_since)
        return None

    def tick(self, now: float) -> None:
        self._advance_turns(now)
        self._advance_autobusy(now)
        busy = self.is_busy()
        if busy != self.was_busy:
            self.was_busy = busy
            self.session_update(self.sessions.busy, busy)
            self.on_busy_change(busy)

    def _advance_turns(self, now: float) -> None:
        while self.turn is not None and now >= self.turn.end:
            end = self.turn.end
            self.history.append(("reply", self.turn.reply))
            self.turn = self.queue.pop(0) if self.queue else None
            if self.turn is not None:
                self.turn.start = end

    def _advance_autobusy(self, now: float) -> None:
        """Knob FAKE_AUTOBUSY: an agent that works by itself, idle IDLE_MS,
        busy BUSY_MS, again and again."""
        if self.knobs.autobusy is None:
            return
        idle_ms, busy_ms = self.knobs.autobusy
        if self.auto_next is None:
            self.auto_next = now + idle_ms
        while now >= self.auto_next:
            self.auto_busy = not self.auto_busy
            self.auto_since = self.auto_next
            self.auto_next += busy_ms if self.auto_busy else idle_ms
            self.log.write("autobusy", busy=self.auto_busy)

    def on_busy_change(self, busy: bool) -> None:
        """Hook: the agent became busy or idle."""

    # -- drawing -------------------------------------------------------------

    def render(self, now: float) -> Frame:
        raise NotImplementedError

    def shown_input(self) -> str:
        """Knob FAKE_HIDE_INPUT: the input is kept but drawn as if empty."""
        return "" if self.knobs.hide_input else self.input

    def input_rows(self, prefix: str, cont: str, placeholder: str = "") -> tuple[list[str], tuple[int, int]]:
        """The input line's rows and the cursor (row in them, column): at the
        end of the text; at the start of a placeholder.

        Knob FAKE_NO_PLACEHOLDER reproduces an empty input line drawn
        without its placeholder: Codex writes the composer's ``›`` and its
        dim placeholder separately (recordings of 0.171.0: ``›``, a cursor
        move past the space, then the placeholder), so without the second
        write the row reads ``›`` alone once its trailing space is trimmed
        (issue 11, found from outside)."""
        text = self.shown_input()
        if not text and placeholder and not self.knobs.no_placeholder:
            return [prefix + dim(placeholder)], (0, cells(prefix))
        rows = wrap(text, prefix, cont, self.width)
        return rows, (len(rows) - 1, min(cells(rows[-1]), self.width - 1))

    def redraw(self, now: float) -> None:
        """Common behaviour: the whole screen is redrawn on every change.
        Rows are overwritten in place (never a blank screen in between), the
        title set with ``ESC]0;...BEL``, the cursor placed at the end of the
        input and shown."""
        frame = self.render(now)
        if frame == self.shown:
            return
        parts = [f"{ESC}[?25l"]
        if frame.title != self.title_shown:
            parts.append(f"{ESC}]0;{frame.title}{BEL}")
        for n, row in enumerate(frame.rows):
            parts.append(f"{ESC}[{n + 1};1H{ESC}[2K{clip(row, self.width)}")
        if len(frame.rows) < self.height:
            parts.append(f"{ESC}[{len(frame.rows) + 1};1H{ESC}[J")
        row, col = frame.cursor
        parts.append(f"{ESC}[{row + 1};{col + 1}H{ESC}[?25h")
        self.out("".join(parts))
        self.shown, self.title_shown = frame, frame.title
        self.rows_drawn = len(frame.rows)

    def history_rows(self, user: tuple[str, str], reply: tuple[str, str]) -> list[str]:
        """History as rows; ``user`` and ``reply`` are (prefix, continuation).
        Only the newest entries that can still show are laid out, so a long
        session redraws as fast as a new one."""
        rows: list[str] = []
        for who, text in reversed(self.history):
            if len(rows) >= self.height:
                break
            prefix, cont = user if who == "user" else reply
            rows[:0] = wrap(text, prefix, cont, self.width)
        return rows


def place(rows: list[str], origin: int, cursor: tuple[int, int]) -> tuple[int, int]:
    """A cursor given within the bottom block, as a screen position."""
    row = min(max(origin + cursor[0], 0), max(len(rows) - 1, 0))
    return row, cursor[1]


# ---------------------------------------------------------------------------
# Claude Code 2.1.197
# ---------------------------------------------------------------------------


class ClaudeFake(FakeProvider):
    """Fake of Claude Code 2.1.197 (``claude``)."""

    name = "claude"
    # Reproduces: Claude Code draws inline, in the normal screen (recordings
    # of 2.1.197; docs/adapters.md: "inline TUIs such as Claude Code draw
    # above the cursor").
    alt_screen = False
    # Reproduces: killed with SIGTERM/SIGHUP, Claude Code prints how to
    # resume the session, with its real id (docs/providers.md).
    hangup_template = "Resume this session with: claude --resume {id}\n"

    # Reproduces: the title is a braille spinner (alternating ⠂ and ⠐) while
    # busy and ✳ when idle (recordings; config/providers/claude-code.toml).
    TITLE_SPINNER = "⠂⠐"

    def intercept_enter(self, chunk: Chunk) -> bool:
        """Reproduces: Claude Code swallows an Enter that arrives in the same
        burst as typed text (config/providers/claude-code.toml, [input]:
        "Claude Code swallows an Enter that arrives in the same burst as the
        text"); the host therefore waits enter_delay_ms before the Enter.
        Only typed text counts: a bracketed paste followed by an Enter in the
        same read still submits."""
        if chunk.typed_text:
            self.log.write("swallowed-enter")
            return True
        return False

    def render(self, now: float) -> Frame:
        """Reproduces the 2.1.197 layout (samples in claude-code.toml): the
        history, then the spinner line while busy, the input box between two
        rules, and the footer whose text the busy/idle rules read ("esc to
        interrupt" / "? for shortcuts" in the last two rows)."""
        width = self.width
        above = ["Claude Code (fake)", ""] + self.history_rows(("❯ ", "  "), ("● ", "  "))
        bottom: list[str] = []
        activity = self.activity()
        if activity is not None:
            seconds = int(max(0.0, now - activity.start) // 1000)
            bottom += [f"✽ Working… ({seconds}s)", ""]
        rule = "─" * width
        rows, (crow, ccol) = self.input_rows("❯ ", "  ")
        cursor = (len(bottom) + 1 + crow, ccol)
        hint = "esc to interrupt" if activity is not None else "? for shortcuts"
        bottom += [rule] + rows + [rule, f"  {hint} · ← for agents"]
        screen, origin = stack(above, bottom, self.height, fill=False)
        if activity is not None:
            title = self.TITLE_SPINNER[int(now // ANIMATION_MS) % 2] + " fake"
        else:
            title = "✳ fake"
        return Frame(screen, place(screen, origin, cursor), title)


# ---------------------------------------------------------------------------
# Codex 0.171.0
# ---------------------------------------------------------------------------

CPR_ERROR = "Error: The cursor position could not be read within a normal duration\n"
BURST_MIN_CHARS = 6
BURST_GAP_MS = 8
BURST_ENTER_MS = 120


def osc_7501(state: str) -> str:
    return f"{ESC}]7501;state={state}:app=codex{ST}"


class CodexFake(FakeProvider):
    """Fake of Codex 0.171.0 (``codex``)."""

    name = "codex"
    # Reproduces: Codex runs in the alternate screen (recordings of 0.171.0).
    alt_screen = True

    # Reproduces: the title starts with a braille spinner while busy
    # (config/providers/codex.toml: title rule '^[\x{2801}-\x{28FF}]').
    TITLE_SPINNER = "⠋⠙⠹⠸"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.burst = 0  # printable characters in the current burst
        self.last_char_t: float | None = None
        self.idle_osc_pending = False

    def startup(self) -> list[tuple[list[Event], float]]:
        """Reproduces: Codex asks the terminal where the cursor is (ESC[6n)
        and, when no answer comes, quits with "Error: The cursor position
        could not be read within a normal duration" (documented for older
        Codex releases; the host's responder answers ESC[6n).  Input read
        while waiting is kept and handled once the screen is up."""
        self.out(f"{ESC}[6n")
        deadline = mono_ms() + self.knobs.cpr_timeout_ms
        early: list[tuple[list[Event], float]] = []
        while True:
            remaining = deadline - mono_ms()
            if remaining <= 0:
                self.log.write("cpr-timeout")
                raise Quit(1, "cpr-timeout", stderr=CPR_ERROR)
            readable = self.wait(remaining)
            self.handle_signals()
            if readable:
                events, t = self.read_chunk()
                early.append((events, t))
                if any(event.kind == "cpr" for event in events):
                    return early

    def before_event(self, event: Event, chunk: Chunk) -> None:
        """Reproduces: after a turn's ``state=done`` OSC, the next key makes
        Codex send ``state=idle`` (recordings of 0.171.0).  Also tracks the
        paste-burst timing (see intercept_enter)."""
        if event.kind in KEY_KINDS and self.idle_osc_pending:
            self.idle_osc_pending = False
            self.out(osc_7501("idle"))
        if event.kind == "text":
            for _ in event.text:
                if self.last_char_t is not None and chunk.t - self.last_char_t <= BURST_GAP_MS:
                    self.burst += 1
                else:
                    self.burst = 1
                self.last_char_t = chunk.t
        elif event.kind not in ("enter", "cpr", "report"):
            self.burst = 0

    def intercept_enter(self, chunk: Chunk) -> bool:
        """Reproduces Codex's paste-burst rule (config/providers/codex.toml,
        [input]: "Without bracketed paste Codex takes >= 6 characters within
        8 ms as a paste, and an Enter within 120 ms of one as a newline").
        Characters of one read count as 0 ms apart.  The newline extends the
        burst, so a second Enter within 120 ms is a newline too."""
        if (self.burst >= BURST_MIN_CHARS and self.last_char_t is not None
                and chunk.t - self.last_char_t <= BURST_ENTER_MS):
            self.input += "\n"
            self.last_char_t = chunk.t
            self.log.write("newline-inserted")
            return True
        return False

    def on_busy_change(self, busy: bool) -> None:
        """Reproduces: Codex reports turns out of band with OSC 7501
        ``state=working`` at the start and ``state=done`` at the end
        (config/providers/codex.toml: the signals that stay reliable while a
        reply streams)."""
        self.out(osc_7501("working" if busy else "done"))
        self.idle_osc_pending = not busy

    def working_ms(self, activity: Turn) -> float:
        if self.knobs.codex_working_ms is not None:
            return self.knobs.codex_working_ms
        return activity.duration / 3

    def render(self, now: float) -> Frame:
        """Reproduces the 0.171.0 layout (samples in codex.toml): header,
        history, and at the bottom the composer, a blank row and the model
        and directory row.

        Reproduces the documented quirk: ``• Working (Ns • esc to
        interrupt)`` is drawn two rows above the composer only until the
        first text delta; then the reply streams in the history and nothing
        on screen says busy (only the OSC and the title do)."""
        if self.knobs.codex_sign_in:
            return self.sign_in_frame()
        above = ["", "  >_ OpenAI Codex (fake)", ""] + self.history_rows(("› ", "  "), ("• ", "  "))
        working_row = ""
        activity = self.activity()
        if activity is not None:
            elapsed = max(0.0, now - activity.start)
            working = self.working_ms(activity)
            if elapsed < working:
                working_row = f"• Working ({int(elapsed // 1000)}s • esc to interrupt)"
            else:
                above += wrap(partial_reply(activity.reply, elapsed - working, activity.duration - working),
                              "• ", "  ", self.width)
        rows, (crow, ccol) = self.input_rows("› ", "  ", placeholder="Ask Codex to do anything")
        bottom = [working_row, ""] + rows + ["", f"  fake-model · {self.cwd}"]
        screen, origin = stack(above, bottom, self.height, fill=True)
        base = os.path.basename(self.cwd.rstrip("/")) or "/"
        title = f"fake | {base}"
        if activity is not None:
            title = self.TITLE_SPINNER[int(now // ANIMATION_MS) % len(self.TITLE_SPINNER)] + " " + title
        return Frame(screen, place(screen, origin, (2 + crow, ccol)), title)


    # Reproduces: without an account Codex shows its sign-in choice and no
    # composer (the 0.171.0 start-up recordings); no detection rule reads it.
    SIGN_IN = [
        "  Welcome to Codex, OpenAI's command-line coding agent",
        "",
        "  Choose how you want to use Codex.",
        "",
        "> 1. Sign in with ChatGPT",
        "     Usage included with Plus, Pro, Business, and Enterprise plans",
        "",
        "  2. Sign in with Device Code",
        "     Sign in from another device with a one-time code",
        "",
        "  3. Sign in another way",
        "     Use an API key or another provider",
        "",
        "  Press enter to continue",
    ]

    def sign_in_frame(self) -> Frame:
        """Knob FAKE_CODEX_SIGN_IN: the sign-in choice screen, for as long
        as the fake runs (what is typed is kept but never drawn)."""
        rows = self.SIGN_IN[: self.height]
        return Frame(rows, (min(4, len(rows) - 1), 0), "")


def partial_reply(reply: str, streamed_ms: float, stream_ms: float) -> str:
    """The part of ``reply`` streamed after ``streamed_ms`` of ``stream_ms``
    (at least its first character: the first text delta)."""
    fraction = streamed_ms / stream_ms if stream_ms > 0 else 1.0
    return reply[:max(1, min(len(reply), math.ceil(len(reply) * fraction)))]


# ---------------------------------------------------------------------------
# opencode 1.18.33
# ---------------------------------------------------------------------------


class OpenCodeFake(FakeProvider):
    """Fake of opencode 1.18.33 (``opencode``)."""

    name = "opencode"
    # Reproduces: opencode runs in the alternate screen (recordings of 1.18.33).
    alt_screen = True
    # Reproduces: killed with SIGTERM/SIGHUP, opencode prints how to continue
    # the session, with its real id (docs/providers.md).
    hangup_template = "Continue  opencode -s {id}\n"

    # Reproduces: the busy animation of eight squares in the status row.
    SQUARES = ("■■■■■■⬝⬝", "⬝■■■■■■⬝", "⬝⬝■■■■■■", "⬝■■■■■■⬝")

    # Reproduces: a paste of more than 150 characters (or 3 lines) shows in
    # the input box as "[Pasted ~N lines]", not as its text
    # (docs/providers.md; seen with 1.18.33 in tests/real_providers.rs).
    COLLAPSE_CHARS = 150
    COLLAPSE_LINES = 3
    collapsed = ""

    def before_event(self, event: Event, chunk: Chunk) -> None:
        text = event.text or ""
        if event.kind == "paste" and (
            len(text) > self.COLLAPSE_CHARS or text.count("\n") + 1 >= self.COLLAPSE_LINES
        ):
            self.collapsed = text

    def shown_input(self) -> str:
        text = super().shown_input()
        if self.collapsed and self.collapsed in text:
            lines = self.collapsed.count("\n") + 1
            return text.replace(self.collapsed, f"[Pasted ~{lines} lines] ")
        return text

    def status_row(self, now: float) -> str:
        """Reproduces: the last row shows the animation and "esc interrupt"
        while busy, the working directory when idle (opencode.toml: busy
        "esc interrupt", idle '^\\s*[/~]' in the last row).  The idle row's
        key hint ends two columns before the right edge, as recorded."""
        # Reproduces: opencode draws a turn late — nothing busy for up to
        # 0.85 s after the Enter in tests/corpus — while the turn has begun.
        late = self.turn is not None and now - self.turn.start < self.knobs.opencode_draw_delay_ms
        if self.is_busy() and not late:
            frame = self.SQUARES[int(now // ANIMATION_MS) % len(self.SQUARES)]
            return f"   {frame}  esc interrupt"
        left, right = f"   {self.cwd}", "ctrl+p commands"
        gap = max(2, self.width - 2 - cells(left) - cells(right))
        return left + " " * gap + right

    def render(self, now: float) -> Frame:
        """Reproduces the 1.18.33 layout (samples in opencode.toml): history
        at the top, the input box at the bottom with the agent and model row
        and its ``╹▀▀▀`` edge, then the status row."""
        bar = "  ┃  "
        above = self.history_rows((bar, bar), ("     ", "     "))
        rows, (crow, ccol) = self.input_rows(bar, bar, placeholder="Ask anything...")
        edge = "  ╹" + "▀" * max(0, self.width - 5)
        bottom = ["  ┃"] + rows + ["  ┃", "  ┃  Build · Fake", edge, self.status_row(now)]
        screen, origin = stack(above, bottom, self.height, fill=True)
        return Frame(screen, place(screen, origin, (1 + crow, ccol)), "OC | fake")


# ---------------------------------------------------------------------------

PROVIDERS = {"claude": ClaudeFake, "codex": CodexFake, "opencode": OpenCodeFake}


def main(provider: str) -> int:
    """Run the fake ``provider`` on the terminal of stdin/stdout."""
    argv, cwd = list(sys.argv), os.getcwd()
    try:
        knobs = Knobs.from_env(os.environ)
        sessions = SESSIONS[provider](argv, os.environ, cwd)
    except (KnobError, UsageError) as err:
        sys.stderr.write(f"{provider} (fake): {err}\n")
        return 2
    fake = PROVIDERS[provider](knobs, EventLog(knobs.log_path), argv, cwd, sessions=sessions)
    try:
        return fake.run()
    except KeyboardInterrupt:
        return 130
