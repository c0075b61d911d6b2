"""Wall time of N `compute` calls sent at once to an MCP server over stdio.

Usage: python3 parallel_calls.py N ITERATIONS ROUNDS -- COMMAND...

Starts COMMAND (e.g. `toolhost serve chaos.wasm --workers 1`), initializes
a 2025-06-18 session, then ROUNDS times sends N `tools/call` requests for
chaos's `compute` at once and waits for every reply; prints the median
and the fastest round. Every reply must be a successful result.
"""

import json
import subprocess
import sys
import time


def main() -> None:
    if len(sys.argv) < 6 or sys.argv[4] != "--":
        sys.exit(__doc__)
    calls, iterations, rounds = (int(a) for a in sys.argv[1:4])
    server = subprocess.Popen(
        sys.argv[5:],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )

    def send(message: dict) -> None:
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()

    def reply() -> dict:
        while True:
            line = server.stdout.readline()
            if not line:
                sys.exit("the server closed its stdout")
            message = json.loads(line)
            if "id" in message:
                return message

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "parallel_calls", "version": "0"}}})
    reply()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    walls = []
    for round_ in range(rounds):
        started = time.perf_counter()
        for i in range(calls):
            send({"jsonrpc": "2.0", "id": 1000 * round_ + i + 1, "method": "tools/call",
                  "params": {"name": "compute", "arguments": {"iterations": iterations}}})
        replies = [reply() for _ in range(calls)]
        walls.append((time.perf_counter() - started) * 1000)
        failed = [r for r in replies if "result" not in r or r["result"].get("isError")]
        if failed:
            sys.exit(f"a call failed: {failed[0]}")
    walls.sort()
    print(f"{calls} at once: median {walls[len(walls) // 2]:.1f} ms, fastest {walls[0]:.1f} ms")
    server.stdin.close()
    server.wait(timeout=30)


if __name__ == "__main__":
    main()
