"""A real OAuth 2.1 authorization server for the tests, built on authlib's
grants and served by Flask on a loopback port in a background thread.

`toolhost serve --http` as an OAuth resource server is tested against it: the
server discovers this issuer through RFC 8414 metadata, fetches /jwks and
checks the JWT access tokens issued here (RFC 9068 style, RS256, `kid` in the
header, RFC 8707 `resource` as `aud`). The Python `mcp` client's
OAuthClientProvider runs its whole flow against it: dynamic client
registration (RFC 7591), authorization code with PKCE (S256 only), refresh.

The authorization endpoint approves at once as `AuthServer.user` (no login
page, no consent page): a test plays the browser with one GET and reads the
code off the redirect. `AuthServer.mint` signs tokens directly, including the
broken ones a resource server must refuse (alg none, HS256 keyed with the
public key's PEM, unknown kid, a stranger's key, expired, not yet valid,
another issuer).

    with authorization_server(workdir) as auth:
        client_id, secret = auth.register_client("tools:call")
        token = auth.client_credentials_token(client_id, secret, "tools:call", resource)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import httpx2
from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import ClientMixin, InvalidRequestError, InvalidScopeError, grants
from authlib.oauth2.rfc7591 import ClientRegistrationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from flask import Flask, Response, g, jsonify, request
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler

#: How long any one wait of the harness lasts: a request to the server, its
#: start, its stop. Far beyond what a loopback request takes.
PATIENCE = 30.0

#: The access tokens' lifetime in seconds (`expires_in`), unless a test sets
#: `AuthServer.token_lifetime`.
TOKEN_LIFETIME = 300

#: How many (method, path) pairs `AuthServer.requests` keeps: the newest.
MAX_RECORDED_REQUESTS = 1000

#: The redirect URI of clients registered by `register_client` and by
#: `mcp_oauth`. Nothing listens there: the redirect is read, never followed.
CALLBACK = "http://127.0.0.1/oauth/callback"

#: Authorization codes live this long (RFC 6749 recommends at most 10 minutes).
CODE_LIFETIME = 120

_DEFAULT: Any = object()


# --- JOSE, by hand: every byte of a token under the test's control -----------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_uint(n: int) -> str:
    return _b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))


def _encode_jwt(header: dict[str, Any], claims: dict[str, Any], sign: Callable[[bytes], bytes]) -> str:
    """A compact JWS. Hand-made rather than PyJWT's, because PyJWT refuses to
    produce the broken tokens a resource server must be shown (an HMAC keyed
    with a PEM public key, for one)."""
    signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
    return f"{signing_input}.{_b64url(sign(signing_input.encode('ascii')))}"


@dataclass(frozen=True)
class SigningKey:
    """An RSA key and its `kid`."""

    kid: str
    private_key: rsa.RSAPrivateKey

    @classmethod
    def generate(cls, prefix: str = "key") -> SigningKey:
        return cls(f"{prefix}-{uuid.uuid4().hex[:12]}", rsa.generate_private_key(public_exponent=65537, key_size=2048))

    def sign_rs256(self, data: bytes) -> bytes:
        return self.private_key.sign(data, padding.PKCS1v15(), hashes.SHA256())

    def public_pem(self) -> bytes:
        """The public key as PEM (SubjectPublicKeyInfo): the HMAC secret of the
        key-confusion attack."""
        return self.private_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def jwk(self) -> dict[str, str]:
        numbers = self.private_key.public_key().public_numbers()
        return {
            "kty": "RSA",
            "use": "sig",
            "alg": "RS256",
            "kid": self.kid,
            "n": _b64url_uint(numbers.n),
            "e": _b64url_uint(numbers.e),
        }


# --- the authorization server's records ------------------------------------------


def _scopes(scope: str | None) -> list[str]:
    return scope.split() if scope else []


@dataclass
class Client(ClientMixin):
    """A registered client (authlib's ClientMixin over a plain record).
    `scope` None: any requested scope is allowed. Dynamically registered
    clients get None whatever scope they registered with: the mcp client
    registers with the scope the resource server challenged for, and the
    consent (mcp_oauth's `scope`) decides what it gets. `register_client`'s
    clients are held to their scope."""

    client_id: str
    client_secret: str | None
    scope: str | None
    redirect_uris: list[str]
    grant_types: list[str]
    response_types: list[str]
    auth_methods: frozenset[str]

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        return self.redirect_uris[0] if self.redirect_uris else None

    def get_allowed_scope(self, scope: str | None) -> str | None:
        """The requested scope, or None (invalid_scope) when it asks beyond
        the registration; without a request, the registered scope."""
        if self.scope is None:
            return scope or ""
        if not scope:
            return self.scope
        return scope if set(_scopes(scope)) <= set(_scopes(self.scope)) else None

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return self.client_secret is not None and secrets.compare_digest(self.client_secret, client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in self.auth_methods

    def check_response_type(self, response_type: str) -> bool:
        return response_type in self.response_types

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.grant_types


@dataclass
class AuthorizationCode:
    """An issued code, bound to its client, redirect URI, PKCE challenge and
    the RFC 8707 resources of the authorization request."""

    code: str
    client_id: str
    redirect_uri: str | None
    scope: str
    user: str
    resource: list[str]
    code_challenge: str | None
    code_challenge_method: str | None
    expires_at: float

    def get_redirect_uri(self) -> str | None:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


@dataclass
class RefreshToken:
    """An opaque refresh token; used once (each refresh issues a new one)."""

    token: str
    client_id: str
    user: str
    scope: str
    resource: list[str]
    revoked: bool = False

    def check_client(self, client: Client) -> bool:
        return client.client_id == self.client_id

    def get_scope(self) -> str:
        return self.scope


class InvalidTargetError(OAuth2Error):
    """RFC 8707 §2: a `resource` the grant does not cover."""

    error = "invalid_target"


# --- authlib grants, bound to one AuthServer ----------------------------------


class S256Only(CodeChallenge):
    """PKCE is required on every authorization request, S256 only (OAuth 2.1);
    authlib's own CodeChallenge lets a request without a challenge through."""

    SUPPORTED_CODE_CHALLENGE_METHOD: ClassVar[list[str]] = ["S256"]
    DEFAULT_CODE_CHALLENGE_METHOD = "S256"

    def validate_code_challenge(self, grant: Any, redirect_uri: str) -> None:
        payload = grant.request.payload.data
        if not payload.get("code_challenge"):
            raise InvalidRequestError("PKCE is required: missing 'code_challenge'")
        if payload.get("code_challenge_method") != "S256":
            raise InvalidRequestError("PKCE with code_challenge_method=S256 is required")
        super().validate_code_challenge(grant, redirect_uri)


def _grant_classes(owner: AuthServer) -> list[tuple[type, list[Any] | None]]:
    """authlib's grants with their storage hooks on `owner`'s records."""

    class CodeGrant(grants.AuthorizationCodeGrant):
        TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = ["client_secret_basic", "client_secret_post", "none"]

        def save_authorization_code(self, code: str, req: Any) -> None:
            owner._save_code(
                AuthorizationCode(
                    code=code,
                    client_id=req.client.client_id,
                    redirect_uri=req.payload.redirect_uri,
                    scope=req.scope or "",
                    user=req.user,
                    resource=[r for r in request.args.getlist("resource") if r],
                    code_challenge=req.payload.data.get("code_challenge"),
                    code_challenge_method=req.payload.data.get("code_challenge_method"),
                    expires_at=time.time() + CODE_LIFETIME,
                )
            )

        def query_authorization_code(self, code: str, client: Client) -> AuthorizationCode | None:
            return owner._find_code(code, client.client_id)

        def delete_authorization_code(self, authorization_code: AuthorizationCode) -> None:
            owner._delete_code(authorization_code.code)

        def authenticate_user(self, authorization_code: AuthorizationCode) -> str:
            g.granted_resource = authorization_code.resource
            return authorization_code.user

    class ClientCredentialsGrant(grants.ClientCredentialsGrant):
        TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = ["client_secret_basic", "client_secret_post"]

        def validate_token_request(self) -> None:
            super().validate_token_request()
            client: Client = self.request.client
            asked = _scopes(self.request.payload.scope)
            if client.scope is not None and not set(asked) <= set(_scopes(client.scope)):
                raise InvalidScopeError()

        def create_token_response(self) -> tuple[int, dict[str, Any], list[tuple[str, str]]]:
            client: Client = self.request.client
            scope = self.request.payload.scope or client.scope or ""
            token = self.generate_token(scope=scope, include_refresh_token=False)
            return 200, token, self.TOKEN_RESPONSE_HEADER

    class RefreshGrant(grants.RefreshTokenGrant):
        TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = ["client_secret_basic", "client_secret_post", "none"]
        INCLUDE_NEW_REFRESH_TOKEN = True

        def authenticate_refresh_token(self, refresh_token: str) -> RefreshToken | None:
            return owner._find_refresh(refresh_token)

        def authenticate_user(self, refresh_token: RefreshToken) -> str:
            g.granted_resource = refresh_token.resource
            return refresh_token.user

        def revoke_old_credential(self, refresh_token: RefreshToken) -> None:
            refresh_token.revoked = True

    return [(CodeGrant, [S256Only(required=True)]), (ClientCredentialsGrant, None), (RefreshGrant, None)]


def _registration_endpoint(owner: AuthServer) -> type[ClientRegistrationEndpoint]:
    class OpenRegistration(ClientRegistrationEndpoint):
        """RFC 7591 registration open to anyone, as MCP clients expect."""

        def authenticate_token(self, req: Any) -> bool:
            return True

        def get_server_metadata(self) -> dict[str, Any]:
            # Without scopes_supported: a client may register any scope.
            return {k: v for k, v in owner.metadata().items() if k != "scopes_supported"}

        def resolve_public_key(self, req: Any) -> None:
            return None

        def extract_client_metadata(self, req: Any) -> dict[str, Any]:
            # RFC 7591 §2's defaults, echoed so the client knows how to authenticate.
            metadata = dict(super().extract_client_metadata(req))
            metadata.setdefault("token_endpoint_auth_method", "client_secret_basic")
            metadata.setdefault("grant_types", ["authorization_code"])
            metadata.setdefault("response_types", ["code"])
            return metadata

        def generate_client_info(self, req: Any) -> dict[str, Any]:
            info = dict(super().generate_client_info(req))
            if req.payload.data.get("token_endpoint_auth_method") == "none":
                del info["client_secret"]  # a public client gets no secret
            return info

        def save_client(self, client_info: dict[str, Any], client_metadata: dict[str, Any], req: Any) -> Client:
            client = Client(
                client_id=client_info["client_id"],
                client_secret=client_info.get("client_secret"),
                scope=None,
                redirect_uris=list(client_metadata.get("redirect_uris", [])),
                grant_types=list(client_metadata["grant_types"]),
                response_types=list(client_metadata["response_types"]),
                auth_methods=frozenset([client_metadata["token_endpoint_auth_method"]]),
            )
            owner._save_client(client)
            return client

    return OpenRegistration


# --- the server ---------------------------------------------------------------------


@dataclass
class AuthServer:
    """One running authorization server. Tests read and set its public
    attributes; the request threads read them at the time of each request."""

    issuer: str
    workdir: Path
    #: The subject the authorization endpoint approves as.
    user: str = "alice"
    #: The user's groups, as the tokens' `groups` claim (read at each issue).
    groups: list[str] = field(default_factory=list)
    #: `aud` of a token whose request named no `resource`; None: the client id.
    default_audience: str | None = None
    #: Advertised in the metadata (the `mcp` client's last-resort scope choice); not enforced.
    scopes_supported: list[str] = field(default_factory=lambda: ["tools:read", "tools:call"])
    #: `expires_in` and `exp - iat` of the access tokens issued from now on.
    token_lifetime: int = TOKEN_LIFETIME

    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _keys: list[SigningKey] = field(default_factory=lambda: [SigningKey.generate()], repr=False)
    _stranger: SigningKey | None = field(default=None, repr=False)
    _clients: dict[str, Client] = field(default_factory=dict, repr=False)
    _codes: dict[str, AuthorizationCode] = field(default_factory=dict, repr=False)
    _refresh: dict[str, RefreshToken] = field(default_factory=dict, repr=False)
    _requests: deque[tuple[str, str]] = field(default_factory=lambda: deque(maxlen=MAX_RECORDED_REQUESTS), repr=False)
    _jwks_fetches: int = field(default=0, repr=False)

    # --- what tests read ---

    @property
    def jwks_uri(self) -> str:
        return f"{self.issuer}/jwks"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"

    @property
    def jwks_fetches(self) -> int:
        """How many times /jwks was served: a resource server's key-cache
        refreshes (and their rate limit) show here."""
        with self._lock:
            return self._jwks_fetches

    @property
    def requests(self) -> list[tuple[str, str]]:
        """(method, path) of the requests served, oldest first; the newest
        MAX_RECORDED_REQUESTS only."""
        with self._lock:
            return list(self._requests)

    @property
    def current_kid(self) -> str:
        with self._lock:
            return self._keys[0].kid

    def metadata(self) -> dict[str, Any]:
        """RFC 8414 authorization server metadata."""
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": self.token_endpoint,
            "registration_endpoint": f"{self.issuer}/register",
            "jwks_uri": self.jwks_uri,
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "client_credentials", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
            "scopes_supported": list(self.scopes_supported),
            "authorization_response_iss_parameter_supported": True,
        }

    def jwks(self) -> dict[str, Any]:
        with self._lock:
            return {"keys": [k.jwk() for k in self._keys]}

    # --- what tests do ---

    def rotate(self, keep_previous: bool = True) -> str:
        """A new current signing key with a new kid; the one it replaces stays
        in the JWKS (tokens it signed still verify) unless keep_previous is
        False. Returns the new kid."""
        new = SigningKey.generate()
        with self._lock:
            self._keys = [new, self._keys[0]] if keep_previous else [new]
        return new.kid

    def register_client(self, scope: str, secret: bool = True) -> tuple[str, str | None]:
        """Registers a client directly (no HTTP). With a secret: a
        confidential client for client_credentials (client_secret_basic or
        _post). Without: a public client for the authorization code flow at
        CALLBACK, with no client_credentials grant."""
        client_id = f"client-{uuid.uuid4().hex[:12]}"
        client_secret = secrets.token_urlsafe(24) if secret else None
        client = Client(
            client_id=client_id,
            client_secret=client_secret,
            scope=scope,
            redirect_uris=[CALLBACK],
            grant_types=(
                ["client_credentials", "authorization_code", "refresh_token"]
                if secret
                else ["authorization_code", "refresh_token"]
            ),
            response_types=["code"],
            auth_methods=frozenset(["client_secret_basic", "client_secret_post"] if secret else ["none"]),
        )
        self._save_client(client)
        return client_id, client_secret

    def client_credentials_token(
        self, client_id: str, client_secret: str | None, scope: str, resource: str | None
    ) -> str:
        """The access token of a real client_credentials request to /token
        (client_secret_basic); raises with the server's answer when refused."""
        data = {"grant_type": "client_credentials", "scope": scope}
        if resource is not None:
            data["resource"] = resource
        auth = (client_id, client_secret) if client_secret is not None else None
        if auth is None:
            data["client_id"] = client_id
        response = httpx2.post(self.token_endpoint, data=data, auth=auth, timeout=PATIENCE)
        if response.status_code != 200:
            raise RuntimeError(f"token request refused ({response.status_code}): {response.text}")
        return str(response.json()["access_token"])

    def mint(
        self,
        sub: str = "alice",
        scope: str = "",
        aud: str | list[str] | None = _DEFAULT,
        iss: str | None = None,
        exp_in: int = 300,
        nbf_in: int = 0,
        kid: str | None = None,
        alg: str = "RS256",
        key: str = "current",
        extra_claims: dict[str, Any] | None = None,
        header_overrides: dict[str, Any] | None = None,
    ) -> str:
        """A token signed directly, for the tokens a resource server must
        refuse (and the odd one it must accept).

        aud: default `default_audience` (required then); None leaves `aud` out.
        iss: default `issuer`. exp_in / nbf_in: seconds from now (negative:
        the past). kid: default the signing key's kid (for alg none and
        HS256, the current key's, as an attacker would send).
        alg: "RS256" (with key "current", "previous" or "stranger" — a key not
        in the JWKS, under a kid not in it), "HS256" (key "public-pem": the
        HMAC secret is the current public key's PEM, the key-confusion attack)
        or "none" (no signature: the token ends in ".").
        extra_claims / header_overrides: merged last; a None value removes the
        claim or header (e.g. {"exp": None}, {"kid": None}).
        """
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer if iss is None else iss,
            "sub": sub,
            "exp": now + exp_in,
            "iat": now,
            "nbf": now + nbf_in,
            "jti": uuid.uuid4().hex,
            "client_id": "minted",
            "scope": scope,
            "groups": list(self.groups),
        }
        audience = self.default_audience if aud is _DEFAULT else aud
        if aud is _DEFAULT and audience is None:
            raise ValueError("mint: pass aud (or set default_audience); aud=None leaves it out")
        if audience is not None:
            claims["aud"] = audience
        signer, signer_kid = self._signer(alg, key)
        header: dict[str, Any] = {"alg": alg, "typ": "at+jwt", "kid": kid if kid is not None else signer_kid}
        _merge(claims, extra_claims)
        _merge(header, header_overrides)
        return _encode_jwt(header, claims, signer)

    # --- internals: signing ---

    def _signer(self, alg: str, key: str) -> tuple[Callable[[bytes], bytes], str]:
        """The signing function for `alg` with `key`, and the kid it implies."""
        with self._lock:
            keys = list(self._keys)
            if key == "stranger" and self._stranger is None:
                self._stranger = SigningKey.generate("stranger")
            stranger = self._stranger
        if alg == "none":
            return (lambda _data: b""), keys[0].kid
        if alg == "HS256":
            if key != "public-pem":
                raise ValueError("mint: HS256 is for key='public-pem' (the key-confusion attack)")
            pem = keys[0].public_pem()
            return (lambda data: hmac.new(pem, data, hashlib.sha256).digest()), keys[0].kid
        if alg != "RS256":
            raise ValueError(f"mint: alg {alg!r}: RS256, HS256 or none (set another 'alg' with header_overrides)")
        chosen = {"current": keys[0], "previous": keys[1] if len(keys) > 1 else None, "stranger": stranger}
        if key not in chosen:
            raise ValueError(f"mint: key {key!r}: current, previous or stranger")
        signing_key = chosen[key]
        if signing_key is None:
            raise ValueError("mint: no previous key (rotate first)")
        return signing_key.sign_rs256, signing_key.kid

    def _access_token(self, client: Client, user: str | None, scope: str, audience: str | list[str]) -> str:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            # RFC 9068 §2.2: without a resource owner the subject is the client.
            "sub": user if user is not None else client.client_id,
            "aud": audience,
            "exp": now + self.token_lifetime,
            "iat": now,
            "nbf": now,
            "jti": uuid.uuid4().hex,
            "client_id": client.client_id,
            "scope": scope,
            "groups": list(self.groups) if user is not None else [],
        }
        with self._lock:
            signing_key = self._keys[0]
        header = {"alg": "RS256", "typ": "at+jwt", "kid": signing_key.kid}
        return _encode_jwt(header, claims, signing_key.sign_rs256)

    def _generate_token(
        self,
        grant_type: str,
        client: Client,
        user: str | None = None,
        scope: str | None = None,
        expires_in: int | None = None,
        include_refresh_token: bool = True,
    ) -> dict[str, Any]:
        """authlib's token generator hook: a JWT access token whose `aud` is
        the request's RFC 8707 resources (or the grant's), and an opaque
        refresh token remembered with the same grant."""
        resource = _token_resources()
        audience: str | list[str] = resource or self.default_audience or client.client_id
        token: dict[str, Any] = {
            "token_type": "Bearer",
            "access_token": self._access_token(client, user, scope or "", audience),
            "expires_in": self.token_lifetime,
            "scope": scope or "",
        }
        if include_refresh_token and user is not None:
            refresh = RefreshToken(secrets.token_urlsafe(32), client.client_id, user, scope or "", resource)
            with self._lock:
                self._refresh[refresh.token] = refresh
            token["refresh_token"] = refresh.token
        return token

    # --- internals: records ---

    def _save_client(self, client: Client) -> None:
        with self._lock:
            self._clients[client.client_id] = client

    def _query_client(self, client_id: str) -> Client | None:
        with self._lock:
            return self._clients.get(client_id)

    def _save_code(self, code: AuthorizationCode) -> None:
        with self._lock:
            self._codes[code.code] = code

    def _find_code(self, code: str, client_id: str) -> AuthorizationCode | None:
        with self._lock:
            found = self._codes.get(code)
        if found is None or found.client_id != client_id or found.expires_at < time.time():
            return None
        return found

    def _delete_code(self, code: str) -> None:
        with self._lock:
            self._codes.pop(code, None)

    def _find_refresh(self, token: str) -> RefreshToken | None:
        with self._lock:
            found = self._refresh.get(token)
        return None if found is None or found.revoked else found

    def _record(self, method: str, path: str) -> None:
        with self._lock:
            self._requests.append((method, path))
            if path == "/jwks":
                self._jwks_fetches += 1


