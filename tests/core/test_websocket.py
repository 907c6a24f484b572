"""The sans-I/O WebSocket server of RFC 6455 (handshake, messages, closing): bytes in, actions out.

A `WebSocket` is fed raw client bytes and writes to a recording link; a subclass
records what its handler methods are told. No socket is involved. Client frames are masked and server
frames decoded by `tests/wire.py`, not by the module under test.
"""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from fakes import RecordingLink
from wire import MASK, Op, client_close, client_frame, decode_server_frames

from clientmcp_fast.core.channel import SUBPROTOCOL, client_channel_handshake
from clientmcp_fast.core.limits import MAX_MESSAGE_BYTES
from clientmcp_fast.core.websocket import (
    HandshakeError,
    Link,
    WebSocket,
    accept_response,
    check_upgrade,
    close_reason_bytes,
    offered_subprotocols,
)

MiB = 1024 * 1024

# RFC 6455 §1.3 / §4.2.2: the worked example of Sec-WebSocket-Accept.
RFC_KEY = b"dGhlIHNhbXBsZSBub25jZQ=="
RFC_ACCEPT = b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


class RecordingWebSocket(WebSocket):
    """A WebSocket whose handler methods record each call as a tuple, in order."""

    def __init__(self, link: Link) -> None:
        WebSocket.__init__(self, link)
        self.events: list[tuple[object, ...]] = []

    def on_text(self, payload: bytes) -> None:
        self.events.append(("text", bytes(payload)))

    def on_binary(self, payload: bytes) -> None:
        self.events.append(("binary", bytes(payload)))

    def on_exact_ping(self) -> None:
        self.events.append(("exact_ping",))

    def on_close(self, code: int, reason: str) -> None:
        self.events.append(("close", code, reason))


class Connection:
    """A WebSocket under test with its recording link, recording what its handler methods hear."""

    def __init__(self) -> None:
        self.link = RecordingLink()
        self.ws = RecordingWebSocket(self.link)

    def receive(self, *frames: bytes) -> None:
        """Feed the frames as one chunk of bytes."""
        self.ws.receive_bytes(b"".join(frames))

    @property
    def events(self) -> list[tuple[object, ...]]:
        return self.ws.events

    def sent(self) -> list[tuple[bool, int, bytes]]:
        """Every frame written so far."""
        return decode_server_frames(self.link.data)

    def sent_close(self) -> tuple[int, bytes]:
        """Code and reason bytes of the one close frame written, which must be the last frame."""
        sent = self.sent()
        closes = [payload for _, opcode, payload in sent if opcode == Op.CLOSE]
        assert len(closes) == 1, sent
        assert sent[-1][1] == Op.CLOSE
        payload = closes[0]
        assert len(payload) >= 2, payload
        return int.from_bytes(payload[:2], "big"), payload[2:]

    def assert_failed(self, code: int, *, stream_broken: bool = False, peer_closed: bool = False) -> None:
        """The connection failed with `code`: one close frame, the handler told once, and the transport
        either waiting for the peer's close (end(True)) or, when the byte stream itself is broken and no
        close frame could be parsed from it, ended at once (end(False), RFC 6455 §7.1.7); also ended at
        once when what failed was the peer's own (malformed) close frame: no other close will come."""
        sent_code, _ = self.sent_close()
        assert sent_code == code
        assert self.link.ends == [not (stream_broken or peer_closed)]
        closes = [event for event in self.events if event[0] == "close"]
        assert len(closes) == 1
        assert closes[0][1] == code


@pytest.fixture
def conn() -> Connection:
    return Connection()


def upgrade_headers(**overrides: bytes | None) -> dict[bytes, bytes]:
    """A valid upgrade request's headers; a keyword replaces one (underscores for dashes), None drops it."""
    headers = {
        b"host": b"127.0.0.1:8000",
        b"upgrade": b"websocket",
        b"connection": b"Upgrade",
        b"sec-websocket-version": b"13",
        b"sec-websocket-key": RFC_KEY,
    }
    for name, value in overrides.items():
        key = name.replace("_", "-").encode()
        if value is None:
            headers.pop(key, None)
        else:
            headers[key] = value
    return headers


