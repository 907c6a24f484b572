"""OAuth on a real bridge (docs/oauth.md): the metadata, registration, the token endpoint, the authorize
page's refusals and the apps' resources, each refusal with its RFC error, its metric and its log line.

The consent step (the app's `authorize` / `consent`) is not built yet: codes are minted by a
second `AuthorizationServer` with the bridge's secret, as another instance of a cluster
would issue them, and the bridge must take them as its own. With OAuth off, nothing of it
shows: `/.well-known/` is 404 and a 401 names no metadata.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import socket
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import jwt
import pytest
from agents import MODERN, WAIT, echo, online_app
from conftest import SECRET, RunningBridge, make_token
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from clientmcp_fast.core.consent import CODE_ALPHABET, MAX_REQUESTS_PER_APP
from clientmcp_fast.core.oauth import CODE_SECONDS, REQUEST_SECONDS, AuthorizationServer
from clientmcp_fast.core.oauth_pages import CONSENT_COOKIE
from clientmcp_fast.core.tokens import ROLE_AGENT, mint

APP = "todo-app"
REDIRECT = "http://127.0.0.1:33418/callback"
VERIFIER = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
NO_STORE = {"cache-control": "no-store", "pragma": "no-cache"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class OAuthBridge:
    """A bridge with OAuth on, its public URL on loopback, and a second authorization server (the test's)."""

    def __init__(self, bridge: RunningBridge) -> None:
        self.bridge = bridge
        self.url = bridge.http_url
        self.minter = AuthorizationServer(self.url, (SECRET,), SECRET, os.urandom)
        self.http = httpx2.Client(base_url=self.url, timeout=WAIT, follow_redirects=False)

    def resource(self, app_id: str = APP) -> str:
        return f"{self.url}/apps/{app_id}/mcp"

    def register(self, **metadata: Any) -> str:
        body = {"redirect_uris": [REDIRECT], "client_name": "Test Host", **metadata}
        response = self.http.post("/oauth/register", json=body)
        assert response.status_code == 201, response.text
        return response.json()["client_id"]

    def authorize_query(self, client_id: str, **parameters: Any) -> dict[str, str]:
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT,
            "state": "st-1",
            "code_challenge": CHALLENGE,
            "code_challenge_method": "S256",
            "resource": self.resource(),
            **parameters,
        }
        return {k: v for k, v in query.items() if v is not None}

    def code(self, client_id: str, now: float | None = None, **parameters: Any) -> str:
        """A code as the consent step will issue it once the app said yes and the person typed its code."""
        query = urlencode(self.authorize_query(client_id, **parameters)).encode()
        request = self.minter.authorize_request(query)
        return self.minter.issue_code(request, time.time() if now is None else now, 0)

    def token(self, **form: Any) -> httpx2.Response:
        return self.http.post("/oauth/token", data={k: v for k, v in form.items() if v is not None})

    def exchange(self, client_id: str, code: str, /, **extra: Any) -> httpx2.Response:
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "client_id": client_id,
            "redirect_uri": REDIRECT,
            "code_verifier": VERIFIER,
            "resource": self.resource(),
            **extra,
        }
        return self.token(**form)

    def refusals(self) -> dict[tuple[str, str], int]:
        return dict(self.bridge.call(lambda server: dict(server.oauth.refusals)))


@pytest.fixture
def oauth(start_bridge: Callable[..., RunningBridge]) -> OAuthBridge:
    port = free_port()
    bridge = start_bridge(port=port, oauth=True, public_url=f"http://127.0.0.1:{port}")
    served = OAuthBridge(bridge)
    yield served
    served.http.close()


@pytest.fixture
def oauth_logged(start_bridge: Callable[..., RunningBridge], captured_log):
    """An OAuth bridge started after its log is captured (`form`: text or json): the bridge and the log."""
    made: list[OAuthBridge] = []

    def start(form: str) -> tuple[OAuthBridge, Any]:
        stream = captured_log(form)  # before the bridge starts: it takes the log as it is then
        port = free_port()
        made.append(OAuthBridge(start_bridge(port=port, oauth=True, public_url=f"http://127.0.0.1:{port}")))
        return made[-1], stream

    yield start
    for served in made:
        served.http.close()


