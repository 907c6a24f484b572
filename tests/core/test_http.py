"""Requests as the core reads them, and response bytes: heads, Content-Length and bodies as `core.http` builds them."""

from __future__ import annotations

import httptools
import pytest
from fakes import request_with_headers

from clientmcp_fast._pure.http_reader import CONTENT_LENGTH, EXPECT, TRANSFER_ENCODING
from clientmcp_fast.core import http as core_http
from clientmcp_fast.core.http import (
    ACCEPT,
    AUTHORIZATION,
    JSON_ONLY,
    KNOWN_INDEX,
    KNOWN_NAMES,
    MCP_METHOD,
    MCP_NAME,
    MCP_PROTOCOL_VERSION,
    MCP_SESSION_ID,
    ORIGIN,
    TEXT_PLAIN,
    response_message,
)


def _parsed(message: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
    """Status, headers and body of a response, as an independent HTTP parser reads them."""
    parts: dict = {"headers": {}, "body": b""}

    class Reader:
        def on_header(self, name: bytes, value: bytes) -> None:
            parts["headers"][name.lower()] = value

        def on_body(self, body: bytes) -> None:
            parts["body"] += body

    parser = httptools.HttpResponseParser(Reader())
    parser.feed_data(message)
    return parser.get_status_code(), parts["headers"], parts["body"]


# Lengths either side of those whose Content-Length line is made once and kept.
@pytest.mark.parametrize("size", [0, 1, 9, 10, 4095, 4096, 4097, 100_000])
@pytest.mark.parametrize("headers", [JSON_ONLY, (TEXT_PLAIN,), (TEXT_PLAIN, (b"x-a", b"b"))])
def test_the_content_length_is_the_body_s_every_time(size, headers):
    body = b"x" * size
    for _ in range(2):  # made, then kept
        message = response_message(200, headers, body, False)
        status, got, parsed_body = _parsed(message)
        assert (status, got[b"content-length"], parsed_body) == (200, str(size).encode(), body)
        assert message.endswith(b"\r\n\r\n" + body)
        assert message.count(b"content-length") == 1


def test_a_head_answer_keeps_the_length_and_leaves_the_body_out():
    full = response_message(200, JSON_ONLY, b'{"a":1}', False)
    head = response_message(200, JSON_ONLY, b'{"a":1}', False, with_body=False)
    assert full == head + b'{"a":1}'
    assert b"content-length: 7\r\n\r\n" in head


def test_close_is_said_and_the_usual_json_head_matches_the_general_one():
    for close in (False, True):
        usual = response_message(200, JSON_ONLY, b"{}", close)
        general = response_message(200, (JSON_ONLY[0],), b"{}", close)  # another tuple: no shortcut
        assert usual == general
        assert (b"connection: close\r\n" in usual) is close
    assert response_message(404, (TEXT_PLAIN,), b"no\n", True).startswith(b"HTTP/1.1 404 Not Found\r\n")


def test_a_request_keeps_the_known_headers_by_position_and_the_others_by_name():
    request = request_with_headers(
        b"POST", b"/mcp", {b"authorization": b"Bearer t", b"x-forwarded-for": b"10.0.0.1"}
    )
    assert request.header(AUTHORIZATION) == b"Bearer t"
    assert request.header(MCP_SESSION_ID) is None
    assert request.known[KNOWN_INDEX[b"authorization"]] == b"Bearer t"
    assert sum(value is not None for value in request.known) == 1
    assert request.others == {b"x-forwarded-for": b"10.0.0.1"}
    assert request.headers == {b"authorization": b"Bearer t", b"x-forwarded-for": b"10.0.0.1"}
    assert request.headers is request.headers  # made once


def test_every_header_the_bridge_and_the_request_reader_read_by_position_is_a_known_name():
    positions = (ACCEPT, AUTHORIZATION, CONTENT_LENGTH, EXPECT, MCP_METHOD, MCP_NAME)
    positions += (MCP_PROTOCOL_VERSION, MCP_SESSION_ID, ORIGIN, TRANSFER_ENCODING)
    names = [KNOWN_NAMES[position] for position in positions]
    assert names == [
        b"accept",
        b"authorization",
        b"content-length",
        b"expect",
        b"mcp-method",
        b"mcp-name",
        b"mcp-protocol-version",
        b"mcp-session-id",
        b"origin",
        b"transfer-encoding",
    ]
    assert len(set(KNOWN_NAMES)) == len(KNOWN_NAMES)
    assert all(name == name.lower() for name in KNOWN_NAMES)
    without_others = request_with_headers(b"GET", b"/", {b"host": b"a"})
    assert without_others.others is None and without_others.headers == {b"host": b"a"}


def test_the_heads_remembered_are_bounded_and_the_rest_still_built():
    # A CORS origin is echoed in the head, and agents choose origins: past the bound, heads
    # are built every time and none is kept.
    for n in range(core_http._MAX_HEAD_PREFIXES + 100):
        headers = ((b"access-control-allow-origin", b"https://%d.example" % n),)
        message = response_message(200, headers, b"{}", False)
        assert b"access-control-allow-origin: https://%d.example\r\n" % n in message
    assert len(core_http._HEAD_PREFIXES) <= core_http._MAX_HEAD_PREFIXES
