"""`clientmcp demo --oauth` in a real browser: an MCP host signs in, and the todo page's user consents.

The host is the official `mcp` SDK's `OAuthClientProvider`, with a loopback listener for its
redirect URI (RFC 8252 §7.3), as a native host has. Its browser and the person's are headless
Chromium (the Debian package, as in test_todo_page.py): the test plays the person, who reads
the bridge's consent page the host opened, finds the same request and its code in the todo
page, answers there, and types the code into the consent page
(docs/oauth.md, Try it with the demo). Screenshots of the request, on a phone's screen, are
saved under reports/ for a reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from playwright.async_api import Page, expect
from test_demo import Demo, running_demo
from test_oauth_http import MemoryStorage
from test_todo_page import REPORTS, WAIT, WAIT_MS, chromium, open_page, todo_titles

from clientmcp_fast.core.consent import CODE_ALPHABET

pytestmark = pytest.mark.anyio


APP = "demo-todos"
PHONE = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 2,
    "is_mobile": True,
    "has_touch": True,
}
SIGNED_IN = "You can close this page."


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    async with chromium() as launched:
        yield launched


@pytest.fixture
def demo() -> Any:
    with running_demo("--port", "0", "--oauth") as running:
        running.resource = re.search(r"OAuth URL:\s+(\S+)", "\n".join(running.lines)).group(1)
        running.bridge = f"http://127.0.0.1:{running.port}"
        yield running


class Refused(Exception):
    """What the host makes of a redirect that carries an error instead of a code."""


class HostCallback:
    """The host's redirect URI: a listener on loopback where the browser comes back with a code or an error."""

    def __init__(self) -> None:
        self.answers: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        self.url = ""
        self._server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> HostCallback:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/callback"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def origin(self) -> str:
        return self.url.removesuffix("/callback")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):  # a connection the browser opened ahead
            writer.close()
            return
        target = urlsplit(head.split(b" ", 2)[1].decode("latin-1"))
        if target.path == "/callback":
            self.answers.put_nowait({name: values[0] for name, values in parse_qs(target.query).items()})
        body = f"<!doctype html><title>Signed in</title><p>{SIGNED_IN}</p>".encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        await writer.drain()
        writer.close()


class Host:
    """An MCP host signing in with the SDK's OAuth client; the person's browser opens its consent page.

    `person` plays the person once the consent page is open (given that tab); its failure
    fails the sign-in at once rather than after a timeout.
    """

    def __init__(self, demo: Demo, callback: HostCallback, browser_context: Any, name: str | None) -> None:
        self.demo = demo
        self.callback = callback
        self.context = browser_context
        self.storage = MemoryStorage()
        self.answer: dict[str, str] | None = None
        self.person: asyncio.Task[None] | None = None
        self._play: Callable[[Page], Awaitable[None]] | None = None
        self.provider = OAuthClientProvider(
            server_url=demo.resource,
            client_metadata=OAuthClientMetadata(redirect_uris=[callback.url], client_name=name),
            storage=self.storage,
            redirect_handler=self._open_in_browser,
            callback_handler=self._come_back,
        )

    @contextlib.asynccontextmanager
    async def connected(self, person: Callable[[Page], Awaitable[None]]) -> AsyncIterator[Client]:
        self._play = person
        async with (
            httpx2.AsyncClient(auth=self.provider, timeout=WAIT) as http,
            Client(streamable_http_client(self.demo.resource, http_client=http)) as client,
        ):
            yield client

    async def _open_in_browser(self, url: str) -> None:
        assert url.startswith(f"{self.demo.bridge}/oauth/authorize?")
        tab = await self.context.new_page()
        tab.set_default_timeout(WAIT_MS)
        await tab.goto(url)
        assert self._play is not None
        self.person = asyncio.create_task(self._play(tab))

    async def _come_back(self) -> AuthorizationCodeResult:
        assert self.person is not None
        returned = asyncio.ensure_future(self.callback.answers.get())
        await asyncio.wait({returned, self.person}, timeout=WAIT * 3, return_when=asyncio.FIRST_COMPLETED)
        if self.person.done() and self.person.exception() is not None and not returned.done():
            returned.cancel()
            self.person.result()  # the person's failure, as it happened
        self.answer = answer = await asyncio.wait_for(returned, WAIT)
        if "error" in answer:
            raise Refused(answer["error"])
        return AuthorizationCodeResult(code=answer["code"], state=answer["state"], iss=answer["iss"])


def request_card(page: Page) -> Any:
    return page.locator("#requests .request")


async def read_the_consent_page(tab: Page, client: str, callback: HostCallback) -> None:
    await expect(tab.locator("h1")).to_have_text(f"Connect to {APP}?")
    await expect(tab.locator("main")).to_contain_text(f"{client} asks to use the tools of {APP}.")
    await expect(tab.locator("main")).to_contain_text(f"this page returns to {callback.origin}.")