def assert_refused(
    response: httpx2.Response, status: int, error: str, description: str | None = None
) -> None:
    """An RFC 6749 §5.2 error body, never stored."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert {name: response.headers.get(name) for name in NO_STORE} == NO_STORE
    body = response.json()
    assert set(body) == {"error", "error_description"} and body["error"] == error, body
    if description is not None:
        assert body["error_description"] == description


# -- RFC 8414 and RFC 9728: the metadata -------------------------------------------------------


def test_the_authorization_server_metadata_is_served_at_its_well_known_path(oauth):
    response = oauth.http.get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200 and response.headers["access-control-allow-origin"] == "*"
    metadata = response.json()
    assert metadata["issuer"] == oauth.url
    assert metadata["token_endpoint"] == f"{oauth.url}/oauth/token"
    assert metadata["registration_endpoint"] == f"{oauth.url}/oauth/register"
    assert metadata["authorization_endpoint"] == f"{oauth.url}/oauth/authorize"
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["authorization_response_iss_parameter_supported"] is True
    head = oauth.http.head("/.well-known/oauth-authorization-server")
    assert head.status_code == 200 and head.content == b""


def test_each_app_has_protected_resource_metadata_and_nothing_else_under_well_known(oauth):
    response = oauth.http.get(f"/.well-known/oauth-protected-resource/apps/{APP}/mcp")
    assert response.status_code == 200
    assert response.json() == {
        "resource": oauth.resource(),
        "authorization_servers": [oauth.url],
        "bearer_methods_supported": ["header"],
        "resource_name": APP,
    }
    for path in (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource/apps/a%20b/mcp",
        "/.well-known/oauth-protected-resource/apps/x/mcp/extra",
        "/.well-known/openid-configuration",
        "/.well-known/oauth-authorization-server/extra",
    ):
        assert oauth.http.get(path).status_code == 404, path
    assert oauth.http.post("/.well-known/oauth-authorization-server").status_code == 405
    preflight = oauth.http.options("/.well-known/oauth-authorization-server")
    assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == "*"


# -- RFC 7591: registration ------------------------------------------------------------------------


def test_a_client_registers_and_its_client_id_is_the_registration(oauth):
    response = oauth.http.post("/oauth/register", json={"redirect_uris": [REDIRECT], "client_name": "Host"})
    assert response.status_code == 201
    assert {name: response.headers.get(name) for name in NO_STORE} == NO_STORE
    body = response.json()
    assert body["redirect_uris"] == [REDIRECT] and body["token_endpoint_auth_method"] == "none"
    assert oauth.minter.client(body["client_id"]).name == "Host"  # any instance reads it: nothing was stored
    assert oauth.bridge.call(lambda server: server.oauth.clients_registered) == 1


def test_a_registration_that_cannot_be_taken_is_refused_with_its_rfc_7591_error(oauth_logged):
    oauth, stream = oauth_logged("text")
    cases = [
        ({"content": b"redirect_uris=x", "headers": {"content-type": "application/x-www-form-urlencoded"}},
         "invalid_client_metadata", "the registration must be sent as application/json"),
        ({"content": b"{", "headers": {"content-type": "application/json"}}, "invalid_client_metadata",
         "the registration is not JSON"),
        ({"json": {"redirect_uris": ["https://host.example/cb#x"]}}, "invalid_redirect_uri",
         "a redirect URI has a fragment"),
        ({"json": {"redirect_uris": ["http://host.example/cb"]}}, "invalid_redirect_uri", None),
        ({"json": {"redirect_uris": [REDIRECT], "grant_types": ["client_credentials"]}}, "invalid_client_metadata",
         None),
    ]  # fmt: skip
    for request, error, description in cases:
        assert_refused(oauth.http.post("/oauth/register", **request), 400, error, description)
    assert oauth.refusals() == {
        ("register", "invalid_client_metadata"): 3,
        ("register", "invalid_redirect_uri"): 2,
    }
    assert oauth.http.get("/oauth/register").status_code == 405
    lines = [line for line in stream.getvalue().splitlines() if " oauth_refused " in line]
    # One line per endpoint and error every 10 s; the others are counted in the next line.
    assert len(lines) == 2
    assert "endpoint=register error=invalid_client_metadata" in lines[0]
    assert 'reason="the registration must be sent as application/json"' in lines[0]


# -- RFC 6749 §4.1.3 and §5: the token endpoint ------------------------------------------------------


def test_a_code_from_another_instance_is_exchanged_for_tokens_never_stored(oauth):
    client_id = oauth.register()
    response = oauth.exchange(client_id, oauth.code(client_id))
    assert response.status_code == 200, response.text
    assert {name: response.headers.get(name) for name in NO_STORE} == NO_STORE
    tokens = response.json()
    assert set(tokens) == {"access_token", "token_type", "expires_in", "refresh_token"}
    claims = jwt.decode(tokens["access_token"], SECRET, algorithms=["HS256"], audience=oauth.resource())
    assert (claims["sub"], claims["role"], claims["exp"] - claims["iat"]) == (APP, "agent", 3600)
    assert oauth.bridge.call(lambda s: s.oauth.authorization.tokens_issued["authorization_code"]) == 1


@pytest.mark.parametrize(
    ("change", "status", "error", "description"),
    [
        ({"code_verifier": None}, 400, "invalid_request", "code_verifier is missing: PKCE (RFC 7636) is required"),
        ({"code_verifier": "B" * 43}, 400, "invalid_grant", "code_verifier does not match the code_challenge"),
        ({"code_verifier": CHALLENGE}, 400, "invalid_grant", "code_verifier does not match the code_challenge"),
        ({"redirect_uri": REDIRECT + "/"}, 400, "invalid_grant",
         "redirect_uri is not the one of the authorization request"),
        ({"resource": "http://127.0.0.1:1/apps/todo-app/mcp"}, 400, "invalid_target",
         "resource is not the one the code was issued for"),
        ({"resource": "RESOURCE_OF:other-app"}, 400, "invalid_target",
         "resource is not the one the code was issued for"),
        ({"client_id": None}, 400, "invalid_client", "client_id is missing: this bridge has public clients only"),
        ({"client_id": "FORGED"}, 400, "invalid_client",
         "client_id is not one this bridge issued: register at /oauth/register"),
        ({"client_id": "ANOTHER"}, 400, "invalid_grant", "the code was issued to another client"),
        ({"code": "EXPIRED"}, 400, "invalid_grant", "the code expired"),
        ({"code": "AN_ACCESS_TOKEN"}, 400, "invalid_grant", "the code is not one this bridge issued"),
        ({"grant_type": "password"}, 400, "unsupported_grant_type", None),
        ({"grant_type": None}, 400, "invalid_request", "grant_type is missing"),
    ],
    ids=["no PKCE", "wrong verifier", "plain verifier", "redirect not byte for byte", "resource of another server",
         "another app's resource", "no client_id", "forged client_id", "another client's code", "expired code",
         "access token as code", "another grant type", "no grant type"],
)  # fmt: skip
def test_a_token_request_is_refused_with_its_rfc_6749_error(oauth, change, status, error, description):
    client_id = oauth.register()
    code = oauth.code(client_id)
    stand_ins = {
        "FORGED": json.loads(
            AuthorizationServer(oauth.url, (b"x" * 32,), b"x" * 32, os.urandom).register(
                json.dumps({"redirect_uris": [REDIRECT]}).encode(), time.time()
            )
        )["client_id"],
        "ANOTHER": oauth.register(),
        "EXPIRED": oauth.code(client_id, now=time.time() - CODE_SECONDS - 1),
        "AN_ACCESS_TOKEN": mint(SECRET, ROLE_AGENT, APP, 3600, time.time()),
        "RESOURCE_OF:other-app": oauth.resource("other-app"),
    }
    change = {name: stand_ins.get(value, value) for name, value in change.items()}
    assert_refused(oauth.exchange(client_id, code, **change), status, error, description)
    assert oauth.refusals() == {("token", error): 1}
    # A refused request does not use the code up, and nothing was issued.
    if change.get("code") is None and "code" not in change:
        assert oauth.exchange(client_id, code).status_code == 200


def test_the_token_endpoint_takes_a_form_by_post_only(oauth):
    assert_refused(
        oauth.http.post("/oauth/token", json={"grant_type": "authorization_code"}),
        400,
        "invalid_request",
        "the body must be application/x-www-form-urlencoded",
    )
    response = oauth.http.get("/oauth/token")
    assert response.status_code == 405 and response.headers["allow"] == "POST, OPTIONS"
    assert_refused(oauth.http.post("/oauth/token", content=b"grant_type=a&grant_type=b", headers={
        "content-type": "application/x-www-form-urlencoded; charset=utf-8"}), 400, "invalid_request",
        "the parameter grant_type is sent more than once")  # fmt: skip


def test_a_code_used_twice_is_refused_and_its_refresh_token_ends_with_it(oauth):
    client_id = oauth.register()
    code = oauth.code(client_id)
    first = oauth.exchange(client_id, code).json()
    assert_refused(oauth.exchange(client_id, code), 400, "invalid_grant", "the code was used already")
    again = oauth.token(grant_type="refresh_token", refresh_token=first["refresh_token"], client_id=client_id)
    assert_refused(
        again, 400, "invalid_grant", "the grant was ended: a code or refresh token of it was replayed"
    )


def test_a_refresh_rotates_and_a_replayed_refresh_token_ends_the_grant(oauth):
    client_id = oauth.register()
    first = oauth.exchange(client_id, oauth.code(client_id)).json()
    second = oauth.token(
        grant_type="refresh_token",
        refresh_token=first["refresh_token"],
        client_id=client_id,
        resource=oauth.resource(),
    )
    assert second.status_code == 200 and second.json()["refresh_token"] != first["refresh_token"]
    replay = oauth.token(
        grant_type="refresh_token", refresh_token=first["refresh_token"], client_id=client_id
    )
    assert_refused(replay, 400, "invalid_grant", "the refresh token was used already: the grant is ended")
    after = oauth.token(
        grant_type="refresh_token", refresh_token=second.json()["refresh_token"], client_id=client_id
    )
    assert_refused(after, 400, "invalid_grant")
    assert oauth.bridge.call(lambda s: s.oauth.authorization.tokens_issued) == {
        "authorization_code": 1,
        "refresh_token": 1,
    }


def test_a_refresh_token_of_another_client_or_for_another_resource_is_refused(oauth):
    client_id = oauth.register()
    refresh_token = oauth.exchange(client_id, oauth.code(client_id)).json()["refresh_token"]
    other = oauth.register()
    assert_refused(
        oauth.token(grant_type="refresh_token", refresh_token=refresh_token, client_id=other),
        400,
        "invalid_grant",
        "the refresh token was issued to another client",
    )
    assert_refused(
        oauth.token(
            grant_type="refresh_token",
            refresh_token=refresh_token,
            client_id=client_id,
            resource=oauth.resource("other-app"),
        ),
        400,
        "invalid_target",
    )


# -- the apps' resources: /apps/<client-id>/mcp ------------------------------------------------------


def mcp_post(oauth: OAuthBridge, path: str, token: str | None, **headers: str) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream", **headers}
    if token is not None:
        sent["authorization"] = f"Bearer {token}"
    return oauth.http.post(path, json=body, headers=sent)


def test_a_resource_without_a_token_points_at_its_metadata(oauth):
    response = mcp_post(oauth, f"/apps/{APP}/mcp", None)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{oauth.url}/.well-known/oauth-protected-resource/apps/{APP}/mcp"'
    )
    assert oauth.refusals() == {}  # the first step of every flow, not a refusal


def test_a_resource_takes_only_an_access_token_for_itself(oauth):
    client_id = oauth.register()
    tokens = oauth.exchange(client_id, oauth.code(client_id)).json()
    now = time.time()
    wrong_audience = jwt.encode(
        {"sub": APP, "role": "agent", "aud": oauth.resource("other-app"), "exp": int(now) + 60}, SECRET
    )
    refused = {
        "a static agent token (no aud)": make_token("agent", APP),
        "another app's token": make_token("agent", "other-app"),
        "an audience of another app": wrong_audience,
        "a refresh token": tokens["refresh_token"],
        "a code": oauth.code(client_id),
        "an app's token": make_token("client", APP),
        "junk": "x.y.z",
    }
    for what, token in refused.items():
        response = mcp_post(oauth, f"/apps/{APP}/mcp", token)
        assert response.status_code == 401, what
        assert response.headers["www-authenticate"] == (
            f'Bearer resource_metadata="{oauth.url}/.well-known/oauth-protected-resource/apps/{APP}/mcp", '
            'error="invalid_token"'
        ), what
    assert oauth.refusals() == {("resource", "invalid_token"): len(refused)}
    # The access token of another app's resource is refused here, and taken there.
    other_code = oauth.code(client_id, resource=oauth.resource("other-app"))
    other = oauth.exchange(client_id, other_code, resource=oauth.resource("other-app")).json()
    assert mcp_post(oauth, f"/apps/{APP}/mcp", other["access_token"]).status_code == 401
    assert mcp_post(oauth, "/apps/other-app/mcp", other["access_token"]).status_code == 200
    assert mcp_post(oauth, f"/apps/{APP}/mcp", tokens["access_token"]).status_code == 200


def test_a_code_or_a_refresh_token_is_no_access_token_on_mcp_either(oauth):
    client_id = oauth.register()
    tokens = oauth.exchange(client_id, oauth.code(client_id)).json()
    for token in (tokens["refresh_token"], oauth.code(client_id), client_id):
        response = mcp_post(oauth, "/mcp", token)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'  # /mcp as before
    assert mcp_post(oauth, "/mcp", tokens["access_token"]).status_code == 200  # an agent token for its app


def test_a_resource_path_that_is_not_an_app_is_not_found(oauth):
    client_id = oauth.register()
    access_token = oauth.exchange(client_id, oauth.code(client_id)).json()["access_token"]
    for path in ("/apps/a%20b/mcp", "/apps/x/mcp/extra", "/apps/x", "/apps//mcp", "/apps/x/mcp/token"):
        for token in (None, access_token):
            assert mcp_post(oauth, path, token).status_code == 404, (path, token)


def test_a_resource_keeps_the_origin_rules_and_preflight_of_mcp(oauth):
    assert mcp_post(oauth, f"/apps/{APP}/mcp", None, origin="https://evil.example").status_code == 403
    preflight = oauth.http.options(
        f"/apps/{APP}/mcp",
        headers={"origin": "http://localhost:3000", "access-control-request-method": "POST"},
    )
    assert (
        preflight.status_code == 204
        and preflight.headers["access-control-allow-origin"] == "http://localhost:3000"
    )
    response = mcp_post(oauth, f"/apps/{APP}/mcp", None, origin="http://localhost:3000")
    assert (
        response.status_code == 401
        and "www-authenticate" in response.headers["access-control-expose-headers"].lower()
    )
    # With its access token, the allowed Origin is served and told so; a refused one is not.
    client_id = oauth.register()
    access_token = oauth.exchange(client_id, oauth.code(client_id)).json()["access_token"]
    response = mcp_post(oauth, f"/apps/{APP}/mcp", access_token, origin="http://localhost:3000")
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "http://localhost:3000"
    assert mcp_post(oauth, f"/apps/{APP}/mcp", access_token, origin="https://evil.example").status_code == 403


@pytest.mark.anyio
async def test_an_sdk_agent_calls_an_app_with_an_access_token_on_its_resource(oauth):
    """The access token is an agent token: the official SDK calls the app through /apps/<id>/mcp with it."""
    client_id = oauth.register()
    tokens = oauth.exchange(client_id, oauth.code(client_id)).json()
    async with (
        online_app(oauth.bridge, APP, {"echo": echo}),
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {tokens['access_token']}"}, timeout=WAIT
        ) as http,
        Client(streamable_http_client(oauth.resource(), http_client=http), mode=MODERN) as client,
    ):
        result = await client.call_tool("echo", {"said": "hi"})
    block = result.content[0]
    assert isinstance(block, TextContent) and json.loads(block.text) == {"said": "hi"}


# -- the authorization endpoint: its refusals, and what it says until apps can consent -------------


PAGE_HEADERS = {"cache-control": "no-store", "x-frame-options": "DENY", "referrer-policy": "same-origin"}


def assert_page(response: httpx2.Response, status: int, *words: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert {name: response.headers.get(name) for name in PAGE_HEADERS} == PAGE_HEADERS
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert "location" not in response.headers
    text = " ".join(response.text.split())
    for word in words:
        assert word in text, (word, text)


def test_a_forged_client_or_a_redirect_not_registered_is_shown_never_redirected(oauth):
    client_id = oauth.register()
    forged = client_id[:-4] + "AAAA"
    assert_page(oauth.http.get("/oauth/authorize", params=oauth.authorize_query(forged)), 400, "cannot go on")
    for redirect in (REDIRECT + "x", "http://127.0.0.1:33418/other", "https://attacker.example/callback"):
        response = oauth.http.get(
            "/oauth/authorize", params=oauth.authorize_query(client_id, redirect_uri=redirect)
        )
        assert_page(response, 400, "redirect_uri is not one the client registered, byte for byte")
    assert oauth.refusals() == {("authorize", "invalid_client"): 1, ("authorize", "invalid_request"): 3}


@pytest.mark.parametrize(
    ("change", "error"),
    [({"code_challenge": None}, "invalid_request"), ({"code_challenge_method": "plain"}, "invalid_request"),
     ({"code_challenge_method": None}, "invalid_request"), ({"resource": None}, "invalid_target"),
     ({"resource": "https://other.example/apps/todo-app/mcp"}, "invalid_target"),
     ({"response_type": "token"}, "unsupported_response_type")],
    ids=["no PKCE", "plain", "no method (plain)", "no resource", "resource of another server", "implicit"],
)  # fmt: skip
def test_a_refused_authorization_request_is_redirected_with_error_state_and_iss(oauth, change, error):
    client_id = oauth.register()
    response = oauth.http.get("/oauth/authorize", params=oauth.authorize_query(client_id, **change))
    assert response.status_code == 302 and response.headers["cache-control"] == "no-store"
    location = response.headers["location"]
    assert location.startswith(REDIRECT + "?")
    answer = parse_qs(urlsplit(location).query)
    assert answer["error"] == [error] and answer["state"] == ["st-1"] and answer["iss"] == [oauth.url]


def test_a_valid_request_for_an_app_not_connected_is_told_it_cannot_be_asked(oauth):
    """The page says so and offers the way back with access_denied."""
    client_id = oauth.register()
    response = oauth.http.get("/oauth/authorize", params=oauth.authorize_query(client_id))
    assert_page(response, 403, "todo-app cannot be authorized this way", "Return to http://127.0.0.1:33418")
    back = response.text.split('href="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    assert parse_qs(urlsplit(back).query) == {
        "error": ["access_denied"],
        "error_description": ["the app cannot be asked for consent"],
        "state": ["st-1"],
        "iss": [oauth.url],
    }
    assert oauth.refusals() == {("authorize", "access_denied"): 1}


def consent_form(
    oauth: OAuthBridge, client_id: str, cookie: str = "cookie-1", now: float | None = None
) -> dict:
    query = urlencode(oauth.authorize_query(client_id)).encode()
    request = oauth.minter.authorize_request(query)
    value = oauth.minter.pending(request, time.time() if now is None else now)
    return {"request": value, "csrf": oauth.minter.csrf_token(cookie, request.id), "code": "ABCD2345"}


def test_the_consent_form_without_its_csrf_token_or_cookie_is_refused(oauth):
    client_id = oauth.register()
    form = consent_form(oauth, client_id)
    cookie = {"cookie": f"{CONSENT_COOKIE}=cookie-1"}
    cases = {
        "no CSRF token": ({**form, "csrf": ""}, cookie),
        "no cookie": (form, {}),
        "another browser's cookie": (form, {"cookie": f"{CONSENT_COOKIE}=cookie-2"}),
        "another site's form": (form, {**cookie, "origin": "https://evil.example"}),
        "the https cookie's name over http": (form, {"cookie": f"__Host-{CONSENT_COOKIE}=cookie-1"}),
    }
    for data, headers in cases.values():
        response = oauth.http.post("/oauth/authorize", data=data, headers=headers)
        assert_page(response, 403, "This form was not sent from its page")
    assert oauth.refusals() == {("authorize", "invalid_request"): len(cases)}
    # With its token and cookie the form goes on: to a request this instance never showed.
    response = oauth.http.post("/oauth/authorize", data=form, headers={**cookie, "origin": oauth.url})
    assert_page(response, 400, "This request is no longer waiting")


@pytest.mark.anyio
async def test_the_real_page_posted_without_its_csrf_token_or_cookie_is_refused(oauth):
    """A forged form never reaches the code: no attempt is counted, and the real form then goes through."""
    client_id = oauth.register()
    person = Person(oauth)
    async with online_app(oauth.bridge, APP, {"echo": echo}, on_authorize=UserOfTheApp()) as app:
        await person.open(authorize_url(oauth, client_id))
        code = await app.on_authorize.code()
        fields = person.fields()
        for headers in (
            {"cookie": f"{CONSENT_COOKIE}={person.cookie}"},  # the token missing below
            {},  # no cookie
            {"cookie": f"{CONSENT_COOKIE}=another-browser"},
            {"cookie": f"{CONSENT_COOKIE}={person.cookie}", "origin": "https://evil.example"},
        ):
            data = {**fields, "code": code}
            if "origin" not in headers and headers.get("cookie", "").endswith(str(person.cookie)):
                data["csrf"] = ""
            for _ in range(6):  # more than the attempts a code has
                response = await person.http.post(f"{oauth.url}/oauth/authorize", data=data, headers=headers)
                assert_page(response, 403, "This form was not sent from its page")
        assert set(answer_of(await person.type_code(code))) == {"code", "state", "iss"}
    await person.http.aclose()
    assert oauth.refusals() == {("authorize", "invalid_request"): 24}


def test_a_consent_form_whose_request_expired_or_was_forged_is_refused(oauth):
    client_id = oauth.register()
    expired = consent_form(oauth, client_id, now=time.time() - REQUEST_SECONDS - 1)
    cookie = {"cookie": f"{CONSENT_COOKIE}=cookie-1"}
    response = oauth.http.post("/oauth/authorize", data=expired, headers=cookie)
    # 10 minutes without an answer: the client hears access_denied.
    denied(response, oauth, "the authorization request expired: no answer within 10 minutes")
    forged = {**expired, "request": make_token("agent", APP)}
    response = oauth.http.post("/oauth/authorize", data=forged, headers=cookie)
    assert_page(response, 400, "the authorization request is not one this bridge issued")


# -- OAuth off: nothing of it shows ---------------------------------------------------------------


def test_with_oauth_off_every_well_known_path_is_404_and_a_401_names_no_metadata(bridge):
    with httpx2.Client(base_url=bridge.http_url, timeout=WAIT) as http:
        for path in (
            "/.well-known/oauth-authorization-server",
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-protected-resource/mcp",
            f"/.well-known/oauth-protected-resource/apps/{APP}/mcp",
            "/.well-known/openid-configuration",
            "/.well-known/anything",
            "/oauth/register",
            "/oauth/token",
            "/oauth/authorize",
            f"/apps/{APP}/mcp",
        ):
            assert http.get(path).status_code == 404, path
            assert http.post(path).status_code == 404, path
        response = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
        bad = http.post("/mcp", json={}, headers={"authorization": "Bearer x.y.z"})
        assert bad.headers["www-authenticate"] == 'Bearer error="invalid_token"'


@pytest.mark.anyio
@pytest.mark.parametrize("oauth_mode", ["off", "on"])
async def test_an_sdk_agent_with_a_static_header_connects_and_never_starts_a_flow(start_bridge, oauth_mode):
    """Hosts that see discovery answer drop their header: with a static token, nothing but /mcp is ever asked."""
    if oauth_mode == "on":
        port = free_port()
        bridge = start_bridge(port=port, oauth=True, public_url=f"http://127.0.0.1:{port}")
    else:
        bridge = start_bridge()
    asked: list[str] = []

    async def record(request: httpx2.Request) -> None:
        asked.append(request.url.path)

    headers = {"Authorization": f"Bearer {bridge.token('agent', APP)}"}
    async with (
        online_app(bridge, APP, {"echo": echo}),
        httpx2.AsyncClient(headers=headers, timeout=WAIT, event_hooks={"request": [record]}) as http,
    ):
        for mode in ("legacy", MODERN, "auto"):
            async with Client(streamable_http_client(bridge.mcp_url, http_client=http), mode=mode) as client:
                result = await client.call_tool("echo", {"n": 1})
                assert json.loads(result.content[0].text) == {"n": 1}
    assert asked and set(asked) == {"/mcp"}


# -- the official SDK's OAuth client, the consent step played by the test ------------------------


class MemoryStorage:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client_info: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client_info

    async def set_client_info(self, client_info: Any) -> None:
        self.client_info = client_info


class Person:
    """The person at the browser: opens the consent page, reads it, types the code their app shows."""

    def __init__(self, oauth: OAuthBridge) -> None:
        self.oauth = oauth
        self.http = httpx2.AsyncClient(timeout=WAIT, follow_redirects=False)
        self.cookie: str | None = None
        self.page: httpx2.Response | None = None

    async def open(self, url: str) -> httpx2.Response:
        """GET the authorization URL, as the browser the client opened does."""
        headers = {"cookie": f"{CONSENT_COOKIE}={self.cookie}"} if self.cookie else {}
        self.page = response = await self.http.get(url, headers=headers)
        self.http.cookies.clear()  # the test says which cookie each request carries
        cookie = response.headers.get("set-cookie")
        if cookie is not None:
            self.cookie = cookie.split(";", 1)[0].split("=", 1)[1]
        return response

    def fields(self) -> dict[str, str]:
        """The hidden fields of the page's form."""
        assert self.page is not None
        text = self.page.text
        return {
            name: html.unescape(re.search(f'name="{name}" value="([^"]*)"', text).group(1))
            for name in ("request", "csrf")
        }

    async def type_code(self, code: str, **change: str) -> httpx2.Response:
        """POST the form with `code`, from the page's origin and with its cookie."""
        assert self.page is not None
        action = html.unescape(re.search('<form method="post" action="([^"]*)"', self.page.text).group(1))
        form = {**self.fields(), "code": code, **change}
        headers = {"origin": self.oauth.url, "cookie": f"{CONSENT_COOKIE}={self.cookie}"}
        response = await self.http.post(action, data=form, headers=headers)
        if response.status_code != 303:
            self.page = response
        return response


