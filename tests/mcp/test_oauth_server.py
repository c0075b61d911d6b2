"""The OAuth authorization server of oauth_server.py, tested on its own (no
toolhost): the toolhost OAuth tests trust what it issues, so what it issues
is checked here against the RFCs' rules with an independent verifier (PyJWT)
and with the official `mcp` client's OAuth provider.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import socket
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx2
import jwt
import pytest
from mcp.shared.auth import OAuthMetadata
from oauth_server import CALLBACK, PATIENCE, AuthServer, authorization_server, mcp_oauth

RESOURCE = "http://127.0.0.1:9/mcp"


@pytest.fixture
def auth(tmp_path: Path) -> Iterator[AuthServer]:
    with authorization_server(tmp_path / "oauth") as server:
        yield server


# --- helpers: a client written from the RFCs, over plain HTTP -------------------------


def _get(url: str, **kwargs: Any) -> httpx2.Response:
    return httpx2.get(url, timeout=PATIENCE, follow_redirects=False, **kwargs)


def _post(url: str, **kwargs: Any) -> httpx2.Response:
    return httpx2.post(url, timeout=PATIENCE, follow_redirects=False, **kwargs)


def _pkce() -> tuple[str, str]:
    """(verifier, S256 challenge) per RFC 7636 §4."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def _register_public(auth: AuthServer, scope: str = "tools:read tools:call") -> str:
    response = _post(
        f"{auth.issuer}/register",
        json={
            "redirect_uris": [CALLBACK],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "scope": scope,
            "client_name": "test",
        },
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert "client_secret" not in body, "a public client gets no secret"
    assert body["token_endpoint_auth_method"] == "none"
    return str(body["client_id"])


def _authorize(auth: AuthServer, client_id: str, challenge: str | None, **params: str) -> httpx2.Response:
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": CALLBACK,
        "state": "st-123",
        "scope": "tools:call",
        "resource": RESOURCE,
        **params,
    }
    if challenge is not None:
        query.setdefault("code_challenge", challenge)
        query.setdefault("code_challenge_method", "S256")
    return _get(f"{auth.issuer}/authorize", params=query)


def _redirect_params(response: httpx2.Response) -> dict[str, str]:
    assert response.status_code == 302, response.text
    location = response.headers["location"]
    assert location.startswith(CALLBACK + "?"), location
    return {k: v[0] for k, v in parse_qs(urlparse(location).query).items()}


def _code_for(auth: AuthServer, client_id: str, challenge: str) -> str:
    params = _redirect_params(_authorize(auth, client_id, challenge))
    assert params["state"] == "st-123"
    assert params["iss"] == auth.issuer  # RFC 9207
    return params["code"]


def _exchange(auth: AuthServer, client_id: str, code: str, verifier: str) -> httpx2.Response:
    return _post(
        auth.token_endpoint,
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": CALLBACK,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": RESOURCE,
        },
    )


def _verify(auth: AuthServer, token: str, audience: str) -> dict[str, Any]:
    """Verifies `token` as a resource server would: the key by `kid` from the
    JWKS found through the metadata, RS256 only, iss and aud checked."""
    jwks_uri = _get(f"{auth.issuer}/.well-known/oauth-authorization-server").json()["jwks_uri"]
    keys = jwt.PyJWKSet.from_dict(_get(jwks_uri).json())
    kid = jwt.get_unverified_header(token)["kid"]
    key = next(k for k in keys.keys if k.key_id == kid)
    claims: dict[str, Any] = jwt.decode(
        token,
        key.key,
        algorithms=["RS256"],
        audience=audience,
        issuer=auth.issuer,
        options={"require": ["exp", "iat", "nbf", "iss", "sub", "aud", "jti"]},
    )
    return claims


def _unverified(token: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    header, payload, signature = token.split(".")

    def part(p: str) -> dict[str, Any]:
        decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))
        return decoded

    return part(header), part(payload), signature


# --- metadata -------------------------------------------------------------------------


