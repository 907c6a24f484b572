"""The authorization server without I/O (docs/oauth.md): every refusal with its RFC error, grouped by RFC.

RFC 8414 and RFC 9728 (metadata), RFC 7591 (registration), RFC 6749 §4.1 with RFC 7636
(PKCE), RFC 8707 (resource) and RFC 9207 (`iss`) (authorization), RFC 6749 §5 and §6
(tokens and refresh). The clock and the randomness are arguments: nothing waits.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import re
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
import pytest

from clientmcp_fast.core import oauth
from clientmcp_fast.core.oauth import (
    ACCESS_SECONDS,
    CODE_SECONDS,
    GRANT_SECONDS,
    REFRESH_SECONDS,
    REQUEST_SECONDS,
    AuthorizationServer,
    AuthorizeRefusal,
    OAuthError,
    UsedOnce,
    error_body,
    pkce_matches,
    s256,
)
from clientmcp_fast.core.tokens import ROLE_AGENT, ROLE_CLIENT, TokenError, TokenVerifier, mint

SECRET = b"oauth-tests-secret-0123456789abcdef-0123"
OLD_SECRET = b"oauth-tests-old-secret-0123456789abcdef0"
OTHER_SECRET = b"not-this-bridges-secret-0123456789abcdef"
ISSUER = "https://bridge.example"
NOW = 1_700_000_000.0
APP = "todo-app"
RESOURCE = f"{ISSUER}/apps/{APP}/mcp"
REDIRECT = "https://host.example/oauth/callback"
# RFC 7636 Appendix B: the example verifier and its S256 challenge.
VERIFIER = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
# RFC 6749 §5.2: error_description holds %x20-21 / %x23-5B / %x5D-7E only.
DESCRIPTION = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]+")


def counting_random():
    """Random bytes that differ at each call, and are the same in every run."""
    counter = itertools.count(1)
    return lambda n: next(counter).to_bytes(n, "big")


def new_server(**options) -> AuthorizationServer:
    return AuthorizationServer(ISSUER, (SECRET, OLD_SECRET), SECRET, counting_random(), **options)


@pytest.fixture
def server() -> AuthorizationServer:
    return new_server()


def register(server: AuthorizationServer, **metadata) -> dict:
    body = {"redirect_uris": [REDIRECT], "client_name": "Host Example", **metadata}
    return json.loads(server.register(json.dumps(body).encode(), NOW))


def refusal(call, *args, **kwargs) -> OAuthError:
    with pytest.raises(OAuthError) as caught:
        call(*args, **kwargs)
    error = caught.value
    assert error.error in oauth.ERRORS
    assert DESCRIPTION.fullmatch(error.description), error.description
    assert json.loads(error.body()) == {"error": error.error, "error_description": error.description}
    return error


def authorize_query(client_id: str, **parameters) -> bytes:
    base = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "state": "xyz-state",
        "code_challenge": CHALLENGE,
        "code_challenge_method": "S256",
        "resource": RESOURCE,
    }
    base.update(parameters)
    return urlencode({k: v for k, v in base.items() if v is not None}).encode()


def code_for(
    server: AuthorizationServer, client_id: str, now: float = NOW, gen: int = 0, **parameters
) -> str:
    """An authorization code as the consent step will issue it: the test plays the person and the app."""
    request = server.authorize_request(authorize_query(client_id, **parameters))
    return server.issue_code(request, now, gen)


def token_body(**parameters) -> bytes:
    return urlencode({k: v for k, v in parameters.items() if v is not None}).encode()


def exchange(server, client_id, code, now=NOW, gen=0, **extra) -> dict:
    parameters = {
        "grant_type": "authorization_code",
        "code": code,
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "code_verifier": VERIFIER,
        "resource": RESOURCE,
        **extra,
    }
    return json.loads(server.token(token_body(**parameters), now, lambda app: gen))


def refresh(server, client_id, refresh_token, now=NOW, gen=0, **extra) -> dict:
    parameters = {
        "grant_type": "refresh_token",
        "refresh_token": refresh_token,
        "client_id": client_id,
        **extra,
    }
    return json.loads(server.token(token_body(**parameters), now, lambda app: gen))


def claims_of(token: str) -> dict:
    return jwt.decode(token, SECRET, algorithms=["HS256"], options={"verify_exp": False, "verify_aud": False})


@pytest.fixture
def client_id(server) -> str:
    return register(server)["client_id"]


# -- RFC 8414 and RFC 9728: the metadata -----------------------------------------------------


def test_the_authorization_server_metadata_names_what_is_supported(server):
    metadata = json.loads(server.metadata)
    assert metadata == {
        "issuer": ISSUER,
        "authorization_endpoint": f"{ISSUER}/oauth/authorize",
        "token_endpoint": f"{ISSUER}/oauth/token",
        "registration_endpoint": f"{ISSUER}/oauth/register",
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": True,
    }


def test_each_app_is_a_protected_resource_whose_metadata_names_this_server(server):
    assert json.loads(server.resource_metadata(APP)) == {
        "resource": RESOURCE,
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
        "resource_name": APP,
    }
    # RFC 9728 §3.1: the well-known segment goes between the host and the resource's path.
    assert (
        server.resource_metadata_url(APP) == f"{ISSUER}/.well-known/oauth-protected-resource/apps/{APP}/mcp"
    )
    assert (
        server.challenge(APP, False)
        == (
            f'Bearer resource_metadata="{ISSUER}/.well-known/oauth-protected-resource/apps/{APP}/mcp"'
        ).encode()
    )
    assert server.challenge(APP, True).endswith(b', error="invalid_token"')


@pytest.mark.parametrize(
    ("resource", "app"),
    [(RESOURCE, APP), ("HTTPS://Bridge.Example/apps/todo-app/mcp", APP), (f"{ISSUER}/apps/a:b@c.d/mcp", "a:b@c.d"),
     (f"{ISSUER}/apps/todo-app/mcp/", None), (f"{ISSUER}/apps/todo-app/MCP", None), (f"{ISSUER}/apps//mcp", None),
     (f"{ISSUER}/apps/a%20b/mcp", None), (f"{ISSUER}/apps/a/b/mcp", None), (f"{ISSUER}/mcp", None),
     (f"{ISSUER}:443/apps/todo-app/mcp", None), ("https://other.example/apps/todo-app/mcp", None),
     (f"{ISSUER}.evil/apps/todo-app/mcp", None), (f"{ISSUER}/apps/todo-app/mcp?x=1", None), (ISSUER, None)],
)  # fmt: skip
def test_a_resource_names_an_app_of_this_bridge_or_nothing(server, resource, app):
    assert server.app_of_resource(resource) == app


# -- RFC 7591: registration, carried in the client ID ------------------------------------------


def test_a_registration_is_answered_with_a_client_id_that_carries_it(server):
    registered = register(
        server, token_endpoint_auth_method="client_secret_basic", logo_uri="https://x/l.png"
    )
    assert registered == {
        "client_id": registered["client_id"],
        "client_id_issued_at": int(NOW),
        "redirect_uris": [REDIRECT],
        "client_name": "Host Example",
        "token_endpoint_auth_method": "none",  # public clients only (RFC 7591 §3.2.1 lets the server decide)
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
    }
    client = server.client(registered["client_id"])
    assert client.redirect_uris == (REDIRECT,) and client.name == "Host Example"
    assert claims_of(registered["client_id"])["role"] == "oauth_client"
    assert "logo_uri" not in claims_of(registered["client_id"])  # nothing kept that is not used


def test_two_registrations_alike_get_two_client_ids(server):
    assert register(server)["client_id"] != register(server)["client_id"]


def test_a_client_id_signed_with_a_secret_still_accepted_is_good(server):
    old = AuthorizationServer(ISSUER, (OLD_SECRET,), OLD_SECRET, counting_random())
    client_id = register(old)["client_id"]
    assert server.client(client_id).redirect_uris == (REDIRECT,)


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[]", b'"text"', b"{", b"\xff"],
)
def test_a_registration_that_is_not_a_json_object_is_refused(server, body):
    assert refusal(server.register, body, NOW).error == "invalid_client_metadata"


def test_a_registration_over_16_kib_is_refused(server):
    body = json.dumps({"redirect_uris": [REDIRECT], "pad": "x" * 16384}).encode()
    error = refusal(server.register, body, NOW)
    assert (error.error, error.description) == (
        "invalid_client_metadata",
        "the registration is larger than 16384 bytes",
    )


BAD_HOST = "a redirect URI's host is not a DNS name or an IP literal, or its port is not a number"
NOT_LOOPBACK = "an http:// redirect URI must be on loopback (127.0.0.1, [::1] or localhost): use https://"


@pytest.mark.parametrize(
    ("uris", "why"),
    [(None, "redirect_uris must be an array of 1-4 redirect URIs"),
     ([], "redirect_uris must be an array of 1-4 redirect URIs"),
     ([REDIRECT] * 5, "redirect_uris must be an array of 1-4 redirect URIs"),
     ("https://host.example/cb", "redirect_uris must be an array of 1-4 redirect URIs"),
     ([7], "a redirect URI is not a non-empty string"),
     ([""], "a redirect URI is not a non-empty string"),
     (["https://host.example/" + "a" * 500], "a redirect URI is longer than 512 characters"),
     (["https://host.example/a b"], "a redirect URI holds a space, a control or a non-ASCII character"),
     (["https://hôst.example/cb"], "a redirect URI holds a space, a control or a non-ASCII character"),
     (["https://host.example/cb#frag"], "a redirect URI has a fragment"),
     (["/relative/cb"], "a redirect URI is not an absolute URI with a scheme"),
     (["1http://x/cb"], "a redirect URI is not an absolute URI with a scheme"),
     (["javascript:alert(1)"], "a redirect URI of the scheme javascript is refused"),
     (["JavaScript://x/%0aalert(1)"], "a redirect URI of the scheme javascript is refused"),
     (["data:text/html,hi"], "a redirect URI of the scheme data is refused"),
     (["file:///etc/passwd"], "a redirect URI of the scheme file is refused"),
     (["https:/host.example/cb"], "a redirect URI of the scheme https has no authority (//host)"),
     (["https:///cb"], BAD_HOST), (["https://host.example:x/cb"], BAD_HOST),
     (["https://me@host.example/cb"], "a redirect URI holds a user name"),
     (["http://host.example/cb"], NOT_LOOPBACK), (["http://127.0.0.1.nip.io/cb"], NOT_LOOPBACK)],
)  # fmt: skip
def test_a_redirect_uri_that_cannot_be_registered_is_refused(server, uris, why):
    body = json.dumps({"redirect_uris": uris} if uris is not None else {"client_name": "x"}).encode()
    error = refusal(server.register, body, NOW)
    assert error.error == "invalid_redirect_uri"
    assert error.description == why


@pytest.mark.parametrize(
    "uri",
    ["https://host.example/cb?x=1", "http://127.0.0.1:33418/", "http://[::1]/cb", "http://localhost:3000/cb",
     "cursor://anysphere.cursor-retrieval/oauth/callback", "com.example.app:/oauth2redirect", "https://[2001:db8::1]:8443/cb"],
)  # fmt: skip
def test_the_redirect_uris_of_web_and_native_clients_are_registered(server, uri):
    assert register(server, redirect_uris=[uri])["redirect_uris"] == [uri]


@pytest.mark.parametrize(
    ("name", "why"),
    [("", "client_name is not a non-empty string"), ("  ", "client_name is not a non-empty string"),
     (7, "client_name is not a non-empty string"), ("x" * 101, "client_name is longer than 100 characters"),
     ("Good\u202eliveC", "client_name holds a control, format or private-use character"),
     ("Line\nbreak", "client_name holds a control, format or private-use character"),
     ("zero\u200bwidth", "client_name holds a control, format or private-use character")],
)  # fmt: skip
def test_a_client_name_that_could_mislead_the_consent_page_is_refused(server, name, why):
    error = refusal(
        server.register, json.dumps({"redirect_uris": [REDIRECT], "client_name": name}).encode(), NOW
    )
    assert (error.error, error.description) == ("invalid_client_metadata", why)


@pytest.mark.parametrize(
    "metadata",
    [{"grant_types": ["client_credentials"]}, {"grant_types": ["refresh_token"]}, {"grant_types": "authorization_code"},
     {"grant_types": ["authorization_code", "implicit"]}, {"response_types": ["token"]}, {"response_types": []}],
)  # fmt: skip
def test_a_grant_or_response_type_other_than_the_code_flow_is_refused(server, metadata):
    body = json.dumps({"redirect_uris": [REDIRECT], **metadata}).encode()
    assert refusal(server.register, body, NOW).error == "invalid_client_metadata"


def forged_client_ids(server: AuthorizationServer) -> dict[str, str]:
    good = register(server)["client_id"]
    header, payload, signature = good.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["redirect_uris"] = ["https://attacker.example/cb"]
    tampered = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    foreign = AuthorizationServer(ISSUER, (OTHER_SECRET,), OTHER_SECRET, counting_random())
    return {
        "another bridge's": register(foreign)["client_id"],
        "redirect URIs changed": f"{header}.{tampered}.{signature}",
        "an agent token": mint(SECRET, ROLE_AGENT, APP, 3600, NOW),
        "an app token": mint(SECRET, ROLE_CLIENT, APP, 3600, NOW),
        "a URL (metadata document)": "https://host.example/client.json",
        "too long": good + "A" * 4096,
    }


def test_a_forged_client_id_is_invalid_client(server):
    for what, client_id in forged_client_ids(server).items():
        error = refusal(server.client, client_id)
        assert error.error == "invalid_client", what


# -- RFC 6749 §4.1.1, RFC 7636, RFC 8707, RFC 9207: the authorization request ---------------------


def test_a_valid_authorization_request_is_bound_to_client_redirect_challenge_and_resource(server, client_id):
    request = server.authorize_request(authorize_query(client_id, scope="mcp tools"))
    assert (request.client_key, request.client_name) == (server.client(client_id).key, "Host Example")
    assert (request.redirect_uri, request.redirect_given, request.state) == (REDIRECT, True, "xyz-state")
    assert (request.challenge, request.resource, request.app_id, request.scope) == (
        CHALLENGE,
        RESOURCE,
        APP,
        "mcp tools",
    )


def test_the_only_registered_redirect_uri_is_used_when_none_is_given(server, client_id):
    request = server.authorize_request(authorize_query(client_id, redirect_uri=None))
    assert (request.redirect_uri, request.redirect_given) == (REDIRECT, False)


def page_refusal(server, query: bytes) -> AuthorizeRefusal:
    with pytest.raises(AuthorizeRefusal) as caught:
        server.authorize_request(query)
    assert caught.value.redirect is None, "never sent to a redirect URI that is not known good"
    return caught.value


def test_a_bad_client_id_is_shown_to_the_person_never_redirected(server):
    for what, client_id in forged_client_ids(server).items():
        assert page_refusal(server, authorize_query(client_id)).error == "invalid_client", what
    assert page_refusal(server, authorize_query(None)).error == "invalid_client"


@pytest.mark.parametrize(
    "redirect",
    [REDIRECT + "/", REDIRECT[:-1], "https://HOST.example/oauth/callback", REDIRECT + "?x=1", "https://host.example/oauth/callback%20",
     "https://host.example:443/oauth/callback", "https://attacker.example/oauth/callback", "https://host.example.attacker.example/oauth/callback"],
)  # fmt: skip
def test_a_redirect_uri_not_registered_byte_for_byte_is_never_redirected_to(server, client_id, redirect):
    """No open redirect: a redirect URI one byte away from the registered one is an error shown on the page."""
    refused = page_refusal(server, authorize_query(client_id, redirect_uri=redirect))
    assert (refused.error, refused.description) == (
        "invalid_request",
        "redirect_uri is not one the client registered, byte for byte",
    )


def test_a_missing_redirect_uri_with_several_registered_is_shown_to_the_person(server):
    client_id = register(server, redirect_uris=[REDIRECT, "https://host.example/other"])["client_id"]
    refused = page_refusal(server, authorize_query(client_id, redirect_uri=None))
    assert refused.description == "redirect_uri is missing, and the client registered several"


@pytest.mark.parametrize(
    ("registered", "given", "allowed"),
    [("http://127.0.0.1:33418/cb", "http://127.0.0.1:50123/cb", True),
     ("http://127.0.0.1/cb", "http://127.0.0.1:50123/cb", True),
     ("http://[::1]:1/cb", "http://[::1]/cb", True), ("http://127.0.0.1:1/cb", "http://127.0.0.1:2/other", False),
     ("http://127.0.0.1:1/cb", "http://[::1]:1/cb", False), ("http://localhost:1/cb", "http://localhost:2/cb", False),
     ("http://127.0.0.1:1/cb", "http://127.0.0.1:x/cb", False),
     ("http://127.0.0.1:1/cb", "http://127.0.0.1:1@evil.example/cb", False),
     ("http://127.0.0.1:1/cb", "https://127.0.0.1:1/cb", False)],
)  # fmt: skip
def test_a_loopback_ip_redirect_may_change_its_port_and_nothing_else(server, registered, given, allowed):
    """RFC 8252 §7.3: the port of a loopback IP literal is chosen when the client listens."""
    client_id = register(server, redirect_uris=[registered])["client_id"]
    if allowed:
        assert server.authorize_request(authorize_query(client_id, redirect_uri=given)).redirect_uri == given
    else:
        page_refusal(server, authorize_query(client_id, redirect_uri=given))


def test_a_parameter_sent_twice_is_refused_on_the_page(server, client_id):
    query = authorize_query(client_id) + b"&state=again"
    refused = page_refusal(server, query)
    assert (refused.error, refused.description) == (
        "invalid_request",
        "the parameter state is sent more than once",
    )
    assert page_refusal(server, authorize_query(client_id) + b"&x=%ff").description == (
        "the query is not UTF-8 in application/x-www-form-urlencoded"
    )


def redirected(server, query: bytes) -> dict[str, list[str]]:
    """The error a refused request hands the client at its redirect URI, with state and iss."""
    with pytest.raises(AuthorizeRefusal) as caught:
        server.authorize_request(query)
    assert caught.value.redirect is not None
    assert caught.value.redirect.startswith(REDIRECT + "?")
    parameters = parse_qs(urlsplit(caught.value.redirect).query, strict_parsing=True)
    assert parameters["error"] == [caught.value.error] and parameters["iss"] == [ISSUER]
    assert parameters["error_description"] == [caught.value.description]
    return parameters


NOT_S256 = "transform algorithm not supported: code_challenge_method must be S256"
BAD_CHALLENGE = "code_challenge is not an S256 challenge (43 base64url characters)"


@pytest.mark.parametrize(
    ("parameters", "error", "description"),
    [({"response_type": None}, "invalid_request", "response_type is missing: it must be code"),
     ({"response_type": "token"}, "unsupported_response_type",
      "response_type must be code (the authorization code grant)"),
     ({"code_challenge": None}, "invalid_request", "code_challenge is missing: PKCE (RFC 7636) with S256 is required"),
     ({"code_challenge_method": None}, "invalid_request", NOT_S256),
     ({"code_challenge_method": "plain", "code_challenge": VERIFIER}, "invalid_request", NOT_S256),
     ({"code_challenge": CHALLENGE[:-1]}, "invalid_request", BAD_CHALLENGE),
     ({"code_challenge": CHALLENGE[:-1] + "="}, "invalid_request", BAD_CHALLENGE),
     ({"resource": None}, "invalid_target", f"resource is missing: name the app, {ISSUER}/apps/<client-id>/mcp"),
     ({"resource": "https://other.example/apps/todo-app/mcp"}, "invalid_target",
      f"resource is not an app of this bridge: {ISSUER}/apps/<client-id>/mcp"),
     ({"resource": f"{ISSUER}/mcp"}, "invalid_target",
      f"resource is not an app of this bridge: {ISSUER}/apps/<client-id>/mcp"),
     ({"scope": "a  b"}, "invalid_scope", "scope is not a list of scope tokens separated by single spaces"),
     ({"scope": 'a"b'}, "invalid_scope", "scope is not a list of scope tokens separated by single spaces")],
)  # fmt: skip
def test_a_refused_request_is_redirected_with_its_error_state_and_iss(
    server, client_id, parameters, error, description
):
    answer = redirected(server, authorize_query(client_id, **parameters))
    assert (answer["error"], answer["error_description"], answer["state"]) == (
        [error],
        [description],
        ["xyz-state"],
    )


def test_a_state_that_is_not_printable_ascii_is_refused_and_not_echoed(server, client_id):
    for state in ("x" * 1025, "tab\there"):
        answer = redirected(server, authorize_query(client_id, state=state))
        assert answer["error"] == ["invalid_request"] and "state" not in answer


def test_the_authorization_response_carries_code_state_and_iss(server, client_id):
    """RFC 9207 §2: iss beside the code, so that a client talking to several servers tells them apart."""
    request = server.authorize_request(authorize_query(client_id))
    uri = server.authorization_response(request, "the-code")
    assert uri.startswith(REDIRECT + "?")
    assert parse_qs(urlsplit(uri).query) == {"code": ["the-code"], "state": ["xyz-state"], "iss": [ISSUER]}
    denied = parse_qs(urlsplit(server.denied(request, "the app said no")).query)
    assert denied == {
        "error": ["access_denied"],
        "error_description": ["the app said no"],
        "state": ["xyz-state"],
        "iss": [ISSUER],
    }


def test_a_redirect_uri_with_a_query_keeps_it(server):
    client_id = register(server, redirect_uris=["https://host.example/cb?tenant=7"])["client_id"]
    request = server.authorize_request(
        authorize_query(client_id, redirect_uri="https://host.example/cb?tenant=7")
    )
    assert server.authorization_response(request, "c").startswith("https://host.example/cb?tenant=7&code=c&")


# -- the request waiting for consent, and its CSRF token ---------------------------------------


def test_a_pending_request_comes_back_as_it_was_signed(server, client_id):
    request = server.authorize_request(authorize_query(client_id, scope="mcp"))
    value = server.pending(request, NOW)
    back = server.read_pending(value, NOW + REQUEST_SECONDS - 1)
    assert back.id == request.id and len(back.id) == 22
    carried = [name for name in type(request).__slots__ if name != "id"]  # a field added later too
    assert len(carried) >= 9
    for name in carried:
        assert getattr(back, name) == getattr(request, name), name
    assert claims_of(value)["role"] == "oauth_request"


def test_a_pending_request_expired_or_forged_is_refused(server, client_id):
    value = server.pending(server.authorize_request(authorize_query(client_id)), NOW)
    expired = refusal(server.read_pending, value, NOW + REQUEST_SECONDS)
    # Still this bridge's request: its client hears access_denied, with state and iss.
    assert (expired.error, expired.description) == (
        "access_denied",
        "the authorization request expired: no answer within 10 minutes",
    )
    assert expired.request.app_id == APP and expired.redirect.startswith(REDIRECT + "?error=access_denied&")
    foreign = AuthorizationServer(ISSUER, (OTHER_SECRET,), OTHER_SECRET, counting_random())
    forged = foreign.pending(server.authorize_request(authorize_query(client_id)), NOW)
    for bad in (forged, mint(SECRET, ROLE_AGENT, APP, 3600, NOW), code_for(server, client_id)):
        error = refusal(server.read_pending, bad, NOW)
        assert (error.error, error.description) == (
            "invalid_request",
            "the authorization request is not one this bridge issued",
        )


def test_the_csrf_token_is_bound_to_the_cookie_and_the_request(server):
    token = server.csrf_token("cookie-1", "request-1")
    assert server.csrf_matches("cookie-1", "request-1", token)
    assert not server.csrf_matches("cookie-2", "request-1", token)
    assert not server.csrf_matches("cookie-1", "request-2", token)
    assert not server.csrf_matches(None, "request-1", token)
    assert not server.csrf_matches("cookie-1", "request-1", None)
    assert not server.csrf_matches("cookie-1", "request-1", "")
    old = AuthorizationServer(ISSUER, (OLD_SECRET,), OLD_SECRET, counting_random())
    assert server.csrf_matches("c", "r", old.csrf_token("c", "r"))  # made before a rotation


# -- RFC 6749 §4.1.3 and §5: the code for tokens ---------------------------------------------------


def test_a_code_is_exchanged_for_an_agent_token_bound_to_the_resource_and_a_refresh_token(server, client_id):
    answer = exchange(server, client_id, code_for(server, client_id, gen=3), gen=3)
    assert set(answer) == {"access_token", "token_type", "expires_in", "refresh_token"}
    assert (answer["token_type"], answer["expires_in"]) == ("Bearer", ACCESS_SECONDS)
    access = claims_of(answer["access_token"])
    assert access == {
        "sub": APP,
        "role": "agent",
        "aud": RESOURCE,
        "iat": int(NOW),
        "exp": int(NOW) + 3600,
        "gen": 3,
    }
    verifier = TokenVerifier([SECRET])
    verifier.generations = {ROLE_AGENT: {APP: 3}, ROLE_CLIENT: {}}
    assert verifier.verify(answer["access_token"], ROLE_AGENT, NOW) == APP  # what /mcp verifies, unchanged
    refresh_claims = claims_of(answer["refresh_token"])
    assert refresh_claims["role"] == "oauth_refresh" and refresh_claims["exp"] == int(NOW) + REFRESH_SECONDS


def test_no_v1_verifier_takes_a_code_a_refresh_token_a_client_id_or_a_request_for_an_access_token(
    server, client_id
):
    code = code_for(server, client_id)
    refresh_token = exchange(server, client_id, code_for(server, client_id))["refresh_token"]
    pending = server.pending(server.authorize_request(authorize_query(client_id)), NOW)
    verifier = TokenVerifier([SECRET])
    for credential in (code, refresh_token, client_id, pending):
        for role in (ROLE_AGENT, ROLE_CLIENT):
            with pytest.raises(
                TokenError, match="token (role is missing or not client/agent|sub is missing)"
            ):
                verifier.verify(credential, role, NOW)


def test_the_app_s_consented_tools_reach_the_access_token(server, client_id):
    request = server.authorize_request(authorize_query(client_id))
    code = server.issue_code(request, NOW, 0, tools=["read_*", "add_todo"])
    answer = exchange(server, client_id, code)
    assert claims_of(answer["access_token"])["tools"] == ["read_*", "add_todo"]
    again = refresh(server, client_id, answer["refresh_token"], NOW + 10)
    assert claims_of(again["access_token"])["tools"] == ["read_*", "add_todo"]
    with pytest.raises(ValueError):
        server.issue_code(request, NOW, 0, tools=["bad name"])


def test_a_scope_asked_for_is_granted_as_asked_and_said_so(server, client_id):
    answer = exchange(server, client_id, code_for(server, client_id, scope="mcp:tools"))
    assert answer["scope"] == "mcp:tools"


def token_refusal(server, body: bytes, now: float = NOW, gen: int = 0) -> OAuthError:
    return refusal(server.token, body, now, lambda app: gen)


def exchange_refusal(server, client_id, code, now=NOW, gen=0, **extra) -> tuple[str, str]:
    parameters = {
        "grant_type": "authorization_code",
        "code": code,
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "code_verifier": VERIFIER,
        "resource": RESOURCE,
        **extra,
    }
    error = token_refusal(server, token_body(**parameters), now, gen)
    return error.error, error.description


def test_a_token_request_without_or_with_another_grant_type_is_refused(server):
    assert (token_refusal(server, b"code=x").error, token_refusal(server, b"code=x").description) == (
        "invalid_request",
        "grant_type is missing",
    )
    for grant in (
        "password",
        "client_credentials",
        "implicit",
        "urn:ietf:params:oauth:grant-type:device_code",
    ):
        assert token_refusal(server, token_body(grant_type=grant)).error == "unsupported_grant_type"


def test_a_token_request_that_is_not_a_form_or_repeats_a_parameter_is_refused(server, client_id):
    assert token_refusal(server, b"grant_type=authorization_code&grant_type=refresh_token").description == (
        "the parameter grant_type is sent more than once"
    )
    assert token_refusal(server, b"grant_type=%ff").error == "invalid_request"
    assert token_refusal(server, b"\xff").error == "invalid_request"
    assert token_refusal(server, b"a=1&" * 40).description == "the body has more than 32 parameters"
    assert token_refusal(server, b"x" * (16 * 1024 + 1)).description == "the body is larger than 16384 bytes"


def test_a_code_with_a_missing_or_forged_client_id_is_invalid_client(server, client_id):
    code = code_for(server, client_id)
    assert exchange_refusal(server, None, code) == (
        "invalid_client",
        "client_id is missing: this bridge has public clients only",
    )
    for what, forged in forged_client_ids(server).items():
        assert exchange_refusal(server, forged, code)[0] == "invalid_client", what


def test_another_clients_code_is_refused(server, client_id):
    other = register(server)["client_id"]
    code = code_for(server, other)
    assert exchange_refusal(server, client_id, code) == (
        "invalid_grant",
        "the code was issued to another client",
    )


def test_a_code_that_expired_or_is_not_a_code_is_refused(server, client_id):
    code = code_for(server, client_id)
    assert exchange_refusal(server, client_id, code, now=NOW + CODE_SECONDS) == (
        "invalid_grant",
        "the code expired",
    )
    refresh_token = exchange(server, client_id, code_for(server, client_id))["refresh_token"]
    not_codes = {
        "a refresh token": refresh_token,
        "an access token": mint(SECRET, ROLE_AGENT, APP, 3600, NOW),
        "the client ID": client_id,
        "another bridge's code": jwt.encode(claims_of(code), OTHER_SECRET, algorithm="HS256"),
        "junk": "not-a-code",
        "too long": code + "A" * 4096,
    }
    for what, bad in not_codes.items():
        error, description = exchange_refusal(server, client_id, bad)
        assert error == "invalid_grant", what
        assert description in (
            "the code is not one this bridge issued",
            "the code is longer than any this bridge issues",
        ), what


def test_a_code_without_pkce_or_with_a_wrong_verifier_is_refused(server, client_id):
    code = code_for(server, client_id)
    assert exchange_refusal(server, client_id, code, code_verifier=None) == (
        "invalid_request",
        "code_verifier is missing: PKCE (RFC 7636) is required",
    )
    assert exchange_refusal(server, client_id, code, code_verifier="short") == (
        "invalid_request",
        "code_verifier is not 43-128 characters of A-Z a-z 0-9 - . _ ~",
    )
    wrong = "A" * 43
    assert exchange_refusal(server, client_id, code, code_verifier=wrong) == (
        "invalid_grant",
        "code_verifier does not match the code_challenge",
    )
    # The plain method's "verifier equals challenge" is not S256.
    assert exchange_refusal(server, client_id, code, code_verifier=CHALLENGE)[0] == "invalid_grant"
    # None of these used the code up: the rightful client still exchanges it.
    assert "access_token" in exchange(server, client_id, code)


def test_a_code_with_another_redirect_uri_is_refused(server, client_id):
    code = code_for(server, client_id)
    assert exchange_refusal(server, client_id, code, redirect_uri=REDIRECT + "/") == (
        "invalid_grant",
        "redirect_uri is not the one of the authorization request",
    )
    assert exchange_refusal(server, client_id, code, redirect_uri=None) == (
        "invalid_request",
        "redirect_uri is missing: the authorization request had one",
    )
    # Not given at the authorization request: not needed now, and checked if sent.
    quiet = code_for(server, client_id, redirect_uri=None)
    assert "access_token" in exchange(server, client_id, quiet, redirect_uri=None)


def test_a_code_for_another_resource_is_invalid_target(server, client_id):
    code = code_for(server, client_id)
    for resource in (
        f"{ISSUER}/apps/other-app/mcp",
        "https://other.example/apps/todo-app/mcp",
        f"{ISSUER}/mcp",
    ):
        assert exchange_refusal(server, client_id, code, resource=resource) == (
            "invalid_target",
            "resource is not the one the code was issued for",
        )
    assert "access_token" in exchange(
        server, client_id, code, resource=None
    )  # bound at the authorization request


def test_a_code_used_twice_is_refused_and_ends_its_grant(server, client_id):
    """RFC 6749 §4.1.2: a code used twice is refused, and what it gave is revoked where it can be."""
    code = code_for(server, client_id)
    first = exchange(server, client_id, code)
    assert exchange_refusal(server, client_id, code, now=NOW + 1) == (
        "invalid_grant",
        "the code was used already",
    )
    error = token_refusal(
        server,
        token_body(grant_type="refresh_token", refresh_token=first["refresh_token"], client_id=client_id),
        NOW + 2,
    )
    assert (error.error, error.description) == (
        "invalid_grant",
        "the grant was ended: a code or refresh token of it was replayed",
    )


def test_a_code_of_a_revoked_generation_is_refused(server, client_id):
    code = code_for(server, client_id, gen=0)
    assert exchange_refusal(server, client_id, code, gen=1) == (
        "invalid_grant",
        "the app's agent tokens were revoked since the code was issued",
    )


# -- RFC 6749 §6, OAuth 2.1 §4.3.1: refresh with rotation ------------------------------------------


def test_a_refresh_rotates_the_refresh_token_and_keeps_the_grant(server, client_id):
    first = exchange(server, client_id, code_for(server, client_id))
    second = refresh(server, client_id, first["refresh_token"], NOW + 3000, resource=RESOURCE)
    assert second["refresh_token"] != first["refresh_token"]
    old, new = claims_of(first["refresh_token"]), claims_of(second["refresh_token"])
    assert (new["grant"], new["auth_time"], new["aud"], new["sub"]) == (
        old["grant"],
        old["auth_time"],
        RESOURCE,
        APP,
    )
    assert new["exp"] == int(NOW + 3000 + REFRESH_SECONDS)
    assert claims_of(second["access_token"])["exp"] == int(NOW + 3000 + ACCESS_SECONDS)


def test_a_rotated_refresh_token_used_again_ends_the_grant(server, client_id):
    first = exchange(server, client_id, code_for(server, client_id))
    second = refresh(server, client_id, first["refresh_token"], NOW + 1)
    error = token_refusal(
        server,
        token_body(grant_type="refresh_token", refresh_token=first["refresh_token"], client_id=client_id),
        NOW + 2,
    )
    assert (error.error, error.description) == (
        "invalid_grant",
        "the refresh token was used already: the grant is ended",
    )
    error = token_refusal(
        server,
        token_body(grant_type="refresh_token", refresh_token=second["refresh_token"], client_id=client_id),
        NOW + 3,
    )
    assert error.description == "the grant was ended: a code or refresh token of it was replayed"


def refresh_refusal(server, client_id, token, now=NOW, gen=0, **extra) -> tuple[str, str]:
    parameters = {"grant_type": "refresh_token", "refresh_token": token, "client_id": client_id, **extra}
    error = token_refusal(server, token_body(**parameters), now, gen)
    return error.error, error.description


def test_a_refresh_token_of_another_client_expired_or_not_one_is_refused(server, client_id):
    token = exchange(server, client_id, code_for(server, client_id))["refresh_token"]
    other = register(server)["client_id"]
    assert refresh_refusal(server, other, token) == (
        "invalid_grant",
        "the refresh token was issued to another client",
    )
    assert refresh_refusal(server, client_id, token, now=NOW + REFRESH_SECONDS) == (
        "invalid_grant",
        "the refresh token expired",
    )
    assert refresh_refusal(server, client_id, None) == ("invalid_request", "refresh_token is missing")
    for bad in (code_for(server, client_id), mint(SECRET, ROLE_AGENT, APP, 3600, NOW), client_id):
        assert refresh_refusal(server, client_id, bad) == (
            "invalid_grant",
            "the refresh token is not one this bridge issued",
        )
    assert (
        refresh_refusal(server, forged_client_ids(server)["another bridge's"], token)[0] == "invalid_client"
    )


def test_a_refresh_for_another_resource_more_scope_or_a_revoked_generation_is_refused(server, client_id):
    token = exchange(server, client_id, code_for(server, client_id, scope="a b"))["refresh_token"]
    assert refresh_refusal(server, client_id, token, resource=f"{ISSUER}/apps/other/mcp") == (
        "invalid_target",
        "resource is not the one the refresh token was issued for",
    )
    assert refresh_refusal(server, client_id, token, scope="a c")[0] == "invalid_scope"
    assert refresh_refusal(server, client_id, token, gen=1) == (
        "invalid_grant",
        "the app's agent tokens were revoked: authorize again",
    )
    assert "access_token" in refresh(server, client_id, token, scope="b")  # less is allowed


def test_a_grant_ends_30_days_after_the_consent_whatever_the_refreshes(server, client_id):
    answer = exchange(server, client_id, code_for(server, client_id))
    now = NOW
    while "refresh_token" in answer:
        now += REFRESH_SECONDS - 1
        if now >= NOW + GRANT_SECONDS:
            break
        answer = refresh(server, client_id, answer["refresh_token"], now)
        assert claims_of(answer["refresh_token"])["exp"] <= NOW + GRANT_SECONDS
    assert (
        refresh_refusal(server, client_id, answer["refresh_token"], now=NOW + GRANT_SECONDS)[1]
        == "the refresh token expired"
    )


# -- what a process remembers ------------------------------------------------------------------------


def test_used_credentials_are_remembered_until_they_expire_and_within_a_bound():
    used = UsedOnce(3)
    assert used.add("a", 10, 0) and not used.add("a", 10, 5)
    assert used.seen("a", 9) and not used.seen("a", 10)  # expired: forgotten
    for key in "bcde":
        used.add(key, 100, 20)
    assert len(used) == 3 and used.forgotten == 1 and not used.seen("b", 21)


def test_an_entry_that_expires_behind_a_later_one_is_gone_at_its_time():
    """A refresh token near its grant's end expires before one issued earlier: it is not seen after its time."""
    used = UsedOnce(10)
    used.add("long", 100, 0)
    used.add("short", 10, 1)
    assert used.seen("short", 9) and not used.seen("short", 10)
    assert used.add("short", 50, 11) and used.seen("short", 49)


