"""`clientmcp_fast.client` keeps its own promises against a real bridge: pings, reconnects, size limit."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import logging
import re
import socket

import httpx2
import pytest
import websockets
from wire import Op

from clientmcp_fast import client as client_module
from clientmcp_fast.client import ClientMCP, accepted, completed, rejected
from clientmcp_fast.core.limits import MAX_MESSAGE_BYTES
from clientmcp_fast.core.websocket import OPEN

pytestmark = pytest.mark.anyio


async def _echo(arguments: dict) -> str:
    return "ok"


def _app(bridge, client_id: str = "lib", **options) -> ClientMCP:
    app = ClientMCP(bridge.ws_url, bridge.token("client", client_id), **options)
    app.expose("echo", _echo)
    return app


def _online(bridge, client_id: str = "lib"):
    return lambda server: client_id in server.bridge.apps


async def _wait(predicate, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.02)


async def test_an_idle_app_pings_and_stays_connected(start_bridge):
    """ClientMCP v1 §3.2: the library pings when idle, and pings keep the bridge's idle timer from firing."""
    bridge = start_bridge(app_idle_timeout=0.6)
    async with _app(bridge, ping_interval=0.2, reconnect=False) as app:
        await asyncio.sleep(1.8)  # three idle timeouts without a single call
        assert app.close_code is None
        assert bridge.call(_online(bridge))
    bridge.assert_nothing_leaks()


async def test_without_pings_the_bridge_closes_4408_and_the_app_reconnects(start_bridge):
    bridge = start_bridge(app_idle_timeout=0.3)
    async with _app(bridge, ping_interval=60, backoff=(0.05, 0.1)) as app:
        await _wait(lambda: app.close_code == 4408)
        await app.wait_registered()  # registered again on a new connection
        await _wait(lambda: bridge.call(_online(bridge)))


async def test_a_replaced_app_does_not_reconnect(bridge):
    """ClientMCP v1 §3.1: a client closed with 4409 MUST NOT reconnect automatically."""
    older = _app(bridge, backoff=(0.05, 0.1))
    await older.connect()
    async with _app(bridge, reconnect=False):
        await asyncio.wait_for(older.closed(), 10)
        assert older.close_code == 4409
        await asyncio.sleep(0.3)  # longer than the backoff: a reconnect would have replaced the newer
        assert bridge.call(lambda s: s.bridge.apps["lib"].state == OPEN)
    await older.close()


async def test_a_result_over_4_mib_becomes_a_tool_error_saying_so(bridge):
    """ClientMCP v1 §3.2: a result that cannot be delivered is replaced by a tool error that says why."""

    async def huge(arguments: dict) -> str:
        return "x" * MAX_MESSAGE_BYTES

    app = _app(bridge, reconnect=False)
    app.expose("huge", huge)
    async with app:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "huge"}}
        headers = {"Authorization": f"Bearer {bridge.token('agent', 'lib')}"}
        async with httpx2.AsyncClient(timeout=30) as http:
            response = await http.post(bridge.mcp_url, content=json.dumps(body), headers=headers)
        result = response.json()["result"]
        assert result["isError"] is True
        assert result["content"][0]["text"] == "The result is too large to deliver (over 4 MiB)."
        assert app.close_code is None  # the connection survived it


async def test_a_bridge_that_stops_answering_is_a_dead_link():
    """ClientMCP v1 §3.2: nothing within the pong timeout of a ping, and the library drops the connection."""
    from websockets.asyncio.server import serve

    async def silent_after_registered(ws):
        await ws.recv()  # the register
        await ws.send('{"type":"registered"}')
        async for _ in ws:  # pings, never answered
            pass

    async with serve(silent_after_registered, "127.0.0.1", 0, subprotocols=["clientmcp.v1"]) as server:
        port = server.sockets[0].getsockname()[1]
        app = ClientMCP(
            f"ws://127.0.0.1:{port}/connect", "t", ping_interval=0.1, pong_timeout=0.3, reconnect=False
        )
        app.expose("echo", _echo)
        await app.connect()
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(app.closed(), 5)
        assert asyncio.get_running_loop().time() - started < 2
        assert app.close_code == 1011  # ours, "no answer to ping", echoed by the peer
        await app.close()