def test_metadata_is_rfc8414_and_served_at_both_well_known_urls(auth: AuthServer) -> None:
    oauth = _get(f"{auth.issuer}/.well-known/oauth-authorization-server")
    oidc = _get(f"{auth.issuer}/.well-known/openid-configuration")
    assert oauth.status_code == oidc.status_code == 200
    assert oauth.json() == oidc.json()
    metadata = oauth.json()
    assert auth.issuer.startswith("http://127.0.0.1:") and not auth.issuer.endswith("/")
    assert metadata["issuer"] == auth.issuer
    for endpoint, path in [
        ("authorization_endpoint", "/authorize"),
        ("token_endpoint", "/token"),
        ("registration_endpoint", "/register"),
        ("jwks_uri", "/jwks"),
    ]:
        assert metadata[endpoint] == auth.issuer + path
    assert metadata["response_types_supported"] == ["code"]
    assert metadata["grant_types_supported"] == ["authorization_code", "client_credentials", "refresh_token"]
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    auth_methods = set(metadata["token_endpoint_auth_methods_supported"])
    assert {"none", "client_secret_post", "client_secret_basic"} <= auth_methods
    assert metadata["scopes_supported"] == auth.scopes_supported
    # The mcp client's model reads it, and compares its issuer as a plain string.
    assert str(OAuthMetadata.model_validate(metadata).issuer) == auth.issuer
    jwks = _get(metadata["jwks_uri"]).json()
    assert [k["kid"] for k in jwks["keys"]] == [auth.current_kid]
    assert all(k["kty"] == "RSA" and "d" not in k for k in jwks["keys"]), "public keys only"


# --- authorization code with PKCE ----------------------------------------------------


def test_registration_and_authorization_code_with_pkce_issue_a_verifiable_jwt(auth: AuthServer) -> None:
    auth.groups = ["engineers", "oncall"]
    client_id = _register_public(auth)
    verifier, challenge = _pkce()
    response = _exchange(auth, client_id, _code_for(auth, client_id, challenge), verifier)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["token_type"] == "Bearer" and body["scope"] == "tools:call" and body["refresh_token"]

    claims = _verify(auth, body["access_token"], RESOURCE)
    assert claims["sub"] == "alice"
    assert claims["aud"] == [RESOURCE]  # RFC 8707: the resource is the audience
    assert claims["client_id"] == client_id
    assert claims["scope"] == "tools:call"
    assert claims["groups"] == ["engineers", "oncall"]
    assert claims["exp"] - claims["iat"] == body["expires_in"]
    header = jwt.get_unverified_header(body["access_token"])
    assert header["alg"] == "RS256" and header["kid"] == auth.current_kid
    with pytest.raises(jwt.InvalidAudienceError):
        jwt.decode(
            body["access_token"],
            jwt.PyJWKSet.from_dict(auth.jwks()).keys[0].key,
            algorithms=["RS256"],
            audience="http://127.0.0.1:9/other",
        )