def test_the_used_code_memory_is_bounded_and_its_bound_documented(client_id):
    """Past the bound the oldest code is forgotten: a replay of it is then not caught (docs/oauth.md, Decisions)."""
    server = new_server(max_used_codes=2)
    client_id = register(server)["client_id"]
    codes = [code_for(server, client_id) for _ in range(3)]
    for code in codes:
        exchange(server, client_id, code)
    assert len(server.used_codes) == 2 and server.used_codes.forgotten == 1
    assert exchange_refusal(server, client_id, codes[2])[1] == "the code was used already"


# -- RFC 7636 and the error bodies ------------------------------------------------------------------


def test_s256_is_rfc_7636_appendix_b():
    assert s256(VERIFIER) == CHALLENGE
    assert pkce_matches(VERIFIER, CHALLENGE)
    assert not pkce_matches(VERIFIER + "x", CHALLENGE)
    assert not pkce_matches("short", s256("short"))  # under 43 characters is no verifier


def test_an_error_body_never_holds_a_quote_or_a_backslash():
    body = json.loads(error_body("invalid_request", 'say "no" \\ now é'))
    assert body == {"error": "invalid_request", "error_description": "say ?no? ? now ?"}


def test_a_csrf_token_is_an_hmac_under_the_signing_secret(server):
    expected = hmac.new(SECRET, b"csrf\0c\0r", hashlib.sha256).digest()
    assert server.csrf_token("c", "r") == base64.urlsafe_b64encode(expected).rstrip(b"=").decode()


