"""Clients known by their metadata document's URL, on a real bridge (docs/oauth.md, Decisions).

The official SDK's `OAuthClientProvider` with `client_metadata_url`, from its first 401 to a
refresh: it never registers, and the bridge reads its document from an HTTPS server of the
test's (tests/https_server.py). For that, the bridge's fetcher is given the seam of
net/client_documents.py: the test's authority trusted, the test's host name resolved to
127.0.0.1, and 127.0.0.1 alone let through the address policy. Then what a bridge as deployed
does, with no seam: it never fetches from loopback; a document that cannot be used is shown on
the page and never redirected to; each refusal is a metric and a log line; and with
`--oauth-client-documents off` nothing is offered or read.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import httpx2
import pytest
from agents import MODERN, WAIT, echo, online_app
from conftest import RunningBridge
from https_server import HttpsServer, Resolver, answer, make_authority, only_this_loopback
from test_oauth_http import (
    APP,
    REDIRECT,
    MemoryStorage,
    OAuthBridge,
    Person,
    PlayedHost,
    UserOfTheApp,
    assert_page,
    assert_refused,
    free_port,
)

from clientmcp_fast.net.client_documents import ClientDocuments

PATH = "/oauth/client.json"

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def authority(tmp_path_factory):
    return make_authority(tmp_path_factory.mktemp("authority"))


@pytest.fixture
def documents_bridge(start_bridge: Callable[..., RunningBridge]):
    """A bridge with OAuth on, started with `settings`; closed after the test."""
    made: list[OAuthBridge] = []

    def start(**settings: Any) -> OAuthBridge:
        port = free_port()
        made.append(
            OAuthBridge(
                start_bridge(port=port, oauth=True, public_url=f"http://127.0.0.1:{port}", **settings)
            )
        )
        return made[-1]

    yield start
    for served in made:
        served.http.close()


def trust_the_test_server(oauth: OAuthBridge, authority: Any, **options: Any) -> None:
    """The seam: the bridge's fetcher trusts the test's authority, resolves client.test, takes 127.0.0.1."""

    def install(server: Any) -> None:
        server.oauth.documents = ClientDocuments(
            server.loop,
            address_refusal=only_this_loopback,
            ssl_context=authority.client_context(),
            resolve=Resolver("127.0.0.1"),
            **options,
        )

    oauth.bridge.call(install)


def document(url: str, **change: Any) -> bytes:
    body = {
        "client_id": url,
        "client_name": "SDK host",
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **change,
    }
    return json.dumps(body).encode()


def authorize_url(oauth: OAuthBridge, client_id: str, **parameters: Any) -> str:
    return f"{oauth.url}/oauth/authorize?{urlencode(oauth.authorize_query(client_id, **parameters))}"


async def test_the_metadata_offers_documents_beside_registration_unless_turned_off(documents_bridge):
    metadata = documents_bridge().http.get("/.well-known/oauth-authorization-server").json()
    assert metadata["client_id_metadata_document_supported"] is True
    assert metadata["registration_endpoint"].endswith("/oauth/register")
    off = documents_bridge(oauth_client_documents=False)
    metadata = off.http.get("/.well-known/oauth-authorization-server").json()
    assert "client_id_metadata_document_supported" not in metadata
    assert off.bridge.call(lambda server: server.oauth.documents) is None


async def test_the_sdk_oauth_client_known_by_its_document_url_never_registers(documents_bridge, authority):
    """`OAuthClientProvider(client_metadata_url=...)` from its first 401 to a refresh, through the real consent."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    oauth = documents_bridge()
    trust_the_test_server(oauth, authority)
    user = UserOfTheApp()
    person = Person(oauth)
    asked: list[tuple[str, str]] = []
    async with HttpsServer(authority) as server:
        url = server.url(PATH)
        server.routes[PATH] = answer(
            200, document(url), "Content-Type: application/json", "Cache-Control: max-age=60"
        )

        host = PlayedHost(
            person, user, oauth.url, "Connect to todo-app?",
            f"<b>SDK host</b>, described at <b>https://client.test:{server.port}</b>, asks to use the tools of "
            "<b>todo-app</b>", "returns to <b>http://127.0.0.1:33418</b>",
        )  # fmt: skip

        async def record(request: httpx2.Request) -> None:
            asked.append((request.method, request.url.path))

        provider = OAuthClientProvider(
            server_url=oauth.resource(),
            client_metadata=OAuthClientMetadata(redirect_uris=[REDIRECT], client_name="SDK host"),
            storage=MemoryStorage(),
            redirect_handler=host.open_page,
            callback_handler=host.come_back,
            client_metadata_url=url,
        )
        async with (
            online_app(oauth.bridge, APP, {"echo": echo}, on_authorize=user),
            httpx2.AsyncClient(auth=provider, timeout=WAIT, event_hooks={"request": [record]}) as http,
            streamable(oauth, http, MODERN) as client,
        ):
            first = await client.call_tool("echo", {"n": 1})
            provider.context.token_expiry_time = time.time() - 1  # as an hour later: the SDK refreshes first
            second = await client.call_tool("echo", {"n": 2})
        await person.http.aclose()
        fetched = server.asked(PATH)
    assert [json.loads(result.content[0].text) for result in (first, second)] == [{"n": 1}, {"n": 2}]
    assert provider.context.client_info.client_id == url
    [request] = user.requests
    assert (request.client_name, request.client_origin) == ("SDK host", "http://127.0.0.1:33418")
    flow = [step for step in asked if not step[1].startswith("/apps/")]
    assert flow == [
        ("GET", f"/.well-known/oauth-protected-resource/apps/{APP}/mcp"),
        ("GET", "/.well-known/oauth-authorization-server"),
        ("POST", "/oauth/token"),
        ("POST", "/oauth/token"),
    ]  # no /oauth/register
    assert fetched == 1  # read at the authorization request; the token endpoint needs only the URL
    issued = oauth.bridge.call(lambda s: dict(s.oauth.authorization.tokens_issued))
    assert issued == {"authorization_code": 1, "refresh_token": 1}
    assert oauth.refusals() == {}


