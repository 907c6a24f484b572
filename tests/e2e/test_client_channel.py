"""The client channel (`/connect`) of a real bridge, against the `websockets` library and raw sockets.

ClientMCP v1 §3, and docs/protocol.md (Close codes, Register validation, Shutdown) and
docs/configuration.md (limits, under Settings). Well-formed apps are `websockets` clients,
an implementation independent of the bridge; malformed frames and apps that stop reading
are raw sockets (`RawApp`). Agents are raw HTTP POSTs of `tools/call` to `/mcp`.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest
from conftest import make_token
from rawhttp import RawApp, RawHttp, mcp_post, tool_call, tool_error_text, upgrade_request
from websockets.asyncio.client import connect as connect_async
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect
from wire import Op, client_frame

MAX_MESSAGE = 4 * 1024 * 1024
PING = '{"type":"ping"}'
PONG = '{"type":"pong"}'
REGISTERED = {"type": "registered"}
ECHO_TOOL = {"name": "echo", "inputSchema": {"type": "object"}}
DISCONNECTED = "The application disconnected before answering."
BUSY = "The application is busy; try again."


def open_app(
    bridge, client_id: str | None = None, *, protocols: list[str] | None = None, **kwargs
) -> ClientConnection:
    """A `websockets` app offering `clientmcp.v1` and a client token for `client_id`."""
    if protocols is None:
        protocols = ["clientmcp.v1", bridge.token("client", client_id)]
    kwargs.setdefault("ping_interval", None)  # only what a test sends reaches the bridge
    return connect(
        bridge.ws_url, subprotocols=protocols, open_timeout=10, close_timeout=5, legacy=True, **kwargs
    )


def register(ws: ClientConnection, tools: list | None = None, **members) -> None:
    """Send a register (the one tool `echo` by default) and check it is answered `registered`."""
    ws.send(json.dumps({"type": "register", "tools": [ECHO_TOOL] if tools is None else tools, **members}))
    assert json.loads(ws.recv(timeout=10)) == REGISTERED


def close_of(ws: ClientConnection, timeout: float = 10.0) -> tuple[int, str]:
    """The (code, reason) of the close frame the bridge sent, skipping messages before it."""
    with pytest.raises(ConnectionClosed) as caught:
        while True:
            ws.recv(timeout=timeout)
    received = caught.value.rcvd
    assert received is not None, f"the connection ended without a close frame: {caught.value!r}"
    return received.code, received.reason


# -- ClientMCP v1 §3.1 connecting ----------------------------------------------------------------


class TestHandshake:
    @pytest.mark.parametrize("token_first", [False, True])
    def test_selects_clientmcp_v1_and_never_echoes_the_token(self, bridge, token_first):
        """The 101 selects clientmcp.v1 alone, whichever order the two values were offered in."""
        token = bridge.token("client", "alice")
        offered = [token, "clientmcp.v1"] if token_first else ["clientmcp.v1", token]
        with open_app(bridge, protocols=offered) as ws:
            assert ws.subprotocol == "clientmcp.v1"
            assert ws.response.status_code == 101
            assert ws.response.headers.get_all("Sec-WebSocket-Protocol") == ["clientmcp.v1"]
            for name, value in ws.response.headers.raw_items():
                assert token not in value, name
            register(ws)
        with RawHttp(bridge.port) as raw:
            raw.send(upgrade_request(offered))
            head = raw.read_until(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 101 ")
            assert token.encode() not in head
            # No part of the token either (it holds dots: each segment is checked).
            for segment in token.split("."):
                assert segment.encode() not in head
        bridge.assert_nothing_leaks()

    @pytest.mark.parametrize(
        "offered",
        [
            pytest.param(None, id="no-subprotocol"),
            pytest.param(["TOKEN"], id="token-only"),
            pytest.param(["clientmcp.v2", "TOKEN"], id="other-version"),
        ],
    )
    def test_upgrade_without_clientmcp_v1_is_http_400(self, bridge, offered):
        """An upgrade that does not offer clientmcp.v1 is refused with HTTP 400, not a WebSocket."""
        token = bridge.token("client", "alice")
        protocols = None if offered is None else [token if p == "TOKEN" else p for p in offered]
        with pytest.raises(InvalidStatus) as caught:
            connect(bridge.ws_url, subprotocols=protocols, open_timeout=10, legacy=True)
        assert caught.value.response.status_code == 400
        bridge.assert_nothing_leaks()

    def test_register_is_answered_registered_in_order(self, bridge):
        """Every accepted register gets its own `registered`, in order."""
        with open_app(bridge, "alice") as ws:
            for _ in range(3):
                ws.send(json.dumps({"type": "register", "tools": [ECHO_TOOL]}))
            for _ in range(3):
                assert json.loads(ws.recv(timeout=10)) == REGISTERED
            ws.send(json.dumps({"type": "register", "tools": []}))  # an empty tool set is fine
            assert json.loads(ws.recv(timeout=10)) == REGISTERED
        bridge.assert_nothing_leaks()

    def test_exact_ping_gets_exactly_pong(self, bridge):
        """The exact text {"type":"ping"} gets exactly {"type":"pong"}, before and after register."""
        with open_app(bridge, "alice") as ws:
            ws.send(PING)
            assert ws.recv(timeout=10) == PONG
            register(ws)
            for _ in range(3):
                ws.send(PING)
                assert ws.recv(timeout=10) == PONG

    @pytest.mark.parametrize("text", ['{"type": "ping"}', '{"type":"ping","seq":7}', ' {"type":"ping"}\n'])
    def test_any_ping_object_gets_exactly_pong(self, bridge, text):
        """Other texts that parse as a ping get the same fixed pong bytes."""
        with open_app(bridge, "alice") as ws:
            ws.send(text)
            assert ws.recv(timeout=10) == PONG

    def test_unknown_message_types_are_ignored(self, bridge):
        """A message of an unknown type is ignored (forward compatibility): the connection goes on."""
        with open_app(bridge, "alice") as ws:
            ws.send(json.dumps({"type": "telemetry", "data": [1, 2, 3]}))
            ws.send(PING)
            assert ws.recv(timeout=10) == PONG

    def test_websocket_ping_frame_gets_pong_frame(self, bridge):
        """An RFC 6455 ping control frame is answered with a pong carrying the same payload."""
        app = RawApp(bridge.port, bridge.token("client", "alice"))
        app.send(client_frame(Op.PING, b"are-you-there"))
        assert app.read_frame() == (True, Op.PONG, b"are-you-there")
        app.close()


# -- ClientMCP v1 §3.1, §2 tokens: 4401 ----------------------------------------------------------

OTHER_SECRET = b"another-secret-that-is-long-enough-0123456789"


class TestTokenRefused:
    @pytest.mark.parametrize(
        "protocols",
        [
            pytest.param(lambda b: ["clientmcp.v1"], id="missing"),
            pytest.param(lambda b: ["clientmcp.v1", "not-a-jwt"], id="garbage"),
            pytest.param(lambda b: ["clientmcp.v1", b.token("client", "alice", ttl=-3600)], id="expired"),
            pytest.param(lambda b: ["clientmcp.v1", b.token("agent", "alice")], id="agent-role"),
            pytest.param(
                lambda b: ["clientmcp.v1", make_token("client", "alice", secret=OTHER_SECRET)],
                id="other-secret",
            ),
            pytest.param(
                lambda b: ["clientmcp.v1", b.token("client", "alice"), b.token("client", "bob")],
                id="two-tokens",
            ),
        ],
    )
    def test_handshake_succeeds_then_close_4401(self, bridge, protocols):
        """A bad client token is not an HTTP failure: the WebSocket opens, then closes with 4401."""
        offered = protocols(bridge)
        with open_app(bridge, protocols=offered) as ws:
            assert ws.subprotocol == "clientmcp.v1"
            code, reason = close_of(ws)
        assert code == 4401
        assert reason
        for value in offered[1:]:
            assert value not in reason
        assert bridge.call(lambda s: "alice" not in s.bridge.apps)
        bridge.assert_nothing_leaks()

    def test_expired_within_the_clock_skew_is_accepted(self, bridge):
        """A token that expired 20 s ago is still inside the 60 s of allowed skew."""
        with open_app(bridge, protocols=["clientmcp.v1", bridge.token("client", "alice", ttl=-20)]) as ws:
            register(ws)


# -- ClientMCP v1 §3.1 replacement: 4409 ---------------------------------------------------------


class TestReplaced:
    def test_older_connection_gets_4409_and_the_newer_keeps_working(self, bridge):
        """A second connection with the same client ID closes the first with 4409; the second serves calls."""
        agent = bridge.token("agent", "alice")
        older = open_app(bridge, "alice")
        register(older)
        with RawHttp(bridge.port) as pending:
            pending.send(mcp_post(tool_call("echo", {"n": 1}, 1), agent))
            assert json.loads(older.recv(timeout=10))["type"] == "call"
            newer = open_app(bridge, "alice")
            assert close_of(older) == (4409, "replaced by a newer connection for this client ID")
            # The older connection's call in flight fails at once.
            assert tool_error_text(pending.read_response()) == DISCONNECTED
        with newer:
            newer.send(PING)
            assert newer.recv(timeout=10) == PONG
            register(newer)
            with RawHttp(bridge.port) as conn:
                conn.send(mcp_post(tool_call("echo", {"n": 2}, 2), agent))
                call = json.loads(newer.recv(timeout=10))
                assert call == {"type": "call", "id": call["id"], "name": "echo", "arguments": {"n": 2}}
                result = {"content": [{"type": "text", "text": "from the newer"}]}
                newer.send(json.dumps({"type": "result", "id": call["id"], "result": result}))
                assert conn.read_response().json() == {"jsonrpc": "2.0", "id": 2, "result": result}
        older.close()
        bridge.assert_nothing_leaks()


# -- ClientMCP v1 §3.2 messages and docs/protocol.md, Register validation: 4400 ------------------


def _long_name() -> str:
    return "n" * 129


class TestProtocolErrors:
    @pytest.mark.parametrize(
        ("tools", "reason"),
        [
            pytest.param(
                [ECHO_TOOL, {"name": "a b", "inputSchema": {"type": "object"}}],
                'tools[1] "a b": name has invalid characters',
                id="invalid-characters",
            ),
            pytest.param([ECHO_TOOL, ECHO_TOOL], 'tools[1] "echo": name declared twice', id="declared-twice"),
            pytest.param([{"name": "x"}], 'tools[0] "x": inputSchema', id="no-input-schema"),
            pytest.param(
                [{"name": "x", "inputSchema": {"type": "string"}}],
                'tools[0] "x": inputSchema',
                id="schema-not-object",
            ),
            pytest.param([{"name": "x", "inputSchema": []}], 'tools[0] "x": inputSchema', id="schema-array"),
            pytest.param([ECHO_TOOL, ECHO_TOOL | {"name": ""}], "tools[1]", id="empty-name"),
            pytest.param(
                [{"name": _long_name(), "inputSchema": {"type": "object"}}], "tools[0]", id="long-name"
            ),
            pytest.param([ECHO_TOOL, ECHO_TOOL | {"name": "other"}, "tool"], "tools[2]", id="not-an-object"),
            pytest.param([{"inputSchema": {"type": "object"}}], "tools[0]", id="no-name"),
            pytest.param([{"name": 5, "inputSchema": {"type": "object"}}], "tools[0]", id="name-not-string"),
            pytest.param(
                [
                    {
                        "name": "x",
                        "inputSchema": {
                            "type": "object",
                            "properties": {"n": {"type": "number", "x-mcp-header": "N"}},
                        },
                    }
                ],
                'tools[0] "x"',
                id="x-mcp-header-on-number",
            ),
        ],
    )
    def test_bad_register_closes_4400_naming_tool_and_problem(self, bridge, tools, reason):
        """A refused register closes with 4400; the reason starts with the tool's index (and name)."""
        with open_app(bridge, "alice") as ws:
            ws.send(json.dumps({"type": "register", "tools": tools}))
            code, got = close_of(ws)
        assert code == 4400
        assert got.startswith(reason), got
        assert len(got.encode()) <= 123
        bridge.assert_nothing_leaks()

    @pytest.mark.parametrize(
        ("message", "problem"),
        [
            pytest.param({"type": "register"}, "tools", id="tools-missing"),
            pytest.param({"type": "register", "tools": {}}, "tools", id="tools-not-array"),
            pytest.param(
                {"type": "register", "tools": [], "instructions": None},
                "instructions",
                id="instructions-null",
            ),
            pytest.param(
                {"type": "register", "tools": [], "instructions": 3}, "instructions", id="instructions-number"
            ),
        ],
    )
    def test_bad_register_members_close_4400(self, bridge, message, problem):
        """A register whose tools or instructions have the wrong shape closes with 4400 naming the member."""
        with open_app(bridge, "alice") as ws:
            ws.send(json.dumps(message))
            code, reason = close_of(ws)
        assert code == 4400
        assert problem in reason, reason

    def test_problem_in_a_long_name_fits_the_close_reason(self, bridge):
        """A long multi-byte tool name is shortened in the reason; the problem itself survives."""
        name = "é" * 100 + " "
        with open_app(bridge, "alice") as ws:
            register_message = {
                "type": "register",
                "tools": [ECHO_TOOL, {"name": name, "inputSchema": {"type": "object"}}],
            }
            ws.send(json.dumps(register_message, ensure_ascii=False))
            code, reason = close_of(ws)
        assert code == 4400
        assert reason.startswith("tools[1]")
        assert reason.endswith(("name has invalid characters", "name must be 1-128 characters"))
        assert len(reason.encode()) <= 123

    @pytest.mark.parametrize(
        "text",
        [
            pytest.param("{not json", id="invalid-json"),
            pytest.param('{"type":"ping"', id="truncated-json"),
            pytest.param("[1, 2]", id="array"),
            pytest.param('"register"', id="string"),
            pytest.param("{}", id="no-type"),
            pytest.param('{"type": 4}', id="type-not-string"),
            pytest.param('{"type":"registered"}', id="bridge-type-registered"),
            pytest.param('{"type":"call","id":"1","name":"x","arguments":{}}', id="bridge-type-call"),
            pytest.param('{"type":"cancel","id":"1"}', id="bridge-type-cancel"),
            pytest.param(PONG, id="bridge-type-pong"),
            pytest.param(
                '{"type":"result","id":"1","result":{"content":{}}}', id="result-without-content-array"
            ),
        ],
    )
    def test_messages_that_break_the_protocol_close_4400(self, bridge, text):
        """Invalid JSON, a non-object, a missing or odd type, or a bridge-only type: 4400 with a reason."""
        with open_app(bridge, "alice") as ws:
            ws.send(text)
            code, reason = close_of(ws)
        assert code == 4400
        assert reason and len(reason.encode()) <= 123
        bridge.assert_nothing_leaks()

    def test_binary_message_closes_4400(self, bridge):
        """A binary message is not part of the protocol."""
        with open_app(bridge, "alice") as ws:
            ws.send(b'{"type":"ping"}')
            code, _ = close_of(ws)
        assert code == 4400


