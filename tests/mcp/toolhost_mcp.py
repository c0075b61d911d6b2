"""Helpers for driving the real `toolhost serve` binary with the official
Python MCP client (`mcp` 2.3.0): starting servers over stdio and streamable
HTTP, connecting clients of either protocol era, recording the JSON-RPC
traffic a client sees, and reading the server's durable event log.

The paths come from the environment (`cargo xtask test` sets both):
TOOLHOST_BIN is the `toolhost` binary, TOOLHOST_PLUGINS the directory of the
built example plugins (`target/plugins/wasm32-wasip2/release`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import DEFAULT_MAX_SSE_EVENT_SIZE, streamable_http_client
from mcp.shared.message import SessionMessage
from mcp_types import Implementation, JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

# --- paths -----------------------------------------------------------------


def _env_path(name: str) -> Path:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(
            f"{name} is not set. Run the suite with `cargo xtask test`, or set "
            "TOOLHOST_BIN (target/debug/toolhost) and TOOLHOST_PLUGINS "
            "(target/plugins/wasm32-wasip2/release) to absolute paths."
        )
    return Path(value)


def toolhost_bin() -> Path:
    return _env_path("TOOLHOST_BIN")


def plugin(name: str) -> Path:
    """The built example plugin `name` (e.g. `text_tools`), as a `.wasm` path."""
    path = _env_path("TOOLHOST_PLUGINS") / f"{name}.wasm"
    if not path.is_file():
        raise RuntimeError(f"{path} does not exist: build the plugins with `cargo xtask plugins`")
    return path


#: Every plugin a test serves; the session fixture compiles them once into
#: the shared compile cache so no server pays for it.
ALL_PLUGINS = ("text_tools", "bulk_output", "chaos", "search_one", "search_two")

#: The prefix of the agent name each client sends in its clientInfo; every
#: connection adds a unique suffix, so the event log's `agent` tells the
#: connections of one server apart (JSON-RPC ids repeat across connections).
AGENT = "toolhost-pytest"

#: The two protocol eras, and how the `mcp` 2.3.0 `Client` selects each:
#: `mode="legacy"` runs the `initialize` handshake (offering 2025-11-25, the
#: latest handshake version); `mode="auto"` probes `server/discover` at
#: 2026-07-28 and adopts it when the server answers (falling back to
#: `initialize` otherwise, which the era check after connecting catches).
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
ERAS = (LEGACY, MODERN)
_MODE = {LEGACY: "legacy", MODERN: "auto"}

#: The `_meta` key that carries the agent's message id.
MESSAGE_ID_KEY = "io.toolhost/message-id"

#: How long a client waits for any one response.
READ_TIMEOUT = 60.0

SERVING = re.compile(r"toolhost: serving MCP at (http://\S+/mcp)\s*$", re.MULTILINE)


# --- waiting on events ---------------------------------------------------------

#: How long a test waits for any one event: far beyond what it takes on a
#: loaded machine, so reaching it means the event is not coming. Tests wait
#: on the event itself (a notification, a reply, a line of the event log),
#: never on the clock.
PATIENCE = 60.0

#: How often `eventually` looks again at a state nothing signals (the server's
#: event log, the traffic a client saw).
POLL = 0.02


@contextmanager
def within(what: str, timeout: float = PATIENCE) -> Iterator[None]:
    """Fails the test, naming `what`, when the body has not finished within
    `timeout` (an `anyio.fail_after` with a message)."""
    try:
        with anyio.fail_after(timeout):
            yield
    except TimeoutError:
        raise AssertionError(f"waited {timeout}s for {what}") from None


async def eventually(what: str, condition: Any, timeout: float = PATIENCE) -> Any:
    """Polls `condition` until it returns something truthy, and returns that;
    fails the test after `timeout`. The pause is the poll's interval, not an
    ordering."""
    with within(what, timeout):
        while not (value := condition()):
            await anyio.sleep(POLL)
    return value


# --- the event log ----------------------------------------------------------


class EventLog:
    """The server's `--events` file: one JSON object a line; with `agent`,
    only the outcomes of that client's calls."""

    def __init__(self, path: Path, agent: str | None = None) -> None:
        self.path = path
        self.agent = agent

    def for_agent(self, agent: str) -> EventLog:
        return EventLog(self.path, agent)

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        # A character cut by a write in progress is in the last line, dropped.
        text = self.path.read_text(encoding="utf-8", errors="replace")
        # A line without its newline yet is being written: not an event yet.
        complete = text[: text.rfind("\n") + 1]
        events = []
        for line in complete.splitlines():
            if line.strip():
                events.append(json.loads(line))
        return events

    def outcomes(self) -> list[dict[str, Any]]:
        return [
            e
            for e in self.read()
            if e.get("event") == "outcome" and (self.agent is None or e.get("context", {}).get("agent") == self.agent)
        ]

    def progress_for_call(self, call_id: Any) -> list[dict[str, Any]]:
        """The progress events the call `call_id` (of this log's agent, if
        any) has reported so far: it is running once there is one."""
        return [
            e
            for e in self.read()
            if e.get("event") == "progress"
            and e.get("context", {}).get("call_id") == str(call_id)
            and (self.agent is None or e.get("context", {}).get("agent") == self.agent)
        ]

    def outcome_for_call(self, call_id: Any) -> dict[str, Any] | None:
        matches = [e for e in self.outcomes() if e.get("context", {}).get("call_id") == str(call_id)]
        assert len(matches) <= 1, f"more than one outcome for call id {call_id!r}: {matches}"
        return matches[0] if matches else None

    async def wait_outcome_for_call(self, call_id: Any, timeout: float = 10.0) -> dict[str, Any]:
        with anyio.move_on_after(timeout):
            while True:
                found = self.outcome_for_call(call_id)
                if found is not None:
                    return found
                await anyio.sleep(0.05)
        everyone = [e for e in EventLog(self.path).read() if e.get("event") == "outcome"]
        same_id = [e for e in everyone if e.get("context", {}).get("call_id") == str(call_id)]
        others = sorted({str(e.get("context", {}).get("agent")) for e in same_id})
        raise AssertionError(
            f"no outcome event for call id {call_id!r} with agent {self.agent!r} (this client's name) "
            f"within {timeout}s; outcomes with that call id have agent(s) {others} "
            f"({len(everyone)} outcomes in all); first of them: {str(same_id[:1])[:600]}"
        )


