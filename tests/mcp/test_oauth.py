"""`toolhost serve --http` as an OAuth 2.1 resource server (R40), against a
real authorization server (authlib, tests/mcp/oauth_server.py) on loopback:
the official Python `mcp` client discovers it and gets a token on its own;
forged, misdirected, stale and under-scoped tokens are refused; the caller
(issuer and subject) is on every outcome, in the store and in what
permission rules can match; a bridged server never sees a client's token.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from front_door import Client, wait_until
from oauth_server import AuthServer, authorization_server, mcp_oauth
from postgres import free_port
from toolhost_mcp import (
    ERAS,
    LEGACY,
    MODERN,
    HttpServer,
    connect_http,
    eventually,
    plugin,
    start_http_server,
    text,
    toolhost_bin,
)

pytestmark = pytest.mark.anyio

#: The scope every caller needs to list and call tools.
TOOLS = "mcp:tools"
#: The extra scope `generate` (bulk output) needs here.
BULK = "tools:bulk"
#: The inner server's static token, which only the bridge knows.
BRIDGE_TOKEN = "bridge-" + uuid.uuid4().hex


@dataclass
class Deployed:
    auth: AuthServer
    server: HttpServer
    inner: HttpServer
    workdir: Path

    @property
    def resource(self) -> str:
        return self.server.url

    def token(self, sub: str = "alice", scope: str = TOOLS, **kw: Any) -> str:
        return self.auth.mint(sub=sub, scope=scope, aud=kw.pop("aud", [self.resource]), **kw)

    def events(self, *args: str) -> list[dict[str, Any]]:
        """`toolhost events --json` over this server's store."""
        done = subprocess.run(
            [str(toolhost_bin()), "events", "--state-dir", str(self.workdir / "outer" / "outputs"), "--json", *args],
            capture_output=True,
            timeout=60,
            check=True,
        )
        return [json.loads(line) for line in done.stdout.decode().splitlines() if line]


def manifest(workdir: Path, inner_url: str) -> Path:
    """chaos (its `ask` tool), with `net` allowed for admins only, and the
    inner server bridged in with its own credential."""
    path = workdir / "toolhost.toml"
    path.write_text(
        f'path = "{plugin("chaos")}"\n'
        "[[rules]]\n"
        'action = "net"\n'
        'resource = "*"\n'
        'effect = "allow"\n'
        'claim = "groups=admins"\n',
        encoding="utf-8",
    )
    bridge = workdir / "bridge.toml"
    bridge.write_text(
        f'[[mcp]]\nname = "inner"\nurl = "{inner_url}"\nbearer_token_env = "INNER_TOKEN"\n', encoding="utf-8"
    )
    return path


@pytest.fixture(scope="module")
def d(module_dir: Path, cache_dir: Path) -> Iterator[Deployed]:
    with authorization_server(module_dir / "as") as auth:
        auth.scopes_supported = [TOOLS, BULK]
        inner = start_http_server(("text_tools",), module_dir / "inner", cache_dir, flags=["--token", BRIDGE_TOKEN])
        try:
            port = free_port()
            resource = f"http://127.0.0.1:{port}/mcp"
            chaos = manifest(module_dir, inner.url)
            flags = [
                "--auth-issuer", auth.issuer,
                "--resource", resource,
                "--tool-scope", f"generate={BULK}",
                "--allow", "mcp:inner/*",
                "--code-mode",
            ]  # fmt: skip
            server = start_http_server(
                ("text_tools", "bulk_output", chaos, module_dir / "bridge.toml"),
                module_dir / "outer",
                cache_dir,
                flags=flags,
                address=f"127.0.0.1:{port}",
                env={"INNER_TOKEN": BRIDGE_TOKEN},
            )
            try:
                assert server.url == resource, server.url
                yield Deployed(auth, server, inner, module_dir)
            finally:
                server.stop()
        finally:
            inner.stop()


def raw(d: Deployed, token: str | None, method: str = "tools/list", params: dict[str, Any] | None = None, **headers: str):
    """One stateless (2026-07-28) request with `token` as its bearer."""
    client = Client(d.server.url, token)
    try:
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "oauth-test", "version": "1"},
        }
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": meta}}
        routing = {"mcp-protocol-version": MODERN, "mcp-method": method}
        if method == "tools/call":
            routing["mcp-name"] = (params or {})["name"]
        return client.post(message, {**routing, **headers})
    finally:
        client.close()


# --- discovery, and the official client's own OAuth -------------------------------