def parse_response(response: bytes) -> tuple[bytes, dict[bytes, list[bytes]]]:
    """Status line and headers (names lower-cased, values listed per name) of an HTTP response head."""
    assert response.endswith(b"\r\n\r\n")
    status, *lines = response[:-4].split(b"\r\n")
    headers: dict[bytes, list[bytes]] = {}
    for line in lines:
        name, _, value = line.partition(b":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return status, headers


class TestOpeningHandshake:
    """RFC 6455 §4.2.1 and §4.2.2: reading the client's upgrade, answering 101."""

    def test_valid_request_returns_the_key(self) -> None:
        assert check_upgrade(upgrade_headers()) == RFC_KEY

    def test_header_values_are_token_lists_and_case_insensitive(self) -> None:
        headers = upgrade_headers(upgrade=b"WebSocket", connection=b"keep-alive, Upgrade")
        assert check_upgrade(headers) == RFC_KEY

    def test_key_surrounded_by_spaces_is_trimmed(self) -> None:
        assert check_upgrade(upgrade_headers(sec_websocket_key=b" " + RFC_KEY + b" ")) == RFC_KEY

    @pytest.mark.parametrize("upgrade", [None, b"h2c", b""])
    def test_no_websocket_upgrade_is_426_naming_the_upgrade(self, upgrade: bytes | None) -> None:
        with pytest.raises(HandshakeError) as info:
            check_upgrade(upgrade_headers(upgrade=upgrade))
        assert info.value.status == 426
        # RFC 9110 §15.5.22: a 426 response must say which protocol to upgrade to.
        assert info.value.headers == ((b"upgrade", b"websocket"),)

    @pytest.mark.parametrize("connection", [None, b"keep-alive", b"close"])
    def test_connection_without_upgrade_is_400(self, connection: bytes | None) -> None:
        with pytest.raises(HandshakeError) as info:
            check_upgrade(upgrade_headers(connection=connection))
        assert info.value.status == 400

    @pytest.mark.parametrize("version", [None, b"8", b"12", b"14", b"13, 8"])
    def test_other_version_is_426_naming_version_13(self, version: bytes | None) -> None:
        with pytest.raises(HandshakeError) as info:
            check_upgrade(upgrade_headers(sec_websocket_version=version))
        assert info.value.status == 426
        assert info.value.headers == ((b"sec-websocket-version", b"13"),)

    @pytest.mark.parametrize(
        "key",
        [
            None,
            b"",
            b"not base64 at all!!",
            b"dGhlIHNhbXBsZSBub25j",  # 15 bytes
            b"dGhlIHNhbXBsZSBub25jZTE=",  # 17 bytes
            b"dGhlIHNhbXBsZSBub25jZQ",  # padding missing
            b"dGhlIHNhbXBs!ZSBub25jZQ==",  # 16 bytes only if the stray character were skipped
        ],
    )
    def test_bad_key_is_400(self, key: bytes | None) -> None:
        with pytest.raises(HandshakeError) as info:
            check_upgrade(upgrade_headers(sec_websocket_key=key))
        assert info.value.status == 400

    def test_accept_value_is_the_rfc_example(self) -> None:
        status, headers = parse_response(accept_response(RFC_KEY, None))
        assert status == b"HTTP/1.1 101 Switching Protocols"
        assert headers[b"sec-websocket-accept"] == [RFC_ACCEPT]
        assert headers[b"upgrade"] == [b"websocket"]
        assert headers[b"connection"] == [b"Upgrade"]
        assert b"sec-websocket-protocol" not in headers
        assert b"sec-websocket-extensions" not in headers

    def test_accept_response_selects_the_subprotocol(self) -> None:
        status, headers = parse_response(accept_response(RFC_KEY, "clientmcp.v1"))
        assert status == b"HTTP/1.1 101 Switching Protocols"
        assert headers[b"sec-websocket-protocol"] == [b"clientmcp.v1"]
        assert headers[b"sec-websocket-accept"] == [RFC_ACCEPT]
        assert b"sec-websocket-extensions" not in headers

    def test_offered_subprotocols_keep_order_and_drop_blanks(self) -> None:
        headers = upgrade_headers(sec_websocket_protocol=b" clientmcp.v1 ,tok-en, ,other ")
        assert offered_subprotocols(headers) == ["clientmcp.v1", "tok-en", "other"]

    def test_no_subprotocol_header_offers_nothing(self) -> None:
        assert offered_subprotocols(upgrade_headers()) == []


class TestClientChannelHandshake:
    """ClientMCP v1 §3.1 and docs/protocol.md, Client channel: select clientmcp.v1, take the token, never echo it."""

    TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJl"

    def _handshake(self, offered: bytes | None) -> tuple[bytes, str | None]:
        return client_channel_handshake(upgrade_headers(sec_websocket_protocol=offered))

    def test_selects_clientmcp_v1_and_returns_the_token(self) -> None:
        response, token = self._handshake(b"clientmcp.v1, " + self.TOKEN.encode())
        assert SUBPROTOCOL == "clientmcp.v1"
        assert token == self.TOKEN
        status, headers = parse_response(response)
        assert status == b"HTTP/1.1 101 Switching Protocols"
        assert headers[b"sec-websocket-protocol"] == [b"clientmcp.v1"]
        assert headers[b"sec-websocket-accept"] == [RFC_ACCEPT]
        assert b"sec-websocket-extensions" not in headers
        assert self.TOKEN.encode() not in response

    def test_token_offered_first_is_found_too(self) -> None:
        # Repeated Sec-WebSocket-Protocol headers reach the core joined with ", " (core/http.py).
        response, token = self._handshake(self.TOKEN.encode() + b", clientmcp.v1")
        assert token == self.TOKEN
        assert parse_response(response)[1][b"sec-websocket-protocol"] == [b"clientmcp.v1"]
        assert self.TOKEN.encode() not in response

    def test_same_offer_in_one_header_or_repeated_headers_joined(self) -> None:
        one_header = self._handshake(b"clientmcp.v1,tok")
        joined = self._handshake(b"clientmcp.v1, tok")
        assert one_header == joined
        assert one_header[1] == "tok"

    def test_other_clientmcp_values_are_not_tokens(self) -> None:
        _, token = self._handshake(b"clientmcp.v2, clientmcp.v1, tok")
        assert token == "tok"

    @pytest.mark.parametrize("offered", [b"clientmcp.v1", b"clientmcp.v1, clientmcp.v2"])
    def test_no_token_gives_none(self, offered: bytes) -> None:
        response, token = self._handshake(offered)
        assert token is None
        assert parse_response(response)[1][b"sec-websocket-protocol"] == [b"clientmcp.v1"]

    def test_two_tokens_give_none(self) -> None:
        response, token = self._handshake(b"clientmcp.v1, first, second")
        assert token is None
        assert b"first" not in response and b"second" not in response

    @pytest.mark.parametrize(
        "offered", [None, b"tok", b"clientmcp.v2, tok", b"clientmcp.v10, tok", b"CLIENTMCP.V1"]
    )
    def test_without_clientmcp_v1_is_400(self, offered: bytes | None) -> None:
        with pytest.raises(HandshakeError) as info:
            self._handshake(offered)
        assert info.value.status == 400

    def test_invalid_upgrade_fails_before_subprotocols(self) -> None:
        headers = upgrade_headers(sec_websocket_version=b"8", sec_websocket_protocol=b"clientmcp.v1, tok")
        with pytest.raises(HandshakeError) as info:
            client_channel_handshake(headers)
        assert info.value.status == 426


class TestDataFrames:
    """RFC 6455 §5.6, docs/protocol.md (Client channel): whole messages reach the handler; the exact ping goes fast."""

    def test_text_frame_reaches_on_text(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.TEXT, b'{"type":"register","tools":[]}'))
        assert conn.events == [("text", b'{"type":"register","tools":[]}')]
        assert conn.link.writes == []

    def test_binary_frame_reaches_on_binary(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.BINARY, b"\x00\xff"))
        assert conn.events == [("binary", b"\x00\xff")]

    def test_empty_text_and_binary_messages(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.TEXT), client_frame(Op.BINARY))
        assert conn.events == [("text", b""), ("binary", b"")]

    def test_exact_ping_reaches_on_exact_ping_only(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.TEXT, b'{"type":"ping"}'))
        assert conn.events == [("exact_ping",)]
        # The handler sends the fixed pong; the WebSocket itself writes nothing.
        assert conn.link.writes == []

    def test_other_ping_text_is_an_ordinary_message(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.TEXT, b'{"type": "ping"}'))
        assert conn.events == [("text", b'{"type": "ping"}')]

    def test_messages_split_across_reads_arrive_once_complete(self, conn: Connection) -> None:
        data = client_frame(Op.TEXT, b"first") + client_frame(Op.TEXT, b"second" * 40)
        for i in range(len(data)):
            conn.ws.receive_bytes(data[i : i + 1])
        assert conn.events == [("text", b"first"), ("text", b"second" * 40)]

    def test_control_ping_is_answered_with_the_same_payload(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.PING, b"are you there"))
        assert conn.link.writes == [b"\x8a\x0dare you there"]
        assert conn.events == []

    def test_unsolicited_pong_is_ignored(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.PONG, b"hi"), client_frame(Op.TEXT, b"after"))
        assert conn.link.writes == []
        assert conn.events == [("text", b"after")]

    def test_send_text_writes_one_text_frame(self, conn: Connection) -> None:
        conn.ws.send_text(b'{"type":"registered"}')
        assert conn.sent() == [(True, Op.TEXT, b'{"type":"registered"}')]

    def test_send_frame_writes_the_bytes_as_given(self, conn: Connection) -> None:
        conn.ws.send_frame(b'\x81\x0f{"type":"pong"}')
        assert conn.link.writes == [b'\x81\x0f{"type":"pong"}']