async def read_the_request(page: Page, client: str, callback: HostCallback) -> str:
    """The request as the todo page shows it; its code."""
    card = request_card(page)
    await expect(card).to_have_count(1)
    await expect(card.locator("h2")).to_have_text("Connect an agent?")
    await expect(card.locator(".client")).to_have_text(client)
    await expect(card.locator(".origin")).to_have_text(callback.origin)
    code = await card.locator(".code").inner_text()
    assert re.fullmatch(f"[{CODE_ALPHABET}]{{8}}", code), code
    return code


async def fits_the_screen(tab: Page) -> None:
    """Nothing wider than the screen: nothing to scroll sideways on a phone."""
    width = await tab.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], width


async def test_a_host_signs_in_when_the_user_allows_in_the_page_and_types_the_code(demo, browser):
    phone = await browser.new_context(**PHONE)
    page = await open_page(browser, demo, context=phone)
    async with HostCallback() as callback:
        host = Host(demo, callback, phone, "Playwright host")

        async def person(consent: Page) -> None:
            await read_the_consent_page(consent, "Playwright host", callback)
            code = await read_the_request(page, "Playwright host", callback)
            code_box = await request_card(page).locator(".code").bounding_box()
            assert code_box["height"] >= 36  # large type: the code is read across to another page
            await fits_the_screen(page)
            await fits_the_screen(consent)
            REPORTS.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(REPORTS / "todo-oauth-request.png"))
            await consent.screenshot(path=str(REPORTS / "consent-page.png"))
            await request_card(page).get_by_role("button", name="Allow").click()
            await expect(request_card(page).locator(".answered")).to_have_text(
                "Allowed. Type the code into the sign-in page, if you have not yet."
            )
            await expect(request_card(page).locator(".code")).to_have_text(code)  # still there to read
            await expect(page.locator("#activity")).to_have_text("You allowed Playwright host.")
            await consent.fill("#code", code)
            await consent.get_by_role("button", name="Allow").click()
            await expect(consent.locator("body")).to_have_text(SIGNED_IN)  # back at the host

        async with host.connected(person) as client:
            tools = await asyncio.wait_for(client.list_tools(), WAIT)
            assert [tool.name for tool in tools.tools] == [
                "add_todo",
                "list_todos",
                "complete_todo",
                "clear_done",
            ]
            added = await asyncio.wait_for(
                client.call_tool("add_todo", {"title": "Signed in with OAuth"}), WAIT
            )
        await asyncio.wait_for(host.person, WAIT)
    assert set(host.answer) == {"code", "state", "iss"} and host.answer["iss"] == demo.bridge
    assert host.storage.tokens.access_token and host.storage.tokens.refresh_token
    assert added.structured_content == {
        "status": "completed",
        "item": {"id": 1, "title": "Signed in with OAuth", "done": False},
    }
    await expect(todo_titles(page)).to_have_text(["Signed in with OAuth"])
    await expect(page.locator("#todos li .by")).to_have_text(["added by an agent"])
    await request_card(page).get_by_role("button", name="Hide").click()
    await expect(request_card(page)).to_have_count(0)
    await phone.close()


async def test_a_host_the_user_denies_in_the_page_hears_access_denied(demo, browser):
    """Deny while the consent form, code typed, waits for the app: the host is sent `access_denied`."""
    page = await open_page(browser, demo)
    await page.fill("#title", "Mine")
    await page.click("#add button")
    async with HostCallback() as callback:
        host = Host(demo, callback, page.context, None)  # a client that gave no name

        async def person(consent: Page) -> None:
            await read_the_consent_page(consent, "A client that gave no name", callback)
            code = await read_the_request(page, "An unnamed client", callback)
            await consent.fill("#code", code)
            async with consent.expect_request(lambda request: request.method == "POST"):
                typed = asyncio.ensure_future(consent.get_by_role("button", name="Allow").click())
            await request_card(page).get_by_role("button", name="Deny").click()
            await typed
            await expect(consent.locator("body")).to_have_text(SIGNED_IN)  # back at the host, refused

        with pytest.raises(Exception) as refused:
            async with host.connected(person):
                pass
        await asyncio.wait_for(host.person, WAIT)
    assert caused_by(refused.value, Refused), refused.value
    assert host.answer == {
        "error": "access_denied",
        "error_description": f"the user of {APP} refused",
        "state": host.answer["state"],
        "iss": demo.bridge,
    }
    assert host.storage.tokens is None
    await expect(request_card(page)).to_have_count(0)
    await expect(page.locator("#activity")).to_have_text("You denied an unnamed client.")
    await expect(todo_titles(page)).to_have_text(["Mine"])


def caused_by(error: BaseException, kind: type[BaseException]) -> bool:
    """Whether `error`, a group holding it, or what caused it is a `kind`."""
    seen: list[BaseException] = [error]
    while seen:
        current = seen.pop()
        if isinstance(current, kind):
            return True
        if isinstance(current, BaseExceptionGroup):
            seen.extend(current.exceptions)
        seen.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return False
