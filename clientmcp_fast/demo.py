"""`clientmcp demo`: a bridge on 127.0.0.1 with a generated secret, and a todo app connected to it.

The app is built on `clientmcp_fast.client` and follows the risk and outcome conventions
of docs/apps.md (Risk levels; Outcomes); it prints what an agent needs to use it.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import secrets
import signal
import sys
import time
from collections.abc import Mapping
from typing import Any

from clientmcp_fast import log
from clientmcp_fast.client import ClientMCP, completed, rejected
from clientmcp_fast.config import Settings, address_text, load, reachable_host
from clientmcp_fast.core.tokens import mint
from clientmcp_fast.net.server import Server, new_event_loop

APP_ID = "demo-todos"
TOKEN_TTL = 7 * 86400.0


class TodoList:
    """The demo app's state: the same functions a UI would call."""

    def __init__(self) -> None:
        self.items: dict[int, dict[str, Any]] = {}
        self._ids = itertools.count(1)

    def add(self, title: str) -> dict[str, Any]:
        item = {"id": next(self._ids), "title": title, "done": False}
        self.items[item["id"]] = item
        return item

    def complete(self, item_id: int) -> dict[str, Any] | None:
        item = self.items.get(item_id)
        if item is not None:
            item["done"] = True
        return item

    def clear_done(self) -> int:
        done = [item_id for item_id, item in self.items.items() if item["done"]]
        for item_id in done:
            del self.items[item_id]
        return len(done)


def todo_app(url: str, token: str, todos: TodoList | None = None) -> ClientMCP:
    """The demo todo app: add / list / complete / clear-done, exposed through ClientMCP."""
    todos = todos or TodoList()
    app = ClientMCP(url, token, instructions="A shared todo list. Items have an integer id and a title.")

    async def add_todo(arguments: dict[str, Any]) -> Any:
        title = arguments.get("title")
        if not isinstance(title, str) or not title.strip():
            return rejected("invalid_title", "title must be a non-empty string")
        item = todos.add(title.strip())
        return completed(f"Added #{item['id']}: {item['title']}", item=item)

    async def list_todos(arguments: dict[str, Any]) -> Any:
        items = list(todos.items.values())
        lines = [f"#{i['id']} [{'x' if i['done'] else ' '}] {i['title']}" for i in items] or ["(empty)"]
        return {
            "content": [{"type": "text", "text": "\n".join(lines)}],
            "structuredContent": {"items": items},
        }

    async def complete_todo(arguments: dict[str, Any]) -> Any:
        item_id = arguments.get("id")
        if isinstance(item_id, bool) or not isinstance(item_id, int):
            return rejected("invalid_id", "id must be an integer")
        item = todos.complete(item_id)
        if item is None:
            return rejected("not_found", f"there is no todo #{item_id}")
        return completed(f"Completed #{item_id}", item=item)

    async def clear_done(arguments: dict[str, Any]) -> Any:
        return completed(f"Removed {todos.clear_done()} completed todos")

    app.expose(
        "add_todo",
        add_todo,
        description="Add a todo",
        input_schema={"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
        risk="operate",
    )
    app.expose("list_todos", list_todos, description="List the todos", risk="observe")
    app.expose(
        "complete_todo",
        complete_todo,
        description="Mark a todo as done",
        input_schema={"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
        risk="operate",
    )
    app.expose("clear_done", clear_done, description="Remove completed todos", risk="manage")
    return app


# What the demo does unlike `serve` when no setting says otherwise: it is a trial on this
# machine, so it listens on loopback and logs only warnings beside what it prints.
DEMO_DEFAULTS = {"CLIENTMCP_HOST": "127.0.0.1", "CLIENTMCP_LOG": "warn"}


def demo_settings(env: Mapping[str, str], flags: argparse.Namespace | None = None) -> Settings:
    """The settings of `serve` from `env` and `flags`, with the demo's defaults and a fresh secret.

    The operator's secrets are never used: the demo prints tokens, and a token signed with a
    real bridge's secret would be valid there.
    """
    secret = secrets.token_hex(32)
    kept = {
        name: value for name, value in env.items() if name not in ("CLIENTMCP_SECRET", "CLIENTMCP_SECRETS")
    }
    return load({**DEMO_DEFAULTS, **kept, "CLIENTMCP_SECRET": secret}, flags)


async def _demo(settings: Settings) -> None:
    loop = asyncio.get_running_loop()
    server = Server(settings, loop)
    await server.start()
    address = address_text(reachable_host(settings.host), server.port)
    secret = settings.signing_secret
    now = time.time()
    app = todo_app(f"ws://{address}/connect", mint(secret, "client", APP_ID, TOKEN_TTL, now))
    await app.connect()
    agent_token = mint(secret, "agent", APP_ID, TOKEN_TTL, now)
    url = f"http://{address}/mcp"
    print(
        f"ClientMCP demo: bridge on http://{address}, app {APP_ID!r} connected with "
        f"{len(app.tools)} tools ({', '.join(app.tools)}).\n"
        f"  agent URL:   {url}\n"
        f"  agent token: {agent_token}\n"
        f"  Claude Code: claude mcp add --transport http {APP_ID} {url} "
        f'--header "Authorization: Bearer {agent_token}"\n'
        f"  no headers?  {url}/{agent_token}\n"
        "Ctrl-C stops the demo.",
        flush=True,
    )
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    await stop
    await app.close()
    await server.shutdown()


def run_demo(env: Mapping[str, str], flags: argparse.Namespace | None = None) -> int:
    """Run the demo until Ctrl-C; the exit status. Raises ConfigError for a setting it cannot use."""
    settings = demo_settings(env, flags)
    log.configure(settings.log, sys.stderr)
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(_demo(settings))
    finally:
        loop.close()
    return 0
