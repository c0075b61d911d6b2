"""Progress notifications and cancellation over stdio and streamable HTTP,
in both protocol eras (R22, R24, R32)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from toolhost_mcp import LEGACY, MODERN, connect_http, connect_stdio, http_server, text

pytestmark = pytest.mark.anyio

PLUGINS = ("bulk_output", "chaos", "text_tools")
#: Budgets far beyond any test: only a cancellation can stop spin_forever
#: within the test's few seconds.
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
    """Records the progress notifications of one call."""

    def __init__(self) -> None:
        self.updates: list[tuple[float, float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.updates.append((time.monotonic(), progress, total, message))


async def generate_with_progress(conn, nbytes: int) -> tuple[Progress, float]:
    progress = Progress()
    started = time.monotonic()
    result = await conn.client.call_tool("generate", {"bytes": nbytes}, progress_callback=progress)
    elapsed = time.monotonic() - started
    assert result.is_error is False, text(result)[:500]
    # Notifications precede the response on the wire; give the client's
    # dispatcher a moment to run the last callbacks.
    await anyio.sleep(0.3)
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
    request = conn.traffic.sent_tool_call("generate")
    token = (request.params or {}).get("_meta", {}).get("progressToken")
    assert token is not None, "the client sent a progressToken"
    received = [
        n for n in conn.traffic.received_notifications("notifications/progress") if n.params["progressToken"] == token
    ]
    assert len(received) == len(updates), "every notification carries the request's token"


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
    await anyio.sleep(0.3)
    assert len(conn.traffic.received_notifications("notifications/progress")) == before


async def test_cancelled_call_gets_no_reply_stops_and_is_recorded_interrupted(conn) -> None:
    with anyio.move_on_after(1.0) as waiting:
        await conn.client.call_tool("spin_forever", {})
    assert waiting.cancelled_caught, "spin_forever returned instead of spinning"
    cancelled_at = time.monotonic()
    request = conn.traffic.sent_tool_call("spin_forever")
    await conn.traffic.wait_cancel_sent(request.id)

    # The server keeps answering.
    with anyio.fail_after(15):
        echoed = await conn.client.call_tool("echo", {"message": "still here"})
    assert echoed.structured_content == {"message": "still here"}

    # The guest stopped: its outcome is durable well before any budget runs out.
    outcome = await conn.events.wait_outcome_for_call(request.id, timeout=10)
    assert time.monotonic() - cancelled_at < 10
    assert outcome["tool"] == "spin_forever"
    assert outcome["status"] == "interrupted"
    if "reason" in outcome:
        assert outcome["reason"] == "cancelled", outcome

    # No reply was ever sent for the cancelled request.
    await anyio.sleep(0.5)
    assert conn.traffic.replies_to(request.id) == [], "a cancelled call gets no reply"


async def test_cancelling_one_call_leaves_concurrent_calls_alone(conn) -> None:
    results: dict[str, Any] = {}

    async def echo(message: str) -> None:
        await anyio.sleep(0.5)
        results[message] = await conn.client.call_tool("echo", {"message": message})

    async with anyio.create_task_group() as tg:
        tg.start_soon(echo, "alongside a cancelled call")
        with anyio.move_on_after(1.0):
            await conn.client.call_tool("spin_forever", {})
    assert results["alongside a cancelled call"].structured_content == {"message": "alongside a cancelled call"}
    request = conn.traffic.sent_tool_call("spin_forever")
    outcome = await conn.events.wait_outcome_for_call(request.id, timeout=10)
    assert outcome["status"] == "interrupted"
