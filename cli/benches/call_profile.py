"""Instructions per `echo` call, by function, of an MCP server under callgrind.

Usage: python3 call_profile.py stdio|http SHORT LONG TOP -- COMMAND...

Runs COMMAND under `valgrind --tool=callgrind` twice, for SHORT and for
LONG sequential `tools/call` requests of `echo` (over stdin and stdout, or
over streamable HTTP: COMMAND must then print its `http://HOST:PORT` on
stderr and serve MCP at `/mcp`), and prints the TOP functions by their
cost per call, inclusive and self: (cost in the long run - cost in the
short run) / (LONG - SHORT), so start-up and shutdown cancel out.

Example (release build; the pool small enough for valgrind's address
space, the compile cache warmed under valgrind):
  python3 cli/benches/call_profile.py stdio 200 1000 60 -- \\
    target/release/toolhost serve text_tools.wasm --max-instances 4 \\
    --cache-dir CACHE --state-dir /dev/shm/STATE
"""

import http.client
import json
import re
import subprocess
import sys
import tempfile
import urllib.parse

from served import http_address

ECHO = {"name": "echo", "arguments": {"message": "hello"}}
INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "call_profile", "version": "1"},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def request(id_: int, method: str, params: dict) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def over_stdio(server: subprocess.Popen, calls: int) -> None:
    def ask(message: dict) -> None:
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()
        while True:
            line = server.stdout.readline()
            if not line:
                sys.exit("the server stopped")
            reply = json.loads(line)
            if reply.get("id") == message["id"]:
                if "result" not in reply:
                    sys.exit(f"not a result: {reply}")
                return

    ask(request(0, "initialize", INITIALIZE))
    server.stdin.write((json.dumps(INITIALIZED) + "\n").encode())
    server.stdin.flush()
    for id_ in range(1, calls + 1):
        ask(request(id_, "tools/call", ECHO))
    server.stdin.close()


def over_http(server: subprocess.Popen, calls: int) -> None:
    address = urllib.parse.urlsplit(http_address(server))
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=600)
    session = None

    def post(message: dict) -> None:
        nonlocal session
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
        if session:
            headers["mcp-session-id"] = session
        connection.request("POST", "/mcp", json.dumps(message), headers)
        response = connection.getresponse()
        body = response.read()
        session = session or response.getheader("mcp-session-id")
        if response.status >= 300 or ("id" in message and b'"result"' not in body):
            sys.exit(f"HTTP {response.status}: {body[:500]!r}")

    post(request(0, "initialize", INITIALIZE))
    post(INITIALIZED)
    for id_ in range(1, calls + 1):
        post(request(id_, "tools/call", ECHO))
    connection.close()
    server.terminate()


def profile(transport: str, calls: int, command: list, out: str) -> None:
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--smc-check=all-non-file"]
        + [f"--callgrind-out-file={out}", f"--log-file={out}.log"]
        + command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if transport == "http" else subprocess.DEVNULL,
    )
    (over_http if transport == "http" else over_stdio)(server, calls)
    server.wait(timeout=600)


def costs(out: str, inclusive: bool) -> dict:
    """Each function's cost in a callgrind output, its object name dropped
    (so two builds compare)."""
    text = subprocess.run(
        ["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}"]
        + ["--threshold=100", "--auto=no", out],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = {}
    for line in text.splitlines():
        row = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if row and not line.lstrip().startswith("Ir"):
            name = re.sub(r"\s*\[[^\]]*\]$", "", row.group(2))
            found[name] = found.get(name, 0) + int(row.group(1).replace(",", ""))
    return found


def main() -> None:
    if len(sys.argv) < 7 or sys.argv[5] != "--" or sys.argv[1] not in ("stdio", "http"):
        sys.exit(__doc__)
    transport = sys.argv[1]
    short, long_, top = (int(a) for a in sys.argv[2:5])
    with tempfile.TemporaryDirectory() as scratch:
        outs = [f"{scratch}/short", f"{scratch}/long"]
        for calls, out in zip((short, long_), outs):
            profile(transport, calls, sys.argv[6:], out)
        for inclusive in (True, False):
            before, after = costs(outs[0], inclusive), costs(outs[1], inclusive)
            rows = sorted(
                ((after[k] - before.get(k, 0)) / (long_ - short), k) for k in after
            )
            print("inclusive" if inclusive else "self", "instructions per call:")
            for cost, name in reversed(rows[-top:]):
                print(f"{cost:10.0f}  {name[:160]}")


if __name__ == "__main__":
    main()
