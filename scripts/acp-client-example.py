#!/usr/bin/env python3
"""A minimal ACP client of a running ACP runtime, as an editor would be one:
it starts `agent-comms acp attach ID` as its agent command and speaks ACP
(JSON-RPC lines) on its stdio — initialize, session/load (the transcript so
far is replayed), one prompt, the reply as it streams. Standard library only.

    scripts/acp-client-example.py RUNTIME_ID 'your prompt'
"""

import json
import subprocess
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: acp-client-example.py RUNTIME_ID PROMPT")
    runtime, text = sys.argv[1], sys.argv[2]
    agent = subprocess.Popen(
        ["agent-comms", "acp", "attach", runtime],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
    )
    next_id = 0

    def call(method, params, on_update=None):
        nonlocal next_id
        next_id += 1
        agent.stdin.write(json.dumps({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}) + "\n")
        agent.stdin.flush()
        for line in agent.stdout:
            msg = json.loads(line)
            if msg.get("method") == "session/update" and on_update:
                on_update(msg["params"]["update"])
            elif msg.get("id") == next_id and "method" not in msg:
                if "error" in msg:
                    sys.exit(f"{method}: {msg['error']['message']}")
                return msg["result"]
        sys.exit("the bridge closed the connection")

    def show(update):
        kind = update.get("sessionUpdate")
        content = update.get("content") or {}
        if kind == "user_message_chunk":
            print(f"  you/others> {content.get('text', '')}")
        elif kind == "agent_message_chunk":
            print(f"  agent> {content.get('text', '')}")
        elif kind == "tool_call":
            print(f"  tool> {update.get('title', '')} ({update.get('status', '')})")

    init = call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    print(f"attached to {init['agentInfo']['name']} {init['agentInfo']['version']}")
    session = call("session/list", {})["sessions"][0]["sessionId"]
    print(f"session {session}, so far:")
    call("session/load", {"sessionId": session, "cwd": "/", "mcpServers": []}, show)
    print(f"prompting: {text}")
    ended = call("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]}, show)
    print(f"turn ended: {ended['stopReason']}")
    agent.stdin.close()
    agent.wait()


if __name__ == "__main__":
    main()