class UserOfTheApp:
    """The app's `on_authorize`: records each request, and answers as the test says (allow by default)."""

    def __init__(self, answer: bool | None = True) -> None:
        self.answer = answer  # None: wait for `decide`
        self.requests: list[Any] = []
        self.asked = asyncio.Event()
        self.decided: asyncio.Future[bool] | None = None

    async def __call__(self, request: Any) -> bool:
        self.requests.append(request)
        self.asked.set()
        if self.answer is not None:
            return self.answer
        self.decided = asyncio.get_running_loop().create_future()
        return await self.decided

    async def code(self) -> str:
        """The code the app shows, once the bridge asked it."""
        await asyncio.wait_for(self.asked.wait(), WAIT)
        self.asked.clear()
        return self.requests[-1].code


def answer_of(response: httpx2.Response) -> dict[str, list[str]]:
    """The parameters of the redirect to the client that ends an authorization request."""
    assert response.status_code == 303, response.text
    assert response.headers["cache-control"] == "no-store"
    location = response.headers["location"]
    assert location.startswith(REDIRECT + "?"), location
    return parse_qs(urlsplit(location).query)


class PlayedHost:
    """The browser side of an SDK host's OAuth flow, its person played by the test.

    `open_page` is the SDK's `redirect_handler`: it opens the consent page the SDK hands its
    browser, checks that it says `words`, and types the code the app's user (`UserOfTheApp`)
    was shown. `come_back` is its `callback_handler`: the code, state and iss of the redirect.
    """

    def __init__(self, person: Person, user: UserOfTheApp, issuer: str, *words: str) -> None:
        self.person = person
        self.user = user
        self.issuer = issuer
        self.words = words
        self.redirected: list[httpx2.Response] = []  # the answers to the forms the person sent

    async def open_page(self, url: str) -> None:
        assert url.startswith(f"{self.issuer}/oauth/authorize?")
        page = await self.person.open(url)
        assert_page(page, 200, *self.words)
        self.redirected.append(await self.person.type_code((await self.user.code()).lower()))

    async def come_back(self) -> Any:
        from mcp.shared.auth import AuthorizationCodeResult

        answer = answer_of(self.redirected[-1])
        assert set(answer) == {"code", "state", "iss"} and answer["iss"] == [self.issuer]
        return AuthorizationCodeResult(code=answer["code"][0], state=answer["state"][0], iss=answer["iss"][0])


