"""Retained output: a 10 MB result reaches the model bounded (head + marker +
tail), and the full text is readable byte-exactly as the resource
`toolhost://output/<id>` and page by page with the built-in `read_output`
tool; ids are scoped to the session that produced them (R16, R32)."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from toolhost_mcp import LEGACY, MODERN, connect_http, connect_stdio, generated_text, http_server, text, texts

pytestmark = pytest.mark.anyio

PLUGINS = ("bulk_output",)
SIZE = 10_000_000
MAX_BYTES = 51_200
MAX_LINES = 2_000
#: Lines per read_output page: 700 lines of 64 bytes stay under the byte
#: bound, so a page is never bounded again.
PAGE = 700

MARKER = re.compile(
    r"\[\.\.\. (\d+) lines \((\d+) bytes\) omitted; full output retained as toolhost-output:([0-9a-f]{32})\b[^\]\n]*\]\n?"
)

TARGETS = [("stdio", LEGACY), ("stdio", MODERN), ("http", LEGACY), ("http", MODERN)]
#: Where one connection is one session, so another connection is another
#: session (2026-07-28 over HTTP is stateless).
SESSION_TARGETS = [("stdio", LEGACY), ("stdio", MODERN), ("http", LEGACY)]


@pytest.fixture(scope="module")
def expected() -> str:
    text = generated_text(SIZE)
    assert len(text) == SIZE and text.count("\n") == SIZE // 64
    return text


@pytest.fixture(scope="module")
def http(module_dir: Path, cache_dir: Path):
    with http_server(PLUGINS, module_dir / "http", cache_dir) as server:
        yield server


async def _connect(request: pytest.FixtureRequest, kind: str, era: str, workdir: Path, cache_dir: Path, **kw: Any):
    if kind == "stdio":
        return connect_stdio(PLUGINS, era, workdir, cache_dir, **kw)
    # The 10 MB resource is one JSON-RPC response: over SSE that is one event,
    # larger than the client's default 1 MiB cap on an SSE event.
    return connect_http(request.getfixturevalue("http"), era, max_sse_event_size=None)


@pytest.fixture(scope="module", params=TARGETS, ids=[f"{k}-{e}" for k, e in TARGETS])
async def conn(request: pytest.FixtureRequest, module_dir: Path, cache_dir: Path):
    kind, era = request.param
    workdir = module_dir / f"{kind}-{era}"
    async with await _connect(request, kind, era, workdir, cache_dir, output_dir=module_dir / "shared-outputs") as c:
        yield c


@pytest.fixture(scope="module")
async def big(conn) -> dict[str, Any]:
    """One `generate` of 10 MB per connection, and its parsed marker."""
    result = await conn.client.call_tool("generate", {"bytes": SIZE})
    assert result.is_error is False, text(result)
    shown = text(result)
    markers = list(MARKER.finditer(shown))
    assert len(markers) == 1, f"expected one omission marker in the bounded text, got {len(markers)}: {shown[:300]!r}"
    m = markers[0]
    return {
        "result": result,
        "shown": shown,
        "head": shown[: m.start()],
        "tail": shown[m.end() :],
        "omitted_lines": int(m.group(1)),
        "omitted_bytes": int(m.group(2)),
        "id": m.group(3),
    }


def count_lines(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


async def test_ten_megabytes_reach_the_model_bounded(big: dict[str, Any], expected: str) -> None:
    result = big["result"]
    assert result.structured_content is None
    parts = texts(result)
    assert sum(len(p.encode()) for p in parts) <= MAX_BYTES
    assert sum(count_lines(p) for p in parts) <= MAX_LINES
    head, tail = big["head"], big["tail"]
    assert head and tail, "the preview keeps a head and a tail"
    assert expected.startswith(head)
    assert expected.endswith(tail)
    assert len(head) + big["omitted_bytes"] + len(tail) == SIZE
    omitted = expected[len(head) : SIZE - len(tail)]
    assert omitted.count("\n") == big["omitted_lines"]


async def test_the_resource_holds_the_full_text_byte_exact(conn, big: dict[str, Any], expected: str) -> None:
    uri = f"toolhost://output/{big['id']}"
    read = await conn.client.read_resource(uri)
    assert len(read.contents) == 1
    content = read.contents[0]
    assert str(content.uri) == uri
    if hasattr(content, "text"):
        full = content.text.encode()
    else:
        full = base64.b64decode(content.blob)
    assert len(full) == SIZE
    assert full == expected.encode()


async def test_read_output_pages_through_the_full_text(conn, big: dict[str, Any], expected: str) -> None:
    pages: list[str] = []
    offset = 0
    total_lines = expected.count("\n")
    while True:
        result = await conn.client.call_tool("read_output", {"id": big["id"], "offset": offset, "limit": PAGE})
        assert result.is_error is False, text(result)
        page = text(result)
        want = min(PAGE, total_lines - offset)
        assert count_lines(page) == want, f"page at line {offset}: {count_lines(page)} lines, expected {want}"
        pages.append(page)
        offset += PAGE
        if want < PAGE:
            break
    full = "".join(pages)
    assert len(full) == SIZE
    assert full == expected
    assert full.startswith(big["head"]) and full.endswith(big["tail"])


async def test_read_output_defaults_and_the_reference_prefix(conn) -> None:
    # 20,000 lines of 10 bytes: over the bounds, so retained.
    small = generated_text(200_000, 20_000)
    result = await conn.client.call_tool("generate", {"bytes": 200_000, "lines": 20_000})
    found = MARKER.search(text(result))
    assert found, text(result)[:300]
    ident = found.group(3)
    lines = small.splitlines(keepends=True)

    default = await conn.client.call_tool("read_output", {"id": ident})
    assert default.is_error is False, text(default)
    assert text(default) == "".join(lines[:2000]), "offset defaults to 0 and limit to 2000 lines"

    prefixed = await conn.client.call_tool("read_output", {"id": f"toolhost-output:{ident}", "offset": 19_990, "limit": 50})
    assert prefixed.is_error is False, text(prefixed)
    assert text(prefixed) == "".join(lines[19_990:])

    middle = await conn.client.call_tool("read_output", {"id": ident, "offset": 12_345, "limit": 3})
    assert text(middle) == "".join(lines[12_345:12_348])


async def test_unknown_and_malformed_ids_are_errors(conn) -> None:
    for bad in ("0" * 32, "../../../../etc/passwd", "toolhost-output:" + "f" * 32):
        await read_output_fails(conn, {"id": bad})
    for uri in (f"toolhost://output/{'0' * 32}", "test://nonexistent"):
        with pytest.raises(MCPError) as refused:
            await conn.client.read_resource(uri)
        # Not found, naming the URI: -32002 in 2025, -32602 since
        # 2026-07-28 (SEP-2164).
        expected = -32002 if conn.era == LEGACY else -32602
        assert refused.value.error.code == expected, refused.value.error
        assert refused.value.error.data == {"uri": uri}, refused.value.error


async def read_output_fails(conn, arguments: dict[str, Any]) -> str:
    """`read_output` with these arguments fails: as an error result or a
    JSON-RPC error (the interface allows either); returns what it said."""
    try:
        result = await conn.client.call_tool("read_output", arguments)
    except MCPError as e:
        return e.message
    assert result.is_error is True, f"read_output {arguments}: {text(result)[:200]}"
    return text(result)


@pytest.mark.parametrize(("kind", "era"), SESSION_TARGETS, ids=[f"{k}-{e}" for k, e in SESSION_TARGETS])
async def test_ids_are_scoped_to_the_session_that_produced_them(
    request: pytest.FixtureRequest, kind: str, era: str, workdir: Path, cache_dir: Path
) -> None:
    # Two stdio servers share one output directory; two HTTP sessions share
    # one server: either way the second session cannot read the first's id.
    shared = workdir / "outputs"
    async with await _connect(request, kind, era, workdir / "one", cache_dir, output_dir=shared) as one:
        result = await one.client.call_tool("generate", {"bytes": 100_000})
        found = MARKER.search(text(result))
        assert found, text(result)[:300]
        ident = found.group(3)
        own = await one.client.call_tool("read_output", {"id": ident, "limit": 1})
        assert own.is_error is False and text(own) == generated_text(64), "the producing session reads it"
        async with await _connect(request, kind, era, workdir / "two", cache_dir, output_dir=shared) as two:
            said = await read_output_fails(two, {"id": ident, "limit": 1})
            assert generated_text(64) not in said, "another session must not read the output"
            with pytest.raises(MCPError):
                await two.client.read_resource(f"toolhost://output/{ident}")