# -- RFC 6455 framing, size and encoding: 1009, 1007, 1002 ---------------------------------------


def raw_app(bridge, client_id: str = "alice") -> RawApp:
    return RawApp(bridge.port, bridge.token("client", client_id))


class TestFraming:
    def test_message_over_4_mib_closes_1009(self, bridge):
        """A text message of 4 MiB + 1 byte closes with 1009."""
        with open_app(bridge, "alice", max_size=None) as ws:
            try:
                ws.send("x" * (MAX_MESSAGE + 1))
            except ConnectionClosed:
                pass  # the bridge may close before the whole frame is written
            code, _ = close_of(ws)
        assert code == 1009
        bridge.assert_nothing_leaks()

    def test_frame_header_over_4_mib_closes_1009_before_the_payload(self, bridge):
        """The size is judged on the frame header: 1009 arrives without a byte of payload sent."""
        app = raw_app(bridge)
        app.send(b"\x81\xff" + (MAX_MESSAGE + 1).to_bytes(8, "big") + b"mask")
        assert app.read_close()[0] == 1009
        app.close()

    def test_fragmented_message_over_4_mib_closes_1009(self, bridge):
        """Fragments adding up to 4 MiB + 1 byte close with 1009."""
        app = raw_app(bridge)
        half = b"y" * (MAX_MESSAGE // 2)
        app.send(client_frame(Op.TEXT, half, fin=False) + client_frame(Op.CONTINUATION, half + b"y"))
        assert app.read_close()[0] == 1009
        app.close()

    def test_message_of_exactly_4_mib_is_accepted(self, bridge):
        """A message of exactly 4 MiB is within the limit: this padded ping gets its pong."""
        prefix, suffix = '{"type":"ping","pad":"', '"}'
        text = prefix + "p" * (MAX_MESSAGE - len(prefix) - len(suffix)) + suffix
        assert len(text) == MAX_MESSAGE
        with open_app(bridge, "alice") as ws:
            ws.send(text)
            assert ws.recv(timeout=20) == PONG

    @pytest.mark.parametrize(
        "frames",
        [
            pytest.param([client_frame(Op.TEXT, b'{"type":"x","s":"\xff"}')], id="invalid-byte"),
            pytest.param([client_frame(Op.TEXT, b'{"type":"x","s":"\xed\xa0\x80"}')], id="surrogate"),
            pytest.param([client_frame(Op.TEXT, b'{"type":"x","s":"\xc3"}')], id="truncated-sequence"),
            pytest.param(
                [
                    client_frame(Op.TEXT, b'{"type":"x","s":"\xc3', fin=False),
                    client_frame(Op.CONTINUATION, b'("}'),
                ],
                id="invalid-across-fragments",
            ),
        ],
    )
    def test_invalid_utf8_text_closes_1007(self, bridge, frames):
        """A text message that is not valid UTF-8 closes with 1007."""
        app = raw_app(bridge)
        app.send(b"".join(frames))
        assert app.read_close()[0] == 1007
        app.close()

    def test_character_split_across_fragments_is_valid(self, bridge):
        """A UTF-8 character split between two fragments is valid text."""
        app = raw_app(bridge)
        app.send(
            client_frame(Op.TEXT, b'{"type":"x","s":"\xc3', fin=False)
            + client_frame(Op.CONTINUATION, b'\xa9"}')
        )
        app.send_text(PING)
        assert app.read_text() == PONG
        app.close()

    @pytest.mark.parametrize(
        "data",
        [
            pytest.param(client_frame(Op.TEXT, PING.encode(), mask=None), id="unmasked"),
            pytest.param(client_frame(Op.TEXT, PING.encode(), rsv=0x40), id="rsv1"),
            pytest.param(client_frame(Op.TEXT, PING.encode(), rsv=0x20), id="rsv2"),
            pytest.param(client_frame(Op.TEXT, PING.encode(), rsv=0x10), id="rsv3"),
            pytest.param(client_frame(0x3, b"x"), id="reserved-opcode"),
            pytest.param(client_frame(Op.PING, b"p" * 126), id="control-over-125"),
            pytest.param(client_frame(Op.PING, b"p", fin=False), id="fragmented-control"),
            pytest.param(client_frame(Op.CONTINUATION, b"x"), id="continuation-alone"),
            pytest.param(
                client_frame(Op.TEXT, b"{", fin=False) + client_frame(Op.TEXT, b"{}"),
                id="new-message-mid-fragments",
            ),
            pytest.param(client_frame(Op.CLOSE, b"\x03"), id="close-1-byte"),
            pytest.param(client_frame(Op.CLOSE, (1005).to_bytes(2, "big")), id="close-code-1005"),
        ],
    )
    def test_framing_errors_close_1002(self, bridge, data):
        """Unmasked frames, reserved bits or opcodes, bad control frames and bad continuations: 1002."""
        app = raw_app(bridge)
        app.send(data)
        assert app.read_close()[0] == 1002
        app.close()
        bridge.assert_nothing_leaks()

    def test_peer_close_is_echoed_and_the_app_goes_offline(self, bridge):
        """An app's close frame is echoed with its code, and the bridge forgets the app."""
        app = raw_app(bridge)
        app.send_text(json.dumps({"type": "register", "tools": [ECHO_TOOL]}))
        assert json.loads(app.read_text()) == REGISTERED
        app.send(client_frame(Op.CLOSE, (1000).to_bytes(2, "big") + b"bye"))
        assert app.read_close()[0] == 1000
        app.assert_closed()
        app.close()
        bridge.assert_nothing_leaks()

    @pytest.mark.parametrize(
        "bad",
        [
            pytest.param(b"\xff", id="invalid-byte"),
            pytest.param(b"\xc3", id="truncated-sequence"),
            pytest.param(b"\xed\xa0\x80", id="encoded-surrogate"),
            pytest.param(b"\xc0\xaf", id="overlong"),
        ],
    )
    def test_an_agent_body_that_is_not_utf8_never_reaches_the_app(self, bridge, bad):
        """Arguments pass through unread, and the app's frames must be UTF-8: such a body is -32700, the app stays."""
        agent = bridge.token("agent", "alice")
        with open_app(bridge, "alice") as ws:
            register(ws)
            with RawHttp(bridge.port) as conn:
                body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"s":"'
                conn.send(mcp_post(body + bad + b'"}}}', agent))
                response = conn.read_response()
                assert response.status == 400
                assert response.json()["error"] == {
                    "code": -32700,
                    "message": "Parse error: the body is not UTF-8",
                }
                assert response.json()["id"] is None
                # The app got nothing, and is still online: valid UTF-8 beyond ASCII passes through as sent.
                valid = {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"s": "é 日本 🙂"}},
                }
                conn.send(mcp_post(json.dumps(valid, ensure_ascii=False).encode(), agent))
                call = json.loads(ws.recv(timeout=10))
                assert call == {
                    "type": "call",
                    "id": call["id"],
                    "name": "echo",
                    "arguments": {"s": "é 日本 🙂"},
                }
                result = {"content": [{"type": "text", "text": "ok"}]}
                ws.send(json.dumps({"type": "result", "id": call["id"], "result": result}))
                assert conn.read_response().json() == {"jsonrpc": "2.0", "id": 2, "result": result}
        bridge.assert_nothing_leaks()