# --- recording the traffic a client sees -------------------------------------


@dataclass
class Traffic:
    """Every JSON-RPC message between the client session and its transport."""

    log: list[tuple[str, float, SessionMessage | Exception]] = field(default_factory=list)

    def sent_requests(self, method: str, name: str | None = None) -> list[JSONRPCRequest]:
        found = []
        for direction, _, item in self.log:
            if direction != "out" or not isinstance(item, SessionMessage):
                continue
            msg = item.message
            if isinstance(msg, JSONRPCRequest) and msg.method == method:
                if name is None or (msg.params or {}).get("name") == name:
                    found.append(msg)
        return found

    def sent_tool_call(self, name: str) -> JSONRPCRequest:
        calls = self.sent_requests("tools/call", name)
        assert calls, f"no tools/call of {name!r} was sent"
        return calls[-1]

    def received(self) -> list[Any]:
        return [item.message for d, _, item in self.log if d == "in" and isinstance(item, SessionMessage)]

    def replies_to(self, request_id: Any) -> list[JSONRPCResponse | JSONRPCError]:
        return [
            m for m in self.received() if isinstance(m, JSONRPCResponse | JSONRPCError) and m.id == request_id
        ]

    def received_notifications(self, method: str) -> list[JSONRPCNotification]:
        return [m for m in self.received() if isinstance(m, JSONRPCNotification) and m.method == method]

    def sent_notifications(self, method: str) -> list[JSONRPCNotification]:
        return [
            item.message
            for d, _, item in self.log
            if d == "out"
            and isinstance(item, SessionMessage)
            and isinstance(item.message, JSONRPCNotification)
            and item.message.method == method
        ]

    async def wait_cancel_sent(self, request_id: Any, timeout: float = 5.0) -> None:
        """Waits until the client has sent `notifications/cancelled` for
        `request_id` (the client writes it just after the caller gives up)."""
        with anyio.move_on_after(timeout):
            while not any(
                (n.params or {}).get("requestId") == request_id
                for n in self.sent_notifications("notifications/cancelled")
            ):
                await anyio.sleep(0.02)
        sent = self.sent_notifications("notifications/cancelled")
        assert any((n.params or {}).get("requestId") == request_id for n in sent), (
            f"the client sent no notifications/cancelled for request {request_id!r}: {sent}"
        )

    def received_requests(self, method: str) -> list[JSONRPCRequest]:
        return [m for m in self.received() if isinstance(m, JSONRPCRequest) and m.method == method]

    def received_results(self) -> list[dict[str, Any]]:
        return [m.result for m in self.received() if isinstance(m, JSONRPCResponse)]