def _merge(target: dict[str, Any], overrides: dict[str, Any] | None) -> None:
    for name, value in (overrides or {}).items():
        if value is None:
            target.pop(name, None)
        else:
            target[name] = value


def _token_resources() -> list[str]:
    """The token request's `resource`s; without any, the ones its grant was
    authorized for. One the grant does not cover is refused (RFC 8707 §2.2)."""
    asked = [r for r in request.form.getlist("resource") if r]
    granted: list[str] = g.get("granted_resource") or []
    if asked and granted and not set(asked) <= set(granted):
        raise InvalidTargetError(description=f"resource {asked} was not authorized (only {granted})")
    return asked or granted


def _app(owner: AuthServer) -> Flask:
    """The Flask app: authlib's endpoints plus metadata and JWKS."""
    app = Flask(f"oauth-server-{uuid.uuid4().hex[:6]}")
    server = AuthorizationServer(app, query_client=owner._query_client, save_token=lambda token, req: None)
    server.register_token_generator("default", owner._generate_token)
    for grant, extensions in _grant_classes(owner):
        server.register_grant(grant, extensions)
    server.register_endpoint(_registration_endpoint(owner))

    @app.before_request
    def record() -> None:
        owner._record(request.method, request.path)

    @app.get("/.well-known/oauth-authorization-server")
    @app.get("/.well-known/openid-configuration")
    def metadata() -> Response:
        return jsonify(owner.metadata())

    @app.get("/jwks")
    def jwks() -> Response:
        return jsonify(owner.jwks())

    @app.post("/register")
    def register() -> Any:
        return server.create_endpoint_response("client_registration")

    @app.get("/authorize")
    def authorize() -> Any:
        # Approves at once as the configured user: no login, no consent page.
        user = owner.user
        try:
            grant = server.get_consent_grant(end_user=user)
        except OAuth2Error as error:
            return server.handle_error_response(None, error)
        response = server.create_authorization_response(grant_user=user, grant=grant)
        location = response.headers.get("Location")
        if response.status_code == 302 and location and "code=" in location:
            # RFC 9207: the authorization response names its issuer.
            response.headers["Location"] = str(httpx2.URL(location).copy_add_param("iss", owner.issuer))
        return response

    @app.post("/token")
    def token() -> Any:
        return server.create_token_response()

    return app