class TestFragmentation:
    """RFC 6455 §5.4: fragments form one message; control frames may come between them."""

    def test_text_fragments_are_joined(self, conn: Connection) -> None:
        conn.receive(
            client_frame(Op.TEXT, b"Hel", fin=False), client_frame(Op.CONTINUATION, b"lo, ", fin=False)
        )
        assert conn.events == []
        conn.receive(client_frame(Op.CONTINUATION, b"world"))
        assert conn.events == [("text", b"Hello, world")]

    def test_binary_fragments_are_joined(self, conn: Connection) -> None:
        conn.receive(
            client_frame(Op.BINARY, b"\x01", fin=False),
            client_frame(Op.CONTINUATION, b""),
            client_frame(Op.BINARY, b"\x02"),
        )
        assert conn.events == [("binary", b"\x01"), ("binary", b"\x02")]

    def test_control_frames_between_fragments(self, conn: Connection) -> None:
        conn.receive(
            client_frame(Op.TEXT, b"part one ", fin=False),
            client_frame(Op.PING, b"ping-1"),
            client_frame(Op.CONTINUATION, b"part two ", fin=False),
            client_frame(Op.PONG, b"unsolicited"),
            client_frame(Op.PING, b""),
            client_frame(Op.CONTINUATION, b"end"),
        )
        assert conn.events == [("text", b"part one part two end")]
        assert conn.sent() == [(True, Op.PONG, b"ping-1"), (True, Op.PONG, b"")]

    def test_ping_between_binary_fragments_is_answered_at_once(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.BINARY, b"ab", fin=False), client_frame(Op.PING, b"\x00\x01\x02"))
        assert conn.sent() == [(True, Op.PONG, b"\x00\x01\x02")]
        assert conn.events == []
        conn.receive(client_frame(Op.CONTINUATION, b"cd"))
        assert conn.events == [("binary", b"abcd")]

    def test_exact_ping_bytes_as_a_fragment_are_message_text(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.TEXT, b'{"type":"ping"}', fin=False), client_frame(Op.CONTINUATION, b""))
        assert conn.events == [("text", b'{"type":"ping"}')]

    def test_continuation_without_a_message_is_1002(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.CONTINUATION, b"orphan"))
        conn.assert_failed(1002)
        assert [e for e in conn.events if e[0] != "close"] == []

    def test_final_continuation_without_a_message_is_1002(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.CONTINUATION, b"orphan", fin=False))
        conn.assert_failed(1002)

    @pytest.mark.parametrize("opcode", [Op.TEXT, Op.BINARY])
    def test_new_data_frame_during_a_fragmented_message_is_1002(self, conn: Connection, opcode: int) -> None:
        conn.receive(client_frame(Op.TEXT, b"start", fin=False), client_frame(opcode, b"intruder"))
        conn.assert_failed(1002)
        assert [e for e in conn.events if e[0] != "close"] == []

    def test_exact_ping_during_a_fragmented_message_is_1002(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.BINARY, b"start", fin=False), client_frame(Op.TEXT, b'{"type":"ping"}'))
        conn.assert_failed(1002)
        assert ("exact_ping",) not in conn.events

    def test_fragments_over_4_mib_in_total_are_1009(self, conn: Connection) -> None:
        conn.receive(
            client_frame(Op.BINARY, b"a" * (2 * MiB), fin=False),
            client_frame(Op.CONTINUATION, b"b" * (2 * MiB), fin=False),
        )
        assert conn.events == []
        conn.receive(client_frame(Op.CONTINUATION, b"c"))
        conn.assert_failed(1009)

    def test_fragments_of_exactly_4_mib_in_total_are_accepted(self, conn: Connection) -> None:
        conn.receive(
            client_frame(Op.TEXT, b"a" * (2 * MiB), fin=False),
            client_frame(Op.CONTINUATION, b"b" * (2 * MiB)),
        )
        assert conn.events == [("text", b"a" * (2 * MiB) + b"b" * (2 * MiB))]
        assert conn.link.writes == []
        assert len(conn.events[0][1]) == MAX_MESSAGE_BYTES  # type: ignore[arg-type]

    def test_a_message_in_tiny_fragments_is_held_in_about_its_own_size(self, conn: Connection) -> None:
        # Two-byte fragments of a 1 MiB message: kept as separate objects they took 64 MiB.
        count = MiB // 2
        stream = b"".join(
            [client_frame(Op.TEXT, b"ab", fin=False)]
            + [client_frame(Op.CONTINUATION, b"ab", fin=False)] * (count - 2)
            + [client_frame(Op.CONTINUATION, b"ab")]
        )
        tracemalloc.start()
        try:
            for start in range(0, len(stream), 65_536):
                conn.ws.receive_bytes(stream[start : start + 65_536])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert conn.events == [("text", b"ab" * count)]
        assert peak < 4 * MiB, peak

    def test_single_frame_over_4_mib_is_1009_from_its_header(self, conn: Connection) -> None:
        header = bytes((0x82, 0x80 | 127)) + struct.pack("!Q", MAX_MESSAGE_BYTES + 1) + MASK
        conn.receive(header)
        conn.assert_failed(1009, stream_broken=True)


