"""`clientmcp demo`: a bridge on 127.0.0.1 with a generated secret, and the shared todo list.

By default the todo app is a web page (clientmcp_fast/web: the JavaScript client and the
page) that the demo serves on a port of its own, with the client tokens the page fetches:
the demo plays the app's backend. `--python-app` connects the same todo app written on
`clientmcp_fast.client` instead, for a machine without a browser. Both follow the risk and
outcome conventions of docs/apps.md (Risk levels; Outcomes); the demo prints what an agent
needs to use the app. The bridge itself never serves files: only the demo does.

`--oauth` turns the bridge's OAuth on (docs/oauth.md, Try it with the demo), its public URL
the demo's own unless `--public-url` says otherwise: the page then asks its user to allow
each MCP host that signs in, and shows the code to type into the bridge's consent page.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import json
import secrets
import signal
import socket
import sys
import time
from collections.abc import Mapping
from importlib import resources
from typing import Any

from clientmcp_fast import log
from clientmcp_fast.client import ClientMCP, completed, rejected
from clientmcp_fast.config import (
    ConfigError,
    Settings,
    address_text,
    load,
    parse_public_url,
    reachable_host,
)
from clientmcp_fast.core.tokens import mint
from clientmcp_fast.net.server import Server, listen_failure, new_event_loop

APP_ID = "demo-todos"
TOKEN_TTL = 7 * 86400.0
# The page's client tokens are short-lived: a token is checked when the app connects only
# (ClientMCP v1 §2), and the page fetches a new one for every connection.
PAGE_TOKEN_TTL = 600.0


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


# The files of the page, by the path they are served at (clientmcp_fast/web, package data).
PAGE_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/todo.js": ("todo.js", "text/javascript; charset=utf-8"),
    "/todo.css": ("todo.css", "text/css; charset=utf-8"),
    "/clientmcp.js": ("clientmcp.js", "text/javascript; charset=utf-8"),
}
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}


def web_file(name: str) -> bytes:
    """A file of clientmcp_fast/web, where the JavaScript client and the demo page ship."""
    return (resources.files("clientmcp_fast") / "web" / name).read_bytes()


class PageServer:
    """The demo's web server for the todo page: its files, where the bridge is, and client tokens.

    GET /token mints a client token for the app, as a production app's backend does after
    checking who asks (ClientMCP v1 §7); this one hands it to whoever can reach the port,
    which is why the demo listens on loopback. One request per connection, GET and HEAD only.
    """

    def __init__(self, secret: bytes, connect_url: str, oauth: bool = False) -> None:
        self.secret = secret
        self.connect_url = connect_url
        self.oauth = oauth  # the page then asks its user about each OAuth client (onAuthorize)
        self.tokens_minted = 0
        self.port = 0
        self._server: asyncio.AbstractServer | None = None

    async def start(self, host: str, port: int) -> None:
        try:
            self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        except OSError as error:
            raise ConfigError(
                f"--page-port: cannot listen on {address_text(host, port)}: {listen_failure(error)}"
            ) from None
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def answer(self, method: str, target: str) -> tuple[int, str, bytes, dict[str, str]]:
        """(status, content type, body, extra headers) for one request."""
        if method not in ("GET", "HEAD"):
            return 405, "text/plain", b"GET only\n", {"Allow": "GET, HEAD"}
        path = target.split("?", 1)[0]
        if path in PAGE_FILES:
            name, kind = PAGE_FILES[path]
            return 200, kind, web_file(name), {}
        if path == "/config.json":
            config: dict[str, Any] = {"url": self.connect_url, "clientId": APP_ID}
            if self.oauth:
                config["oauth"] = True
            body = json.dumps(config).encode()
            return 200, "application/json", body, {}
        if path == "/token":
            self.tokens_minted += 1
            token = mint(self.secret, "client", APP_ID, PAGE_TOKEN_TTL, time.time())
            return 200, "text/plain; charset=utf-8", token.encode(), {"Cache-Control": "no-store"}
        return 404, "text/plain", b"not found\n", {}

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            parts = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            if len(parts) == 3:
                status, kind, body, extra = self.answer(parts[0], parts[1])
            else:
                status, kind, body, extra = 400, "text/plain", b"bad request\n", {}
            headers = {
                "Content-Type": kind,
                "Content-Length": str(len(body)),
                "Cache-Control": "no-cache",
                "X-Content-Type-Options": "nosniff",
                "Connection": "close",
                **extra,
            }
            lines = [f"HTTP/1.1 {status} {_REASONS[status]}", *(f"{k}: {v}" for k, v in headers.items())]
            writer.write("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n")
            if parts[0] != "HEAD":
                writer.write(body)
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        finally:
            writer.close()


# What the demo does unlike `serve` when no setting says otherwise: it is a trial on this
# machine, so it listens on loopback and logs only warnings beside what it prints.
DEMO_DEFAULTS = {"CLIENTMCP_HOST": "127.0.0.1", "CLIENTMCP_LOG": "warn"}


def demo_settings(env: Mapping[str, str], flags: argparse.Namespace | None = None) -> Settings:
    """The settings of `serve` from `env` and `flags`, with the demo's defaults and a fresh secret.

    The operator's secrets are never used: the demo prints tokens, and a token signed with a
    real bridge's secret would be valid there. With OAuth on and no public URL given, the
    public URL is left unset: `own_public_url` sets the demo's own.
    """
    secret = secrets.token_hex(32)
    kept = {
        name: value for name, value in env.items() if name not in ("CLIENTMCP_SECRET", "CLIENTMCP_SECRETS")
    }
    values = {**DEMO_DEFAULTS, **kept, "CLIENTMCP_SECRET": secret}
    given = getattr(flags, "public_url", None) or values.get("CLIENTMCP_PUBLIC_URL", "").strip()
    if not given:
        # load() refuses OAuth on without a public URL; the demo's own is known once its port is.
        values["CLIENTMCP_PUBLIC_URL"] = "http://127.0.0.1"
    settings = load(values, flags)
    return settings if given else dataclasses.replace(settings, public_url=None)


def own_public_url(settings: Settings) -> Settings:
    """`settings` with the demo's own origin, http://HOST:PORT, as the public URL of OAuth.

    The issuer and the resource URLs are built from it before the bridge listens, so a port
    of 0 is chosen here: a free port is taken, and the bridge then listens on it.
    """
    port = settings.port or _free_port(settings.host)
    origin = f"http://{address_text(reachable_host(settings.host), port)}"
    try:
        public_url = parse_public_url(origin)
    except ValueError:
        raise ConfigError(
            f"--oauth: the demo's own URL {origin} is not on loopback, the one place OAuth takes "
            "http://: give --public-url, the https:// origin agents reach the bridge at"
        ) from None
    return dataclasses.replace(settings, port=port, public_url=public_url)


def _free_port(host: str) -> int:
    """A TCP port free on `host` now; raises ConfigError when nothing can listen there."""
    try:
        family = socket.getaddrinfo(host or None, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            return probe.getsockname()[1]
    except OSError as error:
        raise ConfigError(f"cannot listen on {address_text(host, 0)}: {listen_failure(error)}") from None


async def _demo(settings: Settings, python_app: bool, page_port: int | None) -> None:
    loop = asyncio.get_running_loop()
    # Before anything listens: Ctrl-C or SIGTERM while the demo starts is a graceful stop too.
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    server = Server(settings, loop)
    await server.start()
    address = address_text(reachable_host(settings.host), server.port)
    secret = settings.signing_secret
    now = time.time()
    connect_url = f"ws://{address}/connect"
    agent_token = mint(secret, "agent", APP_ID, TOKEN_TTL, now)
    url = f"http://{address}/mcp"
    app: ClientMCP | None = None
    page: PageServer | None = None
    if python_app:
        app = todo_app(connect_url, mint(secret, "client", APP_ID, TOKEN_TTL, now))
        await app.connect()
        headline = (
            f"ClientMCP demo: bridge on http://{address}, app {APP_ID!r} connected with "
            f"{len(app.tools)} tools ({', '.join(app.tools)}).\n"
        )
    else:
        page = PageServer(secret, connect_url, oauth=settings.oauth)
        if page_port is None:  # beside the bridge's port (run_demo made it 0 for any free one)
            page_port = server.port + 1
        try:
            await page.start(settings.host, page_port)
        except ConfigError:
            await server.shutdown()
            raise
        page_url = f"http://{address_text(reachable_host(settings.host), page.port)}/"
        headline = (
            f"ClientMCP demo: bridge on http://{address}; the app {APP_ID!r} is the todo page, "
            "online while it is open in a browser.\n"
            f"  app page:    {page_url}\n"
        )
    print(
        f"{headline}"
        f"  agent URL:   {url}\n"
        f"  agent token: {agent_token}\n"
        f"  Claude Code: claude mcp add --transport http {APP_ID} {url} "
        f'--header "Authorization: Bearer {agent_token}"\n'
        f"  no headers?  {url}/{agent_token}\n"
        f"{oauth_lines(settings)}"
        "Ctrl-C stops the demo.",
        flush=True,
    )
    await stop
    if app is not None:
        await app.close()
    if page is not None:
        await page.close()
    await server.shutdown()


def oauth_lines(settings: Settings) -> str:
    """What the demo prints with OAuth on: the URL to paste into an MCP host, and what happens next."""
    if not settings.oauth:
        return ""
    return (
        f"  OAuth URL:   {settings.public_url}/apps/{APP_ID}/mcp (paste it into an MCP host that signs in "
        "with OAuth)\n"
        "  then:        the host opens the bridge's consent page, and the todo page shows the request "
        "and a code: allow it there, and type the code into the consent page.\n"
    )


def run_demo(env: Mapping[str, str], flags: argparse.Namespace | None = None) -> int:
    """Run the demo until Ctrl-C; the exit status. Raises ConfigError for a setting it cannot use."""
    settings = demo_settings(env, flags)
    python_app = bool(getattr(flags, "python_app", False))
    page_port = getattr(flags, "page_port", None)
    if page_port is not None and not 0 <= page_port <= 65535:
        raise ConfigError(f"--page-port: {page_port} is not a TCP port (0-65535)")
    if page_port is None and settings.port == 0:
        page_port = 0  # any free one beside a free one
    if settings.oauth:
        if python_app:
            raise ConfigError(
                "--oauth: the todo page asks its user to allow each MCP host that signs in, and the "
                "Python app has no one to ask: run the demo without --python-app"
            )
        if settings.public_url is None:
            settings = own_public_url(settings)
    log.configure(settings.log, sys.stderr, settings.log_format)
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(_demo(settings, python_app, page_port))
    finally:
        loop.close()
    return 0