# -- connect(timeout=...), what went wrong in words, and the log (docs/apps.md) ------------------


class _Records(logging.Handler):
    """The `clientmcp.client` logger's records, whatever the logging configuration of the process."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self, level: int) -> list[str]:
        return [record.getMessage() for record in self.records if record.levelno == level]


@pytest.fixture
def client_log():
    records = _Records()
    logger = logging.getLogger("clientmcp.client")
    level = logger.level
    logger.addHandler(records)
    logger.setLevel(logging.DEBUG)
    yield records
    logger.removeHandler(records)
    logger.setLevel(level)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


REFUSED = "connection refused: nothing listens there (is the bridge running?)"
# Python's words and the state a message would leak if it were not written for a reader.
NOT_WORDS = re.compile(r"None|Errno|Error\b|\(\)|\bclosed with\b")


async def test_connect_to_a_closed_port_gives_up_at_its_timeout_saying_why(client_log):
    """connect(timeout=1) retries with the backoff, then raises after 1 s (not 19), in words, and logs it."""
    url = f"ws://127.0.0.1:{_closed_port()}/connect"
    app = ClientMCP(url, "t", backoff=(0.05, 0.2))
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(ConnectionError) as caught:
        await app.connect(timeout=1)
    took = loop.time() - started
    assert 1 <= took < 1.5
    message = str(caught.value)
    attempts = re.fullmatch(
        rf"not registered with {re.escape(url)} within 1 s, after (\d+) attempts: (.*)", message
    )
    assert attempts is not None, message
    assert attempts.group(2) == REFUSED
    assert not NOT_WORDS.search(attempts.group(2))
    tries = int(attempts.group(1))
    assert tries >= 3  # 0.05 s doubling to 0.2 s, each wait 0.5-1.5 times that: some 6 in a second
    assert client_log.messages(logging.WARNING) == [f"cannot connect to {url}: {REFUSED}"] * tries
    waits = client_log.messages(logging.INFO)
    assert len(waits) == tries
    for attempt, line in enumerate(waits, start=2):
        found = re.fullmatch(rf"reconnecting to {re.escape(url)} in (\d+\.\d) s \(attempt {attempt}\)", line)
        assert found is not None, line
        assert 0.0 <= float(found.group(1)) <= 0.3
    await asyncio.wait_for(app.closed(), 1)  # nothing left running


async def test_connect_without_reconnect_fails_at_once_saying_why():
    url = f"ws://127.0.0.1:{_closed_port()}/connect"
    app = ClientMCP(url, "t", reconnect=False)
    started = asyncio.get_running_loop().time()
    with pytest.raises(ConnectionError) as caught:
        await app.connect(timeout=10)
    assert asyncio.get_running_loop().time() - started < 1
    assert str(caught.value) == f"not registered with {url}: {REFUSED}"


async def test_connect_to_a_server_that_never_answers_the_handshake_honours_the_timeout():
    """A port that accepts TCP and then says nothing: the timeout still holds, though the handshake's is 10 s."""
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen()  # the kernel completes the TCP handshake; nobody ever reads
        url = f"ws://127.0.0.1:{mute.getsockname()[1]}/connect"
        app = ClientMCP(url, "t")
        started = asyncio.get_running_loop().time()
        with pytest.raises(ConnectionError) as caught:
            await app.connect(timeout=0.5)
        assert 0.5 <= asyncio.get_running_loop().time() - started < 1
    assert str(caught.value) == f"not registered with {url} within 0.5 s, after 1 attempt: still connecting"