class TestUtf8:
    """RFC 6455 §5.6 and §8.1: text must be UTF-8, failing fast with 1007."""

    def test_valid_non_ascii_text_is_delivered(self, conn: Connection) -> None:
        text = "Grüße, 世界 🌍".encode()
        conn.receive(client_frame(Op.TEXT, text))
        assert conn.events == [("text", text)]

    @pytest.mark.parametrize(
        "payload",
        [b"\xff", b"abc\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"ok \x80 then"],
        ids=["invalid-byte", "truncated", "overlong", "surrogate", "above-max", "lone-continuation"],
    )
    def test_invalid_utf8_in_one_frame_is_1007(self, conn: Connection, payload: bytes) -> None:
        conn.receive(client_frame(Op.TEXT, payload))
        conn.assert_failed(1007)
        assert [e for e in conn.events if e[0] == "text"] == []

    def test_invalid_binary_is_not_checked(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.BINARY, b"\xff\xfe"))
        assert conn.events == [("binary", b"\xff\xfe")]

    def test_invalid_fragment_fails_before_the_message_ends(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.TEXT, b"fine so far", fin=False))
        assert conn.link.writes == []
        conn.receive(client_frame(Op.CONTINUATION, b"\xff", fin=False))
        conn.assert_failed(1007)

    def test_invalid_first_fragment_fails_at_once(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.TEXT, b"\xc3\x28", fin=False))
        conn.assert_failed(1007)

    def test_sequence_split_across_fragments_is_valid(self, conn: Connection) -> None:
        euro = "€".encode()  # e2 82 ac
        conn.receive(
            client_frame(Op.TEXT, b"price: " + euro[:1], fin=False),
            client_frame(Op.CONTINUATION, euro[1:2], fin=False),
            client_frame(Op.CONTINUATION, euro[2:] + b"5"),
        )
        assert conn.events == [("text", "price: €5".encode())]
        assert conn.link.writes == []

    def test_sequence_cut_by_the_end_of_the_message_is_1007(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.TEXT, b"price: \xe2\x82", fin=False))
        assert conn.link.writes == []
        conn.receive(client_frame(Op.CONTINUATION, b""))
        conn.assert_failed(1007)
        assert [e for e in conn.events if e[0] == "text"] == []