# -- draft-ietf-oauth-client-id-metadata-document: a client known by its document's URL -------------

DOCUMENT_URL = "https://client.example/oauth/client.json"
oauth_absent = object()  # a member left out of a document
BAD_HOST = "its host is not a DNS name or an IP literal, or its port is not one from 1 to 65535"
NOT_URL = "it holds a space, a backslash, a control or a non-ASCII character"
PUBLIC = "token_endpoint_auth_method must be none: this bridge takes public clients only"
URIS = "redirect_uris must be an array of 1-16 redirect URIs"


def document_server(**options) -> AuthorizationServer:
    return new_server(client_documents=True, **options)


def document_body(url: str = DOCUMENT_URL, **change) -> bytes:
    body = {"client_id": url, "client_name": "Document Host", "redirect_uris": [REDIRECT], **change}
    return json.dumps({k: v for k, v in body.items() if v is not oauth_absent}).encode()


def test_the_metadata_offers_documents_only_when_the_bridge_reads_them(server):
    assert "client_id_metadata_document_supported" not in json.loads(server.metadata)
    metadata = json.loads(document_server().metadata)
    assert metadata["client_id_metadata_document_supported"] is True
    assert metadata["registration_endpoint"] == f"{ISSUER}/oauth/register"  # hosts that cannot still register