# -- docs/configuration.md, Settings: idle and slow apps, 4408, 4429 -----------------------------


class TestIdle:
    def test_silent_app_closes_4408_while_a_pinging_app_stays(self, start_bridge):
        """With app_idle_timeout=0.5, a silent app gets 4408; one pinging every 0.1 s stays open."""
        bridge = start_bridge(app_idle_timeout=0.5)
        silent = open_app(bridge, "silent")
        register(silent)
        with open_app(bridge, "chatty") as chatty:
            register(chatty)
            # Three idle periods: each ping is a sign of life, so the chatty app stays.
            until = time.monotonic() + 1.5
            while time.monotonic() < until:
                chatty.send(PING)
                assert chatty.recv(timeout=10) == PONG
                time.sleep(0.1)
            assert close_of(silent) == (4408, "nothing received for 0.5 s")
            assert bridge.call(lambda s: "chatty" in s.bridge.apps and "silent" not in s.bridge.apps)
        silent.close()
        bridge.assert_nothing_leaks()


def _listed(server) -> list[tuple[int, str]]:
    """Each listed WebSocket's place as it holds it, and its app's client ID."""
    assert [protocol.index for protocol in server.websockets] == list(range(len(server.websockets)))
    return [(protocol.index, protocol.session.client_id) for protocol in server.websockets]