# What the consent page says to a person whose host registered as "SDK host" (REDIRECT).
SDK_HOST_PAGE = (
    "Connect to todo-app?",
    "<b>SDK host</b> asks to use the tools of <b>todo-app</b>",
    "returns to <b>http://127.0.0.1:33418</b>",
)


def denied(response: httpx2.Response, oauth: OAuthBridge, description: str) -> None:
    assert answer_of(response) == {
        "error": ["access_denied"],
        "error_description": [description],
        "state": ["st-1"],
        "iss": [oauth.url],
    }


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_the_sdk_oauth_client_through_the_page_and_the_apps_consent(oauth, mode):
    """`mcp.client.auth.OAuthClientProvider` from its first 401 to a refresh, through the real consent step.

    The test plays the person: it opens the URL the SDK hands its browser, reads the page,
    and types the code the app (a `clientmcp_fast.client` app with `on_authorize`) was sent.
    """
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    user = UserOfTheApp()
    person = Person(oauth)
    host = PlayedHost(person, user, oauth.url, *SDK_HOST_PAGE)
    asked: list[tuple[str, str]] = []

    async def record(request: httpx2.Request) -> None:
        asked.append((request.method, request.url.path))

    provider = OAuthClientProvider(
        server_url=oauth.resource(),
        client_metadata=OAuthClientMetadata(redirect_uris=[REDIRECT], client_name="SDK host"),
        storage=MemoryStorage(),
        redirect_handler=host.open_page,
        callback_handler=host.come_back,
    )
    async with (
        online_app(oauth.bridge, APP, {"echo": echo}, on_authorize=user),
        httpx2.AsyncClient(auth=provider, timeout=WAIT, event_hooks={"request": [record]}) as http,
        Client(streamable_http_client(oauth.resource(), http_client=http), mode=mode) as client,
    ):
        first = await client.call_tool("echo", {"n": 1})
        provider.context.token_expiry_time = time.time() - 1  # as an hour later: the SDK refreshes first
        second = await client.call_tool("echo", {"n": 2})
    await person.http.aclose()
    assert [json.loads(result.content[0].text) for result in (first, second)] == [{"n": 1}, {"n": 2}]
    [request] = user.requests
    assert (request.client_name, request.client_origin) == ("SDK host", "http://127.0.0.1:33418")
    assert re.fullmatch(f"[{CODE_ALPHABET}]{{8}}", request.code)
    assert len(host.redirected) == 1
    flow = [step for step in asked if not step[1].startswith("/apps/")]
    assert flow == [
        ("GET", f"/.well-known/oauth-protected-resource/apps/{APP}/mcp"),
        ("GET", "/.well-known/oauth-authorization-server"),
        ("POST", "/oauth/register"),
        ("POST", "/oauth/token"),
        ("POST", "/oauth/token"),
    ]
    issued = oauth.bridge.call(lambda s: dict(s.oauth.authorization.tokens_issued))
    assert issued == {"authorization_code": 1, "refresh_token": 1}
    assert oauth.bridge.call(lambda s: (s.oauth.codes_issued, len(s.bridge.consents))) == (1, 0)


