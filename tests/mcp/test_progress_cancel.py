"""Progress notifications and cancellation over stdio and streamable HTTP,
in both protocol eras (R22, R24, R32)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp_types import JSONRPCRequest
from toolhost_mcp import (
    LEGACY,
    MODERN,
    PATIENCE,
    Connection,
    connect_http,
    connect_stdio,
    eventually,
    http_server,
    text,
    within,
)

pytestmark = pytest.mark.anyio

PLUGINS = ("bulk_output", "chaos", "text_tools")
#: Budgets far beyond any test: only a cancellation can stop `busy` within
#: the tests' patience (PATIENCE, 60 s, is a tenth of the deadline).
FLAGS = ("--fuel", "1000000000000000", "--timeout", "600s")

TARGETS = [("stdio", LEGACY), ("stdio", MODERN), ("http", LEGACY), ("http", MODERN)]
#: At most ~20 progress notifications a second per call.
RATE = 20


@pytest.fixture(scope="module")
def http(module_dir: Path, cache_dir: Path):
    with http_server(PLUGINS, module_dir / "http", cache_dir, flags=FLAGS) as server:
        yield server


@pytest.fixture(scope="module", params=TARGETS, ids=[f"{k}-{e}" for k, e in TARGETS])
async def conn(request: pytest.FixtureRequest, module_dir: Path, cache_dir: Path):
    kind, era = request.param
    if kind == "stdio":
        async with connect_stdio(PLUGINS, era, module_dir / f"stdio-{era}", cache_dir, flags=FLAGS) as c:
            yield c
    else:
        async with connect_http(request.getfixturevalue("http"), era) as c:
            yield c


class Progress:
    """Records the progress notifications of one call, and lets a test wait
    until they satisfy a condition."""

    def __init__(self) -> None:
        self.updates: list[tuple[float, float, float | None, str | None]] = []
        self._changed = anyio.Event()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.updates.append((time.monotonic(), progress, total, message))
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, what: str, done: Callable[[list], bool]) -> None:
        """Waits, woken by each update, until `done(updates)` holds."""
        with within(what):
            while not done(self.updates):
                await self._changed.wait()


def progress_token(conn: Connection, tool: str) -> object:
    """The progressToken of the last call of `tool` the client sent."""
    request = conn.traffic.sent_tool_call(tool)
    return (request.params or {}).get("_meta", {}).get("progressToken")


def progress_on_the_wire(conn: Connection, token: object) -> int:
    """How many notifications/progress with `token` the client has received."""
    return sum(
        1 for n in conn.traffic.received_notifications("notifications/progress") if n.params["progressToken"] == token
    )


async def generate_with_progress(conn: Connection, nbytes: int) -> tuple[Progress, float]:
    progress = Progress()
    started = time.monotonic()
    result = await conn.client.call_tool("generate", {"bytes": nbytes}, progress_callback=progress)
    elapsed = time.monotonic() - started
    assert result.is_error is False, text(result)[:500]
    # The server sends a call's last notification before its reply, so every
    # one is in the traffic by now; wait until the client's dispatcher has
    # run the callback of each.
    sent = progress_on_the_wire(conn, progress_token(conn, "generate"))
    await progress.until(f"the callbacks of all {sent} notifications", lambda updates: len(updates) >= sent)
    return progress, elapsed


async def test_progress_token_yields_increasing_notifications_ending_at_the_total(conn) -> None:
    progress, _ = await generate_with_progress(conn, 10_000_000)
    updates = progress.updates
    assert updates, "a call with a progressToken got no notifications/progress"
    values = [p for _, p, _, _ in updates]
    assert all(b > a for a, b in zip(values, values[1:])), f"progress must strictly increase: {values}"
    for _, _, total, message in updates:
        assert total is not None, "generate's updates have numeric progress and total"
        assert message, "every notification has a message"
    totals = {total for _, _, total, _ in updates}
    assert len(totals) == 1, f"one total for the call: {totals}"
    _, last, total, _ = updates[-1]
    assert last == total, "the last update (all bytes done) is always sent"
    token = progress_token(conn, "generate")
    assert token is not None, "the client sent a progressToken"
    assert progress_on_the_wire(conn, token) == len(updates), "every notification carries the request's token"


async def test_progress_is_rate_limited_and_keeps_the_last(conn) -> None:
    # 64 updates (one per MiB) from a guest that produces them far faster
    # than 20 a second.
    progress, elapsed = await generate_with_progress(conn, 64 * 1024 * 1024)
    count = len(progress.updates)
    assert count >= 1
    assert count <= RATE * elapsed + 2, f"{count} notifications in {elapsed:.2f}s: more than ~{RATE}/s"
    _, last, total, _ = progress.updates[-1]
    assert last == total == 64 * 1024 * 1024


async def test_a_call_without_progress_token_gets_no_progress(conn) -> None:
    before = len(conn.traffic.received_notifications("notifications/progress"))
    result = await conn.client.call_tool("generate", {"bytes": 3_000_000})
    assert result.is_error is False
    assert progress_token(conn, "generate") is None, "the client sent no progressToken"
    # A call's notifications all precede its reply (the server flushes them
    # before replying), and the reply has arrived: none came, and none will.
    assert len(conn.traffic.received_notifications("notifications/progress")) == before


@asynccontextmanager
async def running_busy(conn: Connection) -> AsyncIterator[JSONRPCRequest]:
    """Calls `busy` (it reports progress, then computes until stopped) and,
    once the server's event log shows that progress (the call is running),
    yields its request; on leaving, cancels the call as a caller giving up
    does, and waits until the client has sent notifications/cancelled."""
    calls = len(conn.traffic.sent_requests("tools/call", "busy"))
    returned = []

    async def call() -> None:
        returned.append(await conn.client.call_tool("busy", {}))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await eventually(
            "the client to send the call of busy",
            lambda: len(conn.traffic.sent_requests("tools/call", "busy")) > calls,
        )
        request = conn.traffic.sent_tool_call("busy")
        await eventually(
            f"busy (request {request.id}) to report progress", lambda: conn.events.progress_for_call(request.id)
        )
        yield request
        assert returned == [], f"busy returned instead of running until cancelled: {returned}"
        tg.cancel_scope.cancel()
    await conn.traffic.wait_cancel_sent(request.id)


async def test_cancelled_call_gets_no_reply_stops_and_is_recorded_interrupted(conn) -> None:
    async with running_busy(conn) as request:
        pass

    # The server keeps answering.
    with within("a call after the cancelled one to be answered"):
        echoed = await conn.client.call_tool("echo", {"message": "still here"})
    assert echoed.structured_content == {"message": "still here"}

    # The guest stopped: its outcome is durable within PATIENCE, a tenth of
    # its deadline, with fuel to spare for days.
    outcome = await conn.events.wait_outcome_for_call(request.id, timeout=PATIENCE)
    assert outcome["tool"] == "busy"
    assert outcome["status"] == "interrupted"
    assert outcome.get("reason") == "cancelled", outcome

    # The server records a call's outcome before it would reply; a call made
    # after the outcome is durable has its reply, and none came for the
    # cancelled request.
    later = await conn.client.call_tool("echo", {"message": "after the outcome"})
    assert later.structured_content == {"message": "after the outcome"}
    assert conn.traffic.replies_to(request.id) == [], "a cancelled call gets no reply"


async def test_cancelling_one_call_leaves_concurrent_calls_alone(conn) -> None:
    async with running_busy(conn) as request:
        # Called, and answered, while busy runs.
        alongside = await conn.client.call_tool("echo", {"message": "alongside a cancelled call"})
        assert conn.events.outcome_for_call(request.id) is None, "busy ended before it was cancelled"
    assert alongside.structured_content == {"message": "alongside a cancelled call"}
    outcome = await conn.events.wait_outcome_for_call(request.id, timeout=PATIENCE)
    assert outcome["status"] == "interrupted"
    assert outcome.get("reason") == "cancelled", outcome
