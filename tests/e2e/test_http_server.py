"""The bridge's HTTP/1.1 server against raw sockets: routes, framing, pipelining, hygiene and limits.

docs/configuration.md (Paths; limits and HTTP hygiene, under Settings) and docs/protocol.md
(Shutdown). Every request is written byte for byte, so malformed and hostile input reaches
the bridge as sent.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from rawhttp import RawApp, RawHttp, mcp_post, rpc, tool_call, tool_error_text, upgrade_request

MAX_BODY = 4 * 1024 * 1024
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
NOT_FOUND = b"GET /nothing-here HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
ECHO_TOOL = {"name": "echo", "inputSchema": {"type": "object"}}


def registered_app(bridge, client_id: str, **kwargs) -> RawApp:
    """A raw-socket app online as `client_id` with the one tool `echo`."""
    app = RawApp(bridge.port, bridge.token("client", client_id), **kwargs)
    app.send_text(json.dumps({"type": "register", "tools": [ECHO_TOOL]}))
    assert json.loads(app.read_text()) == {"type": "registered"}
    return app


def assert_ok_health(response) -> None:
    assert (response.status, response.body) == (200, b"ok")


def ping_ids(conn: RawHttp, ids) -> None:
    """Read one answer per id, and check each is the legacy ping answer for that id, in order."""
    for request_id in ids:
        response = conn.read_response()
        assert response.status == 200, (response.status, response.body)
        assert response.json() == {"jsonrpc": "2.0", "id": request_id, "result": {}}


# -- docs/configuration.md, Paths ----------------------------------------------------------------


class TestPaths:
    def test_healthz_answers_ok(self, bridge):
        """GET /healthz is 200 with the body `ok`."""
        with RawHttp(bridge.port) as conn:
            conn.send(HEALTHZ)
            response = conn.read_response()
            assert_ok_health(response)
            assert response.header("content-type").startswith("text/plain")
            conn.assert_open()

    @pytest.mark.parametrize(
        ("method", "target"),
        [
            ("POST", "/healthz"),
            ("PUT", "/healthz"),
            ("DELETE", "/healthz"),
            ("PATCH", "/healthz"),
            ("OPTIONS", "/healthz"),
            ("POST", "/connect"),
        ],
    )
    def test_methods_other_than_get_are_405(self, bridge, method, target):
        """Any method but GET on /healthz, and POST on /connect, is 405 with Allow: GET."""
        with RawHttp(bridge.port) as conn:
            conn.send(f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n".encode())
            response = conn.read_response()
            assert response.status == 405
            assert response.header("allow") == "GET"

    def test_head_answer_has_no_body_and_the_connection_stays_usable(self, bridge):
        """A HEAD answer carries no content, so the next answer on the connection parses cleanly."""
        with RawHttp(bridge.port) as conn:
            conn.send(b"HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + HEALTHZ)
            head = conn.read_response(head_request=True)
            assert head.status == 405
            assert_ok_health(conn.read_response())

    @pytest.mark.parametrize("target", ["/", "/nothing-here", "/healthz/", "/connect/x", "/mcpx", "/mcp/a/b"])
    def test_unknown_path_is_404(self, bridge, target):
        """Anything but /connect, /mcp, /mcp/<token> and /healthz is 404."""
        with RawHttp(bridge.port) as conn:
            conn.send(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            assert conn.read_response().status == 404

    def test_connect_without_upgrade_is_426(self, bridge):
        """A plain GET /connect is told to upgrade: 426 with Upgrade: websocket."""
        with RawHttp(bridge.port) as conn:
            conn.send(b"GET /connect HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            response = conn.read_response()
            assert response.status == 426
            assert response.header("upgrade") == "websocket"

    def test_http_1_0_request_is_answered_and_closed(self, bridge):
        """An HTTP/1.0 request without keep-alive gets its answer, then the connection closes."""
        with RawHttp(bridge.port) as conn:
            conn.send(b"GET /healthz HTTP/1.0\r\n\r\n")
            response = conn.read_response()
            assert_ok_health(response)
            assert response.header("connection") == "close"
            conn.assert_closed()

    @pytest.mark.parametrize(
        "head",
        [b"GET /healthz HTTP/1.1\r\n", b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n"],
        ids=["no Host", "two Hosts"],
    )
    def test_http_1_1_without_exactly_one_host_is_400_and_closes(self, bridge, head):
        """RFC 9112 §3.2: an HTTP/1.1 request lacking Host, or with two, gets 400."""
        with RawHttp(bridge.port) as conn:
            conn.send(head + b"\r\n")
            response = conn.read_response()
            assert response.status == 400
            assert b"Host" in response.body
            assert response.header("connection") == "close"
            conn.assert_closed()
        with RawHttp(bridge.port) as conn:  # and the bridge serves the next connection as ever
            conn.send(HEALTHZ)
            assert_ok_health(conn.read_response())

    def test_an_absolute_form_target_is_served_as_its_path(self, bridge):
        """RFC 9112 §3.2.2: a server must accept `GET http://host/healthz HTTP/1.1`."""
        with RawHttp(bridge.port) as conn:
            conn.send(b"GET http://127.0.0.1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert_ok_health(conn.read_response())
            body = rpc("ping", request_id=3)
            token = bridge.token("agent", "x")
            conn.send(mcp_post(body, None, target=f"http://127.0.0.1:{bridge.port}/mcp/{token}"))
            response = conn.read_response()
            assert response.status == 200, response.body
            assert response.json() == {"jsonrpc": "2.0", "id": 3, "result": {}}

    def test_a_body_nested_past_the_json_limit_is_a_parse_error(self, bridge):
        """docs/configuration.md: JSON nested deeper than about 1,000 levels is refused, not a crash."""
        deep = b"[" * 2000 + b"]" * 2000
        body = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":' + deep + b"}}"
        with RawHttp(bridge.port) as conn:
            conn.send(mcp_post(body, bridge.token("agent", "x")))
            response = conn.read_response()
            assert response.status == 400
            error = response.json()["error"]
            assert (error["code"], error["message"]) == (-32700, "Parse error: the body nests too deeply")
            conn.send(HEALTHZ)  # and the connection serves on
            assert_ok_health(conn.read_response())

    def test_a_websocket_upgrade_over_http_1_0_is_400(self, bridge):
        """RFC 6455 §4.1: the opening handshake is HTTP/1.1 or later, so 1.0 gets no 101."""
        token = bridge.token("client", "x")
        request = upgrade_request(["clientmcp.v1", token]).replace(b"HTTP/1.1", b"HTTP/1.0", 1)
        with RawHttp(bridge.port) as conn:
            conn.send(request)
            response = conn.read_response()
            assert response.status == 400
            assert b"HTTP/1.1" in response.body

    @pytest.mark.parametrize(
        "line",
        [
            b"NOT A REQUEST",
            b"GET /healthz FOO/1.1",
            b"GET  HTTP/1.1",
            b"GET /healthz HTTP/1.1 extra",
            b"\x00\x01\x02",
        ],
    )
    def test_malformed_request_line_is_400_and_closes(self, bridge, line):
        """A request line that is not HTTP gets 400, and nothing after it is read."""
        with RawHttp(bridge.port) as conn:
            conn.send(line + b"\r\nHost: 127.0.0.1\r\n\r\n" + HEALTHZ)
            response = conn.read_response()
            assert response.status == 400
            assert response.header("connection") == "close"
            conn.assert_closed()

    @pytest.mark.parametrize("line", [b"GET /healthz", b"GET /healthz HTTP/2.0", b"GET /healthz HTTP/0.9"])
    def test_other_http_versions_are_505_and_close(self, bridge, line):
        """HTTP/0.9 (no version) and HTTP/2 request lines get 505, then the close."""
        with RawHttp(bridge.port) as conn:
            conn.send(line + b"\r\nHost: 127.0.0.1\r\n\r\n" + HEALTHZ)
            response = conn.read_response()
            assert response.status == 505
            conn.assert_closed()


# -- keep-alive and pipelining ------------------------------------------------------------------


class TestPersistentConnections:
    def test_several_requests_on_one_connection(self, bridge):
        """Keep-alive: requests written one after another on one connection are all answered."""
        agent = bridge.token("agent", "alice")
        with RawHttp(bridge.port) as conn:
            for request_id in range(1, 4):
                conn.send(HEALTHZ)
                assert_ok_health(conn.read_response())
                conn.send(NOT_FOUND)
                assert conn.read_response().status == 404
                conn.send(mcp_post(rpc("tools/list", request_id=request_id), agent))
                response = conn.read_response()
                assert response.json() == {"jsonrpc": "2.0", "id": request_id, "result": {"tools": []}}
            conn.assert_open()

    def test_pipelined_requests_are_answered_in_order(self, bridge):
        """Three requests in one write get their three answers in the order they were sent."""
        agent = bridge.token("agent", "alice")
        with RawHttp(bridge.port) as conn:
            conn.send(mcp_post(rpc("ping", request_id="first"), agent) + NOT_FOUND + HEALTHZ)
            assert conn.read_response().json() == {"jsonrpc": "2.0", "id": "first", "result": {}}
            assert conn.read_response().status == 404
            assert_ok_health(conn.read_response())
            conn.assert_open()

    def test_many_pipelined_requests_are_all_answered_in_order(self, bridge):
        """Far more than 16 pipelined requests in one write: every one answered, in order."""
        agent = bridge.token("agent", "alice")
        with RawHttp(bridge.port) as conn:
            conn.send(b"".join(mcp_post(rpc("ping", request_id=i), agent) for i in range(100)))
            ping_ids(conn, range(100))
            conn.assert_open()

    def test_reading_pauses_behind_a_slow_request_and_resumes(self, bridge):
        """With 16 requests queued behind a pending call, reading stops; it resumes once answered."""
        agent = bridge.token("agent", "slowpoke")
        app = registered_app(bridge, "slowpoke")
        with RawHttp(bridge.port) as conn:
            conn.send(mcp_post(tool_call("echo", {}, "call"), agent))
            call = json.loads(app.read_text())
            assert call["name"] == "echo"
            conn.send(b"".join(mcp_post(rpc("ping", request_id=i), agent) for i in range(30)))

            def paused(server):
                (http,) = server.http_connections
                return not http.transport.is_reading()

            bridge.wait_for(paused)
            # Written while reading is paused: only read once the queue drains.
            conn.send(b"".join(mcp_post(rpc("ping", request_id=i), agent) for i in range(30, 40)))
            app.send_text(json.dumps({"type": "result", "id": call["id"], "result": {"content": []}}))
            answer = conn.read_response()
            assert answer.json() == {"jsonrpc": "2.0", "id": "call", "result": {"content": []}}
            ping_ids(conn, range(40))
            bridge.wait_for(lambda s: all(c.transport.is_reading() for c in s.http_connections))
            conn.assert_open()
        app.close()
        bridge.assert_nothing_leaks()


# -- request bodies ------------------------------------------------------------------------------


class TestBodies:
    def test_content_length_body_to_mcp(self, bridge):
        """A tools/list with a Content-Length body is answered 200."""
        with RawHttp(bridge.port) as conn:
            conn.send(mcp_post(rpc("tools/list", request_id=7), bridge.token("agent", "alice")))
            response = conn.read_response()
            assert response.status == 200
            assert response.json() == {"jsonrpc": "2.0", "id": 7, "result": {"tools": []}}

    def test_chunked_body_to_mcp(self, bridge):
        """The same request with a chunked body, split into several chunks, is answered 200."""
        body = rpc("tools/list", request_id=8)
        pieces = [body[:5], body[5:20], body[20:]]
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"
        with RawHttp(bridge.port) as conn:
            conn.send(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                + bridge.token("agent", "alice").encode()
                + b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                + chunked
                + HEALTHZ
            )
            response = conn.read_response()
            assert response.status == 200
            assert response.json() == {"jsonrpc": "2.0", "id": 8, "result": {"tools": []}}
            assert_ok_health(conn.read_response())

    def test_expect_100_continue_gets_continue_before_the_answer(self, bridge):
        """With Expect: 100-continue the bridge says 100 Continue, then answers once the body came."""
        body = rpc("tools/list", request_id=9)
        with RawHttp(bridge.port) as conn:
            head = mcp_post(body, bridge.token("agent", "alice"), extra="Expect: 100-continue\r\n")[
                : -len(body)
            ]
            conn.send(head)
            interim = conn.read_response()
            assert (interim.version, interim.status, interim.reason) == ("HTTP/1.1", 100, "Continue")
            assert interim.headers == []
            conn.send(body)
            response = conn.read_response()
            assert response.status == 200
            assert response.json()["id"] == 9

    def test_expect_100_continue_with_too_large_a_body_is_413_without_continue(self, bridge):
        """Content-Length over 4 MiB with Expect: 100-continue: 413 at once, no 100, then the close."""
        with RawHttp(bridge.port) as conn:
            conn.send(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                + bridge.token("agent", "alice").encode()
                + b"\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1)
            )
            response = conn.read_response()
            assert response.status == 413
            assert response.json()["error"]["code"] == -32600
            conn.assert_closed()

    def test_body_of_exactly_4_mib_is_served(self, bridge):
        """A body of exactly 4 MiB is within the limit."""
        prefix = b'{"jsonrpc":"2.0","id":10,"method":"ping","params":{"pad":"'
        suffix = b'"}}'
        body = prefix + b"p" * (MAX_BODY - len(prefix) - len(suffix)) + suffix
        assert len(body) == MAX_BODY
        with RawHttp(bridge.port) as conn:
            conn.send(mcp_post(body, bridge.token("agent", "alice")))
            response = conn.read_response()
            assert response.status == 200
            assert response.json() == {"jsonrpc": "2.0", "id": 10, "result": {}}

    @pytest.mark.parametrize("framing", ["content-length", "chunked"])
    def test_body_over_4_mib_is_413_with_a_json_rpc_error(self, bridge, framing):
        """A body of 4 MiB + 1 byte gets 413 with a JSON-RPC error body, then the connection closes."""
        agent = bridge.token("agent", "alice")
        head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {agent}\r\n".encode()
        if framing == "content-length":
            data = head + b"Content-Length: %d\r\n\r\n" % (MAX_BODY + 1) + b"{" * (MAX_BODY + 1)
        else:
            piece = b"{" * (1024 * 1024)
            data = head + b"Transfer-Encoding: chunked\r\n\r\n"
            data += b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(4)) + b"1\r\n{\r\n0\r\n\r\n"
        with RawHttp(bridge.port) as conn:
            # The bridge may answer and close before the body is all written: write from a thread.
            writer = threading.Thread(target=_send_ignoring_reset, args=(conn, data))
            writer.start()
            response = conn.read_response()
            writer.join(30)
            assert response.status == 413
            assert response.header("content-type") == "application/json"
            assert response.json() == {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32600, "message": "Request body larger than 4 MiB"},
            }
            assert response.header("connection") == "close"
            conn.assert_closed()


def _send_ignoring_reset(conn: RawHttp, data: bytes) -> None:
    try:
        conn.send(data)
    except OSError:
        pass  # the bridge closed after its answer; what matters is the answer


# -- HTTP hygiene: framing conflicts and smuggling ---------------------------------------------------

SMUGGLED = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def _post(framing: bytes, body: bytes) -> bytes:
    return b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + framing + b"\r\n" + body


class TestHygiene:
    @pytest.mark.parametrize(
        "request_bytes",
        [
            pytest.param(
                _post(b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n" + SMUGGLED),
                id="CL.TE",
            ),
            pytest.param(
                _post(b"Transfer-Encoding: chunked\r\nContent-Length: 40\r\n", b"0\r\n\r\n" + SMUGGLED),
                id="TE.CL",
            ),
            pytest.param(_post(b"Content-Length: 0\r\nContent-Length: 44\r\n", SMUGGLED), id="two-CL"),
            pytest.param(
                _post(b"Content-Length: 44\r\nContent-Length: 0\r\n", SMUGGLED), id="two-CL-reversed"
            ),
            pytest.param(_post(b"Content-Length: 0, 44\r\n", SMUGGLED), id="CL-list"),
            pytest.param(
                _post(b"Transfer-Encoding:\r\n chunked\r\nContent-Length: 5\r\n", b"0\r\n\r\n" + SMUGGLED),
                id="TE-obs-fold",
            ),
            pytest.param(
                _post(b"Transfer-Encoding: identity\r\n chunked\r\n", b"0\r\n\r\n" + SMUGGLED),
                id="TE-obs-fold-2",
            ),
            pytest.param(
                _post(b"Transfer-Encoding: chunked, identity\r\n", b"0\r\n\r\n" + SMUGGLED), id="TE-identity"
            ),
            pytest.param(_post(b"Transfer-Encoding: identity\r\n", SMUGGLED), id="TE-identity-alone"),
            pytest.param(
                _post(b"Transfer-Encoding : chunked\r\n", b"0\r\n\r\n" + SMUGGLED), id="TE-space-before-colon"
            ),
            pytest.param(
                _post(b"Transfer-Encoding: xchunked\r\n", b"0\r\n\r\n" + SMUGGLED), id="TE-xchunked"
            ),
            pytest.param(
                _post(
                    b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n", b"0\r\n\r\n" + SMUGGLED
                ),
                id="TE-twice",
            ),
        ],
    )
    def test_ambiguous_framing_gets_one_refusal_and_the_close(self, bridge, request_bytes):
        """Conflicting or obfuscated framing: one refusal, the close, and no answer to the smuggled GET."""
        with RawHttp(bridge.port) as conn:
            conn.send(request_bytes)
            response = conn.read_response()
            assert response.status in (400, 501), (response.status, response.body)
            assert response.header("connection") == "close"
            conn.assert_closed()

    def test_both_content_length_and_transfer_encoding_is_400(self, bridge):
        """Content-Length and Transfer-Encoding together: exactly 400 and the close (docs/configuration.md)."""
        with RawHttp(bridge.port) as conn:
            conn.send(_post(b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n"))
            assert conn.read_response().status == 400
            conn.assert_closed()

    def test_two_different_content_lengths_is_400(self, bridge):
        """Two different Content-Lengths: exactly 400 and the close (docs/configuration.md, Settings)."""
        with RawHttp(bridge.port) as conn:
            conn.send(_post(b"Content-Length: 2\r\nContent-Length: 3\r\n", b"{}}"))
            assert conn.read_response().status == 400
            conn.assert_closed()

    def test_request_inside_a_chunked_body_is_only_body(self, bridge):
        """A request written inside chunk data is body bytes: it is never answered as a request."""
        hidden = SMUGGLED
        agent = bridge.token("agent", "alice")
        with RawHttp(bridge.port) as conn:
            conn.send(
                _post(
                    f"Authorization: Bearer {agent}\r\nTransfer-Encoding: chunked\r\n".encode(),
                    b"%x\r\n%s\r\n0\r\n\r\n" % (len(hidden), hidden),
                )
                + NOT_FOUND
            )
            response = conn.read_response()
            assert response.status == 400
            assert response.json()["error"]["code"] == -32700
            # The next answer is the 404 written after the POST, not a 200 to the hidden GET.
            assert conn.read_response().status == 404
            conn.assert_open()


# -- docs/configuration.md, Settings: limits -----------------------------------------------------


class TestHeadLimits:
    def test_head_over_16_kib_is_431(self, bridge):
        """A request head over 16 KiB in one write gets 431, then the close."""
        with RawHttp(bridge.port) as conn:
            conn.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Filler: " + b"a" * 17_000 + b"\r\n\r\n")
            response = conn.read_response()
            assert (response.status, response.reason) == (431, "Request Header Fields Too Large")
            conn.assert_closed()

    def test_head_just_under_16_kib_is_served(self, bridge):
        """A head of about 15 KiB is within the limit."""
        with RawHttp(bridge.port) as conn:
            conn.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Filler: " + b"a" * 15_000 + b"\r\n\r\n")
            assert_ok_health(conn.read_response())

    def test_many_headers_sent_slowly_are_431(self, bridge):
        """Many small header lines, written one by one, pass 16 KiB: 431 before the head even ends."""
        with RawHttp(bridge.port) as conn:
            conn.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            _trickle(conn, (b"X-Header-%d: %s\r\n" % (i, b"v" * 60) for i in range(1_000)))
            response = conn.read_response()
            assert response.status == 431
            conn.assert_closed()

    def test_one_header_value_sent_in_pieces_is_431(self, bridge):
        """One endless header value, written in small pieces, is cut off at 16 KiB with 431."""
        with RawHttp(bridge.port) as conn:
            conn.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Endless: ")
            _trickle(conn, (b"w" * 200 for _ in range(500)))
            response = conn.read_response()
            assert response.status == 431
            conn.assert_closed()


def _trickle(conn: RawHttp, pieces) -> None:
    """Write pieces one at a time until the bridge answers (then stop writing)."""
    for piece in pieces:
        try:
            conn.send(piece)
        except OSError:
            return  # closed after its answer
        # Pacing, not synchronisation: separate segments, so the bridge sees many small reads.
        time.sleep(0.001)
        if conn.readable():
            return
    raise AssertionError("the bridge never answered the oversized head")


class TestTimeouts:
    def test_partial_head_is_closed_after_the_head_timeout(self, start_bridge):
        """A head that never completes: the connection closes without an answer after head_timeout."""
        bridge = start_bridge(head_timeout=0.5)
        with RawHttp(bridge.port) as conn:
            started = time.monotonic()
            conn.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            conn.assert_closed(timeout=10)
            assert time.monotonic() - started >= 0.3

    def test_silent_connection_is_closed_after_the_head_timeout(self, start_bridge):
        """A connection that sends nothing at all is closed after head_timeout too."""
        bridge = start_bridge(head_timeout=0.5)
        with RawHttp(bridge.port) as conn:
            started = time.monotonic()
            conn.assert_closed(timeout=10)
            assert time.monotonic() - started >= 0.3

    def test_idle_keep_alive_connection_is_closed(self, start_bridge):
        """After an answer, a connection idle for keepalive_timeout is closed."""
        bridge = start_bridge(keepalive_timeout=0.5)
        with RawHttp(bridge.port) as conn:
            conn.send(HEALTHZ)
            assert_ok_health(conn.read_response())
            answered = time.monotonic()
            conn.assert_closed(timeout=10)
            assert time.monotonic() - answered >= 0.3

    def test_connection_waiting_for_a_call_is_not_timed_out(self, start_bridge):
        """A request whose answer takes longer than both timeouts is still answered on its connection."""
        bridge = start_bridge(head_timeout=0.3, keepalive_timeout=0.3)
        app = registered_app(bridge, "patient")
        with RawHttp(bridge.port) as conn:
            conn.send(mcp_post(tool_call("echo", {}, 1), bridge.token("agent", "patient")))
            call = json.loads(app.read_text())
            # Let several sweeps pass, each of which would close an expired connection.
            time.sleep(1.2)
            app.send_text(json.dumps({"type": "result", "id": call["id"], "result": {"content": []}}))
            assert conn.read_response().json() == {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}
        app.close()


class TestConnectionCap:
    def test_connection_over_the_cap_is_closed_at_once(self, start_bridge):
        """With max_agent_connections=5, a 6th connection is closed without an answer; the 5 go on."""
        bridge = start_bridge(max_agent_connections=5)
        conns = [RawHttp(bridge.port) for _ in range(5)]
        try:
            bridge.wait_for(lambda s: len(s.http_connections) == 5)
            with RawHttp(bridge.port) as extra:
                extra.send(HEALTHZ)
                extra.assert_closed(timeout=5)
            for conn in conns:
                conn.send(HEALTHZ)
                assert_ok_health(conn.read_response())
            conns.pop().close()
            bridge.wait_for(lambda s: len(s.http_connections) == 4)
            with RawHttp(bridge.port) as again:
                again.send(HEALTHZ)
                assert_ok_health(again.read_response())
        finally:
            for conn in conns:
                conn.close()


# -- docs/protocol.md, Shutdown ------------------------------------------------------------------


class TestShutdown:
    def test_queued_upgrade_during_shutdown_gets_503_after_the_call_is_answered(self, bridge):
        """Shutdown mid-call: the call gets the shutdown error, the upgrade queued behind it 503, then close."""
        app = registered_app(bridge, "bob")
        with RawHttp(bridge.port) as conn:
            conn.send(
                mcp_post(tool_call("echo", {}, 1), bridge.token("agent", "bob"))
                + upgrade_request(["clientmcp.v1", bridge.token("client", "carol")])
            )
            assert json.loads(app.read_text())["type"] == "call"
            stopping = asyncio.run_coroutine_threadsafe(bridge.server.shutdown(), bridge.loop)
            response = conn.read_response()
            assert tool_error_text(response) == "The bridge is shutting down."
            refused = conn.read_response()
            assert refused.status == 503
            assert refused.header("connection") == "close"
            conn.assert_closed()
        assert app.read_close() == (1001, "bridge shutting down")
        app.close()
        stopping.result(15)
        with pytest.raises(ConnectionRefusedError):
            RawHttp(bridge.port)

    def test_a_call_in_flight_at_shutdown_is_answered_as_the_last_on_its_connection(self, bridge):
        """The shutdown error carries `connection: close`, and the connection ends after it."""
        app = registered_app(bridge, "bob")
        with RawHttp(bridge.port) as conn:
            conn.send(mcp_post(tool_call("echo", {}, 1), bridge.token("agent", "bob")))
            assert json.loads(app.read_text())["type"] == "call"
            stopping = asyncio.run_coroutine_threadsafe(bridge.server.shutdown(), bridge.loop)
            response = conn.read_response()
            assert tool_error_text(response) == "The bridge is shutting down."
            assert response.header("connection") == "close"
            conn.assert_closed()
        assert app.read_close() == (1001, "bridge shutting down")
        app.close()
        stopping.result(15)
