#!/usr/bin/env python3
"""A fake ACP agent (Agent Client Protocol v1) for the end-to-end tests of
`runtime acp-serve` (tests/acp.rs): JSON-RPC 2.0, one JSON object per line
on stdio, the agent's side. Standard library only.

It does what the supervisor relies on, as the ACP v1 spec and the field notes
on the real agents (ACP.md) describe it, and in its hostile modes what a
broken or unfriendly agent may do. Each behaviour below says which documented
behaviour it reproduces; tests/fakes/README.md has the table.

Environment:
  FAKE_ACP_LOG       JSON lines of what it saw (initialize, sessions,
                     prompts, the answers to its own requests); the tests
                     read it to count prompts.
  FAKE_ACP_MODE      normal (default) | garbage | huge | deaf | unknown |
                     write | exit-mid-turn | permission
  FAKE_ACP_TURN_MS   how long a turn lasts (default 0); a prompt whose text
                     has a token TURN_MS=N lasts N ms instead.
  (prompt tokens)    CHUNKS=N in a prompt's text: the turn streams N more
                     agent_message_chunk updates, `chunk I sent_ns=T` with T
                     the wall clock (Unix ns) just before the write, spaced
                     by CHUNK_MS=M ms (default 0: back to back), for the
                     fan-out benchmark (bench/src/fanout.rs).
  FAKE_ACP_WRITE_PATHS  os.pathsep-separated paths the `unknown` and `write`
                     modes ask the client to write (default: one file,
                     fake-acp-written.txt, in the session's cwd).
"""

import fcntl
import json
import os
import re
import sys
import threading
import time
import uuid

MODES = ("normal", "garbage", "huge", "deaf", "unknown", "write", "exit-mid-turn", "permission")
MODE = os.environ.get("FAKE_ACP_MODE") or "normal"
LOG = os.environ.get("FAKE_ACP_LOG")
TURN_MS = os.environ.get("FAKE_ACP_TURN_MS") or "0"
# A bad knob is the test's mistake: say so and exit 2, as the other fakes do.
def bad_knob(why):
    sys.stderr.write(f"fake-acp-agent: {why}\n")
    sys.exit(2)


if MODE not in MODES:
    bad_knob(f"FAKE_ACP_MODE={MODE!r} is none of {', '.join(MODES)}")
if not TURN_MS.isdigit():
    bad_knob(f"FAKE_ACP_TURN_MS={TURN_MS!r} is not a number of milliseconds")
TURN_MS = int(TURN_MS)
NAME, VERSION = "fake-acp-agent", "0.3.1"
# Where sessions live, so that a fresh process can resume one (as the real
# agents keep theirs under HOME).
SESSIONS = os.path.join(os.path.expanduser("~"), ".fake-acp", "sessions")
# The line the huge mode writes: over the supervisor's 16 MiB MAX_LINE.
HUGE_BYTES = 20 * 1024 * 1024
# How long the fake waits for the answer to a request of its own.
ANSWER_WAIT_S = 30

out_lock = threading.Lock()
log_lock = threading.Lock()


def send(msg):
    write_raw(json.dumps(msg, ensure_ascii=False))


def write_raw(line):
    data = (line + "\n").encode()
    with out_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def log(event, **fields):
    if not LOG:
        return
    fields["event"] = event
    fields["t"] = time.time()
    with log_lock, open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(fields, ensure_ascii=False) + "\n")


def respond(msg_id, result):
    send({"jsonrpc": "2.0", "id": msg_id, "result": result})


def error(msg_id, code, message):
    send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})


def garbage():
    """Mode garbage: a line that is not JSON, and a JSON array (a batch,
    which ACP does not use), between real messages."""
    if MODE == "garbage":
        write_raw("this is not JSON {{{ \x1b[2J")
        write_raw("[1, 2, 3]")


