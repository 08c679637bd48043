#!/usr/bin/env python3
"""A minimal MCP client, as an agent CLI is one: it starts `agent-comms
[--actor ID] mcp` as its server and speaks MCP (JSON-RPC lines) on its
stdio — initialize, tools/list, then each tool call given on the command
line, printing the text each result renders. Standard library only; real
agents use their own MCP client (docs/mcp.md says how to configure each).

    scripts/mcp-client-example.py [--actor ID] TOOL JSON_ARGS [TOOL JSON_ARGS ...]
"""

import json
import subprocess
import sys


def main():
    args = sys.argv[1:]
    actor = []
    if args[:1] == ["--actor"]:
        actor, args = ["--actor", args[1]], args[2:]
    if not args or len(args) % 2:
        sys.exit("usage: mcp-client-example.py [--actor ID] TOOL JSON_ARGS [TOOL JSON_ARGS ...]")
    server = subprocess.Popen(
        ["agent-comms", *actor, "mcp"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
    )
    next_id = 0

    def call(method, params):
        nonlocal next_id
        next_id += 1
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}) + "\n")
        server.stdin.flush()
        for line in server.stdout:
            message = json.loads(line)
            if message.get("id") == next_id:
                if "error" in message:
                    sys.exit(f"{method}: {message['error']['message']}")
                return message["result"]
        sys.exit("the server closed the connection")

    init = call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "mcp-client-example", "version": "1"}})
    server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    tools = call("tools/list", {})["tools"]
    print(f"{init['serverInfo']['name']} serves {len(tools)} tools: {', '.join(t['name'] for t in tools)}")
    for tool, raw in zip(args[::2], args[1::2]):
        result = call("tools/call", {"name": tool, "arguments": json.loads(raw)})
        mark = "error" if result.get("isError") else "ok"
        print(f"-> {tool} {raw} [{mark}]")
        for block in result["content"]:
            print("   " + block["text"].replace("\n", "\n   "))
    server.stdin.close()
    server.wait()


if __name__ == "__main__":
    main()
