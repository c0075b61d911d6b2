"""Streamable HTTP: sessions per era, many concurrent calls, and the safety
rules: loopback by default, a token required off loopback, bearer auth,
Host and Origin checks (DNS-rebinding defence), clean shutdown."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import anyio
import httpx2
import pytest
from toolhost_mcp import (
    LEGACY,
    MODERN,
    connect_http,
    http_server,
    serve_command,
    server_env,
    start_http_server,
)

pytestmark = pytest.mark.anyio

PLUGINS = ("text_tools",)
CONCURRENT = 200

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": LEGACY,
        "capabilities": {},
        "clientInfo": {"name": "raw-http", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def http(module_dir: Path, cache_dir: Path):
    with http_server(PLUGINS, module_dir / "http", cache_dir) as server:
        yield server


async def post_initialize(url: str, headers: dict[str, str]) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=30) as client:
        return await client.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **headers})


async def test_announces_the_port_it_bound(http) -> None:
    assert http.url == f"http://127.0.0.1:{http.port}/mcp"
    assert http.port != 0, "port 0 asks for a free port; the line names the one bound"
    response = await post_initialize(http.url, {})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_concurrent_calls_all_settle(http, era: str) -> None:
    async with connect_http(http, era) as conn:
        results: dict[int, object] = {}

        async def call(n: int) -> None:
            results[n] = await conn.client.call_tool("echo", {"message": f"call {n} of {era}"})

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for n in range(CONCURRENT):
                    tg.start_soon(call, n)
        assert len(results) == CONCURRENT
        for n, result in results.items():
            assert result.is_error is False, result
            assert result.structured_content == {"message": f"call {n} of {era}"}
        requests = conn.traffic.sent_requests("tools/call", "echo")
        assert len(requests) == CONCURRENT
        for request in requests:
            outcome = await conn.events.wait_outcome_for_call(request.id)
            assert outcome["status"] == "completed"
            assert outcome["context"]["agent"] == conn.agent


async def test_2025_sessions_have_an_id_and_2026_is_stateless(http) -> None:
    async with connect_http(http, LEGACY) as legacy:
        await legacy.client.call_tool("echo", {"message": "a"})
        assert len(legacy.session_ids) == 1, f"one Mcp-Session-Id for the session: {legacy.session_ids}"
    async with connect_http(http, MODERN) as modern:
        await modern.client.call_tool("echo", {"message": "b"})
        assert modern.session_ids == [], "2026-07-28 over HTTP has no sessions"


async def test_sessions_are_separate(http) -> None:
    async with connect_http(http, LEGACY) as one, connect_http(http, LEGACY) as two:
        assert one.session_ids and two.session_ids
        assert one.session_ids[0] != two.session_ids[0]


@pytest.mark.parametrize("address", ["0.0.0.0:0", "[::]:0"])
def test_non_loopback_bind_without_token_refuses_to_start(address: str, workdir: Path, cache_dir: Path) -> None:
    command = serve_command(PLUGINS, ["--http", address], workdir, cache_dir)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, env=server_env(workdir))
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"`serve --http {address}` without a token kept running (it must refuse): {e.stderr!r}")
    assert done.returncode != 0
    assert "token" in done.stderr.lower(), f"stderr says a token is required: {done.stderr!r}"
    assert "serving MCP" not in done.stderr, (
        f"it must refuse before binding, not announce that it serves and then stop: {done.stderr!r}"
    )


async def test_bearer_token_is_required_when_set(workdir: Path, cache_dir: Path) -> None:
    with http_server(PLUGINS, workdir, cache_dir, flags=["--token", "s3cret-token"]) as server:
        assert (await post_initialize(server.url, {})).status_code == 401
        assert (await post_initialize(server.url, {"Authorization": "Bearer wrong"})).status_code == 401
        assert (await post_initialize(server.url, {"Authorization": "s3cret-token"})).status_code == 401
        ok = await post_initialize(server.url, {"Authorization": "Bearer s3cret-token"})
        assert ok.status_code == 200, ok.text

        async with connect_http(server, LEGACY, headers={"Authorization": "Bearer s3cret-token"}) as conn:
            result = await conn.client.call_tool("echo", {"message": "authorized"})
            assert result.structured_content == {"message": "authorized"}
        for era in (LEGACY, MODERN):
            with pytest.raises(Exception) as raised:  # noqa: PT011 - any failure to connect
                async with connect_http(server, era):
                    pass
            assert not isinstance(raised.value, AssertionError), raised.value


async def test_token_from_the_environment(workdir: Path, cache_dir: Path) -> None:
    with http_server(PLUGINS, workdir, cache_dir, env={"TOOLHOST_TOKEN": "env-token"}) as server:
        assert (await post_initialize(server.url, {})).status_code == 401
        assert (await post_initialize(server.url, {"Authorization": "Bearer env-token"})).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example:{port}"])
async def test_foreign_host_header_is_rejected(http, host: str) -> None:
    response = await post_initialize(http.url, {"Host": host.format(port=http.port)})
    assert 400 <= response.status_code < 500, f"Host {host}: {response.status_code} {response.text[:200]}"
    assert response.status_code != 200


@pytest.mark.parametrize("host", ["localhost:{port}", "127.0.0.1:{port}", "[::1]:{port}"])
async def test_loopback_host_headers_are_accepted(http, host: str) -> None:
    response = await post_initialize(http.url, {"Host": host.format(port=http.port)})
    assert response.status_code == 200, f"Host {host}: {response.status_code} {response.text[:200]}"


async def test_foreign_origin_is_rejected(http) -> None:
    rejected = await post_initialize(http.url, {"Origin": "http://evil.example"})
    assert 400 <= rejected.status_code < 500, f"{rejected.status_code} {rejected.text[:200]}"
    accepted = await post_initialize(http.url, {"Origin": f"http://localhost:{http.port}"})
    assert accepted.status_code == 200, f"{accepted.status_code} {accepted.text[:200]}"


async def test_sigterm_stops_the_server_cleanly(workdir: Path, cache_dir: Path) -> None:
    server = start_http_server(PLUGINS, workdir, cache_dir)
    try:
        async with connect_http(server, LEGACY) as conn:
            await conn.client.call_tool("echo", {"message": "before shutdown"})
            request = conn.traffic.sent_tool_call("echo")
        server.process.send_signal(signal.SIGTERM)
        code = server.process.wait(timeout=20)
        assert code == 0, f"exit status {code} after SIGTERM; stderr:\n{server.stderr()[-2000:]}"
        assert server.events.outcome_for_call(request.id)["status"] == "completed"
    finally:
        server.stop()
