"""Code Mode over MCP (R34): `toolhost serve --code-mode` advertises
`execute` next to the other tools; a program's tool calls settle as child
calls of the `execute` call, each in the durable event log."""

from __future__ import annotations

from pathlib import Path

import pytest
from toolhost_mcp import MODERN, connect_stdio, text, texts

pytestmark = pytest.mark.anyio

PLUGINS = ("text_tools", "chaos")
FLAGS = ("--code-mode", "--fuel", "2000000000")


@pytest.fixture(scope="module")
async def conn(module_dir: Path, cache_dir: Path):
    async with connect_stdio(PLUGINS, MODERN, module_dir / "stdio", cache_dir, flags=FLAGS) as c:
        yield c


async def test_r34_serve_advertises_execute_with_declarations(conn) -> None:
    tools = {t.name: t for t in (await conn.client.list_tools()).tools}
    assert {"execute", "word_count", "echo", "spin_forever"} <= tools.keys()
    execute = tools["execute"]
    assert execute.input_schema["required"] == ["code"]
    assert "declare namespace tools {" in execute.description
    assert (
        "function word_count(input: {text: string}): "
        "Promise<{bytes: number, lines: number, words: number}>;" in execute.description
    ), execute.description


async def test_r34_a_program_calls_tools_as_child_calls(conn) -> None:
    program = """
    const counts = await Promise.all(
      ["one two", "three four five", "six"].map(text => tools.word_count({ text })));
    console.log("texts:", counts.length);
    return counts.reduce((sum, c) => sum + c.words, 0);
    """
    result = await conn.client.call_tool("execute", {"code": program})
    assert result.is_error is not True, text(result)
    assert texts(result) == ["texts: 3", "6"]
    request = conn.traffic.sent_tool_call("execute")
    parent = await conn.events.wait_outcome_for_call(request.id)
    assert parent["status"] == "completed"
    children = [
        e
        for e in conn.events.outcomes()
        if e["tool"] == "word_count" and e["context"]["call_id"].startswith(f"{request.id}/")
    ]
    assert sorted(e["context"]["call_id"] for e in children) == [f"{request.id}/{n}" for n in (1, 2, 3)]
    for child in children:
        assert child["context"]["session_id"] == parent["context"]["session_id"]
        assert child["context"]["message_id"] == parent["context"]["message_id"]
        assert child["status"] == "completed"


async def test_r34_a_program_error_is_an_error_result_with_its_line(conn) -> None:
    result = await conn.client.call_tool("execute", {"code": "const a = 1;\nreturn a +;"})
    assert result.is_error is True
    assert "SyntaxError" in text(result) and "(line 2, column" in text(result), text(result)