def test_r40_protected_resource_metadata_names_the_issuer_and_scopes(d: Deployed) -> None:
    base = d.server.url.removesuffix("/mcp")
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
        reply = httpx2.get(base + path, timeout=30)
        assert reply.status_code == 200, (path, reply.status_code, reply.text)
        doc = reply.json()
        assert doc["resource"] == d.resource, doc
        assert doc["authorization_servers"] == [d.auth.issuer], doc
        assert set(doc["scopes_supported"]) == {TOOLS, BULK}, doc
        assert doc["bearer_methods_supported"] == ["header"], doc


def test_r40_no_token_is_401_pointing_at_the_metadata(d: Deployed) -> None:
    reply = raw(d, None)
    assert reply.status == 401, reply
    challenge = reply.headers["www-authenticate"]
    base = d.server.url.removesuffix("/mcp")
    assert f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"' in challenge, challenge
    assert f'scope="{TOOLS}"' in challenge, challenge


@pytest.mark.parametrize("era", ERAS)
async def test_r40_the_mcp_client_discovers_gets_a_token_lists_and_calls(d: Deployed, era: str) -> None:
    d.auth.user = "alice"
    provider = mcp_oauth(d.server.url, d.auth, TOOLS)
    async with connect_http(d.server, era, auth=provider) as conn:
        names = {t.name for t in (await conn.client.list_tools()).tools}
        assert {"echo", "ask", "read_output"} <= names, names
        assert "generate" not in names, f"generate needs {BULK}, which the token lacks: {names}"
        result = await conn.client.call_tool("echo", {"message": f"oauth {era}"})
        assert text(result) == f"oauth {era}"
        caller = f"{d.auth.issuer}#alice"

        def outcome() -> dict[str, Any] | None:
            found = [o for o in conn.events.outcomes() if o.get("tool") == "echo"]
            return found[-1] if found else None

        recorded = await eventually("the echo's outcome", outcome)
    assert recorded["context"]["caller"] == caller, recorded
    assert provider.browser.visited, "the client never went through the authorization endpoint"


# --- tokens that must not work -------------------------------------------------------


def _refusals(d: Deployed) -> dict[str, str]:
    other = "http://127.0.0.1:1/not-our-issuer"
    ten_years = int(time.time()) + 10 * 365 * 86_400
    return {
        # Right issuer and audience, but not access tokens (RFC 9068 §4).
        "an ID token (typ JWT)": d.token(header_overrides={"typ": "JWT"}),
        "untyped": d.token(header_overrides={"typ": None}),
        "a logout token": d.token(header_overrides={"typ": "logout+jwt"}),
        "a security event token": d.token(header_overrides={"typ": "secevent+jwt"}),
        "a DPoP proof": d.token(header_overrides={"typ": "dpop+jwt"}),
        "issued ten years from now": d.token(extra_claims={"iat": ten_years}, exp_in=10 * 365 * 86_400 + 300),
        "wrong audience": d.token(aud=["http://127.0.0.1:1/mcp"]),
        "other issuer": d.token(iss=other),
        "expired": d.token(exp_in=-600),
        "not yet valid": d.token(nbf_in=600),
        "alg none": d.token(alg="none"),
        "HS256 with the public key": d.token(alg="HS256", key="public-pem"),
        "a key not in the set": d.token(key="stranger"),
        "garbage": "not.a.jwt",
    }


def test_r40_forged_misdirected_and_stale_tokens_are_401(d: Deployed) -> None:
    for name, token in _refusals(d).items():
        reply = raw(d, token)
        assert reply.status == 401, f"{name}: {reply.status} {reply.body[:300]!r}"
        challenge = reply.headers.get("www-authenticate", "")
        assert 'error="invalid_token"' in challenge, (name, challenge)
    good = raw(d, d.token())
    assert good.status == 200, good


def test_r40_a_token_in_the_query_string_is_refused(d: Deployed) -> None:
    client = Client(d.server.url + "?access_token=" + d.token())
    try:
        reply = client.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"mcp-protocol-version": MODERN})
    finally:
        client.close()
    assert reply.status == 400, reply
    assert b"query string" in reply.body, reply.body


#: How long after a fetch of the issuer's keys an unknown key id fetches
#: them again (KEY_REFETCH_INTERVAL).
KEY_REFETCH_INTERVAL = 5.0