def test_a_code_is_used_once_and_the_refresh_token_rotates(auth: AuthServer) -> None:
    client_id = _register_public(auth)
    verifier, challenge = _pkce()
    code = _code_for(auth, client_id, challenge)
    first = _exchange(auth, client_id, code, verifier)
    assert first.status_code == 200, first.text
    again = _exchange(auth, client_id, code, verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"

    auth.groups = ["later"]
    refresh = first.json()["refresh_token"]
    refreshed = _post(
        auth.token_endpoint, data={"grant_type": "refresh_token", "refresh_token": refresh, "client_id": client_id}
    )
    assert refreshed.status_code == 200, refreshed.text
    claims = _verify(auth, refreshed.json()["access_token"], RESOURCE)
    assert claims["aud"] == [RESOURCE], "the refreshed token keeps the grant's resource"
    assert claims["groups"] == ["later"], "groups are read when a token is issued"
    assert refreshed.json()["refresh_token"] != refresh
    reused = _post(
        auth.token_endpoint, data={"grant_type": "refresh_token", "refresh_token": refresh, "client_id": client_id}
    )
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"


def test_registration_without_an_auth_method_is_a_confidential_client(auth: AuthServer) -> None:
    """RFC 7591 §2: the default is client_secret_basic, and the answer says so
    (the mcp client authenticates the way the registration answer names)."""
    registered = _post(f"{auth.issuer}/register", json={"redirect_uris": [CALLBACK]})
    assert registered.status_code == 201, registered.text
    body = registered.json()
    assert body["token_endpoint_auth_method"] == "client_secret_basic" and body["client_secret"]
    assert body["grant_types"] == ["authorization_code"]
    verifier, challenge = _pkce()
    code = _code_for(auth, body["client_id"], challenge)
    exchange = {"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK, "code_verifier": verifier}
    unauthenticated = _post(auth.token_endpoint, data={**exchange, "client_id": body["client_id"]})
    assert unauthenticated.status_code == 401 and unauthenticated.json()["error"] == "invalid_client"
    token = _post(auth.token_endpoint, data=exchange, auth=(body["client_id"], body["client_secret"]))
    assert token.status_code == 200, token.text
    assert "refresh_token" not in token.json(), "not registered for refresh_token"
    assert _verify(auth, token.json()["access_token"], RESOURCE)["sub"] == "alice"


def test_the_wrong_pkce_verifier_is_refused(auth: AuthServer) -> None:
    client_id = _register_public(auth)
    _, challenge = _pkce()
    other_verifier, _ = _pkce()
    response = _exchange(auth, client_id, _code_for(auth, client_id, challenge), other_verifier)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"


def test_pkce_is_required_and_s256_only(auth: AuthServer) -> None:
    client_id = _register_public(auth)
    verifier, challenge = _pkce()
    without = _redirect_params(_authorize(auth, client_id, None))
    assert without["error"] == "invalid_request" and "code" not in without
    plain = _redirect_params(_authorize(auth, client_id, verifier, code_challenge_method="plain"))
    assert plain["error"] == "invalid_request" and "code" not in plain
    missing_verifier = _post(
        auth.token_endpoint,
        data={
            "grant_type": "authorization_code",
            "code": _code_for(auth, client_id, challenge),
            "redirect_uri": CALLBACK,
            "client_id": client_id,
        },
    )
    assert missing_verifier.status_code == 400


def test_the_configured_user_is_approved_and_no_resource_means_the_client_id(auth: AuthServer) -> None:
    auth.user = "bob"
    client_id = _register_public(auth)
    verifier, challenge = _pkce()
    params = _redirect_params(_authorize(auth, client_id, challenge, resource=""))
    token = _post(
        auth.token_endpoint,
        data={
            "grant_type": "authorization_code",
            "code": params["code"],
            "redirect_uri": CALLBACK,
            "client_id": client_id,
            "code_verifier": verifier,
        },
    ).json()["access_token"]
    claims = _verify(auth, token, client_id)
    assert claims["sub"] == "bob" and claims["aud"] == client_id


def test_an_unregistered_redirect_uri_is_not_redirected_to(auth: AuthServer) -> None:
    client_id = _register_public(auth)
    _, challenge = _pkce()
    response = _authorize(auth, client_id, challenge, redirect_uri="http://127.0.0.1/elsewhere")
    assert response.status_code == 400 and "location" not in response.headers


# --- client credentials --------------------------------------------------------------


def test_client_credentials(auth: AuthServer) -> None:
    client_id, secret = auth.register_client("tools:call tools:read")
    assert secret is not None
    claims = _verify(auth, auth.client_credentials_token(client_id, secret, "tools:call", RESOURCE), RESOURCE)
    assert claims["sub"] == client_id and claims["client_id"] == client_id
    assert claims["scope"] == "tools:call" and claims["groups"] == []

    # Without a resource: the default audience, else the client id.
    assert _verify(auth, auth.client_credentials_token(client_id, secret, "tools:read", None), client_id)
    auth.default_audience = "http://127.0.0.1:9"
    assert _verify(auth, auth.client_credentials_token(client_id, secret, "tools:read", None), "http://127.0.0.1:9")

    # client_secret_post works too; a wrong secret, a scope beyond the
    # registration and a public client are refused.
    post = _post(
        auth.token_endpoint,
        data={
            "grant_type": "client_credentials",
            "client_id": client_id,
            "client_secret": secret,
            "scope": "tools:read",
        },
    )
    assert post.status_code == 200, post.text
    with pytest.raises(RuntimeError, match="invalid_client"):
        auth.client_credentials_token(client_id, "wrong", "tools:call", RESOURCE)
    with pytest.raises(RuntimeError, match="invalid_scope"):
        auth.client_credentials_token(client_id, secret, "admin", RESOURCE)
    public_id, no_secret = auth.register_client("tools:call", secret=False)
    assert no_secret is None
    with pytest.raises(RuntimeError, match="invalid_client"):
        auth.client_credentials_token(public_id, None, "tools:call", RESOURCE)


# --- keys ------------------------------------------------------------------------------


def test_rotation_keeps_the_previous_key_and_serves_the_new_one(auth: AuthServer) -> None:
    client_id, secret = auth.register_client("tools:call")
    old_kid = auth.current_kid
    before = auth.client_credentials_token(client_id, secret, "tools:call", RESOURCE)
    fetches = auth.jwks_fetches

    new_kid = auth.rotate()
    assert new_kid != old_kid and auth.current_kid == new_kid
    assert [k["kid"] for k in _get(auth.jwks_uri).json()["keys"]] == [new_kid, old_kid]
    assert auth.jwks_fetches == fetches + 1
    assert jwt.get_unverified_header(before)["kid"] == old_kid
    assert _verify(auth, before, RESOURCE)["client_id"] == client_id
    after = auth.client_credentials_token(client_id, secret, "tools:call", RESOURCE)
    assert jwt.get_unverified_header(after)["kid"] == new_kid
    assert _verify(auth, after, RESOURCE)
    assert jwt.get_unverified_header(auth.mint(aud=RESOURCE, key="previous"))["kid"] == old_kid

    newest = auth.rotate(keep_previous=False)
    assert [k["kid"] for k in auth.jwks()["keys"]] == [newest]
    with pytest.raises(StopIteration):
        _verify(auth, before, RESOURCE)
    assert ("GET", "/jwks") in auth.requests


# --- minted tokens --------------------------------------------------------------------


def test_mint_signs_a_good_token_by_default(auth: AuthServer) -> None:
    auth.groups = ["g1"]
    claims = _verify(auth, auth.mint(sub="carol", scope="tools:call", aud=RESOURCE), RESOURCE)
    assert claims["sub"] == "carol" and claims["scope"] == "tools:call" and claims["groups"] == ["g1"]
    with pytest.raises(ValueError, match="aud"):
        auth.mint()
    auth.default_audience = RESOURCE
    assert _verify(auth, auth.mint(), RESOURCE)["aud"] == RESOURCE


def test_mint_alg_none_has_no_signature(auth: AuthServer) -> None:
    token = auth.mint(aud=RESOURCE, alg="none")
    header, claims, signature = _unverified(token)
    assert token.endswith(".") and signature == ""
    assert header["alg"] == "none" and header["kid"] == auth.current_kid
    assert claims["aud"] == RESOURCE
    with pytest.raises(jwt.InvalidTokenError):
        _verify(auth, token, RESOURCE)


def test_mint_hs256_is_keyed_with_the_public_pem(auth: AuthServer) -> None:
    token = auth.mint(aud=RESOURCE, alg="HS256", key="public-pem")
    header, _, signature = _unverified(token)
    assert header["alg"] == "HS256" and header["kid"] == auth.current_kid
    signing_input = token.rsplit(".", 1)[0].encode()
    pem = auth._keys[0].public_pem()
    assert pem.startswith(b"-----BEGIN PUBLIC KEY-----")
    expected = base64.urlsafe_b64encode(hmac.new(pem, signing_input, hashlib.sha256).digest()).rstrip(b"=")
    assert signature == expected.decode()
    with pytest.raises(jwt.InvalidTokenError):
        _verify(auth, token, RESOURCE)


def test_mint_with_a_stranger_key_or_an_unknown_kid(auth: AuthServer) -> None:
    jwks_kids = {k["kid"] for k in auth.jwks()["keys"]}
    stranger = auth.mint(aud=RESOURCE, key="stranger")
    assert jwt.get_unverified_header(stranger)["kid"] not in jwks_kids
    assert auth.mint(aud=RESOURCE, key="stranger").split(".")[0] == stranger.split(".")[0], "one stranger key"
    current = jwt.PyJWKSet.from_dict(auth.jwks()).keys[0].key
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(stranger, current, algorithms=["RS256"], audience=RESOURCE)
    unknown = auth.mint(aud=RESOURCE, kid="unknown-kid")
    assert jwt.get_unverified_header(unknown)["kid"] == "unknown-kid"
    # Signed with the current key all the same: only the kid is wrong.
    assert jwt.decode(unknown, current, algorithms=["RS256"], audience=RESOURCE)["iss"] == auth.issuer


def test_mint_times_issuer_and_overrides(auth: AuthServer) -> None:
    with pytest.raises(jwt.ExpiredSignatureError):
        _verify(auth, auth.mint(aud=RESOURCE, exp_in=-60), RESOURCE)
    with pytest.raises(jwt.ImmatureSignatureError):
        _verify(auth, auth.mint(aud=RESOURCE, nbf_in=3600), RESOURCE)
    with pytest.raises(jwt.InvalidIssuerError):
        _verify(auth, auth.mint(aud=RESOURCE, iss="http://127.0.0.1:1"), RESOURCE)
    with pytest.raises(jwt.MissingRequiredClaimError):
        _verify(auth, auth.mint(aud=RESOURCE, extra_claims={"exp": None}), RESOURCE)
    with pytest.raises(jwt.MissingRequiredClaimError):
        _verify(auth, auth.mint(aud=None), RESOURCE)
    header, claims, _ = _unverified(
        auth.mint(aud=[RESOURCE, "x"], extra_claims={"groups": ["admins"]}, header_overrides={"typ": "JWT"})
    )
    assert header["typ"] == "JWT" and claims["groups"] == ["admins"] and claims["aud"] == [RESOURCE, "x"]
    assert "kid" not in _unverified(auth.mint(aud=RESOURCE, header_overrides={"kid": None}))[0]


# --- the server itself -------------------------------------------------------------


def _status_line(connection: socket.socket) -> bytes:
    """The first line of what the server answers on `connection`; b"" when
    it closed (or reset) the connection instead."""
    received = b""
    try:
        while b"\r\n" not in received:
            chunk = connection.recv(65536)
            if not chunk:
                return b""
            received += chunk
    except ConnectionResetError:
        return b""
    return received.split(b"\r\n")[0]


def test_requests_are_recorded_bounded_and_stop_really_stops(tmp_path: Path) -> None:
    with authorization_server(tmp_path) as auth:
        for _ in range(3):
            _get(auth.jwks_uri)
        _get(f"{auth.issuer}/.well-known/oauth-authorization-server?x=1")
        assert auth.requests[-4:] == [("GET", "/jwks")] * 3 + [("GET", "/.well-known/oauth-authorization-server")]
        assert auth.jwks_fetches == 3
        assert auth._requests.maxlen is not None
        issuer = auth.issuer
        # A request under way when the server stops: its connection is
        # ended, not answered after the stop by the handler thread reading it.
        under_way = socket.create_connection(("127.0.0.1", urlparse(issuer).port or 0), timeout=PATIENCE)
        under_way.sendall(b"GET /jwks HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    with under_way:
        with suppress(OSError):
            under_way.sendall(b"\r\n")
        assert _status_line(under_way) == b""
    with pytest.raises(httpx2.ConnectError):
        httpx2.get(issuer + "/jwks", timeout=5)
    assert "GET /jwks" in (tmp_path / "oauth-server.log").read_text()


# --- the mcp client's own OAuth flow, through mcp_oauth -------------------------------


class _Resource(httpx2.AsyncBaseTransport):
    """A stand-in MCP resource server at http://resource.test (RFC 9728
    metadata, a 401 challenge, a JWT check); every other host is real HTTP."""

    url = "http://resource.test/mcp"

    def __init__(self, auth: AuthServer) -> None:
        self.auth = auth
        self.real = httpx2.AsyncHTTPTransport()
        self.accepted: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.host != "resource.test":
            return await self.real.handle_async_request(request)
        if request.url.path == "/.well-known/oauth-protected-resource/mcp":
            prm = {"resource": self.url, "authorization_servers": [self.auth.issuer]}
            return httpx2.Response(200, json={**prm, "scopes_supported": ["tools:read"]})
        bearer = request.headers.get("authorization", "")
        if bearer.startswith("Bearer "):
            self.accepted.append(_verify(self.auth, bearer.removeprefix("Bearer "), self.url))
            return httpx2.Response(200, json={"ok": True})
        challenge = 'Bearer resource_metadata="http://resource.test/.well-known/oauth-protected-resource/mcp"'
        return httpx2.Response(401, headers={"WWW-Authenticate": challenge})

    async def aclose(self) -> None:
        await self.real.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("scope", [None, "tools:call"])
async def test_mcp_oauth_runs_the_mcp_clients_flow(auth: AuthServer, scope: str | None) -> None:
    resource = _Resource(auth)
    provider = mcp_oauth(resource.url, auth, scope)
    async with httpx2.AsyncClient(auth=provider, transport=resource, timeout=PATIENCE) as http:
        response = await http.post(resource.url, json={})
        assert response.status_code == 200, response.text
        again = await http.post(resource.url, json={})
        assert again.status_code == 200
    first, second = resource.accepted
    assert first["jti"] == second["jti"], "the stored token is reused"
    assert first["sub"] == "alice" and first["aud"] == [resource.url]
    assert first["scope"] == (scope or "tools:read")
    visited = provider.browser.visited  # type: ignore[attr-defined]
    assert len(visited) == 1 and httpx2.URL(visited[0]).params["scope"] == (scope or "tools:read")
    paths = [p for _, p in auth.requests]
    assert paths[:4] == ["/.well-known/oauth-authorization-server", "/register", "/authorize", "/token"]