class _QuietHandler(WSGIRequestHandler):
    """Werkzeug's request log goes to the server's log file, not stderr."""

    log_path: Path

    def log(self, type: str, message: str, *args: Any) -> None:
        with self.log_path.open("a", encoding="utf-8") as log:
            log.write(f"{type}: {message % args}\n")


def _handler_for(log_path: Path) -> type[WSGIRequestHandler]:
    return type("Handler", (_QuietHandler,), {"log_path": log_path})


class _Server(ThreadedWSGIServer):
    """Werkzeug's threaded server, remembering its open connections: HTTP/1.1
    keeps them alive in handler threads of their own, which would go on
    answering after the serving loop stopped."""

    def __init__(self, app: Flask, handler: type[WSGIRequestHandler]) -> None:
        super().__init__("127.0.0.1", 0, app, handler=handler)
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Ends every open connection: its handler thread reads EOF and exits."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


def _stop(server: _Server, thread: threading.Thread) -> None:
    """Stops the serving loop and waits for it, within PATIENCE (shutdown()
    itself waits unbounded, so it runs on a thread of its own), then ends the
    kept-alive connections: after this, nothing answers on the port."""
    stopper = threading.Thread(target=server.shutdown, name="oauth-server-stop", daemon=True)
    stopper.start()
    stopper.join(PATIENCE)
    thread.join(PATIENCE)
    server.server_close()
    server.close_connections()
    if thread.is_alive() or stopper.is_alive():
        raise RuntimeError(f"the OAuth server did not stop within {PATIENCE}s")