@asynccontextmanager
async def recording(transport: Any, traffic: Traffic) -> AsyncIterator[tuple[Any, Any]]:
    """Wraps a client transport so `traffic` sees every message both ways."""
    async with transport as (read, write):
        to_session, from_transport = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        to_transport, from_session = anyio.create_memory_object_stream[SessionMessage](0)

        async def pump_in() -> None:
            async with to_session:
                async for item in read:
                    traffic.log.append(("in", time.monotonic(), item))
                    await to_session.send(item)

        async def pump_out() -> None:
            async with from_session:
                async for item in from_session:
                    traffic.log.append(("out", time.monotonic(), item))
                    await write.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump_in)
            tg.start_soon(pump_out)
            try:
                yield from_transport, to_transport
            finally:
                tg.cancel_scope.cancel()


# --- a connected client -------------------------------------------------------


@dataclass
class Connection:
    """A connected `mcp.Client` and what the test can observe around it."""

    client: Client
    agent: str
    era: str
    transport: str  # "stdio" or "http"
    traffic: Traffic
    events: EventLog
    notifications: list[tuple[float, Any]]
    stream_errors: list[Exception]
    session_ids: list[str] = field(default_factory=list)
    stderr_path: Path | None = None

    def notifications_of(self, method: str) -> list[Any]:
        return [n for _, n in self.notifications if getattr(n, "method", None) == method]

    async def wait_notification(self, method: str, count: int = 1, timeout: float = 15.0) -> list[Any]:
        """Waits until at least `count` notifications of `method` arrived."""
        with anyio.move_on_after(timeout):
            while len(self.notifications_of(method)) < count:
                await anyio.sleep(0.05)
        found = self.notifications_of(method)
        assert len(found) >= count, (
            f"expected {count} {method} notification(s) within {timeout}s, got {len(found)}; "
            f"all notifications: {[getattr(n, 'method', n) for _, n in self.notifications]}"
        )
        return found

    def stderr(self) -> str:
        if self.stderr_path is None or not self.stderr_path.exists():
            return ""
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


@asynccontextmanager
async def _connect(
    transport: Any,
    era: str,
    kind: str,
    events: EventLog,
    *,
    stderr_path: Path | None = None,
    session_ids: list[str] | None = None,
    client_name: str | None = None,
    elicitation_callback: Any = None,
    read_timeout: float = READ_TIMEOUT,
) -> AsyncIterator[Connection]:
    agent = client_name or f"{AGENT}-{uuid.uuid4().hex[:8]}"
    traffic = Traffic()
    notifications: list[tuple[float, Any]] = []
    stream_errors: list[Exception] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            stream_errors.append(message)
        else:
            notifications.append((time.monotonic(), message))

    client = Client(
        recording(transport, traffic),
        mode=_MODE[era],
        client_info=Implementation(name=agent, version="0.0.1"),
        read_timeout_seconds=read_timeout,
        message_handler=on_message,
        elicitation_callback=elicitation_callback,
        # Every listing and read reaches the server: the server is under test.
        cache=None,
    )
    try:
        async with client:
            assert client.protocol_version == era, (
                f"asked for protocol {era} but negotiated {client.protocol_version}"
                + (" (the server did not answer server/discover)" if era == MODERN else "")
            )
            yield Connection(
                client=client,
                agent=agent,
                era=era,
                transport=kind,
                traffic=traffic,
                events=events.for_agent(agent),
                notifications=notifications,
                stream_errors=stream_errors,
                session_ids=session_ids if session_ids is not None else [],
                stderr_path=stderr_path,
            )
    except BaseExceptionGroup as group:
        # The client's task groups wrap whatever the test raised; show the
        # test's own failure when there is exactly one.
        leaf = _single_failure(group)
        if leaf is None:
            raise
        raise leaf from None