def test_each_websocket_holds_its_place_in_the_servers_list_as_others_close(start_bridge):
    """`server.websockets` is a list each protocol knows its place in: a closed one's goes to the last."""
    bridge = start_bridge()
    apps = {client_id: open_app(bridge, client_id) for client_id in ("a", "b", "c", "d")}
    for app in apps.values():
        register(app)
    assert sorted(bridge.call(_listed)) == [(0, "a"), (1, "b"), (2, "c"), (3, "d")]
    apps.pop("b").close()
    bridge.wait_for(lambda s: len(s.websockets) == 3)
    assert sorted(bridge.call(_listed)) == [(0, "a"), (1, "d"), (2, "c")]
    apps.pop("c").close()  # the last one
    bridge.wait_for(lambda s: len(s.websockets) == 2)
    assert sorted(bridge.call(_listed)) == [(0, "a"), (1, "d")]
    for app in apps.values():
        app.close()
    bridge.assert_nothing_leaks()


def _shrink_bridge_send_buffer(server) -> None:
    # The kernel would otherwise absorb megabytes; shrinking the bridge's socket buffer for
    # this one app makes its own write buffer fill, which is what the limits measure.
    (protocol,) = server.websockets
    protocol.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)


class TestSlowApp:
    def test_app_that_stops_reading_gets_busy_calls_then_4429(self, start_bridge):
        """Above the soft limit new calls are busy; after app_soft_seconds the app is closed with 4429."""
        bridge = start_bridge(
            app_soft_bytes=256 * 1024, app_hard_bytes=64 * 1024 * 1024, app_soft_seconds=1.0
        )
        agent = bridge.token("agent", "slow")
        app = RawApp(bridge.port, bridge.token("client", "slow"), rcvbuf=4096)
        app.send_text(json.dumps({"type": "register", "tools": [ECHO_TOOL]}))
        assert json.loads(app.read_text()) == REGISTERED
        bridge.call(_shrink_bridge_send_buffer)
        arguments = {"pad": "z" * (100 * 1024)}
        delivered: list[RawHttp] = []
        try:
            while True:
                conn = RawHttp(bridge.port)
                conn.send(mcp_post(tool_call("echo", arguments, len(delivered)), agent))
                delivered.append(conn)
                sent = len(delivered)
                bridge.wait_for(lambda s, sent=sent: len(s.bridge.calls) == sent)
                if bridge.call(lambda s: s.bridge.apps["slow"].congested_since is not None):
                    break
                assert sent < 50, "the app's unsent data never passed the soft limit"
            with RawHttp(bridge.port) as refused:
                refused.send(mcp_post(tool_call("echo", {}, "late"), agent))
                assert tool_error_text(refused.read_response(), "late") == BUSY
            bridge.wait_for(lambda s: "slow" not in s.bridge.apps, timeout=10)
            # The close frame waits behind the unread calls: read them all to reach it.
            code, reason = app.read_close()
            assert code == 4429
            assert reason.startswith("the app does not read"), reason
            for request_id, conn in enumerate(delivered):
                assert tool_error_text(conn.read_response(), request_id) == DISCONNECTED
        finally:
            for conn in delivered:
                conn.close()
            app.close()
        bridge.assert_nothing_leaks()

    def test_app_whose_unsent_data_passes_the_hard_limit_closes_4429_at_once(self, start_bridge):
        """One call that pushes unsent data past app_hard_bytes closes the app with 4429 without waiting."""
        bridge = start_bridge(app_soft_bytes=64 * 1024, app_hard_bytes=256 * 1024, app_soft_seconds=60.0)
        app = RawApp(bridge.port, bridge.token("client", "slow"), rcvbuf=4096)
        app.send_text(json.dumps({"type": "register", "tools": [ECHO_TOOL]}))
        assert json.loads(app.read_text()) == REGISTERED
        bridge.call(_shrink_bridge_send_buffer)
        with RawHttp(bridge.port) as conn:
            conn.send(
                mcp_post(tool_call("echo", {"pad": "z" * (1024 * 1024)}, 1), bridge.token("agent", "slow"))
            )
            assert tool_error_text(conn.read_response()) == DISCONNECTED
            assert app.read_close() == (4429, "the app does not read: unsent data passed the hard limit")
        app.close()
        bridge.assert_nothing_leaks()


