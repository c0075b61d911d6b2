"""`serve --watch`: replacing a served plugin file reloads it, the client
hears `notifications/tools/list_changed` (2025-11-25) or a tools-changed
event on its `subscriptions/listen` stream (2026-07-28), and tools/list and
tools/call show the new plugin."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import anyio
import pytest
from mcp.client.subscriptions import ToolsListChanged
from mcp.shared.exceptions import MCPError
from toolhost_mcp import LEGACY, MODERN, connect_http, connect_stdio, http_server, plugin

pytestmark = pytest.mark.anyio

LIST_CHANGED = "notifications/tools/list_changed"
#: How long a reload may take: debounce, compile (cached) and activation.
RELOAD_TIMEOUT = 30.0


def replace(target: Path, source: str) -> None:
    """Atomically replaces `target` by a copy of the plugin `source`."""
    staging = target.with_name(f".{target.name}.new")
    shutil.copyfile(plugin(source), staging)
    os.replace(staging, target)


async def names(conn) -> list[str]:
    return [t.name for t in (await conn.client.list_tools()).tools]


async def source_of_search(conn) -> str:
    result = await conn.client.call_tool("search", {"query": "q"})
    assert result.is_error is False
    return result.structured_content["source"]


@pytest.mark.parametrize("kind", ["stdio", "http"])
async def test_replacing_a_plugin_file_sends_list_changed_and_new_tools(
    kind: str, workdir: Path, cache_dir: Path
) -> None:
    served = workdir / "plugins" / "tool.wasm"
    served.parent.mkdir()
    shutil.copyfile(plugin("search_one"), served)

    async def scenario(conn) -> None:
        assert await names(conn) == ["read_output", "search"]
        assert await source_of_search(conn) == "one"

        replaced_at = time.monotonic()
        replace(served, "search_two")
        await conn.wait_notification(LIST_CHANGED, 1, timeout=RELOAD_TIMEOUT)
        # No change, no notification: every one so far came after the file
        # changed (the reload's debounce and compile give a notification
        # sent without a change the time to arrive first).
        early = [t for t, n in conn.notifications if getattr(n, "method", None) == LIST_CHANGED and t < replaced_at]
        assert early == [], "a tools/list_changed notification came before any change"
        # When the notification arrives, the new plugin is already served.
        assert await names(conn) == ["read_output", "search"]
        assert await source_of_search(conn) == "two", "calls reach the reloaded plugin"

        seen = len(conn.notifications_of(LIST_CHANGED))
        replace(served, "text_tools")
        await conn.wait_notification(LIST_CHANGED, seen + 1, timeout=RELOAD_TIMEOUT)
        assert await names(conn) == ["echo", "read_output", "regex_search", "word_count"]
        echoed = await conn.client.call_tool("echo", {"message": "reloaded"})
        assert echoed.structured_content == {"message": "reloaded"}
        with pytest.raises(MCPError):
            await conn.client.call_tool("search", {"query": "q"})

    if kind == "stdio":
        async with connect_stdio([served], LEGACY, workdir, cache_dir, flags=["--watch"]) as conn:
            await scenario(conn)
    else:
        with http_server([served], workdir, cache_dir, flags=["--watch"]) as server:
            async with connect_http(server, LEGACY) as conn:
                await scenario(conn)


async def test_replacing_a_plugin_in_a_served_directory_reloads_it(workdir: Path, cache_dir: Path) -> None:
    folder = workdir / "plugins"
    folder.mkdir()
    shutil.copyfile(plugin("search_one"), folder / "search.wasm")
    shutil.copyfile(plugin("text_tools"), folder / "text.wasm")
    async with connect_stdio([folder], LEGACY, workdir, cache_dir, flags=["--watch"]) as conn:
        assert await names(conn) == ["echo", "read_output", "regex_search", "search", "word_count"]
        assert await source_of_search(conn) == "one"
        replace(folder / "search.wasm", "search_two")
        await conn.wait_notification(LIST_CHANGED, 1, timeout=RELOAD_TIMEOUT)
        assert await source_of_search(conn) == "two"
        assert await names(conn) == ["echo", "read_output", "regex_search", "search", "word_count"]
        echoed = await conn.client.call_tool("echo", {"message": "untouched"})
        assert echoed.structured_content == {"message": "untouched"}, "the other plugin keeps serving"


@pytest.mark.parametrize("kind", ["stdio", "http"])
async def test_2026_clients_hear_changes_through_subscriptions_listen(
    kind: str, workdir: Path, cache_dir: Path
) -> None:
    served = workdir / "plugins" / "tool.wasm"
    served.parent.mkdir()
    shutil.copyfile(plugin("search_one"), served)

    async def scenario(conn) -> None:
        assert await source_of_search(conn) == "one"
        async with conn.client.listen(tools_list_changed=True) as subscription:
            assert subscription.honored.tools_list_changed, "the server honours tools_list_changed"
            replace(served, "search_two")
            with anyio.fail_after(RELOAD_TIMEOUT):
                event = await subscription.__anext__()
            assert isinstance(event, ToolsListChanged), event
            assert await source_of_search(conn) == "two"

            replace(served, "text_tools")
            expected = ["echo", "read_output", "regex_search", "word_count"]
            # A late duplicate of the first change may come first: read
            # events until one finds the new list (each must be a tools change).
            with anyio.fail_after(RELOAD_TIMEOUT):
                while True:
                    event = await subscription.__anext__()
                    assert isinstance(event, ToolsListChanged), event
                    if await names(conn) == expected:
                        break

    if kind == "stdio":
        async with connect_stdio([served], MODERN, workdir, cache_dir, flags=["--watch"]) as conn:
            await scenario(conn)
    else:
        with http_server([served], workdir, cache_dir, flags=["--watch"]) as server:
            async with connect_http(server, MODERN) as conn:
                await scenario(conn)