def authorize_url(oauth: OAuthBridge, client_id: str) -> str:
    return f"{oauth.url}/oauth/authorize?{urlencode(oauth.authorize_query(client_id))}"


@pytest.mark.anyio
async def test_the_code_and_the_apps_allow_are_both_needed_in_either_order(oauth):
    """The form with the right code waits for the app's answer; an answer before the form is kept for it."""
    client_id = oauth.register()
    user = UserOfTheApp(answer=None)
    person = Person(oauth)
    async with online_app(oauth.bridge, APP, {"echo": echo}, on_authorize=user):
        await person.open(authorize_url(oauth, client_id))
        code = await user.code()
        posted = asyncio.ensure_future(person.type_code(code))
        await asyncio.sleep(0.3)
        assert not posted.done()  # the code is right: the form waits for the app
        user.decided.set_result(True)
        answer = answer_of(await posted)
        assert set(answer) == {"code", "state", "iss"}
        assert oauth.exchange(client_id, answer["code"][0]).status_code == 200
        # The app answers first this time; the form then finds the answer waiting.
        await person.open(authorize_url(oauth, client_id))
        code = await user.code()
        user.decided.set_result(True)
        await asyncio.sleep(0.3)
        assert set(answer_of(await person.type_code(code))) == {"code", "state", "iss"}
    await person.http.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("when", ["before the code", "while the form waits"])
