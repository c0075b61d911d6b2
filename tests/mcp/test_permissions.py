"""Permission asks reach the MCP client: as an elicitation form (2025-11-25
clients that declare the capability) or as an input-required result the
client retries with the answer (2026-07-28); a client that can do neither is
denied with a hint to add an `--allow` rule. "always" lasts for the session
(R27, R29, R32)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp_types import ElicitResult
from toolhost_mcp import LEGACY, MODERN, connect_http, connect_stdio, http_server, text

pytestmark = pytest.mark.anyio

PLUGINS = ("chaos",)
TARGETS = [("stdio", LEGACY), ("stdio", MODERN), ("http", LEGACY), ("http", MODERN)]
IDS = [f"{k}-{e}" for k, e in TARGETS]
CHOICES = ("once", "always", "reject")


def offered(schema: dict[str, Any]) -> dict[str, list[Any]]:
    """The values each property of an elicitation form allows."""
    out = {}
    for name, prop in (schema.get("properties") or {}).items():
        values = list(prop.get("enum") or [])
        for option in (prop.get("oneOf") or []) + (prop.get("anyOf") or []):
            if isinstance(option, dict) and "const" in option:
                values.append(option["const"])
        out[name] = values
    return out


class Answerer:
    """The client's elicitation callback: records each ask and answers with
    `action` and, on accept, the form field offering `choice`."""

    def __init__(self) -> None:
        self.asks: list[Any] = []
        self.action = "accept"
        self.choice: str | None = "once"

    def answer(self, action: str, choice: str | None = None) -> None:
        self.action, self.choice = action, choice

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.asks.append(params)
        if self.action != "accept":
            return ElicitResult(action=self.action)
        schema = getattr(params, "requested_schema", None)
        assert schema is not None, f"expected a form elicitation, got {params!r}"
        for name, values in offered(schema).items():
            if self.choice in values:
                return ElicitResult(action="accept", content={name: self.choice})
        raise AssertionError(f"the permission form offers no {self.choice!r} choice: {schema}")


@pytest.fixture(scope="module")
def http(module_dir: Path, cache_dir: Path):
    with http_server(PLUGINS, module_dir / "http", cache_dir) as server:
        yield server


def connector(request: pytest.FixtureRequest, kind: str, era: str, workdir: Path, cache_dir: Path, **kw: Any):
    if kind == "stdio":
        return connect_stdio(PLUGINS, era, workdir, cache_dir, **kw)
    return connect_http(request.getfixturevalue("http"), era, **kw)


@pytest.fixture(scope="module", params=TARGETS, ids=IDS)
async def conn(request: pytest.FixtureRequest, module_dir: Path, cache_dir: Path):
    kind, era = request.param
    answerer = Answerer()
    async with connector(request, kind, era, module_dir / f"{kind}-{era}", cache_dir, elicitation_callback=answerer) as c:
        c.answerer = answerer
        yield c


def fresh(prefix: str) -> str:
    return f"{prefix}/{uuid.uuid4().hex[:12]}"


def declared_session(kind: str, era: str) -> dict | None:
    """Stateless 2026-07-28 HTTP has no sessions: a client declares one."""
    if kind == "http" and era == MODERN:
        return {"io.toolhost/session-id": uuid.uuid4().hex}
    return None


async def ask(conn, action: str, resource: str, meta: dict | None = None):
    return await conn.client.call_tool("ask", {"action": action, "resource": resource}, meta=meta)


async def test_accept_once_grants_the_call_and_asks_again_next_time(conn) -> None:
    answerer = conn.answerer
    answerer.answer("accept", "once")
    before = len(answerer.asks)
    resource = fresh("example.org")
    result = await ask(conn, "net", resource)
    assert result.is_error is False, text(result)
    assert text(result) == "granted"
    assert len(answerer.asks) == before + 1, "the ask reached the client's elicitation callback"
    params = answerer.asks[-1]
    assert resource in params.message, f"the question names the resource: {params.message!r}"
    fields = offered(params.requested_schema)
    assert any(set(CHOICES) <= set(values) for values in fields.values()), f"once/always/reject offered: {fields}"

    # How it travelled depends on the era.
    if conn.era == LEGACY:
        assert conn.traffic.received_requests("elicitation/create"), "2025-11-25: an elicitation/create request"
    else:
        assert not conn.traffic.received_requests("elicitation/create"), "2026-07-28 has no server-to-client requests"
        assert any(r.get("resultType") == "input_required" for r in conn.traffic.received_results()), (
            "2026-07-28: an input-required result, retried with the answer"
        )

    again = await ask(conn, "net", resource)
    assert text(again) == "granted"
    assert len(answerer.asks) == before + 2, "once is not remembered"


async def test_reject_choice_denies(conn) -> None:
    conn.answerer.answer("accept", "reject")
    resource = fresh("example.net")
    result = await ask(conn, "net", resource)
    assert result.is_error is True
    assert f"Permission denied: net {resource}" in text(result)


async def test_decline_denies(conn) -> None:
    conn.answerer.answer("decline")
    before = len(conn.answerer.asks)
    resource = fresh("/etc")
    result = await ask(conn, "read", resource)
    assert len(conn.answerer.asks) == before + 1
    assert result.is_error is True
    assert f"Permission denied: read {resource}" in text(result)


async def test_cancelled_form_denies(conn) -> None:
    conn.answerer.answer("cancel")
    resource = fresh("/var")
    result = await ask(conn, "write", resource)
    assert result.is_error is True
    assert f"Permission denied: write {resource}" in text(result)


@pytest.mark.parametrize(("kind", "era"), TARGETS, ids=IDS)
async def test_always_is_remembered_for_that_session_only(
    request: pytest.FixtureRequest, kind: str, era: str, workdir: Path, cache_dir: Path
) -> None:
    resource = fresh("always.example")
    first = Answerer()
    first.answer("accept", "always")
    session = declared_session(kind, era)
    async with connector(request, kind, era, workdir / "one", cache_dir, elicitation_callback=first) as one:
        assert text(await ask(one, "net", resource, session)) == "granted"
        assert len(first.asks) == 1
        # Same session: saved, not asked again.
        assert text(await ask(one, "net", resource, session)) == "granted"
        assert len(first.asks) == 1, '"always" is remembered within the session'
        # A different resource is still asked.
        first.answer("decline")
        other = await ask(one, "net", fresh("elsewhere.example"), session)
        assert other.is_error is True
        assert len(first.asks) == 2, '"always" saves only the patterns it was shown'

        second = Answerer()
        second.answer("decline")
        async with connector(request, kind, era, workdir / "two", cache_dir, elicitation_callback=second) as two:
            result = await ask(two, "net", resource, declared_session(kind, era))
            assert len(second.asks) == 1, "another session is asked again"
            assert result.is_error is True
            assert f"Permission denied: net {resource}" in text(result)


@pytest.mark.parametrize(("kind", "era"), TARGETS, ids=IDS)
async def test_client_without_elicitation_is_denied_with_an_allow_hint(
    request: pytest.FixtureRequest, kind: str, era: str, workdir: Path, cache_dir: Path
) -> None:
    async with connector(request, kind, era, workdir, cache_dir) as conn:
        resource = fresh("example.com")
        result = await ask(conn, "net", resource)
        assert result.is_error is True
        assert f"Permission denied: net {resource}" in text(result)
        assert "--allow" in text(result), f"the denial hints at --allow: {text(result)!r}"
        assert not conn.traffic.received_requests("elicitation/create")


@pytest.mark.parametrize(
    "flags",
    [("--allow", "net:rules.example/*"), ("--yes",)],
    ids=["allow-rule", "yes"],
)
async def test_allow_rules_and_yes_settle_without_asking(flags: tuple[str, ...], workdir: Path, cache_dir: Path) -> None:
    answerer = Answerer()
    answerer.answer("decline")
    async with connect_stdio(PLUGINS, LEGACY, workdir, cache_dir, flags=flags, elicitation_callback=answerer) as conn:
        result = await ask(conn, "net", "rules.example/a/b")
        assert result.is_error is False, text(result)
        assert text(result) == "granted"
        assert answerer.asks == [], "a rule or --yes settles it without asking the client"


async def test_stateless_requests_without_a_session_ask_every_time(
    request: pytest.FixtureRequest, workdir: Path, cache_dir: Path
) -> None:
    answerer = Answerer()
    answerer.answer("accept", "always")
    resource = fresh("stateless.example")
    async with connector(request, "http", MODERN, workdir / "stateless", cache_dir, elicitation_callback=answerer) as c:
        assert text(await ask(c, "net", resource)) == "granted"
        assert text(await ask(c, "net", resource)) == "granted"
        assert len(answerer.asks) == 2, "without a declared session, each request is its own session"