@contextmanager
def authorization_server(workdir: Path) -> Iterator[AuthServer]:
    """An authorization server on 127.0.0.1 at a free port, serving in a
    background thread until the block ends; its log is
    workdir/oauth-server.log."""
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "oauth-server.log"
    owner = AuthServer(issuer="", workdir=workdir)
    server = _Server(_app(owner), _handler_for(log_path))
    owner.issuer = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="oauth-server")
    thread.daemon = True
    thread.start()
    try:
        yield owner
    finally:
        _stop(server, thread)


# --- the mcp client's OAuth, with the browser played by one GET --------------------


class MemoryTokenStorage:
    """The mcp client's TokenStorage, in memory: one client's registration
    and tokens for the life of one provider."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class _Browser:
    """Plays the user's browser for OAuthClientProvider: GETs the authorize
    URL, expects the authorization server's redirect to CALLBACK and hands
    its code, state and iss to the callback handler."""

    def __init__(self, auth: AuthServer, scope: str | None) -> None:
        self.auth = auth
        self.scope = scope
        self.result: AuthorizationCodeResult | None = None
        self.visited: list[str] = []

    async def redirect_handler(self, authorization_url: str) -> None:
        url = httpx2.URL(authorization_url)
        if self.scope is not None:
            # The user consents to `scope`: mcp 2.3.0 replaces the client's own
            # scope with the one the resource server challenges for.
            url = url.copy_set_param("scope", self.scope)
        self.visited.append(str(url))
        async with httpx2.AsyncClient(timeout=PATIENCE, follow_redirects=False) as http:
            response = await http.get(url)
        location = response.headers.get("location")
        if response.status_code != 302 or not location or not location.startswith(CALLBACK):
            raise RuntimeError(f"authorize did not redirect to the callback ({response.status_code}): {response.text}")
        query = parse_qs(urlparse(location).query)
        if "error" in query:
            raise RuntimeError(f"authorize refused: {query}")
        self.result = AuthorizationCodeResult(
            code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
        )

    async def callback_handler(self) -> AuthorizationCodeResult:
        if self.result is None:
            raise RuntimeError("the callback came before the authorization redirect")
        result, self.result = self.result, None
        return result


def mcp_oauth(server_url: str, auth: AuthServer, scope: str | None) -> OAuthClientProvider:
    """An mcp OAuthClientProvider (an httpx2.Auth) for the MCP endpoint
    `server_url`: on the server's 401 it discovers the protected resource
    metadata and this authorization server, registers itself (public client,
    PKCE), follows the authorize URL with one GET and exchanges the code.

    scope: what the user consents to — the browser step sets the authorize
    request's scope to it (None: leave the client's choice: the 401's
    WWW-Authenticate scope, else the PRM's scopes_supported, else ours).

        http = httpx2.AsyncClient(auth=mcp_oauth(url, auth, "tools:call"))
        transport = streamable_http_client(url, http_client=http)
    """
    browser = _Browser(auth, scope)
    provider = OAuthClientProvider(
        server_url=server_url,
        client_metadata=OAuthClientMetadata(
            client_name="toolhost-pytest",
            redirect_uris=[CALLBACK],  # type: ignore[list-item]
            token_endpoint_auth_method="none",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope=scope,
        ),
        storage=MemoryTokenStorage(),
        redirect_handler=browser.redirect_handler,
        callback_handler=browser.callback_handler,
    )
    provider.browser = browser  # type: ignore[attr-defined]  # what a test may inspect
    return provider
