"""R38 at each store durability: `toolhost serve --http` killed with SIGKILL
in the middle of a load, then restarted on the same embedded store. Every
call whose reply its client saw replays its recorded outcome, and none runs
twice: each call makes a request a server outside counts."""

from __future__ import annotations

import http.server
import json
import threading
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

import pytest
from front_door import MODERN, Client
from toolhost_mcp import start_http_server

#: Calls sent at once, and how many replies the client sees before the kill.
CALLS = 60
ACKNOWLEDGED = 20


class Counting(http.server.BaseHTTPRequestHandler):
    """Counts each path it is asked for and answers JSON naming it."""

    hits: Counter[str] = Counter()
    lock = threading.Lock()

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        with self.lock:
            self.hits[self.path] += 1
        body = json.dumps({"path": self.path}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


def call(url: str, upstream: str, i: int) -> dict:
    """Call `i` of the load: its own message id in one declared session."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "durability", "version": "1"},
        "io.toolhost/session-id": "load",
        "io.toolhost/message-id": f"load-{i}",
    }
    message = {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": "fetch_json", "arguments": {"url": f"{upstream}/hit/{i}"}, "_meta": meta},
    }
    client = Client(url)
    try:
        reply = client.post(message, {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "fetch_json"})
    finally:
        client.close()
    assert reply.status == 200, (reply.status, reply.body[:300])
    return reply.message()


@pytest.mark.parametrize("durability", ["normal", "full"])
def test_r38_after_kill_9_every_acknowledged_call_replays_and_none_runs_twice(
    durability: str, workdir: Path, cache_dir: Path
) -> None:
    Counting.hits = Counter()
    upstream_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    threading.Thread(target=upstream_server.serve_forever, daemon=True).start()
    upstream = f"http://127.0.0.1:{upstream_server.server_address[1]}"
    flags = ["--allow-http", f"{upstream}/*", "--store-durability", durability]
    try:
        server = start_http_server(("http_tools",), workdir, cache_dir, flags=flags)
        acknowledged: dict[int, dict] = {}
        pool = ThreadPoolExecutor(max_workers=16)
        try:
            pending = {pool.submit(call, server.url, upstream, i): i for i in range(1, CALLS + 1)}
            while len(acknowledged) < ACKNOWLEDGED:
                done, _ = wait(pending, timeout=60, return_when=FIRST_COMPLETED)
                assert done, "no call ended within 60 s"
                for future in done:
                    acknowledged[pending.pop(future)] = future.result()["result"]
            server.process.kill()  # SIGKILL, in the middle of the load
            server.process.wait(timeout=30)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        restarted = start_http_server(("http_tools",), workdir, cache_dir, flags=flags)
        try:
            for i, before in sorted(acknowledged.items()):
                again = call(restarted.url, upstream, i)
                assert again["result"] == before, (durability, i, again)
                assert Counting.hits[f"/hit/{i}"] == 1, (durability, i, Counting.hits[f"/hit/{i}"])
        finally:
            restarted.stop()
    finally:
        upstream_server.shutdown()
