"""The shared todo list in a real browser: headless Chromium (the Debian package) driven by
Playwright, against a real `clientmcp demo`, with the official `mcp` SDK as the agent.

Chromium is /usr/bin/chromium (`.ci/run` installs it; `scripts/prerequisites` checks it);
Playwright is pointed at it and never downloads a browser. A screenshot of the page with the
agent's todo, and one of the question to the user, are saved under reports/ for a reader (not
committed).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from agents import MODERN, sdk_agent
from playwright.async_api import Page, async_playwright, expect
from test_demo import Demo, running_demo

from clientmcp_fast.speedups import IMPLEMENTATION

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
# The Debian package's, found as scripts/prerequisites finds it.
CHROMIUM = os.environ.get("CLIENTMCP_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
REPORTS = ROOT / "reports" / IMPLEMENTATION
WAIT = 15.0  # seconds any one step may take on a busy 2-core machine
WAIT_MS = WAIT * 1000


class DemoAgent:
    """What `sdk_agent` needs of a bridge: the demo's agent URL and the token it printed."""

    def __init__(self, demo: Demo) -> None:
        self.mcp_url = demo.url
        self._token = demo.token

    def token(self, role: str, client_id: str) -> str:
        assert (role, client_id) == ("agent", "demo-todos")
        return self._token


@pytest.fixture
def demo() -> Any:
    with running_demo("--port", "0") as running:
        running.page_url = re.search(r"app page:\s+(\S+)", "\n".join(running.lines)).group(1)
        yield running


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    """Headless Chromium, the Debian package: the browser of every test of tests/browser."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (`.ci/run` does)")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, timeout=WAIT_MS)
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    async with chromium() as launched:
        yield launched


async def open_page(browser: Any, demo: Demo, context: Any = None) -> Page:
    """The todo page in a new tab (of a new browser context unless given), once it shows online."""
    context = context or await browser.new_context()
    page = await context.new_page()
    page.set_default_timeout(WAIT_MS)
    await page.goto(demo.page_url)
    await expect(page.locator("#state")).to_have_text("online", timeout=WAIT_MS)
    return page


@contextlib.asynccontextmanager
async def agent(demo: Demo, mode: str = "legacy", **options: Any) -> AsyncIterator[Any]:
    async with sdk_agent(DemoAgent(demo), "demo-todos", mode, **options) as client:
        yield client


def todo_titles(page: Page) -> Any:
    return page.locator("#todos li .title")


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_an_agents_todo_appears_in_the_page(demo, browser, mode):
    page = await open_page(browser, demo)
    async with agent(demo, mode) as client:
        listed = await client.list_tools()
        assert [tool.name for tool in listed.tools] == [
            "add_todo",
            "list_todos",
            "complete_todo",
            "clear_done",
        ]
        risks = {tool.name: tool.meta["io.github.clientmcp/risk"] for tool in listed.tools}
        assert risks == {
            "add_todo": "operate",
            "list_todos": "observe",
            "complete_todo": "operate",
            "clear_done": "manage",
        }
        result = await asyncio.wait_for(client.call_tool("add_todo", {"title": "Buy oat milk"}), WAIT)
        assert result.structured_content == {
            "status": "completed",
            "item": {"id": 1, "title": "Buy oat milk", "done": False},
        }
    await expect(todo_titles(page)).to_have_text(["Buy oat milk"])
    await expect(page.locator("#todos li .by")).to_have_text(["added by an agent"])
    if mode == "legacy":
        REPORTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(REPORTS / "todo-page.png"))


async def test_what_the_user_adds_the_agent_sees(demo, browser):
    page = await open_page(browser, demo)
    await page.fill("#title", "Call the plumber")
    await page.click("#add button")
    await expect(todo_titles(page)).to_have_text(["Call the plumber"])
    await page.check("#todos li input[type=checkbox]")
    async with agent(demo) as client:
        result = await asyncio.wait_for(client.call_tool("list_todos", {}), WAIT)
        assert result.structured_content == {"items": [{"id": 1, "title": "Call the plumber", "done": True}]}
        assert result.content[0].text == "#1 [x] Call the plumber"
        completed = await client.call_tool("complete_todo", {"id": 1})
        assert completed.structured_content["status"] == "completed"
        missing = await client.call_tool("complete_todo", {"id": 7})
        assert missing.is_error is True
        assert missing.structured_content["reason"]["code"] == "not_found"


class ResponseTypes:
    """The content type of each tools/call answer the agent's HTTP client received."""

    def __init__(self) -> None:
        self.types: list[str] = []

    async def on_response(self, response: httpx2.Response) -> None:
        if response.request.method == "POST" and b'"tools/call"' in response.request.content:
            self.types.append(response.headers.get("content-type", ""))