async def test_a_refused_token_is_said_in_words_and_logged_with_its_close_code(bridge, client_log):
    app = ClientMCP(bridge.ws_url, bridge.token("agent", "lib"))  # an agent's token, not a client's
    with pytest.raises(ConnectionError) as caught:
        await app.connect(timeout=10)
    message = str(caught.value)
    assert message.startswith(
        f"not registered with {bridge.ws_url}: closed with 4401 (the token was refused): "
    )
    assert client_log.messages(logging.INFO) == [f"connected to {bridge.ws_url}; registering 0 tools"]
    warnings = client_log.messages(logging.WARNING)
    assert warnings[0].startswith(f"connection to {bridge.ws_url} closed with 4401 (the token was refused): ")
    assert warnings[1:] == [
        f"not reconnecting to {bridge.ws_url}: the token was refused, and the same token would be again"
    ]


async def test_connects_closes_and_reconnects_are_logged(start_bridge, client_log):
    """A connect, the bridge's close with its code and reason, the reconnect's delay, our own close."""
    bridge = start_bridge(app_idle_timeout=0.3)
    async with _app(bridge, ping_interval=60, backoff=(0.05, 0.1)) as app:
        await _wait(lambda: app.close_code == 4408)
        await app.wait_registered()
    url = bridge.ws_url
    info = client_log.messages(logging.INFO)
    assert info[0] == f"connected to {url}; registering 1 tool"
    assert re.fullmatch(rf"reconnecting to {re.escape(url)} in 0\.\d s \(attempt 2\)", info[1]), info
    assert info[2] == f"connected to {url}; registering 1 tool"
    assert info[-1] == f"connection to {url} closed with 1000 (a normal close)"
    warning = client_log.messages(logging.WARNING)[0]
    assert warning.startswith(f"connection to {url} closed with 4408 (the app was silent for too long)"), (
        warning
    )


class _MidDraw:
    """Stands for the `random` module in clientmcp_fast.client: every jitter factor exactly 1."""

    @staticmethod
    def random() -> float:
        return 0.5


def _waits(client_log: _Records) -> list[float]:
    """The wait before each reconnect, in seconds, as scheduled (not as the log line rounds it)."""
    return [
        record.args[1]  # type: ignore[index]
        for record in client_log.records
        if record.msg.startswith("reconnecting to ")
    ]


async def test_the_backoff_starts_over_only_after_a_connection_stayed_registered(
    start_bridge, client_log, monkeypatch
):
    """4429 at the handshake, or registered and closed within backoff[1]: the wait grows; past it, it starts over."""
    monkeypatch.setattr(client_module, "random", _MidDraw)
    # One app connection allowed: while `holder` has it, every other is closed with 4429 at open
    # (docs/limits.md); an app silent for 0.2 s is closed with 4408.
    bridge = start_bridge(max_app_connections=1, app_idle_timeout=0.2)
    holder = _app(bridge, "holder", ping_interval=0.05)
    await holder.connect()
    app = _app(bridge, ping_interval=60, backoff=(0.05, 0.8))
    connecting = asyncio.ensure_future(app.connect(timeout=60))
    try:
        await _wait(lambda: len(_waits(client_log)) == 5)
        assert app.close_code == 4429
        # Each attempt had its handshake, and still counts as failed.
        assert _waits(client_log) == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8])
        await holder.close()
        await connecting  # registered
        # Silent, it is closed with 4408 some 0.2 s later: registered for less than backoff[1].
        await _wait(lambda: len(_waits(client_log)) == 6)
        assert app.close_code == 4408
        assert _waits(client_log)[5] == pytest.approx(0.8)
        # The next connection pings, so it stays; once it has stayed 0.8 s, silence ends it.
        app.ping_interval = 0.05
        await asyncio.wait_for(app.wait_registered(), 10)
        await asyncio.sleep(1.0)
        assert len(_waits(client_log)) == 6
        app.ping_interval = 60
        await _wait(lambda: len(_waits(client_log)) == 7)
        assert app.close_code == 4408
        assert _waits(client_log)[6] == pytest.approx(0.05)
    finally:
        connecting.cancel()
        await app.close()
        await holder.close()


