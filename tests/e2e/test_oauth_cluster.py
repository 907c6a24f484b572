"""OAuth across three instances of a cluster (docs/oauth.md, In a cluster; docs/scaling.md, Consent across instances).

Three real bridges with OAuth on share one nats-server (with JetStream, for `--state nats`),
one `CLIENTMCP_SECRET` and one public URL, at which nothing listens: `LoadBalancer`, an httpx
transport, plays the load balancer in front of them and sends each request to the instance
the test chooses by its path. The app (a `clientmcp_fast.client` app with `on_authorize`) is
on instance 1; the consent page on instance 2; the token endpoint on instance 3; the
metadata and the registration elsewhere again; MCP calls to each in turn. The official `mcp`
SDK's `OAuthClientProvider` runs the whole flow, the test playing the person as
tests/e2e/test_oauth_http.py does on one instance, then `clientmcp revoke agent` ends it on
every instance.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import httpx2
import jwt
import pytest
import test_cluster
import test_cluster_revocation
from agents import MODERN, WAIT, echo, online_app
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from test_cluster import gone, sees
from test_oauth_http import (
    APP,
    CHALLENGE,
    REDIRECT,
    SDK_HOST_PAGE,
    MemoryStorage,
    Person,
    PlayedHost,
    UserOfTheApp,
    assert_page,
    denied,
    free_port,
)
from test_revocation import LEGACY_HEADERS, LIST, PROMPTLY

from clientmcp_fast.core.consent import CODE_ALPHABET

pytest.importorskip("nats", reason="the cluster needs nats-py (pip install 'clientmcp-fast[nats]')")

pytestmark = pytest.mark.anyio

nats_server = test_cluster.nats_server

# Which instance (0: the app's, 1: the page's, 2: the token endpoint's) serves each path; MCP
# calls on the app's resource go to each in turn.
ROUTES = {
    "/.well-known/oauth-protected-resource/": 0,
    "/.well-known/oauth-authorization-server": 1,
    "/oauth/register": 2,
    "/oauth/authorize": 1,
    "/oauth/token": 2,
}


class LoadBalancer(httpx2.AsyncBaseTransport):
    """The one public URL in front of the instances, for one client: each request goes where ROUTES says."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        instance = self.cluster.instance_for(request.url.path)
        self.cluster.served.append((instance, request.method, request.url.path))
        request.url = request.url.copy_with(port=self.cluster.bridges[instance].port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class Cluster:
    """Three OAuth instances behind `public`, the URL of a load balancer no one else listens at."""

    def __init__(self, bridges: list[Any], public: str) -> None:
        self.bridges = bridges
        self.url = public  # what Person and denied() read as the bridge's URL: its issuer
        self.turns = itertools.cycle(range(len(bridges)))
        self.served: list[tuple[int, str, str]] = []  # (instance, method, path) of every client, in order

    def instance_for(self, path: str) -> int:
        for prefix, instance in ROUTES.items():
            if path.startswith(prefix):
                return instance
        assert path.startswith("/apps/"), path
        return next(self.turns)

    def client(self, **options: Any) -> httpx2.AsyncClient:
        """An HTTP client whose requests go through the load balancer."""
        return httpx2.AsyncClient(transport=LoadBalancer(self), timeout=WAIT, **options)

    def resource(self, app_id: str = APP) -> str:
        return f"{self.url}/apps/{app_id}/mcp"

    def person(self) -> Person:
        """The person's browser, its requests through the load balancer."""
        person = Person(SimpleNamespace(url=self.url))  # type: ignore[arg-type]
        person.http = self.client(follow_redirects=False)
        return person

    def each(self, fn: Callable[[Any], Any]) -> list[Any]:
        """`fn(server)` on each instance's loop, in order."""
        return [bridge.call(fn) for bridge in self.bridges]


def _peers(count: int) -> Callable[[Any], bool]:
    return lambda s: s.cluster is not None and len(s.cluster.directory.peers) == count


@pytest.fixture
def cluster(nats_server, start_bridge) -> Iterator[Cluster]:
    public = f"http://127.0.0.1:{free_port()}"
    bridges = [
        start_bridge(nats=(nats_server.url,), state="nats", oauth=True, public_url=public) for _ in range(3)
    ]
    for bridge in bridges:
        bridge.wait_for(_peers(2), timeout=WAIT)
    yield Cluster(bridges, public)


async def seen_everywhere(cluster: Cluster, consent: bool) -> None:
    """Wait until instances 2 and 3 know the app on instance 1, its tools and whether it asks for consent."""
    for bridge in cluster.bridges[1:]:
        await sees(bridge, APP, tools=1)
        give_up = time.monotonic() + WAIT
        while bridge.call(lambda s: getattr(s.bridge.apps.get(APP), "consent", None)) is not consent:
            assert time.monotonic() < give_up, "the app's consent never reached this instance"
            await asyncio.sleep(0.01)


async def status_on(port: int, path: str, access_token: str) -> int:
    """A plain tools/list POST on one instance, its status."""
    async with httpx2.AsyncClient(timeout=WAIT) as http:
        response = await http.post(
            f"http://127.0.0.1:{port}{path}",
            json=LIST,
            headers={**LEGACY_HEADERS, "Authorization": f"Bearer {access_token}"},
        )
    return response.status_code


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_the_sdk_oauth_client_with_the_app_the_page_and_the_token_endpoint_on_three_instances(
    cluster, nats_server, mode
):
    """`OAuthClientProvider` from its first 401 to a refresh, each step on the instance ROUTES names.

    The person opens the page on instance 2, which sends AUTHORIZE to instance 1; the app's
    `on_authorize` there gets the code and allows; instance 1 sends CONSENT back; the person
    types the code on instance 2, which issues the code; instance 3 exchanges it and refreshes.
    Then calls work on every instance, and `clientmcp revoke agent` ends the grant everywhere.
    """
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    user = UserOfTheApp()
    host = PlayedHost(cluster.person(), user, cluster.url, *SDK_HOST_PAGE)

    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=cluster.resource(),
        client_metadata=OAuthClientMetadata(redirect_uris=[REDIRECT], client_name="SDK host"),
        storage=storage,
        redirect_handler=host.open_page,
        callback_handler=host.come_back,
    )
    async with online_app(cluster.bridges[0], APP, {"echo": echo}, on_authorize=user):
        await seen_everywhere(cluster, True)
        async with (
            cluster.client(auth=provider) as http,
            Client(streamable_http_client(cluster.resource(), http_client=http), mode=mode) as client,
        ):
            first = await client.call_tool("echo", {"n": 1})
            provider.context.token_expiry_time = time.time() - 1  # as an hour later: the SDK refreshes
            second = await client.call_tool("echo", {"n": 2})
            third = await client.call_tool("echo", {"n": 3})
        await host.person.http.aclose()
        assert [json.loads(r.content[0].text) for r in (first, second, third)] == [
            {"n": 1},
            {"n": 2},
            {"n": 3},
        ]
        [request] = user.requests
        assert (request.client_name, request.client_origin) == ("SDK host", "http://127.0.0.1:33418")
        assert re.fullmatch(f"[{CODE_ALPHABET}]{{8}}", request.code)
        flow = [step for step in cluster.served if not step[2].startswith("/apps/")]
        assert flow == [
            (0, "GET", f"/.well-known/oauth-protected-resource/apps/{APP}/mcp"),
            (1, "GET", "/.well-known/oauth-authorization-server"),
            (2, "POST", "/oauth/register"),
            (1, "GET", "/oauth/authorize"),  # the page, on instance 2: the app is on instance 1
            (1, "POST", "/oauth/authorize"),
            (2, "POST", "/oauth/token"),
            (2, "POST", "/oauth/token"),  # the refresh
        ]
        calls = {instance for instance, _, path in cluster.served if path.startswith("/apps/")}
        assert calls == {0, 1, 2}  # MCP requests reached every instance

        # Each instance takes the access token on the app's resource, and on /mcp.
        access = storage.tokens.access_token
        for bridge in cluster.bridges:
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {access}"}, timeout=WAIT) as http,
                Client(
                    streamable_http_client(f"{bridge.http_url}/apps/{APP}/mcp", http_client=http), mode=mode
                ) as client,
            ):
                result = await client.call_tool("echo", {"on": bridge.port})
            assert json.loads(result.content[0].text) == {"on": bridge.port}
            assert await status_on(bridge.port, "/mcp", access) == 200

        # Who did what: the app's instance relayed and counted the answer, the page's issued the
        # code, the token endpoint's the tokens; nothing waits anywhere.
        assert cluster.each(lambda s: dict(s.bridge.consents.answers)) == [
            {"allow": 1, "deny": 0},
            {"allow": 0, "deny": 0},
            {"allow": 0, "deny": 0},
        ]
        assert cluster.each(lambda s: s.oauth.codes_issued) == [0, 1, 0]
        assert cluster.each(lambda s: dict(s.oauth.authorization.tokens_issued))[2] == {
            "authorization_code": 1,
            "refresh_token": 1,
        }
        assert cluster.each(lambda s: len(s.bridge.consents)) == [0, 0, 0]

        # `clientmcp revoke agent` ends the grant on every instance at once.
        assert await test_cluster_revocation.revoke(nats_server.url, "agent", APP) == 1
        for bridge in cluster.bridges:
            give_up = time.monotonic() + PROMPTLY
            while await status_on(bridge.port, f"/apps/{APP}/mcp", access) != 401:
                assert time.monotonic() < give_up, "the revoked access token is still accepted"
                await asyncio.sleep(0.01)
            assert await status_on(bridge.port, "/mcp", access) == 401
        async with cluster.client() as http:
            refresh = await http.post(
                f"{cluster.url}/oauth/token",
                data={
                    "grant_type": "refresh_token",
                    "refresh_token": storage.tokens.refresh_token,
                    "client_id": storage.client_info.client_id,
                },
            )
        assert refresh.status_code == 400 and refresh.json()["error"] == "invalid_grant", refresh.text