class Requests:
    """The fake's own requests to the client and their answers. Its ids
    start at 0, as opencode's do (ACP.md)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.next_id = 0
        self.waiting = {}

    def call(self, method, params):
        with self.lock:
            msg_id = self.next_id
            self.next_id += 1
            done = threading.Event()
            self.waiting[msg_id] = [done, None]
        send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        if not done.wait(ANSWER_WAIT_S):
            return {"timeout": True}
        with self.lock:
            return self.waiting.pop(msg_id)[1]

    def answered(self, msg):
        with self.lock:
            slot = self.waiting.get(msg.get("id"))
            if slot is None:
                return
            slot[1] = {k: msg[k] for k in ("result", "error") if k in msg}
            slot[0].set()


class Agent:
    def __init__(self):
        self.requests = Requests()
        self.lock = threading.Lock()
        # Prompts running: a second one while one runs is logged as such.
        self.running = 0
        self.cancels = {}  # session id -> Event of the running turn
        self.cwd = os.getcwd()

    # -- requests from the client -------------------------------------

    def handle(self, msg):
        method = msg.get("method")
        msg_id = msg.get("id")
        params = msg.get("params") or {}
        if method is None:
            self.requests.answered(msg)
            return
        if method == "initialize":
            # ACP v1 initialize: protocol version 1, loadSession and
            # sessionCapabilities.resume, as the real agents answer.
            log("initialize", params=params)
            respond(msg_id, {
                "protocolVersion": 1,
                "agentCapabilities": {
                    "loadSession": True,
                    "sessionCapabilities": {"resume": {}},
                    "promptCapabilities": {"image": False, "embeddedContext": False},
                },
                "agentInfo": {"name": NAME, "version": VERSION},
                "authMethods": [],
            })
            garbage()
        elif method == "session/new":
            session = "fake_" + uuid.uuid4().hex[:12]
            os.makedirs(SESSIONS, exist_ok=True)
            with open(os.path.join(SESSIONS, session), "w", encoding="utf-8") as f:
                f.write(params.get("cwd", ""))
            self.cwd = params.get("cwd") or self.cwd
            log("new", session=session, cwd=params.get("cwd"))
            respond(msg_id, {"sessionId": session})
            if MODE == "deaf":
                become_deaf()
        elif method in ("session/resume", "session/load"):
            # A fresh process continues a session it kept; an unknown one is
            # "resource not found" (-32002), as ACP defines it. resume
            # replays nothing (the spec's MUST NOT).
            session = params.get("sessionId", "")
            log(method.split("/")[1], session=session)
            if not os.path.isfile(os.path.join(SESSIONS, os.path.basename(session))):
                error(msg_id, -32002, f"session {session} not found")
                return
            self.cwd = params.get("cwd") or self.cwd
            respond(msg_id, {})
        elif method == "session/prompt":
            threading.Thread(target=self.prompt, args=(msg_id, params), daemon=True).start()
        elif method == "session/cancel":
            log("cancel", session=params.get("sessionId"))
            with self.lock:
                turn = self.cancels.get(params.get("sessionId"))
            if turn is not None:
                turn.set()
        elif msg_id is not None:
            # An unknown method: -32601, as opencode and the adapters do.
            error(msg_id, -32601, f"method not found: {method}")

    # -- a turn ----------------------------------------------------------

    def prompt(self, msg_id, params):
        session = params.get("sessionId")
        text = "".join(
            b.get("text", "") for b in params.get("prompt", []) if b.get("type") == "text"
        )
        cancelled = threading.Event()
        with self.lock:
            busy = self.running > 0
            self.running += 1
            self.cancels[session] = cancelled
        log("prompt", session=session, text=text, while_busy=busy)
        try:
            reason = self.turn(session, text, cancelled)
            respond(msg_id, {"stopReason": reason})
        finally:
            with self.lock:
                self.running -= 1
                if self.cancels.get(session) is cancelled:
                    del self.cancels[session]

    def turn(self, session, text, cancelled):
        self.chunk(session, "working on: " + text[:40])
        if MODE == "exit-mid-turn":
            # An agent that dies during a turn (a crash, an OOM kill): its
            # last words on stderr, then exit status 3.
            sys.stderr.write("fake-acp-agent: out of cheese in the middle of a turn\n")
            sys.stderr.flush()
            os._exit(3)
        if MODE == "huge":
            # A runaway line (an agent dumping a huge blob) before the answer.
            write_raw("x" * HUGE_BYTES)
        if MODE in ("unknown", "write"):
            self.ask_client(session)
        if MODE == "permission":
            self.ask_permission(session)
        garbage()
        if self.stream(session, text, cancelled):
            log("cancelled", session=session, text=text)
            return "cancelled"
        turn_ms = token(text, "TURN_MS")
        if turn_ms is None:
            turn_ms = TURN_MS
        # session/cancel ends the turn with stopReason cancelled, as the
        # spec requires and all three agents do within milliseconds.
        if cancelled.wait(turn_ms / 1000):
            log("cancelled", session=session, text=text)
            return "cancelled"
        self.chunk(session, " — done.")
        return "end_turn"

    def stream(self, session, text, cancelled):
        """The CHUNKS=N token: N chunks, each carrying its send time, so a
        client can tell how long an update took from this agent's stdout
        to it (same machine, same clock). True if cancelled meanwhile."""
        chunks = token(text, "CHUNKS")
        gap_s = (token(text, "CHUNK_MS") or 0) / 1000
        for i in range(chunks or 0):
            if cancelled.is_set():
                return True
            self.chunk(session, f"chunk {i} sent_ns={time.time_ns()}")
            if gap_s:
                time.sleep(gap_s)
        return False

    def chunk(self, session, text):
        send({
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": session,
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": text},
                },
            },
        })

    def ask_permission(self, session):
        """Mode permission: session/request_permission for an edit before
        going on, with the four option kinds the adapters offer (ACP.md),
        and the turn's text saying what was chosen."""
        answer = self.requests.call("session/request_permission", {
            "sessionId": session,
            "toolCall": {"toolCallId": "call_fake_1", "title": "Edit notes.txt", "kind": "edit", "status": "pending"},
            "options": [
                {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
            ],
        })
        log("answer", method="session/request_permission", answer=answer)
        outcome = ((answer.get("result") or {}).get("outcome") or {})
        self.chunk(session, f" permission: {outcome.get('optionId', outcome.get('outcome'))}")

    def ask_client(self, session):
        """Requests a client may refuse or may not know."""
        if MODE == "unknown":
            # A method nobody defined, and a response to an id the client
            # never sent: both must leave the session going.
            answer = self.requests.call("fake/unheard_of", {"sessionId": session})
            log("answer", method="fake/unheard_of", answer=answer)
            send({"jsonrpc": "2.0", "id": "never-sent-4242", "result": {"stray": True}})
        # fs/write_text_file whether or not the client declared fs: opencode
        # sends it after an allowed edit even with fs false (ACP.md).
        paths = os.environ.get("FAKE_ACP_WRITE_PATHS")
        paths = paths.split(os.pathsep) if paths else [os.path.join(self.cwd, "fake-acp-written.txt")]
        for path in paths:
            answer = self.requests.call("fs/write_text_file", {
                "sessionId": session,
                "path": path,
                "content": "written by the fake ACP agent\n",
            })
            log("answer", method="fs/write_text_file", path=path, answer=answer)


def token(text, name):
    """The number N of a whitespace-separated token NAME=N in a prompt's
    text, or None."""
    m = re.search(rf"(?:^|\s){name}=(\d+)(?:\s|$)", text)
    return int(m.group(1)) if m else None


def become_deaf():
    """Mode deaf: an agent that stops reading its input (wedged, or busy
    forever on one thread). Its input pipe is shrunk to one page, so that a
    single prompt fills it and the client's write blocks."""
    try:
        fcntl.fcntl(sys.stdin.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    except OSError as e:
        sys.stderr.write(f"fake-acp-agent: cannot shrink the input pipe: {e}\n")
    log("deaf")
    while True:
        time.sleep(3600)


def main():
    agent = Agent()
    log("start", mode=MODE, argv=sys.argv, pid=os.getpid())
    for raw in sys.stdin.buffer:
        line = raw.decode("utf-8", "replace").strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            # Bad JSON: -32700 with a null id, as the adapters answer.
            error(None, -32700, "parse error")
            continue
        if isinstance(msg, dict):
            agent.handle(msg)
    # stdin closed: the client is gone. Exit at once, as opencode does.
    log("eof")


if __name__ == "__main__":
    main()