# -- ClientMCP v1 §5.3 disconnection -------------------------------------------------------------


class TestDisconnection:
    @pytest.mark.parametrize("how", ["close-frame", "tcp-reset"])
    def test_calls_in_flight_fail_at_once_when_the_app_goes(self, bridge, how):
        """An app that goes away fails its calls in flight at once, long before the call timeout."""
        agent = bridge.token("agent", "alice")
        app = raw_app(bridge)
        app.send_text(json.dumps({"type": "register", "tools": [ECHO_TOOL]}))
        assert json.loads(app.read_text()) == REGISTERED
        conns = [RawHttp(bridge.port) for _ in range(3)]
        for request_id, conn in enumerate(conns):
            conn.send(mcp_post(tool_call("echo", {"i": request_id}, request_id), agent))
        calls = [json.loads(app.read_text()) for _ in conns]
        assert sorted(call["arguments"]["i"] for call in calls) == [0, 1, 2]
        started = time.monotonic()
        if how == "close-frame":
            app.send(client_frame(Op.CLOSE, (1000).to_bytes(2, "big")))
        else:
            app.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            app.close()
        for request_id, conn in enumerate(conns):
            assert tool_error_text(conn.read_response(), request_id) == DISCONNECTED
            conn.close()
        assert time.monotonic() - started < 5  # the call timeout is 120 s
        app.close()
        bridge.assert_nothing_leaks()