async def test_consent_denied_by_the_app_ends_the_request(oauth, when):
    client_id = oauth.register()
    user = UserOfTheApp(answer=None)
    person = Person(oauth)
    async with online_app(oauth.bridge, APP, {"echo": echo}, on_authorize=user):
        await person.open(authorize_url(oauth, client_id))
        code = await user.code()
        if when == "before the code":
            user.decided.set_result(False)
            await asyncio.sleep(0.3)
            response = await person.type_code(code)
        else:
            posted = asyncio.ensure_future(person.type_code(code))
            await asyncio.sleep(0.3)
            user.decided.set_result(False)
            response = await posted
        denied(response, oauth, "the user of todo-app refused")
        # The request is over: the same form again is told so.
        again = await person.type_code(code)
        assert_page(again, 400, "This request is no longer waiting")
    await person.http.aclose()
    assert oauth.refusals() == {("authorize", "access_denied"): 2}


@pytest.mark.anyio
async def test_a_wrong_code_five_times_ends_the_request(oauth):
    client_id = oauth.register()
    user = UserOfTheApp()
    person = Person(oauth)
    async with online_app(oauth.bridge, APP, {"echo": echo}, on_authorize=user):
        await person.open(authorize_url(oauth, client_id))
        code = await user.code()
        wrong = "".join("A" if symbol != "A" else "B" for symbol in code)
        for left in (4, 3, 2, 1):
            page = await person.type_code(wrong)
            assert_page(page, 400, f"That is not the code todo-app shows: {left} attempt")
        denied(await person.type_code(wrong), oauth, "a wrong code was typed 5 times")
        # Even the right code cannot revive it.
        assert_page(await person.type_code(code), 400, "This request is no longer waiting")
    await person.http.aclose()