@pytest.mark.parametrize(
    ("url", "why"),
    [("http://client.example/c.json", "it does not start with https://"),
     ("HTTPS://client.example/c.json", "it does not start with https://"),
     ("https:/client.example/c.json", "it does not start with https://"),
     ("ftp://client.example/c.json", "it does not start with https://"),
     ("https://client.example", "it has no path: a document is at https://host/path"),
     ("https://client.example/", "it has no path: a document is at https://host/path"),
     ("https://client.example?x=1", "it has no path: a document is at https://host/path"),
     ("https://client.example/c.json#top", "it has a fragment"),
     ("https://user@client.example/c.json", "it holds a user name"),
     ("https://user:pw@client.example/c.json", "it holds a user name"),
     ("https://client.example/a/../c.json", "it has a . or .. path segment"),
     ("https://client.example/./c.json", "it has a . or .. path segment"),
     ("https://client.example/a/%2E%2E/c.json", "it has a . or .. path segment"),
     ("https://client.example/a/.%2e", "it has a . or .. path segment"),
     ("https://client.example/c .json", NOT_URL), ("https://client.example\\@evil.example/c.json", NOT_URL),
     ("https://clíent.example/c.json", NOT_URL), ("https://client.example/c.json\r\nX: y", NOT_URL),
     ("https://client.example:0/c.json", BAD_HOST), ("https://client.example:65536/c.json", BAD_HOST),
     ("https://client.example:/c.json", BAD_HOST),
     ("https://client.example:x/c.json", BAD_HOST), ("https://cli_ent.example/c.json", BAD_HOST),
     ("https:///c.json", BAD_HOST), ("https://[::1/c.json", BAD_HOST), ("https://[:::::]/c.json", BAD_HOST),
     ("https://client.example/" + "a" * 512, "it is longer than 512 characters")],
)  # fmt: skip
def test_a_client_id_url_that_breaks_a_rule_of_the_draft_is_refused(url, why):
    assert oauth.client_id_url_problem(url) == why
    with pytest.raises(AuthorizeRefusal) as caught:
        document_server().document_to_read(authorize_query(url))
    assert caught.value.error == "invalid_client" and caught.value.redirect is None
    assert caught.value.description == f"client_id is not the URL of a client ID metadata document: {why}"


