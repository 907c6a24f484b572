"""Raw-socket HTTP/1.1 and WebSocket peers for end-to-end tests: they send exactly the bytes a test writes.

The `websockets` library and HTTP clients refuse to send malformed input, and hide how
a server framed its answers; these peers do neither. Only the client side is written
here, and only as much of it as the tests need to read the bridge's answers exactly.
"""

from __future__ import annotations

import base64
import json
import os
import select
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Self

from wire import Op, client_frame, read_server_frame

READ_TIMEOUT = 10.0


class PeerClosed(AssertionError):
    """The bridge closed the connection where the test expected more bytes."""


@dataclass
class Response:
    """One HTTP response as it came off the wire."""

    status: int
    reason: str
    version: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        """The value of header `name` (case-insensitive), repeated ones joined with ", "."""
        values = [value for key, value in self.headers if key == name.lower()]
        return ", ".join(values) if values else None

    def json(self) -> Any:
        return json.loads(self.body)


class RawHttp:
    """One TCP connection to the bridge that writes given bytes and parses responses strictly."""

    def __init__(self, port: int, timeout: float = READ_TIMEOUT, rcvbuf: int | None = None) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            # Set before connecting, so the TCP window is small from the start.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self.buffer = b""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> None:
        """Read more bytes into the buffer; `PeerClosed` at the end of the stream."""
        try:
            data = self.sock.recv(1 << 16)
        except ConnectionResetError:
            data = b""
        if not data:
            raise PeerClosed(f"connection closed; unparsed bytes: {self.buffer[:200]!r}")
        self.buffer += data

    def read_until(self, marker: bytes) -> bytes:
        """Bytes up to and including `marker`."""
        while marker not in self.buffer:
            self._fill()
        end = self.buffer.index(marker) + len(marker)
        data, self.buffer = self.buffer[:end], self.buffer[end:]
        return data

    def read_exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self._fill()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def read_response(self, *, head_request: bool = False) -> Response:
        """The next response (an interim 1xx one included), its body framed as its headers say."""
        head = self.read_until(b"\r\n\r\n").decode("latin-1")
        status_line, *lines = head[:-4].split("\r\n")
        version, status, reason = (status_line.split(" ", 2) + [""])[:3]
        assert version.startswith("HTTP/1."), f"not an HTTP/1.x status line: {status_line!r}"
        response = Response(int(status), reason, version)
        for line in lines:
            name, _, value = line.partition(":")
            assert name and name == name.strip(), f"malformed header line {line!r}"
            response.headers.append((name.lower(), value.strip()))
        if head_request or response.status < 200 or response.status in (204, 304):
            return response
        encoding = response.header("transfer-encoding")
        length = response.header("content-length")
        if encoding is not None:
            assert encoding.lower() == "chunked", encoding
            assert length is None, "both Content-Length and Transfer-Encoding in a response"
            response.body = self._read_chunked()
        elif length is not None:
            response.body = self.read_exactly(int(length))
        else:
            response.body = self.read_to_end()
        return response

    def _read_chunked(self) -> bytes:
        body = b""
        while True:
            size = int(self.read_until(b"\r\n")[:-2].split(b";")[0], 16)
            if size == 0:
                self.read_until(b"\r\n")  # no trailers are ever sent
                return body
            body += self.read_exactly(size)
            assert self.read_exactly(2) == b"\r\n", "chunk not followed by CRLF"

    def read_to_end(self) -> bytes:
        """Everything until the bridge closes the connection."""
        while True:
            try:
                self._fill()
            except PeerClosed:
                data, self.buffer = self.buffer, b""
                return data

    def assert_closed(self, timeout: float = READ_TIMEOUT) -> None:
        """The bridge closes the connection within `timeout` and sends nothing more."""
        self.sock.settimeout(timeout)
        rest = self.read_to_end()
        assert rest == b"", f"unexpected bytes before the close: {rest[:300]!r}"

    def assert_open(self) -> None:
        """Nothing arrived and the connection is still open (a non-blocking peek)."""
        assert self.buffer == b"", f"unexpected bytes: {self.buffer[:300]!r}"
        assert not self.readable(), "expected an open, silent connection"

    def readable(self) -> bool:
        """Whether bytes or the end of the stream are waiting to be read, without waiting."""
        return bool(self.buffer) or bool(select.select([self.sock], [], [], 0)[0])


# -- HTTP requests ---------------------------------------------------------------------------


def mcp_post(body: bytes, token: str | None, extra: str = "", target: str = "/mcp") -> bytes:
    """A POST to the agent endpoint with a Content-Length body; JSON answers only (never SSE)."""
    authorization = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n{authorization}"
        f"Content-Type: application/json\r\nAccept: application/json\r\n{extra}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def rpc(method: str, params: dict | None = None, request_id: int | str = 1) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def tool_call(name: str, arguments: dict | None = None, request_id: int | str = 1) -> bytes:
    """A legacy tools/call (no revision named), as an MCP agent sends it."""
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return rpc("tools/call", params, request_id)


def tool_error_text(response: Response, request_id: int | str = 1) -> str:
    """The text of a tool error result (`isError: true`) answering request `request_id`."""
    assert response.status == 200, (response.status, response.body)
    message = response.json()
    assert message["id"] == request_id, message
    result = message["result"]
    assert result["isError"] is True, result
    (block,) = result["content"]
    assert block["type"] == "text", block
    return block["text"]


# -- WebSocket -------------------------------------------------------------------------------


def upgrade_request(protocols: list[str] | None, target: str = "/connect", key: bytes | None = None) -> bytes:
    key = key or base64.b64encode(os.urandom(16))
    offered = f"Sec-WebSocket-Protocol: {', '.join(protocols)}\r\n" if protocols else ""
    return (
        f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key.decode()}\r\nSec-WebSocket-Version: 13\r\n{offered}\r\n"
    ).encode()


class RawApp(RawHttp):
    """An app speaking the client channel over a raw socket: it reads only when the test says so."""

    def __init__(self, port: int, token: str, *, rcvbuf: int | None = None) -> None:
        super().__init__(port, rcvbuf=rcvbuf)
        self.send(upgrade_request(["clientmcp.v1", token]))
        response = self.read_response(head_request=True)
        assert response.status == 101, (response.status, response.body)
        assert response.header("sec-websocket-protocol") == "clientmcp.v1"

    def send_text(self, text: str | bytes) -> None:
        self.send(client_frame(Op.TEXT, text.encode() if isinstance(text, str) else text))

    def read_frame(self) -> tuple[bool, int, bytes]:
        """The next server frame: (fin, opcode, payload), checked as `wire.read_server_frame` does."""
        return read_server_frame(self.read_exactly)

    def read_text(self) -> str:
        fin, opcode, payload = self.read_frame()
        assert (fin, opcode) == (True, Op.TEXT), (fin, opcode, payload[:200])
        return payload.decode("utf-8")

    def read_close(self) -> tuple[int, str]:
        """Skip data frames up to the bridge's close frame; its (code, reason)."""
        while True:
            _, opcode, payload = self.read_frame()
            if opcode == Op.CLOSE:
                assert len(payload) >= 2, payload
                return int.from_bytes(payload[:2], "big"), payload[2:].decode("utf-8")


def wait_until(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    """Poll a condition outside the bridge (a socket, a process) until it holds."""
    give_up = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > give_up:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(0.01)
