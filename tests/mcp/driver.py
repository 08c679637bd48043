"""An MCP client that none of agent-comms' code wrote (the official Python
SDK, `mcp` from PyPI), driven line by line by tests/mcp.rs.

It starts `agent-comms mcp ARGS...` (argv[1:]) as its server over stdio,
exactly as an agent's MCP configuration would, and reads commands from
standard input, one JSON object per line:

  {"id": 1, "list": true}                       tools/list
  {"id": 2, "call": NAME, "args": {...}}        tools/call, run concurrently
  {"id": 3, "cancel": 2}                        abandon call 2 (the SDK sends
                                                notifications/cancelled)
  {"id": 4, "resources": true}                  resources/list
  {"id": 5, "read": URI}                        resources/read
  {"id": 6, "subscribe": URI}                   resources/subscribe

and answers each on standard output, one JSON object per line, when it is
done: {"id": N, "tools": [...]} or {"id": N, "result": {...}, "progress":
[messages...], "seconds": S}, or {"id": N, "protocol_error": "..."}; a
`resources/updated` notification as {"updated": URI} when it comes.
Standard input closing ends the session.
"""

import asyncio
import json
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def read_lines():
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = await reader.readline()
        if not line:
            return
        yield json.loads(line)


async def call(session, command):
    progress = []

    async def on_progress(value, total, message):
        progress.append(message)

    started = time.monotonic()
    try:
        result = await session.call_tool(
            command["call"], command.get("args", {}), progress_callback=on_progress
        )
    except asyncio.CancelledError:
        emit({"id": command["id"], "cancelled": True, "progress": progress})
        raise
    except Exception as e:  # a JSON-RPC error: the test asserts on it
        emit({"id": command["id"], "protocol_error": str(e)})
        return
    emit(
        {
            "id": command["id"],
            "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
            "progress": progress,
            "seconds": time.monotonic() - started,
        }
    )


async def main():
    env = dict(os.environ)
    params = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:], env=env)
    async with stdio_client(params) as (read, write):
        async def on_message(message):
            if getattr(message, "method", None) == "notifications/resources/updated":
                emit({"updated": message.params.uri})

        async with ClientSession(read, write, message_handler=on_message) as session:
            init = await session.initialize()
            emit({"id": 0, "initialized": init.model_dump(mode="json", by_alias=True, exclude_none=True)})
            calls = {}
            async for command in read_lines():
                if command.get("list"):
                    tools = await session.list_tools()
                    emit(
                        {
                            "id": command["id"],
                            "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools.tools],
                        }
                    )
                elif "call" in command:
                    calls[command["id"]] = asyncio.create_task(call(session, command))
                elif command.get("resources"):
                    listed = await session.list_resources()
                    emit({"id": command["id"], "resources": [r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in listed.resources]})
                elif "read" in command:
                    read_result = await session.read_resource(command["read"])
                    emit({"id": command["id"], "contents": [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in read_result.contents]})
                elif "subscribe" in command:
                    await session.subscribe_resource(command["subscribe"])
                    emit({"id": command["id"], "ok": True})
                elif "cancel" in command:
                    calls[command["cancel"]].cancel()
                    emit({"id": command["id"], "ok": True})
            for task in calls.values():
                if not task.done():
                    try:
                        await task
                    except asyncio.CancelledError:
                        pass


asyncio.run(main())