def test_r40_an_unknown_kid_refreshes_the_keys_and_made_up_ones_are_rate_limited(d: Deployed) -> None:
    assert raw(d, d.token()).status == 200
    # A rotation is picked up: at once, or within one interval of the last
    # fetch (another test's unknown key id may just have made one).
    before = d.auth.jwks_fetches
    d.auth.rotate()
    wait_until(
        lambda: raw(d, d.token()).status == 200,
        KEY_REFETCH_INTERVAL + 10,
        "a token of the rotated key to be accepted",
        step=0.5,
    )
    assert d.auth.jwks_fetches > before
    # The previous key is still in the set: its tokens still work, unfetched.
    fetched = d.auth.jwks_fetches
    assert raw(d, d.token(key="previous")).status == 200
    assert d.auth.jwks_fetches == fetched
    # A flood of made-up key ids: every one refused, the issuer asked at
    # most once per interval however many arrive.
    started = time.monotonic()
    for n in range(40):
        made_up = raw(d, d.token(kid=f"made-up-{n}"))
        assert made_up.status == 401, made_up
    intervals = (time.monotonic() - started) / KEY_REFETCH_INTERVAL
    assert d.auth.jwks_fetches - fetched <= int(intervals) + 1, (fetched, d.auth.jwks_fetches, intervals)
    # A key rotated during the flood is accepted within one interval (a
    # limit counted per minute refused it for up to a minute).
    d.auth.rotate()
    for n in range(5):
        assert raw(d, d.token(kid=f"made-up-after-{n}")).status == 401
    wait_until(
        lambda: raw(d, d.token()).status == 200,
        KEY_REFETCH_INTERVAL + 10,
        "a token of the key rotated during a flood to be accepted",
        step=0.5,
    )


def test_r40_two_authorization_headers_are_refused(d: Deployed) -> None:
    message = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", MODERN),
        ("authorization", f"Bearer {d.token('alice')}"),
        ("authorization", f"Bearer {d.token('mallory')}"),
    ]
    reply = httpx2.post(d.server.url, content=message, headers=headers, timeout=30)
    assert reply.status_code == 400, (reply.status_code, reply.text)
    assert "one Authorization header" in reply.text, reply.text


# --- scopes --------------------------------------------------------------------------


def test_r40_without_the_tools_scope_is_403_naming_it(d: Deployed) -> None:
    reply = raw(d, d.token(scope="openid"))
    assert reply.status == 403, reply
    challenge = reply.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge and f'scope="{TOOLS}"' in challenge, challenge


def test_r40_a_tool_outside_the_token_scope_is_hidden_and_403(d: Deployed) -> None:
    listed = raw(d, d.token())
    names = {t["name"] for t in listed.message()["result"]["tools"]}
    assert "generate" not in names and "echo" in names, names
    call = {"name": "generate", "arguments": {"bytes": 10}}
    refused = raw(d, d.token(), "tools/call", call)
    assert refused.status == 403, refused
    assert f'scope="{TOOLS} {BULK}"' in refused.headers["www-authenticate"], refused.headers
    scoped = d.token(scope=f"{TOOLS} {BULK}")
    names = {t["name"] for t in raw(d, scoped).message()["result"]["tools"]}
    assert "generate" in names, names
    allowed = raw(d, scoped, "tools/call", call)
    assert allowed.status == 200 and allowed.message()["result"]["isError"] is False, allowed


# --- the caller, everywhere --------------------------------------------------------


def test_r40_a_caller_cannot_use_another_callers_session(d: Deployed) -> None:
    alice = Client(d.server.url, d.token("alice"))
    mallory = Client(d.server.url, d.token("mallory"))
    try:
        session = alice.initialize(LEGACY)
        headers = {"mcp-session-id": session.id, "mcp-protocol-version": LEGACY}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        assert alice.post(listing, headers).status == 200
        stolen = mallory.post(listing, headers)
        assert stolen.status == 404, f"another caller's session: {stolen.status} {stolen.body[:300]!r}"
    finally:
        alice.close()
        mallory.close()


def test_r40_outcomes_are_queryable_by_caller(d: Deployed) -> None:
    tag = uuid.uuid4().hex
    for sub in ("carol", "dave"):
        reply = raw(d, d.token(sub), "tools/call", {"name": "echo", "arguments": {"message": f"{sub}-{tag}"}})
        assert reply.status == 200 and reply.message()["result"]["isError"] is False, reply
    carol = f"{d.auth.issuer}#carol"
    mine = d.events("--caller", carol, "--tool", "echo")
    assert mine, "carol's call has no outcome under her name"
    assert all(o["context"]["caller"] == carol for o in mine), mine
    assert any(o["context"].get("caller") == f"{d.auth.issuer}#dave" for o in d.events("--tool", "echo"))