async def test_clear_done_asks_the_user_and_the_agent_waits_for_the_answer(demo, browser):
    page = await open_page(browser, demo)
    for title in ("Old task", "Open task"):
        await page.fill("#title", title)
        await page.click("#add button")
    await page.check("#todos li[data-id='1'] input[type=checkbox]")
    question = page.locator("#question")
    seen = ResponseTypes()
    async with agent(demo, event_hooks={"response": [seen.on_response]}) as client:
        # No: nothing changes, and the agent reads why (ClientMCP v1 §9.2).
        call = asyncio.create_task(client.call_tool("clear_done", {}))
        await expect(question).to_be_visible()
        await expect(page.locator("#question-text")).to_have_text(
            "An agent asks to remove 1 completed todo. Allow it?"
        )
        await page.click("#no")
        refused = await asyncio.wait_for(call, WAIT)
        assert refused.is_error is True
        assert refused.structured_content == {
            "status": "rejected",
            "reason": {"code": "denied", "detail": "the user said no"},
        }
        await expect(question).to_be_hidden()
        await expect(todo_titles(page)).to_have_text(["Old task", "Open task"])
        # Yes, after more than a second: the answer comes as an SSE stream (docs/protocol.md).
        seen.types.clear()
        call = asyncio.create_task(client.call_tool("clear_done", {}))
        await expect(question).to_be_visible()
        REPORTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(REPORTS / "todo-question.png"))
        await asyncio.sleep(1.5)  # past the bridge's one second, so that the call streams
        assert not call.done()  # the agent is still waiting for the user
        await page.click("#yes")
        done = await asyncio.wait_for(call, WAIT)
        assert done.is_error is not True
        assert done.structured_content == {"status": "completed", "removed": 1}
        assert len(seen.types) == 1 and seen.types[0].startswith("text/event-stream"), seen.types
        await expect(todo_titles(page)).to_have_text(["Open task"])


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_an_agent_that_gives_up_withdraws_its_question(demo, browser, mode):
    """The bridge's cancel reaches the handler's signal: the page takes the question back (ClientMCP v1 §9.1)."""
    page = await open_page(browser, demo)
    await page.fill("#title", "Done already")
    await page.click("#add button")
    await page.check("#todos li input[type=checkbox]")
    async with agent(demo, mode) as client:
        call = asyncio.create_task(client.call_tool("clear_done", {}))
        await expect(page.locator("#question")).to_be_visible()
        call.cancel()  # legacy: notifications/cancelled; modern: the response is closed
        with contextlib.suppress(asyncio.CancelledError):
            await call
        await expect(page.locator("#question")).to_be_hidden()
    await expect(todo_titles(page)).to_have_text(["Done already"])  # nothing removed


async def test_a_reload_takes_the_tools_away_and_back(demo, browser):
    """An agent's notification stream (the legacy GET stream) hears list_changed as the tools go, then come back."""
    page = await open_page(browser, demo)
    headers = {"Authorization": f"Bearer {demo.token}", "Accept": "text/event-stream"}
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(WAIT)) as http,
        http.stream("GET", demo.url, headers=headers) as stream,
    ):
        assert stream.status_code == 200  # the stream is open: changes from now on reach it

        async def two_changes() -> None:
            changes = 0
            async for line in stream.aiter_lines():
                changes += line.startswith("data:") and "notifications/tools/list_changed" in line
                if changes == 2:
                    return

        await page.reload()
        await asyncio.wait_for(two_changes(), WAIT)  # offline, then registered again
    await expect(page.locator("#state")).to_have_text("online")
    async with agent(demo) as client:
        assert len((await client.list_tools()).tools) == 4


async def test_a_second_tab_replaces_the_first_which_stays_replaced(demo, browser):
    first = await open_page(browser, demo)
    second = await open_page(browser, demo, context=first.context)
    await expect(first.locator("#state")).to_have_text("replaced")
    await expect(first.locator("#activity")).to_contain_text("opened in another tab")
    await asyncio.sleep(2)  # past the first waits of the backoff: a reconnect would have replaced the second
    await expect(first.locator("#state")).to_have_text("replaced")
    await expect(second.locator("#state")).to_have_text("online")
    async with agent(demo) as client:
        result = await asyncio.wait_for(client.call_tool("add_todo", {"title": "From the agent"}), WAIT)
        assert result.structured_content["status"] == "completed"
    await expect(todo_titles(second)).to_have_text(["From the agent"])


async def test_the_page_comes_back_online_after_the_bridge_restarts(browser):
    """The demo's bridge stops and starts again on the same ports: the page reconnects by itself."""
    with running_demo("--port", "0") as first:
        first.page_url = re.search(r"app page:\s+(\S+)", "\n".join(first.lines)).group(1)
        page = await open_page(browser, first)
        page_port = re.search(r":(\d+)/$", first.page_url).group(1)
        first.process.terminate()
        assert first.process.wait(WAIT) == 0
        await expect(page.locator("#state")).not_to_have_text("online")
        # The same ports; a new secret, and so new tokens: the page's token function fetches one.
        with running_demo("--port", str(first.port), "--page-port", page_port) as second:
            await expect(page.locator("#state")).to_have_text("online", timeout=WAIT_MS * 2)
            second_agent = DemoAgent(second)
            async with sdk_agent(second_agent, "demo-todos", "legacy") as client:
                assert len((await client.list_tools()).tools) == 4