async def test_a_token_function_whose_tokens_are_refused_backs_off(bridge, client_log, monkeypatch):
    """Every connection closed with 4401 at once: a token function gets a retry, at ever longer waits."""
    monkeypatch.setattr(client_module, "random", _MidDraw)
    calls = 0

    def refused() -> str:
        nonlocal calls
        calls += 1
        return bridge.token("agent", "lib")  # an agent's token, refused to an app

    app = ClientMCP(bridge.ws_url, refused, backoff=(0.05, 0.4))
    connecting = asyncio.ensure_future(app.connect(timeout=60))
    try:
        await _wait(lambda: len(_waits(client_log)) == 5)
        assert app.close_code == 4401
        assert _waits(client_log) == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.4])
        assert calls == 5
    finally:
        connecting.cancel()
        await app.close()


# -- stopping: Ctrl-C under asyncio.run cancels the main task, in whatever state the app is ------


async def _until_cancelled(app: ClientMCP) -> None:
    """The examples' main: `async with app: await app.closed()`, which Ctrl-C cancels."""
    async with app:
        await app.closed()


async def _stopped(task: asyncio.Task) -> None:
    """Cancel `task` as Ctrl-C does, and see it end by that cancel."""
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)


GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 §1.3


async def _accept_websocket(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer a client's opening handshake by hand, with the ClientMCP subprotocol."""
    request = await reader.readuntil(b"\r\n\r\n")
    (key,) = re.findall(rb"(?im)^sec-websocket-key: *(\S+)", request)
    accept = base64.b64encode(hashlib.sha1(key + GUID.encode()).digest()).decode()
    writer.write(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: clientmcp.v1\r\n\r\n".encode()
    )


async def _read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The opcode and unmasked payload of one unfragmented frame from a client (RFC 6455 §5.2)."""
    first, second = await reader.readexactly(2)
    length = second & 0x7F
    if length >= 126:
        length = int.from_bytes(await reader.readexactly(2 if length == 126 else 8), "big")
    mask = await reader.readexactly(4)
    payload = await reader.readexactly(length)
    return first & 0x0F, bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))


@pytest.mark.parametrize("waiting_for", ["handshake", "registered"])
async def test_a_cancelled_connect_leaves_nothing_connected(waiting_for):
    """Ctrl-C before the bridge answered: no runner stays behind, connected and answering calls."""
    from websockets.asyncio.server import serve

    reached, dropped = asyncio.Event(), asyncio.Event()

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reached.set()
        await reader.read()  # the handshake, never answered, until the app hangs up
        writer.close()
        dropped.set()

    async def never_registers(ws) -> None:
        await ws.recv()  # the register, never answered
        reached.set()
        with contextlib.suppress(websockets.ConnectionClosed):
            async for _ in ws:
                pass
        dropped.set()

    async with contextlib.AsyncExitStack() as stack:
        if waiting_for == "handshake":
            server = await asyncio.start_server(mute, "127.0.0.1", 0)
            stack.push_async_callback(server.wait_closed)
            stack.callback(server.close)
        else:
            server = await stack.enter_async_context(
                serve(never_registers, "127.0.0.1", 0, subprotocols=["clientmcp.v1"])
            )
        app = ClientMCP(f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/connect", "t")
        app.expose("echo", _echo)
        connecting = asyncio.ensure_future(app.connect(timeout=60))
        await asyncio.wait_for(reached.wait(), 10)
        await _stopped(connecting)
        await asyncio.wait_for(app.closed(), 1)  # the runner is over: nothing reconnects
        await asyncio.wait_for(dropped.wait(), 5)  # and the connection it had is gone


async def test_ctrl_c_while_waiting_to_reconnect_stops_at_once(client_log):
    """Closed by the bridge and waiting a minute to reconnect, the app stops at once, trying nothing more."""
    from websockets.asyncio.server import serve

    connections = 0

    async def closes_after_registered(ws) -> None:
        nonlocal connections
        connections += 1
        await ws.recv()
        await ws.send('{"type":"registered"}')
        await ws.close(1011, "going away for a while")

    async with serve(closes_after_registered, "127.0.0.1", 0, subprotocols=["clientmcp.v1"]) as server:
        port = server.sockets[0].getsockname()[1]
        app = ClientMCP(f"ws://127.0.0.1:{port}/connect", "t", backoff=(60.0, 60.0))
        app.expose("echo", _echo)
        main = asyncio.ensure_future(_until_cancelled(app))
        await _wait(lambda: len(_waits(client_log)) == 1)  # 30 to 90 s to go
        await _stopped(main)
        await asyncio.wait_for(app.closed(), 1)
        assert connections == 1


async def test_ctrl_c_during_a_call_cancels_the_handler_and_closes_1000():
    """A handler still running when Ctrl-C comes is cancelled, sends nothing, and the close is a normal one."""
    from websockets.asyncio.server import serve

    started, cancelled = asyncio.Event(), asyncio.Event()
    heard: list[dict] = []
    closes: list[int | None] = []

    async def wait(arguments: dict) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()
        return "never"

    async def calls_once(ws) -> None:
        await ws.recv()
        await ws.send('{"type":"registered"}')
        await ws.send('{"type":"call","id":"c1","name":"wait","arguments":{}}')
        with contextlib.suppress(websockets.ConnectionClosed):
            async for raw in ws:
                heard.append(json.loads(raw))
        closes.append(ws.close_code)

    async with serve(calls_once, "127.0.0.1", 0, subprotocols=["clientmcp.v1"]) as server:
        app = ClientMCP(f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/connect", "t")
        app.expose("wait", wait)
        main = asyncio.ensure_future(_until_cancelled(app))
        await asyncio.wait_for(started.wait(), 10)
        await _stopped(main)
        await asyncio.wait_for(cancelled.wait(), 1)
        await _wait(lambda: closes == [1000])
        assert [message["type"] for message in heard] == []  # no result, not even an error


@pytest.mark.parametrize("closers", [1, 2], ids=["one-close", "a-second-close"])
async def test_a_cancelled_close_drops_a_connection_the_bridge_never_closes(closers):
    """Cancelled while waiting for the bridge's half of the closing handshake, close() drops the connection.

    Nothing else would: a peer that stays silent kept the runner, and the socket, forever. The
    close cancelled may be a second one, while the first still waits.
    """
    close_sent, dropped = asyncio.Event(), asyncio.Event()

    async def silent_at_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _accept_websocket(reader, writer)
        await _read_frame(reader)  # the register
        registered = b'{"type":"registered"}'
        writer.write(bytes([0x80 | Op.TEXT, len(registered)]) + registered)
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while (await _read_frame(reader))[0] != Op.CLOSE:
                pass
            close_sent.set()  # and never answered
            await reader.read()
        dropped.set()
        writer.close()

    server = await asyncio.start_server(silent_at_close, "127.0.0.1", 0)
    async with server:
        app = ClientMCP(f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/connect", "t")
        app.expose("echo", _echo)
        await app.connect()
        closes = [asyncio.ensure_future(app.close()) for _ in range(closers)]
        await asyncio.wait_for(close_sent.wait(), 10)
        await _stopped(closes.pop())
        await asyncio.wait_for(asyncio.gather(*closes), 1)
        await asyncio.wait_for(app.closed(), 1)
        await asyncio.wait_for(dropped.wait(), 5)


@pytest.mark.parametrize(
    ("make", "member"),
    [
        (lambda: completed("Done.", status="ok"), "status"),
        (lambda: completed("Done.", operation="op-1"), "operation"),
        (lambda: accepted("op-1", "Started.", reason="why"), "reason"),
        (lambda: rejected("busy", "Try later.", reason="why"), "reason"),
    ],
    ids=["completed-status", "completed-operation", "accepted-reason", "rejected-reason"],
)
async def test_the_outcome_members_are_not_free_for_the_apps_data(make, member):
    """status, operation and reason belong to the outcome: data under those names is refused, not merged."""
    with pytest.raises(ValueError, match=f"^{member}: a member of the outcome itself"):
        make()


# -- on_authorize: the app's side of OAuth consent (docs/oauth.md) ------------------------------


class _ConsentPage:
    """An OAuth client and its person, by hand: registers, opens the consent page, types a code."""

    REDIRECT = "http://127.0.0.1:33418/callback"

    def __init__(self, bridge, http: httpx2.AsyncClient) -> None:
        self.bridge = bridge
        self.http = http
        self.url = bridge.http_url

    async def open(self, client_id: str = "lib") -> None:
        registered = await self.http.post(
            "/oauth/register", json={"redirect_uris": [self.REDIRECT], "client_name": "Lib host"}
        )
        query = {
            "response_type": "code",
            "client_id": registered.json()["client_id"],
            "redirect_uri": self.REDIRECT,
            "state": "s",
            "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            "code_challenge_method": "S256",
            "resource": f"{self.url}/apps/{client_id}/mcp",
        }
        self.page = await self.http.get("/oauth/authorize", params=query)
        self.cookie = self.page.headers["set-cookie"].split(";", 1)[0]
        self.http.cookies.clear()

    async def type_code(self, code: str) -> dict[str, list[str]]:
        """The form POSTed with `code`: what the redirect to the client says."""
        from urllib.parse import parse_qs, urlsplit

        fields = dict(re.findall(r'name="(request|csrf)" value="([^"]*)"', self.page.text))
        headers = {"cookie": self.cookie, "origin": self.url}
        response = await self.http.post("/oauth/authorize", data={**fields, "code": code}, headers=headers)
        assert response.status_code == 303, response.text
        return parse_qs(urlsplit(response.headers["location"]).query)


@pytest.fixture
def oauth_bridge(start_bridge):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return start_bridge(port=port, oauth=True, public_url=f"http://127.0.0.1:{port}")


async def test_on_authorize_answers_the_bridges_authorize_with_consent(oauth_bridge):
    """Set, every register declares consent; the handler gets who asks and the code, and its answer is sent."""
    asked: list[client_module.AuthorizeRequest] = []
    answers = iter([True, False])

    def decide(request: client_module.AuthorizeRequest) -> bool:  # a plain function will do
        asked.append(request)
        return next(answers)

    app = _app(oauth_bridge)
    assert "consent" not in json.loads(app.register_message())
    async with app, httpx2.AsyncClient(base_url=oauth_bridge.http_url, timeout=10) as http:
        app.on_authorize = decide  # while online: the library registers again, with consent
        assert json.loads(app.register_message())["consent"] is True
        await _wait(lambda: oauth_bridge.call(lambda server: server.bridge.apps["lib"].toolset.consent))
        page = _ConsentPage(oauth_bridge, http)
        await page.open()
        await _wait(lambda: oauth_bridge.call(lambda server: server.bridge.consents.answers["allow"] == 1))
        request = asked[-1]
        assert (request.client_name, request.client_origin) == ("Lib host", "http://127.0.0.1:33418")
        assert set(await page.type_code(request.code)) == {"code", "state", "iss"}
        await page.open()
        await _wait(lambda: oauth_bridge.call(lambda server: server.bridge.consents.answers["deny"] == 1))
        assert (await page.type_code(asked[-1].code))["error"] == ["access_denied"]
        app.on_authorize = None  # cleared: registered again without consent
        await _wait(lambda: oauth_bridge.call(lambda server: not server.bridge.apps["lib"].toolset.consent))


async def test_an_on_authorize_that_fails_denies(oauth_bridge, client_log):
    async def broken(request: client_module.AuthorizeRequest) -> bool:
        raise RuntimeError("no screen to ask on")

    async with (
        _app(oauth_bridge, on_authorize=broken),
        httpx2.AsyncClient(base_url=oauth_bridge.http_url, timeout=10) as http,
    ):
        await _ConsentPage(oauth_bridge, http).open()
        await _wait(lambda: oauth_bridge.call(lambda server: server.bridge.consents.answers["deny"] == 1))
    assert any("on_authorize failed" in message for message in client_log.messages(logging.ERROR))