class TestNotRegisteredYet:
    def test_a_call_before_the_first_register_is_a_tool_error_saying_so(self, bridge):
        """Online but not registered (docs/protocol.md, Call outcomes): tools/list is empty, a call is a tool error."""
        agent = bridge.token("agent", "alice")
        app = raw_app(bridge)
        bridge.wait_for(lambda s: "alice" in s.bridge.apps)
        with RawHttp(bridge.port) as conn:
            conn.send(
                mcp_post(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode(), agent)
            )
            assert json.loads(conn.read_response().body) == {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {"tools": []},
            }
            conn.send(mcp_post(tool_call("echo", {}, 2), agent))
            assert (
                tool_error_text(conn.read_response(), 2) == "The application has not declared its tools yet."
            )
        app.send_text(json.dumps({"type": "register", "tools": [ECHO_TOOL]}))
        assert json.loads(app.read_text()) == REGISTERED
        app.close()
        bridge.assert_nothing_leaks()


# -- docs/protocol.md, Shutdown: 1001 ------------------------------------------------------------


class TestShutdown:
    def test_open_apps_get_1001_and_calls_in_flight_the_shutdown_error(self, bridge):
        """A graceful shutdown closes every app with 1001 and answers calls in flight."""
        apps = [open_app(bridge, f"app-{i}") for i in range(3)]
        for app in apps:
            register(app)
        with RawHttp(bridge.port) as conn:
            conn.send(mcp_post(tool_call("echo", {}, 1), bridge.token("agent", "app-0")))
            assert json.loads(apps[0].recv(timeout=10))["type"] == "call"
            bridge.stop()
            assert tool_error_text(conn.read_response()) == "The bridge is shutting down."
        for app in apps:
            assert close_of(app) == (1001, "bridge shutting down")
            app.close()