@pytest.mark.parametrize(
    ("url", "parts"),
    [(DOCUMENT_URL, ("client.example", 443, "client.example", "/oauth/client.json")),
     ("https://Client.Example:8443/c?v=1", ("client.example", 8443, "Client.Example:8443", "/c?v=1")),
     ("https://[2001:DB8::1]/c", ("2001:db8::1", 443, "[2001:DB8::1]", "/c")),
     ("https://192.0.2.7:444/a/b;c", ("192.0.2.7", 444, "192.0.2.7:444", "/a/b;c"))],
)  # fmt: skip
def test_a_client_id_url_names_what_to_dial_what_host_to_name_and_what_to_get(url, parts):
    assert oauth.client_id_url_problem(url) is None
    assert oauth.client_id_url_parts(url) == parts


def test_only_a_client_id_with_a_colon_is_a_url_and_no_issued_one_has_one(server, client_id):
    assert ":" not in client_id and not oauth.is_client_id_url(client_id)
    documents = document_server()
    assert documents.document_to_read(authorize_query(client_id)) is None
    assert documents.document_to_read(authorize_query(None)) is None
    assert documents.document_to_read(authorize_query(DOCUMENT_URL)) == DOCUMENT_URL


def test_a_url_client_id_is_refused_where_the_bridge_reads_no_documents(server):
    with pytest.raises(AuthorizeRefusal) as caught:
        server.document_to_read(authorize_query(DOCUMENT_URL))
    assert (caught.value.error, caught.value.redirect) == ("invalid_client", None)
    assert caught.value.description == (
        "client_id is a URL, and this bridge reads no client ID metadata documents: register at /oauth/register"
    )
    assert page_refusal(server, authorize_query(DOCUMENT_URL)).error == "invalid_client"
    code_refusal = refusal(server.client, DOCUMENT_URL)
    assert code_refusal.error == "invalid_client"