def streamable(oauth: OAuthBridge, http: httpx2.AsyncClient, mode: str) -> Any:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(oauth.resource(), http_client=http), mode=mode)


async def test_a_deployed_bridge_never_fetches_from_loopback(documents_bridge, authority, captured_log):
    stream = captured_log("json")
    oauth = documents_bridge()
    person = Person(oauth)
    async with HttpsServer(authority) as server:
        for host in ("127.0.0.1", "localhost", "[::1]"):
            url = server.url(PATH, host=host)
            server.routes[PATH] = answer(200, document(url))
            page = await person.open(authorize_url(oauth, url))
            assert_page(
                page, 400, "its host resolves to a loopback address, which this bridge never fetches from"
            )
        assert server.requests == []
    await person.http.aclose()
    assert oauth.refusals() == {("authorize", "invalid_client"): 3}
    [event] = [json.loads(line) for line in stream.getvalue().splitlines() if '"oauth_refused"' in line]
    assert event["endpoint"] == "authorize" and event["error"] == "invalid_client"
    assert "loopback" in event["reason"] and "127.0.0.1" not in json.dumps(event)


async def test_a_document_that_cannot_be_used_is_shown_on_the_page_never_redirected(
    documents_bridge, authority
):
    oauth = documents_bridge()
    trust_the_test_server(oauth, authority)
    person = Person(oauth)
    async with HttpsServer(authority) as server:
        url = server.url(PATH)
        for body, words in [
            (document(url + "x"), "metadata document: its client_id is not its URL, byte for byte"),
            (document(url, client_secret="s"), "it holds a client_secret, which no document may"),
            (document(url, redirect_uris=["http://attacker.example/cb"]), "an http:// redirect URI must be on"),
        ]:  # fmt: skip
            server.routes[PATH] = answer(200, body)
            assert_page(await person.open(authorize_url(oauth, url)), 400, words)
        server.routes[PATH] = answer(302, b"", "Location: https://client.test/elsewhere")
        assert_page(await person.open(authorize_url(oauth, url)), 400, "its URL answered 302, not 200")
        # A good document, and a redirect URI one byte away from its own: shown, never redirected to.
        server.routes[PATH] = answer(200, document(url))
        for redirect in (REDIRECT + "/", "https://attacker.example/callback", url):
            page = await person.open(authorize_url(oauth, url, redirect_uri=redirect))
            assert_page(page, 400, "redirect_uri is not one the client registered, byte for byte")
        # The good document and its own redirect URI: the request goes on (here, to an app offline).
        assert_page(
            await person.open(authorize_url(oauth, url)), 403, "todo-app cannot be authorized this way"
        )
    await person.http.aclose()
    assert oauth.refusals() == {
        ("authorize", "invalid_client"): 4,
        ("authorize", "invalid_request"): 3,
        ("authorize", "access_denied"): 1,
    }


