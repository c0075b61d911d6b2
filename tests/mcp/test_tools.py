"""tools/list and tools/call over stdio and streamable HTTP, in both protocol
eras: schemas, structured output, the four outcomes and how each maps onto
MCP, and the call identity in the durable event log (R32)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import JSONRPCError, JSONRPCResponse
from toolhost_mcp import (
    LEGACY,
    MESSAGE_ID_KEY,
    MODERN,
    cli_tools,
    connect_http,
    connect_stdio,
    generated_text,
    http_server,
    text,
    texts,
)

pytestmark = pytest.mark.anyio

PLUGINS = ("text_tools", "bulk_output", "chaos")
#: A small fuel budget: chaos `spin_forever` is stopped by fuel in a fraction
#: of a second (every other tool here needs far less).
FLAGS = ("--fuel", "2000000000")

TARGETS = [("stdio", LEGACY), ("stdio", MODERN), ("http", LEGACY), ("http", MODERN)]


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


def reply_to(conn, request_id: Any) -> JSONRPCResponse | JSONRPCError:
    replies = conn.traffic.replies_to(request_id)
    assert len(replies) == 1, f"expected exactly one reply to request {request_id!r}, got {replies}"
    return replies[0]


async def test_lists_every_tool_sorted_with_its_schemas(conn, cache_dir: Path) -> None:
    expected = {t["name"]: t for t in cli_tools(PLUGINS, cache_dir)}
    listed = (await conn.client.list_tools()).tools
    names = [t.name for t in listed]
    assert names == sorted(names), "tools/list is sorted by name"
    assert names == sorted([*expected, "read_output"])
    for tool in listed:
        if tool.name == "read_output":
            continue
        cli = expected[tool.name]
        assert tool.description == cli["description"], tool.name
        assert tool.input_schema == cli["input_schema"], tool.name
        assert tool.output_schema == cli.get("output_schema"), tool.name
    by_name = {t.name: t for t in listed}
    assert by_name["echo"].output_schema is not None
    assert by_name["generate"].output_schema is None, "generate declares no output"


async def test_read_output_is_a_built_in_tool_with_id_offset_limit(conn) -> None:
    listed = {t.name: t for t in (await conn.client.list_tools()).tools}
    schema = listed["read_output"].input_schema
    assert schema.get("type") == "object"
    assert {"id", "offset", "limit"} <= set(schema["properties"]), schema
    assert "id" in schema.get("required", []), schema
    assert listed["read_output"].description


async def test_r32_echo_returns_structured_content_and_its_text(conn) -> None:
    result = await conn.client.call_tool("echo", {"message": "hi there"})
    assert result.is_error is False
    assert result.structured_content == {"message": "hi there"}
    assert texts(result) == ["hi there"]


async def test_output_without_content_becomes_its_json_as_text(conn) -> None:
    result = await conn.client.call_tool("word_count", {"text": "one two\nthree"})
    assert result.is_error is False
    assert result.structured_content == {"words": 3, "lines": 2, "bytes": 13}
    parts = texts(result)
    assert len(parts) == 1
    assert json.loads(parts[0]) == result.structured_content


async def test_content_only_tool_has_no_structured_content(conn) -> None:
    result = await conn.client.call_tool("generate", {"bytes": 300, "lines": 4})
    assert result.is_error is False
    assert result.structured_content is None
    assert text(result) == generated_text(300, 4)


async def test_r32_schema_violation_is_an_error_result_naming_the_json_pointer(conn) -> None:
    result = await conn.client.call_tool("echo", {"message": 5})
    assert result.is_error is True
    assert result.structured_content is None
    assert "/message" in text(result), text(result)
    reply = reply_to(conn, conn.traffic.sent_tool_call("echo").id)
    assert isinstance(reply, JSONRPCResponse), "a schema violation is a result, not a JSON-RPC error"


async def test_missing_argument_is_an_error_result(conn) -> None:
    result = await conn.client.call_tool("word_count", {})
    assert result.is_error is True
    assert "text" in text(result), text(result)


async def test_tool_failure_is_an_error_result(conn) -> None:
    message = f"deliberate failure {uuid.uuid4().hex[:8]}"
    result = await conn.client.call_tool("fail", {"message": message})
    assert result.is_error is True
    assert message in text(result)
    request = conn.traffic.sent_tool_call("fail")
    outcome = await conn.events.wait_outcome_for_call(request.id)
    assert outcome["tool"] == "fail"
    assert outcome["status"] == "error"


async def test_tool_failure_metadata_reaches_the_client_in_meta(conn) -> None:
    metadata = {"row": 7, "table": "users"}
    result = await conn.client.call_tool("fail", {"message": "no such row", "metadata": metadata})
    assert result.is_error is True
    assert result.meta == {"io.toolhost/metadata": metadata}
    plain = await conn.client.call_tool("fail", {"message": "no metadata"})
    assert plain.meta is None


async def test_r32_unknown_tool_is_a_jsonrpc_error(conn) -> None:
    with pytest.raises(MCPError) as raised:
        await conn.client.call_tool("no_such_tool", {})
    assert "no_such_tool" in raised.value.message
    request = conn.traffic.sent_tool_call("no_such_tool")
    assert isinstance(reply_to(conn, request.id), JSONRPCError)


async def test_fuel_exhaustion_is_a_jsonrpc_error_with_status_and_usage(conn) -> None:
    with pytest.raises(MCPError) as raised:
        await conn.client.call_tool("spin_forever", {})
    data = raised.value.data
    assert isinstance(data, dict), f"error data: {data!r}"
    assert data.get("status") == "interrupted", data
    assert isinstance(data.get("usage"), dict) and data["usage"], data
    request = conn.traffic.sent_tool_call("spin_forever")
    assert isinstance(reply_to(conn, request.id), JSONRPCError), "never a successful-looking result"
    outcome = await conn.events.wait_outcome_for_call(request.id)
    assert outcome["status"] == "interrupted"


async def test_r32_defect_is_a_jsonrpc_error_with_status_and_usage(conn) -> None:
    with pytest.raises(MCPError) as raised:
        await conn.client.call_tool("panic", {})
    data = raised.value.data
    assert isinstance(data, dict), f"error data: {data!r}"
    assert data.get("status") == "defect", data
    assert isinstance(data.get("usage"), dict) and data["usage"], data
    request = conn.traffic.sent_tool_call("panic")
    assert isinstance(reply_to(conn, request.id), JSONRPCError)
    outcome = await conn.events.wait_outcome_for_call(request.id)
    assert outcome["status"] == "defect"


async def test_outcome_events_carry_session_agent_message_and_call_ids(conn) -> None:
    message_id = f"msg-{uuid.uuid4().hex}"
    marked = f"marked {message_id}"
    result = await conn.client.call_tool("echo", {"message": marked}, meta={MESSAGE_ID_KEY: message_id})
    assert result.structured_content == {"message": marked}
    first = [r for r in conn.traffic.sent_requests("tools/call", "echo") if r.params["arguments"] == {"message": marked}]
    assert len(first) == 1
    first_outcome = await conn.events.wait_outcome_for_call(first[0].id)
    context = first_outcome["context"]
    assert first_outcome["tool"] == "echo"
    assert first_outcome["status"] == "completed"
    assert context["agent"] == conn.agent
    assert context["message_id"] == message_id
    assert context["call_id"] == str(first[0].id)
    assert isinstance(context["session_id"], str) and context["session_id"]
    if conn.transport == "http" and conn.era == LEGACY:
        assert conn.session_ids, "a 2025-11-25 HTTP session has an Mcp-Session-Id"
        assert context["session_id"] == conn.session_ids[0], "session id = the MCP session id"

    # Without a message id in _meta, one is generated, fresh for each call.
    plain = f"plain {uuid.uuid4().hex}"
    await conn.client.call_tool("echo", {"message": plain})
    second = [r for r in conn.traffic.sent_requests("tools/call", "echo") if r.params["arguments"] == {"message": plain}]
    second_outcome = await conn.events.wait_outcome_for_call(second[0].id)
    generated = second_outcome["context"]["message_id"]
    assert isinstance(generated, str) and generated and generated != message_id
    assert second_outcome["context"]["agent"] == conn.agent
    if conn.transport == "stdio" or conn.era == LEGACY:
        assert second_outcome["context"]["session_id"] == context["session_id"], "one session id per connection"


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_deadline_is_a_jsonrpc_error_with_status_and_usage(era: str, workdir: Path, cache_dir: Path) -> None:
    flags = ("--timeout", "300ms", "--fuel", "1000000000000000")
    async with connect_stdio(("chaos",), era, workdir, cache_dir, flags=flags) as conn:
        with pytest.raises(MCPError) as raised:
            await conn.client.call_tool("spin_forever", {})
        data = raised.value.data
        assert isinstance(data, dict) and data.get("status") == "interrupted", data
        assert isinstance(data.get("usage"), dict) and data["usage"], data
        outcome = await conn.events.wait_outcome_for_call(conn.traffic.sent_tool_call("spin_forever").id)
        assert outcome["status"] == "interrupted"
        assert outcome.get("reason") == "deadline", outcome


async def test_stdio_stdout_carries_only_protocol(workdir: Path, cache_dir: Path) -> None:
    """A guest writing to stdout never reaches the protocol stream."""
    async with connect_stdio(("chaos", "text_tools"), LEGACY, workdir, cache_dir) as conn:
        noise = 'not json\n{"jsonrpc":"2.0","id":999,"result":{}}\n'
        result = await conn.client.call_tool("print", {"stdout": noise, "stderr": "to stderr\n", "repeat": 3})
        assert result.is_error is False
        echoed = await conn.client.call_tool("echo", {"message": "after print"})
        assert echoed.structured_content == {"message": "after print"}
        assert conn.stream_errors == [], f"unparseable lines on stdout: {conn.stream_errors}"
        assert conn.traffic.replies_to(999) == []


async def test_stdio_connections_get_distinct_session_ids(workdir: Path, cache_dir: Path) -> None:
    ids = []
    for n in range(2):
        async with connect_stdio(("text_tools",), LEGACY, workdir / f"s{n}", cache_dir) as conn:
            await conn.client.call_tool("echo", {"message": "x"})
            request = conn.traffic.sent_tool_call("echo")
            ids.append((await conn.events.wait_outcome_for_call(request.id))["context"]["session_id"])
    assert ids[0] and ids[1] and ids[0] != ids[1]