def test_a_document_describes_a_public_client_with_its_redirect_uris():
    uris = [REDIRECT, "http://127.0.0.1/callback", "cursor://oauth/cb", REDIRECT]
    client = oauth.document_client(
        DOCUMENT_URL,
        document_body(redirect_uris=uris, token_endpoint_auth_method="none", logo_uri="https://x/l.png",
                      grant_types=["authorization_code", "refresh_token"], jwks_uri="http://10.0.0.1/keys"),
    )  # fmt: skip
    assert (client.client_id, client.name, client.site) == (
        DOCUMENT_URL,
        "Document Host",
        "https://client.example",
    )
    assert client.redirect_uris == (REDIRECT, "http://127.0.0.1/callback", "cursor://oauth/cb")
    assert client.key == oauth.client_key(DOCUMENT_URL)
    # token_endpoint_auth_method left out: a document cannot keep a secret, so none; no name: none shown.
    bare = oauth.document_client(DOCUMENT_URL, document_body(client_name=oauth_absent))
    assert bare.name is None and bare.redirect_uris == (REDIRECT,)


DOCUMENT = "the client's metadata document: "


@pytest.mark.parametrize(
    ("body", "why"),
    [(b"{" + b" " * oauth.MAX_DOCUMENT_BYTES + b"}", "it is larger than 16384 bytes"),
     (b"<html>", "it is not JSON"), (b"", "it is not JSON"), (b'{"client_id": 1,}', "it is not JSON"),
     (b"[]", "it is not a JSON object"), (b'"https://client.example/oauth/client.json"', "it is not a JSON object"),
     (document_body(client_id=oauth_absent), "it has no client_id"),
     (document_body(client_id=None), "its client_id is not its URL, byte for byte"),
     (document_body(client_id=DOCUMENT_URL + "/"), "its client_id is not its URL, byte for byte"),
     (document_body(client_id="https://Client.example/oauth/client.json"),
      "its client_id is not its URL, byte for byte"),
     (document_body(client_id="https://client.example:443/oauth/client.json"),
      "its client_id is not its URL, byte for byte"),
     (document_body(client_id="https://other.example/oauth/client.json"),
      "its client_id is not its URL, byte for byte"),
     (document_body(client_secret="s3cret"), "it holds a client_secret, which no document may"),
     (document_body(client_secret_expires_at=0), "it holds a client_secret, which no document may"),
     (document_body(token_endpoint_auth_method="client_secret_basic"),
      PUBLIC),
     (document_body(token_endpoint_auth_method="client_secret_post"), PUBLIC),
     (document_body(token_endpoint_auth_method="private_key_jwt"), PUBLIC),
     (document_body(token_endpoint_auth_method=None), PUBLIC),
     (document_body(redirect_uris=oauth_absent), URIS),
     (document_body(redirect_uris=[]), URIS), (document_body(redirect_uris=REDIRECT), URIS),
     (document_body(redirect_uris=[f"https://host.example/{n}" for n in range(17)]), URIS),
     (document_body(redirect_uris=["http://host.example/cb"]),
      "an http:// redirect URI must be on loopback (127.0.0.1, [::1] or localhost): use https://"),
     (document_body(redirect_uris=["javascript:alert(1)"]), "a redirect URI of the scheme javascript is refused"),
     (document_body(redirect_uris=[REDIRECT + "#x"]), "a redirect URI has a fragment"),
     (document_body(redirect_uris=["/relative"]), "a redirect URI is not an absolute URI with a scheme"),
     (document_body(redirect_uris=[None]), "a redirect URI is not a non-empty string"),
     (document_body(client_name="Ho\u202est"), "client_name holds a control, format or private-use character"),
     (document_body(client_name=""), "client_name is not a non-empty string"),
     (document_body(grant_types=["client_credentials"]),
      "grant_types must include authorization_code and may add refresh_token, nothing else"),
     (document_body(response_types=["token"]), "response_types must be [code]")],
)  # fmt: skip
def test_a_document_that_cannot_describe_a_client_is_refused(body, why):
    error = refusal(oauth.document_client, DOCUMENT_URL, body)
    assert (error.error, error.description) == ("invalid_client", DOCUMENT + why)