class TestClosingHandshake:
    """RFC 6455 §5.5.1 and §7: close frames both ways, codes, reasons, and what happens after."""

    def test_peer_close_is_echoed_with_its_code(self, conn: Connection) -> None:
        conn.receive(client_close(1000, b"bye"))
        assert conn.link.writes == [b"\x88\x02\x03\xe8"]
        assert conn.link.ends == [False]
        assert conn.events == [("close", 1000, "bye")]

    def test_peer_close_with_an_application_code_is_echoed(self, conn: Connection) -> None:
        conn.receive(client_close(4000, "fermé".encode()))
        assert conn.sent_close() == (4000, b"")
        assert conn.link.ends == [False]
        assert conn.events == [("close", 4000, "fermé")]

    def test_peer_close_without_a_code_is_1005(self, conn: Connection) -> None:
        conn.receive(client_close(None))
        assert conn.events == [("close", 1005, "")]
        # RFC 6455 §5.5.1: the reply may be empty or name 1000; 1005 must never go on the wire.
        assert conn.link.writes in ([b"\x88\x00"], [b"\x88\x02\x03\xe8"])
        assert conn.link.ends == [False]

    def test_close_with_a_one_byte_payload_is_1002(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.CLOSE, b"\x03"))
        conn.assert_failed(1002, peer_closed=True)

    @pytest.mark.parametrize("code", [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535])
    def test_invalid_close_codes_are_1002(self, conn: Connection, code: int) -> None:
        conn.receive(client_close(code, b"x"))
        conn.assert_failed(1002, peer_closed=True)

    @pytest.mark.parametrize(
        "code", [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 4000, 4409, 4999]
    )
    def test_valid_close_codes_are_accepted(self, conn: Connection, code: int) -> None:
        conn.receive(client_close(code, b"why"))
        assert conn.events == [("close", code, "why")]
        assert conn.sent_close() == (code, b"")
        assert conn.link.ends == [False]

    def test_close_reason_not_utf8_is_1007(self, conn: Connection) -> None:
        conn.receive(client_close(1000, b"\xff\xfe"))
        conn.assert_failed(1007, peer_closed=True)

    def test_close_reason_of_123_bytes_is_accepted(self, conn: Connection) -> None:
        reason = "é".encode() * 61 + b"!"
        conn.receive(client_close(1001, reason))
        assert conn.events == [("close", 1001, reason.decode())]

    def test_frames_after_the_peers_close_are_ignored(self, conn: Connection) -> None:
        conn.receive(client_close(1000), client_frame(Op.TEXT, b"late"), client_frame(Op.PING, b"late"))
        conn.receive(client_frame(Op.TEXT, b"later"), client_close(1000))
        assert conn.events == [("close", 1000, "")]
        assert conn.link.writes == [b"\x88\x02\x03\xe8"]
        assert conn.link.ends == [False]

    def test_messages_before_the_peers_close_in_the_same_read_are_delivered(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.TEXT, b"last words"), client_close(1001))
        assert conn.events == [("text", b"last words"), ("close", 1001, "")]

    def test_server_close_sends_code_and_reason_and_waits_for_the_peer(self, conn: Connection) -> None:
        conn.ws.send_close(4409, "replaced by a newer connection")
        assert conn.link.writes == [b"\x88\x20\x11\x39replaced by a newer connection"]
        assert conn.link.ends == [True]
        assert conn.events == [("close", 4409, "replaced by a newer connection")]

    def test_frames_after_a_sent_close_are_ignored_until_the_peers_close(self, conn: Connection) -> None:
        conn.ws.send_close(1001, "bridge shutting down")
        conn.receive(
            client_frame(Op.TEXT, b"ignored"),
            client_frame(Op.PING, b"unanswered"),
            client_frame(Op.BINARY, b"x", fin=False),
            client_frame(Op.CONTINUATION, b"\xff"),
        )
        assert conn.events == [("close", 1001, "bridge shutting down")]
        assert conn.sent_close() == (1001, b"bridge shutting down")
        assert conn.link.ends == [True]
        conn.receive(client_close(1001))
        assert conn.link.ends == [True, False]
        # The handler already heard of the close; the peer's reply adds nothing, nor is it echoed.
        assert conn.events == [("close", 1001, "bridge shutting down")]
        assert conn.sent_close() == (1001, b"bridge shutting down")

    def test_broken_frames_after_a_sent_close_are_not_a_second_close(self, conn: Connection) -> None:
        conn.ws.send_close(1000, "done")
        conn.receive(client_frame(Op.TEXT, b"unmasked", mask=None))
        assert conn.sent_close() == (1000, b"done")
        assert len(conn.events) == 1

    def test_nothing_is_read_after_the_connection_closed(self, conn: Connection) -> None:
        conn.receive(client_close(1000))
        conn.receive(client_frame(Op.TEXT, b"ghost"), client_frame(Op.PING), client_close(1000))
        assert conn.events == [("close", 1000, "")]
        assert conn.link.writes == [b"\x88\x02\x03\xe8"]
        assert conn.link.ends == [False]

    def test_nothing_is_sent_once_closing(self, conn: Connection) -> None:
        conn.ws.send_close(1000, "")
        conn.ws.send_text(b"too late")
        conn.ws.send_frame(b'\x81\x0f{"type":"pong"}')
        conn.ws.send_close(1002, "second")
        assert conn.link.writes == [b"\x88\x02\x03\xe8"]
        assert conn.link.ends == [True]
        assert conn.events == [("close", 1000, "")]

    def test_long_reason_is_cut_in_the_frame_but_not_for_the_handler(self, conn: Connection) -> None:
        reason = "ü" * 100  # 200 bytes of UTF-8
        conn.ws.send_close(4400, reason)
        code, sent_reason = conn.sent_close()
        assert code == 4400
        assert sent_reason == ("ü" * 61).encode()
        assert conn.events == [("close", 4400, reason)]

    def test_framing_error_closes_with_our_reason(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.TEXT, b"hi", mask=None))
        conn.assert_failed(1002, stream_broken=True)
        _, reason = conn.sent_close()
        assert reason
        reason.decode("utf-8")

    def test_a_message_before_a_framing_error_in_the_same_read_is_delivered(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.TEXT, b"good") + client_frame(Op.TEXT, b"bad", mask=None))
        conn.assert_failed(1002, stream_broken=True)
        assert [event[:2] for event in conn.events] == [("text", b"good"), ("close", 1002)]

    def test_after_a_framing_error_nothing_more_is_read(self, conn: Connection) -> None:
        conn.receive(
            client_frame(Op.TEXT, b"hi", mask=None) + client_frame(Op.CLOSE, struct.pack("!H", 1000))
        )
        conn.assert_failed(1002, stream_broken=True)
        assert [event[0] for event in conn.events] == ["close"]

    def test_after_a_message_error_the_peers_close_reply_is_read(self, conn: Connection) -> None:
        conn.receive(client_frame(Op.TEXT, b"\xff"))
        conn.assert_failed(1007)
        conn.receive(client_frame(Op.CLOSE, struct.pack("!H", 1007)))
        assert conn.link.ends == [True, False]

    def test_connection_lost_while_open_is_1006(self, conn: Connection) -> None:
        conn.ws.transport_lost()
        assert conn.events == [("close", 1006, "connection lost")]
        conn.ws.transport_lost()
        assert len(conn.events) == 1
        conn.receive(client_frame(Op.TEXT, b"after"))
        assert len(conn.events) == 1

    def test_connection_lost_after_a_close_tells_nothing_more(self, conn: Connection) -> None:
        conn.ws.send_close(1000, "bye")
        conn.ws.transport_lost()
        assert conn.events == [("close", 1000, "bye")]


class TestCloseReasonBytes:
    """RFC 6455 §5.5: a close reason fits 123 bytes and stays valid UTF-8."""

    def test_short_reason_is_unchanged(self) -> None:
        assert close_reason_bytes("normal") == b"normal"
        assert close_reason_bytes("") == b""

    def test_exactly_123_bytes_is_unchanged(self) -> None:
        assert close_reason_bytes("a" * 123) == b"a" * 123

    def test_ascii_is_cut_at_123_bytes(self) -> None:
        assert close_reason_bytes("a" * 124) == b"a" * 123

    @pytest.mark.parametrize(
        ("reason", "expected"),
        [
            ("é" * 100, "é" * 61),  # 2-byte characters: 122 bytes, the 62nd would end at 124
            ("a" + "€" * 50, "a" + "€" * 40),  # 3-byte characters: 121 bytes
            ("€" * 50, "€" * 41),  # ends exactly at 123
            ("ab" + "🌍" * 40, "ab" + "🌍" * 30),  # 4-byte characters: 122 bytes
        ],
    )
    def test_cut_never_splits_a_character(self, reason: str, expected: str) -> None:
        cut = close_reason_bytes(reason)
        assert cut == expected.encode()
        assert len(cut) <= 123
        cut.decode("utf-8")
