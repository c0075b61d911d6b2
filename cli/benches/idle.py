"""What an MCP server over stdio costs before and between calls: time to
its first `tools/list` reply, each of its first calls, and its resident
memory after it has been idle, by what holds it (from /proc/PID/smaps).

    python cli/benches/idle.py IDLE_SECONDS TOOL ARGS_JSON -- COMMAND...

e.g. `python cli/benches/idle.py 35 echo '{"message": "hi"}' --
target/release/toolhost serve --cache-dir "$(mktemp -d)" --state-dir
"$(mktemp -d)" text_tools.wasm`: an empty compile cache times the first
compile too. 35 s is past the 30 s after which a plugin without calls drops
its instances made ahead.
"""

import collections
import json
import subprocess
import sys
import time

# Calls timed one after another, the first included.
CALLS = 6


def main() -> None:
    idle, tool, arguments, separator, *command = sys.argv[1:]
    if separator != "--" or not command:
        sys.exit(__doc__)
    started = time.monotonic()
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def request(ident: int, method: str, params: dict) -> dict:
        message = {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()
        while True:
            reply = json.loads(server.stdout.readline())
            if reply.get("id") == ident:
                return reply

    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "idle", "version": "1"}}
    request(1, "initialize", hello)
    server.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    request(2, "tools/list", {})
    listed = time.monotonic() - started
    calls = []
    for n in range(CALLS):
        before = time.monotonic()
        reply = request(3 + n, "tools/call", {"name": tool, "arguments": json.loads(arguments)})
        calls.append(time.monotonic() - before)
        if reply.get("result", {}).get("isError", True):
            sys.exit(f"the call failed: {reply}")
    time.sleep(float(idle))
    held = resident_by_mapping(server.pid)
    print(f"start -> first tools/list {1000 * listed:.1f} ms")
    print("first calls: " + ", ".join(f"{1000 * c:.2f} ms" for c in calls))
    print(f"resident after {idle} s idle: {sum(held.values()) / 1024:.1f} MiB")
    for what, kib in held.most_common(8):
        print(f"  {kib / 1024:6.1f} MiB  {what}")
    server.stdin.close()
    server.wait(30)


def resident_by_mapping(pid: int) -> collections.Counter:
    """KiB resident per mapping: files by name, anonymous memory by its
    permissions (r-xp anonymous memory is compiled wasm code)."""
    held: collections.Counter = collections.Counter()
    what = ""
    with open(f"/proc/{pid}/smaps", encoding="ascii", errors="replace") as smaps:
        for line in smaps:
            fields = line.split()
            if len(fields) > 1 and "-" in fields[0] and not fields[0].endswith(":"):
                name = fields[5] if len(fields) >= 6 else ""
                what = name.rsplit("/", 1)[-1] if name.startswith("/") else f"anonymous {fields[1]} {name}".strip()
            elif fields[0] == "Rss:":
                held[what] += int(fields[1])
    return held


if __name__ == "__main__":
    main()