@pytest.mark.anyio
async def test_an_app_offline_or_without_consent_gets_a_page_that_says_so(oauth):
    client_id = oauth.register()
    person = Person(oauth)
    page = await person.open(authorize_url(oauth, client_id))
    assert_page(page, 403, "todo-app cannot be authorized this way: it is not connected to this bridge")
    async with online_app(oauth.bridge, APP, {"echo": echo}):  # no on_authorize: no consent
        page = await person.open(authorize_url(oauth, client_id))
        assert_page(page, 403, "todo-app cannot be authorized this way: the app does not ask its user")
    await person.http.aclose()
    back = page.text.split('href="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    assert parse_qs(urlsplit(back).query) == {
        "error": ["access_denied"],
        "error_description": ["the app cannot be asked for consent"],
        "state": ["st-1"],
        "iss": [oauth.url],
    }
    assert oauth.refusals() == {("authorize", "access_denied"): 2}


@pytest.mark.anyio
async def test_an_app_that_goes_away_before_it_answers_ends_the_request(oauth):
    client_id = oauth.register()
    user = UserOfTheApp(answer=None)
    person = Person(oauth)
    async with online_app(oauth.bridge, APP, {"echo": echo}, on_authorize=user):
        await person.open(authorize_url(oauth, client_id))
        code = await user.code()
    denied(await person.type_code(code), oauth, "todo-app went away before it answered")
    await person.http.aclose()