async def test_a_page_for_an_app_on_another_instance_says_what_a_page_on_its_own_says(cluster):
    """The page on instance 2, the app on instance 1: offline, without consent, then denying.

    And an app that stopped asking before the page's instance knew it: the page is shown, the
    app's instance answers at once why it did not ask the app, and the form says it.
    """
    async with cluster.client() as http:
        registered = await http.post(
            f"{cluster.url}/oauth/register", json={"redirect_uris": [REDIRECT], "client_name": "Test Host"}
        )
    client_id = registered.json()["client_id"]
    query = httpx2.QueryParams(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT,
            "state": "st-1",
            "code_challenge": CHALLENGE,
            "code_challenge_method": "S256",
            "resource": cluster.resource(),
        }
    )
    url = f"{cluster.url}/oauth/authorize?{query}"
    person = cluster.person()
    assert_page(
        await person.open(url),
        403,
        "todo-app cannot be authorized this way: it is not connected to this bridge",
    )
    async with online_app(cluster.bridges[0], APP, {"echo": echo}):  # no on_authorize: no consent
        await seen_everywhere(cluster, False)
        assert_page(
            await person.open(url),
            403,
            "todo-app cannot be authorized this way: the app does not ask its user for consent",
        )
        # As if the page's instance had not heard yet that the app registered again without consent.
        cluster.bridges[1].call(lambda s: setattr(s.bridge.apps[APP], "consent", True))
        assert (await person.open(url)).status_code == 200
        request_id = jwt.decode(person.fields()["request"], options={"verify_signature": False})["jti"]
        give_up = time.monotonic() + WAIT
        while (
            cluster.bridges[1].call(lambda s: s.bridge.consents.get(request_id, s.loop.time()).problem)
            is None
        ):
            assert time.monotonic() < give_up, "the app's instance never answered"
            await asyncio.sleep(0.01)
        assert_page(
            await person.type_code("ABCD2345"),
            403,
            "todo-app cannot be authorized this way: the app does not ask its user for consent",
        )
    for bridge in cluster.bridges[1:]:
        await gone(bridge, APP)
    user = UserOfTheApp(answer=False)
    async with online_app(cluster.bridges[0], APP, {"echo": echo}, on_authorize=user):
        await seen_everywhere(cluster, True)
        assert (await person.open(url)).status_code == 200
        code = await user.code()
        await asyncio.sleep(0.3)  # the app's "no" travels back to the page's instance
        denied(await person.type_code(code), cluster, "the user of todo-app refused")
    await person.http.aclose()
    assert [path for instance, _, path in cluster.served if instance != 1 and "authorize" in path] == []
    assert cluster.each(lambda s: dict(s.bridge.consents.answers)) == [
        {"allow": 0, "deny": 1},
        {"allow": 0, "deny": 0},
        {"allow": 0, "deny": 0},
    ]
