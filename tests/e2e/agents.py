"""Agents and apps for the end-to-end tests of `/mcp`: the MCP SDK, raw HTTP, and apps on `ClientMCP`.

The app side is always the project's own `clientmcp_fast.client.ClientMCP`, run in the
test's event loop. The agent side is either the official `mcp` SDK, `httpx2` with
hand-written requests, or `RawHttp`, a socket speaking HTTP/1.1 byte by byte for what a
library hides: a missing Accept header, chunk-by-chunk SSE, hanging up mid-call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Self

import httpx2
import websockets
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from clientmcp_fast.client import ClientMCP

MODERN = "2026-07-28"
# server/discover's supportedVersions and -32022's data.supported (docs/protocol.md), written out
# here rather than imported, so that the tests check the package instead of repeating it.
SUPPORTED = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

OFFLINE = "The application is not connected: its tools are unavailable until it reconnects."
DISCONNECTED = "The application disconnected before answering."
# JSON-RPC error codes the agent endpoint answers with (docs/protocol.md).
HEADER_MISMATCH = -32020
UNSUPPORTED_VERSION = -32022
INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
REQUEST_CANCELLED = -32800
LIST_CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}

WAIT = 10.0  # seconds any single expected event may take on a busy 2-core machine

ACCEPT_BOTH = "application/json, text/event-stream"


# -- apps -----------------------------------------------------------------------------------


async def echo(arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool handler whose result is its arguments, as JSON text."""
    return {"content": [{"type": "text", "text": json.dumps(arguments, sort_keys=True)}]}


class HeldTool:
    """A tool handler that waits until released, and records its calls and its cancellation."""

    def __init__(self, result: Any = "released") -> None:
        self.result = result
        self.arguments: list[dict[str, Any]] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, arguments: dict[str, Any]) -> Any:
        self.arguments.append(arguments)
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return self.result


class SleepyTool:
    """A tool handler that answers after `seconds`, and records a cancellation."""

    def __init__(self, seconds: float, result: Any = "slept") -> None:
        self.seconds = seconds
        self.result = result
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, arguments: dict[str, Any]) -> Any:
        self.started.set()
        try:
            await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return self.result


def app_for(bridge: Any, client_id: str, instructions: str | None = None) -> ClientMCP:
    """An app for `client_id` that does not reconnect by itself (tests decide when it comes back)."""
    return ClientMCP(
        bridge.ws_url, bridge.token("client", client_id), instructions=instructions, reconnect=False
    )


@contextlib.asynccontextmanager
async def online_app(
    bridge: Any,
    client_id: str,
    tools: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]],
    *,
    instructions: str | None = None,
    schemas: dict[str, dict[str, Any]] | None = None,
    on_authorize: Any = None,
) -> AsyncIterator[ClientMCP]:
    """An app connected and registered with `tools` (name -> handler), closed on exit."""
    app = app_for(bridge, client_id, instructions)
    app.on_authorize = on_authorize
    for name, handler in tools.items():
        app.expose(name, handler, input_schema=(schemas or {}).get(name))
    async with app:
        yield app


@contextlib.asynccontextmanager
async def online_in(
    topology: Any, client_id: str, tools: dict[str, Any], **options: Any
) -> AsyncIterator[ClientMCP]:
    """`online_app` on the topology's app bridge, once the agents' bridge knows its tools (conftest.Topology)."""
    async with online_app(topology.app, client_id, tools, **options) as app:
        await asyncio.to_thread(topology.sees, client_id, len(tools))
        yield app


async def nothing_leaks_in(topology: Any) -> None:
    """`nothing_leaks` on every bridge of the topology."""
    for bridge in topology.bridges:
        await nothing_leaks(bridge)


@contextlib.asynccontextmanager
async def answering_app(
    bridge: Any,
    client_id: str,
    register: dict[str, Any],
    answer: Callable[[websockets.ClientConnection, dict[str, Any]], Awaitable[None]],
    ssl: Any = None,
) -> AsyncIterator[websockets.ClientConnection]:
    """An app on the bare `websockets` library: sends `register`, then runs `answer(ws, call)` for each call."""
    token = bridge.token("client", client_id)
    async with websockets.connect(bridge.ws_url, subprotocols=["clientmcp.v1", token], ssl=ssl) as ws:
        await ws.send(json.dumps(register))
        assert json.loads(await asyncio.wait_for(ws.recv(), WAIT)) == {"type": "registered"}

        async def answered(call: dict[str, Any]) -> None:
            with contextlib.suppress(websockets.ConnectionClosed):
                await answer(ws, call)

        async def serve_calls() -> None:
            with contextlib.suppress(websockets.ConnectionClosed):
                async for message in ws:
                    call = json.loads(message)
                    if call.get("type") == "call":
                        asyncio.ensure_future(answered(call))

        answering = asyncio.create_task(serve_calls())
        try:
            yield ws
        finally:
            answering.cancel()