@pytest.mark.anyio
async def test_requests_waiting_for_one_app_are_bounded(oauth):
    client_id = oauth.register()
    person = Person(oauth)
    user = UserOfTheApp(answer=None)
    async with online_app(oauth.bridge, APP, {"echo": echo}, on_authorize=user):
        for _ in range(MAX_REQUESTS_PER_APP):
            assert (await person.open(authorize_url(oauth, client_id))).status_code == 200
        page = await person.open(authorize_url(oauth, client_id))
        assert_page(page, 429, "todo-app has too many requests waiting")
        await asyncio.sleep(0.2)
        assert len(user.requests) == MAX_REQUESTS_PER_APP  # the one refused was never sent to the app
    await person.http.aclose()


def test_refusals_tokens_and_registrations_are_metrics(start_bridge):
    """clientmcp_oauth_*: each refusal by endpoint and RFC error, never by client or app (docs/operations.md)."""
    from test_observability import delta, m, scrape

    port = free_port()
    bridge = start_bridge(
        port=port, oauth=True, public_url=f"http://127.0.0.1:{port}", metrics=("127.0.0.1", 0)
    )
    oauth = OAuthBridge(bridge)
    before = scrape(bridge)
    client_id = oauth.register()
    code = oauth.code(client_id)
    oauth.exchange(client_id, code)
    assert_refused(oauth.exchange(client_id, code), 400, "invalid_grant")
    assert mcp_post(oauth, f"/apps/{APP}/mcp", "x.y.z").status_code == 401
    changed = delta(before, scrape(bridge))
    oauth.http.close()
    assert changed == {
        m("clientmcp_oauth_clients_registered_total"): 1,
        m("clientmcp_oauth_tokens_issued_total", grant_type="authorization_code"): 1,
        m("clientmcp_oauth_refusals_total", endpoint="token", error="invalid_grant"): 1,
        m("clientmcp_oauth_refusals_total", endpoint="resource", error="invalid_token"): 1,
        m("clientmcp_oauth_remembered", kind="codes"): 1,
        m("clientmcp_oauth_remembered", kind="ended_grants"): 1,
        m("clientmcp_http_responses_total", status="201"): 1,
        m("clientmcp_http_responses_total", status="200"): 1,
        m("clientmcp_http_responses_total", status="400"): 1,
        m("clientmcp_http_responses_total", status="401"): 1,
    }


def test_a_refusal_line_holds_no_credential(oauth_logged):
    """oauth_refused: the endpoint, the RFC error, the reason and the app; no code, token, client ID or state."""
    oauth, stream = oauth_logged("json")
    client_id = oauth.register()
    code = oauth.code(client_id)
    tokens = oauth.exchange(client_id, code).json()
    oauth.exchange(client_id, code)  # used already
    oauth.token(grant_type="refresh_token", refresh_token=tokens["refresh_token"], client_id=client_id + "x")
    mcp_post(oauth, f"/apps/{APP}/mcp", tokens["refresh_token"])
    oauth.http.get("/oauth/authorize", params=oauth.authorize_query(client_id, state="secret-state"))
    text = stream.getvalue()
    for credential in (
        client_id,
        code,
        tokens["refresh_token"],
        tokens["access_token"],
        "secret-state",
        CHALLENGE,
    ):
        assert credential not in text
    events = [json.loads(line) for line in text.splitlines() if '"oauth_refused"' in line]
    assert [(e["endpoint"], e["error"]) for e in events] == [
        ("token", "invalid_grant"),
        ("token", "invalid_client"),
        ("resource", "invalid_token"),
        ("authorize", "access_denied"),
    ]
    assert events[0]["reason"] == "the code was used already" and events[0]["not_logged"] == 0
    assert events[2]["app"] == APP and events[2]["reason"] == "token role is missing or not client/agent"