def test_r40_a_rule_naming_a_claim_applies_to_that_caller_only(d: Deployed) -> None:
    arguments = {"action": "net", "resource": f"example.org/{uuid.uuid4().hex}"}
    admin = d.token("erin", extra_claims={"groups": ["staff", "admins"]})
    granted = raw(d, admin, "tools/call", {"name": "ask", "arguments": arguments})
    assert granted.message()["result"]["isError"] is False, granted.message()
    assert text_of(granted) == "granted", granted.message()
    other = d.token("frank", extra_claims={"groups": ["staff"]})
    refused = raw(d, other, "tools/call", {"name": "ask", "arguments": arguments})
    result = refused.message()["result"]
    assert result["isError"] is True and "permission" in text_of(refused).lower(), result


def text_of(reply: Any) -> str:
    return "".join(c.get("text", "") for c in reply.message()["result"]["content"])


# --- no passthrough --------------------------------------------------------------


def test_r40_a_bridged_server_gets_its_own_credential_never_the_clients_token(d: Deployed) -> None:
    token = d.token("grace")
    tools = {t["name"] for t in raw(d, token).message()["result"]["tools"]}
    bridged = next(n for n in tools if n.startswith("inner") and n.endswith("echo"))
    reply = raw(d, token, "tools/call", {"name": bridged, "arguments": {"message": "through the bridge"}})
    assert text_of(reply) == "through the bridge", reply.message()
    # The inner server accepts only its own static token: the client's
    # token would have been refused there.
    direct = Client(d.inner.url, token).post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert direct.status == 401, direct
    calls = [o for o in d.inner.events.outcomes() if o.get("tool") == "echo"]
    assert calls, "the inner server recorded no call"
    assert all(o["context"]["caller"].startswith("token:") for o in calls), calls


def test_r40_a_client_credentials_token_is_a_caller_named_by_its_client(d: Deployed) -> None:
    client_id, secret = d.auth.register_client(scope=TOOLS)
    token = d.auth.client_credentials_token(client_id, secret, TOOLS, d.resource)
    tag = uuid.uuid4().hex
    reply = raw(d, token, "tools/call", {"name": "echo", "arguments": {"message": tag}})
    assert text_of(reply) == tag, reply.message()
    # Issued for another resource, the same client's token is refused here.
    elsewhere = d.auth.client_credentials_token(client_id, secret, TOOLS, None)
    assert raw(d, elsewhere).status == 401
    mine = d.events("--caller", f"{d.auth.issuer}#{client_id}", "--tool", "echo")
    assert [o["context"]["caller"] for o in mine] == [f"{d.auth.issuer}#{client_id}"], mine


# --- callers never share what they own --------------------------------------------


def call_as(
    d: Deployed,
    token: str,
    tool: str,
    arguments: dict[str, Any],
    *,
    session: str | None = None,
    message: str | None = None,
    rpc_id: Any = 1,
):
    """One stateless `tools/call` with the ids a client chooses: the session
    it declares, its message id and its JSON-RPC id (the call id)."""
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "ids-test", "version": "1"},
    }
    if session is not None:
        meta["io.toolhost/session-id"] = session
    if message is not None:
        meta["io.toolhost/message-id"] = message
    body = {
        "jsonrpc": "2.0",
        "id": rpc_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta},
    }
    return request_as(d, token, body)


def request_as(d: Deployed, token: str, body: dict[str, Any]):
    client = Client(d.server.url, token)
    try:
        headers = {"mcp-protocol-version": MODERN, "mcp-method": body["method"]}
        if body["method"] == "tools/call":
            headers["mcp-name"] = body["params"]["name"]
        return client.post(body, headers)
    finally:
        client.close()


def session_request(d: Deployed, token: str, method: str, params: dict[str, Any], session: str):
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "ids-test", "version": "1"},
        "io.toolhost/session-id": session,
    }
    return request_as(d, token, {"jsonrpc": "2.0", "id": 9, "method": method, "params": {**params, "_meta": meta}})