def work_register(**extensions: bool) -> dict[str, Any]:
    """A register of the one tool `work`, with the extension members that are true (docs/protocol.md)."""
    tools = [{"name": "work", "inputSchema": {"type": "object"}}]
    return {"type": "register", "tools": tools, **{name: True for name, on in extensions.items() if on}}


def result_message(call: dict[str, Any], text: str, is_error: bool = False) -> str:
    """The app's `result` for `call`: one text content."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return json.dumps({"type": "result", "id": call["id"], "result": result})


@contextlib.asynccontextmanager
async def websocket_app(
    bridge: Any, client_id: str, slow_seconds: float = 1.6, ssl: Any = None
) -> AsyncIterator[websockets.ClientConnection]:
    """An app on the bare `websockets` library with `echo` and `slow` (answers after `slow_seconds`).

    Each result's text is the tool's name and its arguments as sorted JSON. For peers other
    than `ClientMCP`: a frozen build, a TLS proxy in front of the bridge (`ssl`).
    """
    tools = [
        {"name": "echo", "description": "Echo", "inputSchema": {"type": "object"}},
        {"name": "slow", "description": "Answers after a while", "inputSchema": {"type": "object"}},
    ]

    async def answer(ws: websockets.ClientConnection, call: dict[str, Any]) -> None:
        if call["name"] == "slow":
            await asyncio.sleep(slow_seconds)
        await ws.send(
            result_message(call, f"{call['name']}: {json.dumps(call['arguments'], sort_keys=True)}")
        )

    async with answering_app(bridge, client_id, {"type": "register", "tools": tools}, answer, ssl) as ws:
        yield ws


async def wait_registered(app: ClientMCP) -> None:
    """Wait until the bridge answered every register sent so far."""
    await asyncio.wait_for(app.wait_registered(), WAIT)


async def eventually(bridge: Any, predicate: Callable[[Any], bool], timeout: float = WAIT) -> None:
    """Wait, without blocking this loop, until `predicate(server)` holds on the bridge's loop."""
    give_up = time.monotonic() + timeout
    while not bridge.call(predicate):
        if time.monotonic() > give_up:
            raise AssertionError(f"bridge state never satisfied {predicate}")
        await asyncio.sleep(0.01)


async def nothing_leaks(bridge: Any) -> None:
    """`bridge.assert_nothing_leaks()`, run in a thread so that this loop can still close its sockets."""
    await asyncio.to_thread(bridge.assert_nothing_leaks)


async def stop_bridge(bridge: Any) -> None:
    """Shut the bridge down gracefully (as on SIGTERM) while this loop keeps reading."""
    await asyncio.to_thread(bridge.stop)


# -- agents: the MCP SDK ------------------------------------------------------------------