def _single_failure(group: BaseExceptionGroup) -> BaseException | None:
    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for inner in e.exceptions:
                walk(inner)
        elif not isinstance(e, anyio.get_cancelled_exc_class()):
            leaves.append(e)

    walk(group)
    return leaves[0] if len(leaves) == 1 else None


def serve_command(
    plugins: Sequence[str | Path],
    flags: Sequence[str],
    workdir: Path,
    cache_dir: Path,
    output_dir: Path | None = None,
) -> list[str]:
    """`toolhost serve` with the given plugins (names or paths) and flags, an
    event log, retained outputs and the compile cache under test dirs."""
    paths = [str(p if isinstance(p, Path) else plugin(p)) for p in plugins]
    workdir.mkdir(parents=True, exist_ok=True)
    outputs = output_dir or workdir / "outputs"
    outputs.mkdir(mode=0o700, parents=True, exist_ok=True)
    return [
        str(toolhost_bin()),
        "serve",
        *paths,
        "--events",
        str(workdir / "events.jsonl"),
        "--output-dir",
        str(outputs),
        "--cache-dir",
        str(cache_dir),
        *flags,
    ]


def server_env(workdir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a server gets: no token unless a test sets one, and
    state (retained outputs' default home) under the test's directory."""
    env = {k: v for k, v in os.environ.items() if k not in ("TOOLHOST_TOKEN", "TOOLHOST_CACHE_DIR")}
    env["XDG_STATE_HOME"] = str(workdir / "state")
    env.update(extra or {})
    return env


@asynccontextmanager
async def connect_stdio(
    plugins: Sequence[str | Path],
    era: str,
    workdir: Path,
    cache_dir: Path,
    *,
    flags: Sequence[str] = (),
    client_name: str | None = None,
    elicitation_callback: Any = None,
    output_dir: Path | None = None,
) -> AsyncIterator[Connection]:
    """Starts `toolhost serve` over stdio and connects a client of `era`."""
    command = serve_command(plugins, flags, workdir, cache_dir, output_dir)
    stderr_path = workdir / "stderr.log"
    with open(stderr_path, "a", encoding="utf-8") as errlog:
        params = StdioServerParameters(
            command=command[0],
            args=command[1:],
            env={"XDG_STATE_HOME": str(workdir / "state")},
        )
        transport = stdio_client(params, errlog=errlog)
        try:
            async with _connect(
                transport,
                era,
                "stdio",
                EventLog(workdir / "events.jsonl"),
                stderr_path=stderr_path,
                client_name=client_name,
                elicitation_callback=elicitation_callback,
            ) as conn:
                yield conn
        except BaseException as e:
            e.add_note(f"server stderr ({stderr_path}):\n{_tail(stderr_path)}")
            raise


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(none)"
    return text[-limit:] or "(empty)"


# --- HTTP servers -------------------------------------------------------------


@dataclass
class HttpServer:
    process: subprocess.Popen[bytes]
    url: str
    workdir: Path

    @property
    def events(self) -> EventLog:
        return EventLog(self.workdir / "events.jsonl")

    @property
    def port(self) -> int:
        return int(self.url.split(":")[2].split("/")[0])

    def stderr(self) -> str:
        return _tail(self.workdir / "stderr.log", 20_000)

    def stop(self) -> int:
        """Stops the server (SIGTERM, then SIGKILL) and returns its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        return self.process.returncode


def start_http_server(
    plugins: Sequence[str | Path],
    workdir: Path,
    cache_dir: Path,
    *,
    flags: Sequence[str] = (),
    address: str = "127.0.0.1:0",
    env: dict[str, str] | None = None,
    startup_timeout: float = 60.0,
    wrap: Sequence[str] = (),
) -> HttpServer:
    """Starts `toolhost serve --http ADDRESS` (under the command `wrap`, e.g.
    `prlimit`, when given) and waits for the line that names its URL."""
    command = [*wrap, *serve_command(plugins, ["--http", address, *flags], workdir, cache_dir)]
    stderr_path = workdir / "stderr.log"
    with open(stderr_path, "wb") as errlog, open(workdir / "stdout.log", "wb") as outlog:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=outlog, stderr=errlog, env=server_env(workdir, env)
        )
    deadline = time.monotonic() + startup_timeout
    while time.monotonic() < deadline:
        match = SERVING.search(_tail(stderr_path, 1_000_000))
        if match:
            return HttpServer(process, match.group(1), workdir)
        if process.poll() is not None:
            raise RuntimeError(
                f"`{' '.join(command)}` exited with {process.returncode} before serving; stderr:\n{_tail(stderr_path)}"
            )
        time.sleep(0.05)
    process.kill()
    process.wait()
    raise RuntimeError(
        f"`{' '.join(command)}` printed no `toolhost: serving MCP at URL` line within {startup_timeout}s; "
        f"stderr:\n{_tail(stderr_path)}"
    )


@contextmanager
def http_server(
    plugins: Sequence[str | Path], workdir: Path, cache_dir: Path, **kwargs: Any
) -> Iterator[HttpServer]:
    server = start_http_server(plugins, workdir, cache_dir, **kwargs)
    try:
        yield server
    finally:
        server.stop()


@asynccontextmanager
async def connect_http(
    server: HttpServer,
    era: str,
    *,
    headers: dict[str, str] | None = None,
    client_name: str | None = None,
    elicitation_callback: Any = None,
    max_sse_event_size: int | None = DEFAULT_MAX_SSE_EVENT_SIZE,
    auth: httpx2.Auth | None = None,
) -> AsyncIterator[Connection]:
    """Connects a client of `era` to a running HTTP server, recording the
    `Mcp-Session-Id` of every response; `auth` (e.g. the mcp client's OAuth
    provider) signs its requests."""
    session_ids: list[str] = []

    async def on_response(response: httpx2.Response) -> None:
        sid = response.headers.get("mcp-session-id")
        if sid and sid not in session_ids:
            session_ids.append(sid)

    async with httpx2.AsyncClient(
        headers=headers,
        auth=auth,
        timeout=httpx2.Timeout(30.0, read=300.0),
        event_hooks={"response": [on_response]},
    ) as http:
        transport = streamable_http_client(
            server.url, http_client=http, max_sse_event_size=max_sse_event_size
        )
        try:
            async with _connect(
                transport,
                era,
                "http",
                server.events,
                stderr_path=server.workdir / "stderr.log",
                session_ids=session_ids,
                client_name=client_name,
                elicitation_callback=elicitation_callback,
            ) as conn:
                yield conn
        except BaseException as e:
            e.add_note(f"server stderr:\n{server.stderr()[-4000:]}")
            raise


# --- results ------------------------------------------------------------------


def texts(result: Any) -> list[str]:
    """The text of every text part of a CallToolResult."""
    return [c.text for c in result.content if getattr(c, "type", None) == "text"]


def text(result: Any) -> str:
    return "".join(texts(result))


# --- the text `generate` (bulk_output) produces --------------------------------

_FILL = "abcdefghijklmnopqrstuvwxyz"


def generated_text(nbytes: int, lines: int | None = None) -> str:
    """The exact text bulk_output's `generate {bytes, lines?}` returns, from
    the algorithm its documentation gives: line `n` (1-based) is the first
    `len - 1` bytes of `"<n> "` + the alphabet repeated, then a newline;
    without `lines`, 64-byte lines with the last one cut to make `bytes`;
    with `lines`, exactly that many lines, the first `bytes % lines` one
    byte longer."""

    def line(n: int, keep: int, length: int) -> str:
        body = length - 1
        head = f"{n} "
        filled = head + _FILL * (body // len(_FILL) + 1)
        return (filled[:body] + "\n")[:keep]

    out: list[str] = []
    if lines is None:
        n, remaining = 0, nbytes
        while remaining > 0:
            n += 1
            keep = min(64, remaining)
            out.append(line(n, keep, 64))
            remaining -= keep
    else:
        base, longer = divmod(nbytes, lines)
        for n in range(1, lines + 1):
            length = base + (1 if n <= longer else 0)
            out.append(line(n, length, length))
    return "".join(out)


def cli_tools(plugins: Sequence[str], cache_dir: Path) -> list[dict[str, Any]]:
    """The tools `toolhost list --json` reports for `plugins` (not shadowed)."""
    done = subprocess.run(
        [str(toolhost_bin()), "list", *(str(plugin(p)) for p in plugins), "--json", "--cache-dir", str(cache_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"toolhost list failed:\n{done.stderr}"
    return [t for t in json.loads(done.stdout) if not t.get("shadowed")]