def test_r40_subjects_sharing_a_prefix_never_replay_plant_or_read_each_others_calls(d: Deployed) -> None:
    """`svc` in session `admin:s1` and `svc:admin` in session `s1` (real
    identity providers, SPIFFE ids and client-credentials subjects hold
    `:`) once shared one store key."""
    scopes = f"{TOOLS} {BULK}"
    svc, admin = d.token("svc", scope=scopes), d.token("svc:admin", scope=scopes)
    tag = uuid.uuid4().hex[:8]
    # (a) A's outcome is never B's replay.
    mine = call_as(d, svc, "echo", {"message": f"A-SECRET-{tag}"}, session="admin:s1", message=f"m1-{tag}", rpc_id=7)
    assert text_of(mine) == f"A-SECRET-{tag}", mine.message()
    theirs = call_as(d, admin, "echo", {"message": f"B-{tag}"}, session="s1", message=f"m1-{tag}", rpc_id=7)
    assert text_of(theirs) == f"B-{tag}", theirs.message()
    # (b) B recording first plants nothing in A's later call.
    planted = call_as(d, admin, "echo", {"message": f"PLANTED-{tag}"}, session="s1", message=f"m2-{tag}", rpc_id=8)
    assert text_of(planted) == f"PLANTED-{tag}"
    own = call_as(d, svc, "echo", {"message": f"own-{tag}"}, session="admin:s1", message=f"m2-{tag}", rpc_id=8)
    assert text_of(own) == f"own-{tag}", own.message()
    # (c) A's retained output is neither listed nor readable by B.
    big = call_as(d, svc, "generate", {"bytes": 200_000}, session="admin:s1", message=f"m3-{tag}", rpc_id=9)
    output_id = re.search(r"toolhost-output:([0-9a-f]{32})", text_of(big)).group(1)
    a_list = session_request(d, svc, "resources/list", {}, "admin:s1").message()["result"]["resources"]
    assert any(output_id in r["uri"] for r in a_list), a_list
    b_list = session_request(d, admin, "resources/list", {}, "s1").message()["result"]["resources"]
    assert not any(output_id in r["uri"] for r in b_list), b_list
    b_read = session_request(d, admin, "resources/read", {"uri": f"toolhost://output/{output_id}"}, "s1").message()
    assert "error" in b_read, b_read
    b_page = call_as(d, admin, "read_output", {"id": output_id}, session="s1", message=f"m4-{tag}", rpc_id=10)
    reply = b_page.message()
    assert "error" in reply or reply["result"]["isError"] is True, reply
    # The store keeps each under its own session key.
    a_events = d.events("--caller", f"{d.auth.issuer}#svc", "--tool", "echo")
    b_events = d.events("--caller", f"{d.auth.issuer}#svc:admin", "--tool", "echo")
    assert {o["context"]["session_id"] for o in a_events}.isdisjoint({o["context"]["session_id"] for o in b_events})


def test_r38_ids_reused_for_another_tool_or_other_arguments_are_refused_not_replayed(d: Deployed) -> None:
    token = d.token("reuser")
    tag = uuid.uuid4().hex[:8]
    ids = {"session": f"s-{tag}", "message": f"m-{tag}", "rpc_id": 11}
    first = call_as(d, token, "echo", {"message": f"first-{tag}"}, **ids)
    assert text_of(first) == f"first-{tag}"
    again = call_as(d, token, "echo", {"message": f"first-{tag}"}, **ids)
    assert text_of(again) == f"first-{tag}", "the same call replays"
    for tool, arguments in (("word_count", {"text": "a b"}), ("echo", {"message": f"other-{tag}"})):
        refused = call_as(d, token, tool, arguments, **ids).message()
        assert refused.get("error", {}).get("code") == -32602, refused
        assert "ids of its own" in refused["error"]["message"], refused


# --- Code Mode under OAuth scopes ---------------------------------------------------


def test_r40_code_mode_declares_and_calls_only_what_the_token_may_call_directly(d: Deployed) -> None:
    without, with_bulk = d.token("coder"), d.token("coder", scope=f"{TOOLS} {BULK}")

    def execute_description(token: str) -> str:
        listed = raw(d, token).message()["result"]["tools"]
        return next(t["description"] for t in listed if t["name"] == "execute")

    assert "generate" not in execute_description(without)
    assert "generate" in execute_description(with_bulk)
    direct = raw(d, without, "tools/call", {"name": "generate", "arguments": {"bytes": 10}})
    assert direct.status == 403, direct
    program = {"code": "return await tools.generate({bytes: 10});"}
    nested = raw(d, without, "tools/call", {"name": "execute", "arguments": program}).message()["result"]
    assert nested["isError"] is True, nested
    assert "Unknown tool: generate" in json.dumps(nested), nested
    allowed = raw(d, with_bulk, "tools/call", {"name": "execute", "arguments": program}).message()["result"]
    assert allowed["isError"] is False, allowed
