"""Raw HTTP against `toolhost serve --http`, for the front-door tests (R37):
well-formed requests as a plain client sends them, hostile ones byte by
byte, and what the server process holds (its resident memory).

Every request here is JSON-RPC over one POST; replies are read whole, as
JSON or as a server-sent-event stream.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx2

#: How long any one raw request waits for its reply.
REPLY_TIMEOUT = 30.0

#: The protocol revision of a client older than SSE priming events.
V2025_06_18 = "2025-06-18"
MODERN = "2026-07-28"

ACCEPT = "application/json, text/event-stream"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    #: The SSE events, each as its raw fields (`data`, `id`, `retry`, ...).
    events: list[dict[str, str]] = field(default_factory=list)

    def messages(self) -> list[dict[str, Any]]:
        """The JSON-RPC messages of the reply: its JSON body, or the `data`
        of each SSE event."""
        if self.headers.get("content-type", "").startswith("text/event-stream"):
            return [json.loads(e["data"]) for e in self.events if e.get("data")]
        return [json.loads(self.body)] if self.body else []

    def message(self) -> dict[str, Any]:
        found = [m for m in self.messages() if "id" in m and ("result" in m or "error" in m)]
        assert len(found) == 1, f"expected one response in {self.status} {self.body[:2000]!r}"
        return found[0]


def parse_events(body: bytes) -> list[dict[str, str]]:
    """An SSE stream's events: blank-line separated groups of `field: value`
    lines (a field without a colon has an empty value)."""
    events = []
    for block in body.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        event: dict[str, str] = {}
        for line in block.split("\n"):
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            event[name] = event.get(name, "") + value.removeprefix(" ")
        events.append(event)
    return events


class Client:
    """A plain HTTP client of one server: one POST per JSON-RPC message."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url
        self.token = token
        self.http = httpx2.Client(timeout=REPLY_TIMEOUT)

    def close(self) -> None:
        self.http.close()

    def post(self, message: dict[str, Any] | bytes, headers: dict[str, str] | None = None) -> Reply:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        sent = {"content-type": "application/json", "accept": ACCEPT, **(headers or {})}
        if self.token:
            sent["authorization"] = f"Bearer {self.token}"
        response = self.http.post(self.url, content=body, headers=sent)
        reply = Reply(response.status_code, {k.lower(): v for k, v in response.headers.items()}, response.content)
        if reply.headers.get("content-type", "").startswith("text/event-stream"):
            reply.events = parse_events(response.content)
        return reply

    def initialize(self, version: str = V2025_06_18, name: str = "front-door-test") -> Session:
        reply = self.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": name, "version": "1"}},
            }
        )
        assert reply.status == 200, f"initialize: {reply.status} {reply.body[:500]!r}"
        session = Session(self, reply.headers["mcp-session-id"], version)
        done = session.notify("notifications/initialized")
        assert done.status == 202, f"initialized: {done.status} {done.body[:500]!r}"
        return session

    def stateless_call(self, tool: str, arguments: dict[str, Any], request_id: Any, agent: str) -> Reply:
        """A 2026-07-28 `tools/call`: everything the request needs is in it."""
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": agent, "version": "1"},
        }
        message = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": meta},
        }
        return self.post(message, {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": tool})


@dataclass
class Session:
    client: Client
    id: str
    version: str
    next_id: int = 1

    def headers(self) -> dict[str, str]:
        return {"mcp-session-id": self.id, "mcp-protocol-version": self.version}

    def notify(self, method: str) -> Reply:
        return self.client.post({"jsonrpc": "2.0", "method": method}, self.headers())

    def request(self, method: str, params: dict[str, Any] | None = None, as_id: Any = None) -> Reply:
        request_id = self.next_id if as_id is None else as_id
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
        return self.client.post(message, self.headers())

    def call(self, tool: str, arguments: dict[str, Any]) -> Reply:
        return self.request("tools/call", {"name": tool, "arguments": arguments})


def rss_bytes(pid: int) -> int:
    """The process's resident memory now."""
    return _status_kib(pid, "VmRSS") * 1024


def peak_rss_bytes(pid: int) -> int:
    """The most resident memory the process has had."""
    return _status_kib(pid, "VmHWM") * 1024


def _status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {key} in /proc/{pid}/status")


def open_socket(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=REPLY_TIMEOUT)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def request_head(port: int, length: int, extra: str = "") -> bytes:
    return (
        f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"accept: {ACCEPT}\r\ncontent-length: {length}\r\n{extra}\r\n"
    ).encode()


def read_until_closed(sock: socket.socket, timeout: float) -> bytes:
    """What the server sends until it closes the connection; fails if it
    has not closed it within `timeout`."""
    sock.settimeout(timeout)
    received = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk
    raise AssertionError(f"the server kept the connection open for {timeout}s; received {received[:300]!r}")


def wait_until(predicate: Any, timeout: float, what: str, step: float = 0.05) -> Any:
    """Polls `predicate` until it returns something truthy, at most `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(step)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