# -- many apps -------------------------------------------------------------------------------------


class TestManyApps:
    def test_200_apps_at_once_all_registered_and_answering_pings(self, bridge):
        """200 apps with distinct IDs connect at once; all register and each still answers a ping."""
        count = 200
        tokens = [bridge.token("client", f"app-{i}") for i in range(count)]

        async def run() -> None:
            apps = await asyncio.gather(
                *(
                    connect_async(bridge.ws_url, subprotocols=["clientmcp.v1", token], open_timeout=30)
                    for token in tokens
                )
            )
            try:
                await asyncio.gather(
                    *(app.send(json.dumps({"type": "register", "tools": [ECHO_TOOL]})) for app in apps)
                )
                answers = await asyncio.gather(*(asyncio.wait_for(app.recv(), 30) for app in apps))
                assert all(json.loads(answer) == REGISTERED for answer in answers)
                await asyncio.to_thread(bridge.wait_for, lambda s: len(s.bridge.apps) == count)
                await asyncio.gather(*(app.send(PING) for app in apps))
                pongs = await asyncio.gather(*(asyncio.wait_for(app.recv(), 30) for app in apps))
                assert pongs == [PONG] * count
            finally:
                await asyncio.gather(*(app.close() for app in apps))

        asyncio.run(run())
        bridge.assert_nothing_leaks()
