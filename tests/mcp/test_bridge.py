"""`toolhost serve` as a gateway (R33): a served manifest bridges another
MCP server (here an inner `toolhost serve --http` of text-tools), and a
bridged call's permission question (`mcp` on `<server>/<tool>`) reaches the
real MCP client as an elicitation, like a plugin's own question."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_permissions import Answerer
from toolhost_mcp import LEGACY, connect_stdio, http_server, text

pytestmark = pytest.mark.anyio


@pytest.fixture
def inner(workdir: Path, cache_dir: Path):
    with http_server(("text_tools",), workdir / "inner", cache_dir) as server:
        yield server


def bridge_manifest(workdir: Path, url: str) -> Path:
    # A URL is not a command: the gateway needs no --yes to bridge it, so
    # questions still go to the client.
    manifest = workdir / "bridge.toml"
    manifest.write_text(f'[[mcp]]\nname = "inner"\nurl = "{url}"\n', encoding="utf-8")
    return manifest


async def test_a_bridged_tool_is_listed_and_its_permission_is_asked_of_the_client(
    inner, workdir: Path, cache_dir: Path
) -> None:
    answerer = Answerer()
    manifest = bridge_manifest(workdir, inner.url)
    async with connect_stdio(
        ("chaos", manifest), LEGACY, workdir / "gateway", cache_dir, elicitation_callback=answerer
    ) as conn:
        names = {t.name for t in (await conn.client.list_tools()).tools}
        assert {"inner_echo", "inner_regex_search", "ask"} <= names, names

        answerer.answer("decline")
        result = await conn.client.call_tool("inner_echo", {"message": "through"})
        assert result.is_error is True
        assert "Permission denied: mcp inner/echo" in text(result)
        assert len(answerer.asks) == 1
        assert "inner/echo" in str(answerer.asks[0]), answerer.asks[0]
        assert not inner.events.outcomes(), "nothing reached the inner server"

        answerer.answer("accept", "once")
        result = await conn.client.call_tool("inner_echo", {"message": "through"})
        assert result.is_error is False, text(result)
        assert text(result) == "through"
        assert len(inner.events.outcomes()) == 1