def test_a_document_at_its_bound_is_taken():
    body = document_body()
    body = body[:-1] + b" " * (oauth.MAX_DOCUMENT_BYTES - len(body)) + b"}"
    assert len(body) == oauth.MAX_DOCUMENT_BYTES == oauth.MAX_REGISTRATION_BYTES
    assert oauth.document_client(DOCUMENT_URL, body).client_id == DOCUMENT_URL


def document_query(**parameters) -> bytes:
    return authorize_query(DOCUMENT_URL, **parameters)


@pytest.fixture
def documents() -> tuple[AuthorizationServer, oauth.Client]:
    uris = [REDIRECT, "http://127.0.0.1:33418/cb", "https://host.example/other"]
    return document_server(), oauth.document_client(DOCUMENT_URL, document_body(redirect_uris=uris))


def test_a_request_of_a_client_known_by_its_document_is_bound_like_a_registered_ones(documents):
    server, client = documents
    request = server.authorize_request(document_query(), client)
    assert (request.client_key, request.client_name, request.client_site) == (
        client.key,
        "Document Host",
        "https://client.example",
    )
    assert (request.redirect_uri, request.resource, request.app_id) == (REDIRECT, RESOURCE, APP)
    # A registered client has no site to show.
    registered = new_server()
    assert (
        registered.authorize_request(authorize_query(register(registered)["client_id"])).client_site is None
    )


