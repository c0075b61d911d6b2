"""Time from starting an MCP server over stdio to its first `tools/list`
reply and to its first `tools/call` reply.

    python cli/benches/first_reply.py TOOL ARGS_JSON -- COMMAND...

e.g. `python cli/benches/first_reply.py echo '{"message": "hi"}' --
target/release/toolhost serve --cache-dir /tmp/empty plugin.wasm`. Start
each run with an empty compile cache to time the first compile.
"""

import json
import subprocess
import sys
import time


def main() -> None:
    tool, arguments, separator, *command = sys.argv[1:]
    if separator != "--" or not command:
        sys.exit(__doc__)
    started = time.monotonic()
    server = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )

    def request(ident: int, method: str, params: dict) -> dict:
        message = {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()
        return json.loads(server.stdout.readline())

    hello = {"protocolVersion": "2025-06-18", "capabilities": {},
             "clientInfo": {"name": "first-reply", "version": "1"}}
    request(1, "initialize", hello)
    server.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    request(2, "tools/list", {})
    listed = time.monotonic()
    reply = request(3, "tools/call", {"name": tool, "arguments": json.loads(arguments)})
    called = time.monotonic()
    if reply.get("result", {}).get("isError", True):
        sys.exit(f"the call failed: {reply}")
    print(f"first list {1000 * (listed - started):.0f} ms, "
          f"first call {1000 * (called - started):.0f} ms")
    server.stdin.close()
    server.wait(30)


if __name__ == "__main__":
    main()