def bearer(bridge: Any, client_id: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {bridge.token('agent', client_id)}"}


@contextlib.asynccontextmanager
async def sdk_agent(bridge: Any, client_id: str, mode: str, **options: Any) -> AsyncIterator[Client]:
    """The official `mcp` 2.3.0 SDK client, `mcp.Client` in the given mode, with an agent token for `client_id`."""
    event_hooks = options.pop("event_hooks", None)
    verify = options.pop("verify", True)  # a TLS proxy's own certificate authority, for instance
    async with (
        httpx2.AsyncClient(
            headers=bearer(bridge, client_id),
            timeout=httpx2.Timeout(30.0, read=60.0),
            event_hooks=event_hooks,
            verify=verify,
        ) as http,
        Client(streamable_http_client(bridge.mcp_url, http_client=http), mode=mode, **options) as client,
    ):
        yield client


# -- agents: hand-written requests ----------------------------------------------------------


def envelope(version: str = MODERN, **extra: Any) -> dict[str, Any]:
    """The `_meta` every 2026-07-28 request carries (MCP 2026-07-28, basic/index, `_meta`)."""
    return {
        META_VERSION: version,
        META_CLIENT_INFO: {"name": "e2e", "version": "1"},
        META_CAPABILITIES: {},
        **extra,
    }


def modern_body(method: str, request_id: Any = 1, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A 2026-07-28 request with the full envelope."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**(params or {}), "_meta": envelope()},
    }


def modern_headers(
    bridge: Any, client_id: str, method: str, name: str | None = None, **extra: str
) -> dict[str, str]:
    """The headers a 2026-07-28 request needs (MCP 2026-07-28, basic/transports), with an agent token."""
    headers = {
        **bearer(bridge, client_id),
        "Accept": ACCEPT_BOTH,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    headers.update(extra)
    return headers


def legacy_body(method: str, request_id: Any = 1, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


def legacy_headers(bridge: Any, client_id: str, **extra: str) -> dict[str, str]:
    return {**bearer(bridge, client_id), "Accept": ACCEPT_BOTH, "Content-Type": "application/json", **extra}


def initialize_params(version: str = "2025-11-25") -> dict[str, Any]:
    """The params of a legacy `initialize` asking for revision `version`."""
    return {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


async def legacy_session(http: httpx2.AsyncClient, bridge: Any, client_id: str = "x") -> str:
    """The Mcp-Session-Id minted by a legacy `initialize` from `client_id`'s agent."""
    response = await http.post(
        "/mcp",
        json=legacy_body("initialize", 0, initialize_params()),
        headers=legacy_headers(bridge, client_id),
    )
    return response.headers["mcp-session-id"]


@contextlib.asynccontextmanager
async def http_client(bridge: Any) -> AsyncIterator[httpx2.AsyncClient]:
    """A plain HTTP client for the bridge, without default credentials."""
    async with httpx2.AsyncClient(base_url=bridge.http_url, timeout=WAIT) as http:
        yield http


def error_of(response: httpx2.Response) -> tuple[Any, int]:
    """The (id, code) of a JSON-RPC error answer."""
    body = response.json()
    assert "result" not in body, body
    return body["id"], body["error"]["code"]


def text_result(response: httpx2.Response) -> str:
    """The text of a tools/call answer's first content item (the answer must not be an error)."""
    body = response.json()
    assert "error" not in body, body
    return body["result"]["content"][0]["text"]


class RawResponse:
    """A response head read off a socket: status and lower-cased headers."""

    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status = status
        self.headers = headers


class RawHttp:
    """HTTP/1.1 over a bare socket: requests exactly as written, responses read chunk by chunk."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int) -> None:
        self.reader = reader
        self.writer = writer
        self.port = port
        self._sse = b""

    @classmethod
    async def open(cls, bridge: Any) -> RawHttp:
        """A connection to the bridge; `with await RawHttp.open(bridge) as raw:` closes it at the end."""
        reader, writer = await asyncio.open_connection("127.0.0.1", bridge.port)
        return cls(reader, writer, bridge.port)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(
        self, method: str, target: str, headers: dict[str, str], body: bytes | Any = b"", version: str = "1.1"
    ) -> None:
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        lines = [f"{method} {target} HTTP/{version}", f"Host: 127.0.0.1:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if (body or method == "POST") and not any(name.lower() == "content-length" for name in headers):
            lines.append(f"Content-Length: {len(body)}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    async def head(self) -> RawResponse:
        raw = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), WAIT)
        status_line, *lines = raw.decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for line in lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        return RawResponse(int(status_line.split()[1]), headers)

    async def chunk(self, timeout: float = WAIT) -> bytes | None:
        """The next chunk of a chunked body; None after the last one."""
        size_line = await asyncio.wait_for(self.reader.readuntil(b"\r\n"), timeout)
        size = int(size_line.split(b";")[0], 16)
        data = await asyncio.wait_for(self.reader.readexactly(size + 2), timeout)
        assert data[-2:] == b"\r\n", data
        return data[:-2] if size else None

    async def body(self, response: RawResponse) -> bytes:
        """The whole body of a response with a Content-Length, or chunked."""
        if "content-length" in response.headers:
            length = int(response.headers["content-length"])
            return await asyncio.wait_for(self.reader.readexactly(length), WAIT)
        assert response.headers.get("transfer-encoding") == "chunked", response.headers
        parts = []
        while (part := await self.chunk()) is not None:
            parts.append(part)
        return b"".join(parts)

    async def sse_item(self, timeout: float = WAIT) -> tuple[str, Any] | None:
        """The next SSE item of a chunked stream: ("comment", text), (event, JSON data), or None at the end."""
        while b"\n\n" not in self._sse:
            part = await self.chunk(timeout)
            if part is None:
                assert self._sse == b"", f"the stream ended inside an event: {self._sse!r}"
                return None
            self._sse += part.replace(b"\r\n", b"\n")
        block, self._sse = self._sse.split(b"\n\n", 1)
        if block.startswith(b":"):
            return "comment", block[1:].decode().strip()
        event, data = "message", []
        for line in block.decode().split("\n"):
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
        return event, json.loads("\n".join(data))

    async def sse_message(self, timeout: float = WAIT) -> Any:
        """The next `message` event's JSON, skipping comments; fails at the end of the stream."""
        while True:
            item = await self.sse_item(timeout)
            assert item is not None, "the stream ended"
            if item[0] != "comment":
                assert item[0] == "message", item
                return item[1]

    async def at_eof(self, timeout: float = WAIT) -> bool:
        """Whether the server closed the connection (waits for it)."""
        data = await asyncio.wait_for(self.reader.read(1), timeout)
        return data == b""

    def close(self) -> None:
        self.writer.close()