@pytest.mark.parametrize(
    "redirect",
    [REDIRECT + "/", "https://HOST.example/oauth/callback", "https://host.example:443/oauth/callback",
     "https://client.example/oauth/callback", "https://attacker.example/oauth/callback", DOCUMENT_URL,
     "http://127.0.0.1:33418/other"],
)  # fmt: skip
def test_a_redirect_uri_not_in_the_document_byte_for_byte_is_never_redirected_to(documents, redirect):
    server, client = documents
    with pytest.raises(AuthorizeRefusal) as caught:
        server.authorize_request(document_query(redirect_uri=redirect), client)
    assert (caught.value.error, caught.value.redirect) == ("invalid_request", None)
    assert caught.value.description == "redirect_uri is not one the client registered, byte for byte"


def test_a_documents_loopback_redirect_may_change_its_port_and_one_of_several_must_be_named(documents):
    server, client = documents
    given = "http://127.0.0.1:50999/cb"
    assert server.authorize_request(document_query(redirect_uri=given), client).redirect_uri == given
    with pytest.raises(AuthorizeRefusal) as caught:
        server.authorize_request(document_query(redirect_uri=None), client)
    assert caught.value.description == "redirect_uri is missing, and the client registered several"
    only = oauth.document_client(DOCUMENT_URL, document_body())
    assert server.authorize_request(document_query(redirect_uri=None), only).redirect_uri == REDIRECT


def test_past_the_documents_redirect_uri_a_refusal_goes_to_the_client_with_iss(documents):
    server, client = documents
    with pytest.raises(AuthorizeRefusal) as caught:
        server.authorize_request(document_query(code_challenge_method="plain"), client)
    answer = parse_qs(urlsplit(caught.value.redirect).query)
    assert caught.value.redirect.startswith(REDIRECT + "?")
    assert (answer["error"], answer["state"], answer["iss"]) == (["invalid_request"], ["xyz-state"], [ISSUER])


def test_a_url_client_is_not_authorized_without_its_document_nor_with_anothers(documents):
    server, client = documents
    refused = page_refusal(server, document_query())
    assert (refused.error, refused.description) == (
        "invalid_client",
        "the client's metadata document was not read",
    )
    other = oauth.document_client("https://other.example/c", document_body("https://other.example/c"))
    with pytest.raises(ValueError):
        server.authorize_request(document_query(), other)


def test_a_document_clients_request_carries_its_site_through_the_consent_page(documents):
    server, client = documents
    request = server.authorize_request(document_query(), client)
    back = server.read_pending(server.pending(request, NOW), NOW + 1)
    assert back.client_site == "https://client.example" and back.client_key == client.key


def test_a_document_clients_code_is_exchanged_under_its_url_and_no_other(documents):
    server, client = documents
    request = server.authorize_request(document_query(), client)
    code = server.issue_code(request, NOW, 0)
    other_url = "https://client.example/oauth/other.json"
    assert refusal(exchange, server, other_url, code).description == "the code was issued to another client"
    assert refusal(exchange, server, DOCUMENT_URL + "/", code).error == "invalid_grant"
    tokens = exchange(server, DOCUMENT_URL, code)
    assert claims_of(tokens["access_token"])["aud"] == RESOURCE
    again = refresh(server, DOCUMENT_URL, tokens["refresh_token"])
    assert set(again) >= {"access_token", "refresh_token"}
    malformed = refusal(refresh, server, "https://client.example/", again["refresh_token"])
    assert malformed.error == "invalid_client" and "it has no path" in malformed.description
    # Where the bridge reads no documents, a URL is no client at all.
    off = new_server()
    assert refusal(exchange, off, DOCUMENT_URL, code).error == "invalid_client"


@pytest.mark.parametrize(
    ("cache_control", "age", "seconds"),
    [(None, None, 300), ("", None, 300), ("public", None, 300), ("max-age=120", None, 120),
     ("public, max-age=120", None, 120), ("MAX-AGE=120", None, 120), ('max-age="60"', None, 60),
     ("max-age=86400", None, 3600), ("max-age=600", "100", 500), ("max-age=600", "700", 0),
     ("max-age=600", "x", 600), ("max-age=0", None, 0), ("no-store", None, 0), ("max-age=60, no-cache", None, 0),
     ("No-Store", None, 0), ("max-age=-1", None, 0), ("max-age=1.5", None, 0), ("max-age", None, 0),
     ("max-age=", None, 0), ("max-age=60, max-age=120", None, 0), ("max-age=١٢٠", None, 0),
     ("s-maxage=60", None, 300)],
)  # fmt: skip
def test_a_document_is_kept_as_long_as_its_cache_control_says_an_hour_at_most(cache_control, age, seconds):
    """RFC 9111 §5.2.2.1 max-age, less the Age (§4.2.3); no-store and no-cache keep nothing; an hour at most."""
    assert oauth.document_lifetime(cache_control, age) == seconds
    assert (oauth.DOCUMENT_SECONDS, oauth.MAX_DOCUMENT_SECONDS) == (300, 3600)