async def test_a_document_read_once_serves_the_requests_after_it_and_is_a_metric(start_bridge, authority):
    from test_observability import delta, m, scrape

    port = free_port()
    bridge = start_bridge(
        port=port, oauth=True, public_url=f"http://127.0.0.1:{port}", metrics=("127.0.0.1", 0)
    )
    oauth = OAuthBridge(bridge)
    trust_the_test_server(oauth, authority)
    before = await asyncio.to_thread(scrape, bridge)
    person = Person(oauth)
    async with HttpsServer(authority) as server:
        url = server.url(PATH)
        server.routes[PATH] = answer(200, document(url), "Cache-Control: max-age=60")
        for _ in range(3):
            assert_page(await person.open(authorize_url(oauth, url)), 403, "cannot be authorized this way")
        assert server.asked(PATH) == 1
    await person.http.aclose()
    changed = delta(before, await asyncio.to_thread(scrape, bridge))
    oauth.http.close()
    assert changed[m("clientmcp_oauth_client_document_fetches_total")] == 1
    assert changed[m("clientmcp_oauth_remembered", kind="client_documents")] == 1


async def test_past_the_process_bound_the_page_asks_to_try_again(documents_bridge, authority):
    oauth = documents_bridge()
    trust_the_test_server(oauth, authority, max_fetches=0)
    person = Person(oauth)
    page = await person.open(authorize_url(oauth, f"https://client.test{PATH}"))
    await person.http.aclose()
    assert_page(page, 503, "Try again in a moment", "0 client metadata documents are being read already")
    assert oauth.refusals() == {("authorize", "temporarily_unavailable"): 1}


async def test_a_browser_that_leaves_while_the_document_is_read_stops_nothing_else(
    documents_bridge, authority
):
    oauth = documents_bridge()
    trust_the_test_server(oauth, authority)
    release = asyncio.Event()
    async with HttpsServer(authority) as server:
        url = server.url(PATH)

        async def late(writer: Any) -> None:
            await release.wait()
            writer.write(answer(200, document(url), "Cache-Control: max-age=60"))

        server.routes[PATH] = late
        target = authorize_url(oauth, url).removeprefix(oauth.url)
        reader, writer = await asyncio.open_connection("127.0.0.1", int(oauth.url.rsplit(":", 1)[1]))
        writer.write(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        await writer.drain()
        for _ in range(100):
            if server.requests:
                break
            await asyncio.sleep(0.02)
        writer.close()  # the browser goes away while the bridge reads the document
        await asyncio.sleep(0.1)
        release.set()
        for _ in range(100):
            if oauth.bridge.call(lambda s: len(s.oauth.documents)):
                break
            await asyncio.sleep(0.02)
        assert oauth.bridge.call(lambda s: (len(s.oauth.documents), len(s.oauth._reading))) == (1, 0)
        person = Person(oauth)
        assert_page(await person.open(authorize_url(oauth, url)), 403, "cannot be authorized this way")
        await person.http.aclose()
        assert server.asked(PATH) == 1


async def test_with_documents_off_a_url_is_no_client_anywhere(documents_bridge):
    oauth = documents_bridge(oauth_client_documents=False)
    url = f"https://client.test{PATH}"
    person = Person(oauth)
    page = await person.open(authorize_url(oauth, url))
    await person.http.aclose()
    assert_page(page, 400, "client_id is a URL, and this bridge reads no client ID metadata documents")
    code = oauth.code(oauth.register())  # any code: the client is refused before it is looked at
    response = oauth.exchange(url, code)
    assert_refused(response, 400, "invalid_client")
    assert re.search("reads no client ID metadata documents", response.json()["error_description"])
