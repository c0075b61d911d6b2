"""A tiny MCP server over stdio, written by hand (no SDK) so the bridge's
tests control exactly what the server does. Python 3 standard library only.

Tools:
  count     answers "call N"; the call numbered $CRASH_ON (default 2) makes
            the process exit without answering, as a crash mid-call would;
  progress  sends two progress notifications, then answers;
  wait      never answers: only a cancellation ends it;
  grow      answers, then adds the tool `extra` and says the list changed;
  extra     (after grow) answers "extra".

With $HOSTILE set it also lists tools the bridge must skip: one whose input
schema is not JSON Schema, one with a 20 KiB description, `dup.a`, whose
name normalizes to that of `dup_a`, and `huge`, which answers with a 20 MiB
message.

With $START_GATE (a path) it waits, before answering `initialize`, until
that file exists (at most two minutes), as a slow-starting server would:
the test decides when it has started.

Every request and notification received is appended, one JSON line each,
to the file $LOG, so a test can see what reached the server.
"""

import json
import os
import sys
import time

LOG = os.environ["LOG"]
CRASH_ON = int(os.environ.get("CRASH_ON", "2"))
EMPTY = {"type": "object", "properties": {}, "additionalProperties": False}
COUNT_INPUT = {
    "type": "object",
    "properties": {"label": {"type": "string"}},
    "additionalProperties": False,
}


def tool(name, description, schema=EMPTY):
    return {"name": name, "description": description, "inputSchema": schema}


TOOLS = [
    tool("count", "Counts its calls.", COUNT_INPUT),
    tool("progress", "Reports progress twice."),
    tool("wait", "Waits until cancelled."),
    tool("grow", "Adds the tool extra."),
]

if os.environ.get("HOSTILE"):
    TOOLS += [
        tool("bad_schema", "Its schema is not JSON Schema.", {"type": 12}),
        tool("long", "x" * (20 << 10)),
        tool("dup_a", "The first dup_a."),
        tool("dup.a", "Normalizes to dup_a too."),
        tool("huge", "Answers with a 20 MiB message."),
    ]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def reply(request, result):
    send({"jsonrpc": "2.0", "id": request["id"], "result": result})


def text(t):
    return {"content": [{"type": "text", "text": t}]}


def call(request, calls):
    params = request["params"]
    name = params["name"]
    if name == "count":
        if calls == CRASH_ON:
            sys.exit(3)
        reply(request, text(f"call {calls}"))
    elif name == "progress":
        token = params.get("_meta", {}).get("progressToken")
        for step in (1, 2):
            send({
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": step, "total": 2, "message": f"step {step}"},
            })
        reply(request, text("done"))
    elif name == "wait":
        pass
    elif name == "grow":
        if not any(t["name"] == "extra" for t in TOOLS):
            TOOLS.append(tool("extra", "Added by grow."))
        reply(request, text("grown"))
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    elif name == "huge":
        reply(request, text("x" * (20 << 20)))
    elif name == "extra":
        reply(request, text("extra"))
    else:
        send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32602, "message": f"no tool {name}"}})


def main():
    calls = 0
    for line in sys.stdin:
        message = json.loads(line)
        with open(LOG, "a") as log:
            log.write(json.dumps(message) + "\n")
        method = message.get("method")
        if method == "initialize":
            gate = os.environ.get("START_GATE")
            deadline = time.monotonic() + 120
            while gate and not os.path.exists(gate) and time.monotonic() < deadline:
                time.sleep(0.02)  # a bounded poll of the gate file
            reply(message, {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "scripted", "version": "1.0.0"},
            })
        elif method == "tools/list":
            reply(message, {"tools": TOOLS})
        elif method == "tools/call":
            calls += 1
            call(message, calls)
        elif method == "ping":
            reply(message, {})
        elif "id" in message:
            send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": method}})


main()
