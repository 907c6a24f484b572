"""The machine's floor, measured in the same run: what a server that does next to nothing costs here.

Three bare uvloop servers, for reading figures 1, 2 and 4 on a noisy, virtualised machine:
- `--http PORT`: httptools parses each request and the answer is a fixed tools/call result
  (no app behind it, no checks): the least a Python HTTP server can spend per call;
- `--bridge PORT`: the minimal bridge of docs/benchmarks.md ("a minimal bridge that coalesces its
  WebSocket writes to the app into one write per loop iteration"): each request becomes a
  call frame to the one app connected at `/connect`, the app's result goes back to that
  agent, and nothing is checked (no token, header, JSON or timeout): the least the same
  round trip through an app can cost here, with the bridge's own compiled frame reader;
- `--pong PORT`: accepts the idle clients' upgrade and register with fixed bytes, then
  answers every frame with the pong frame: the least a process woken by each ping spends.
Prints `up` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import resource
from collections.abc import Callable

import httptools
import uvloop

from clientmcp_fast.speedups import FrameReader

RESULT = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}'
HTTP_ANSWER = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
    len(RESULT),
    RESULT,
)
UPGRADED = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
REGISTERED_FRAME = b"\x81\x15" + b'{"type":"registered"}'
PONG_FRAME = b"\x81\x0f" + b'{"type":"pong"}'
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CALL_HEAD = b'{"type":"call","id":"'
CALL_TAIL = b'","name":"echo","arguments":{"text":"hi"}}'
RESULT_HEAD = b'{"type":"result","id":"'
RESULT_MEMBER = b'","result":'
ANSWER_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"


class HttpFloor(asyncio.Protocol):
    """Answers every request with the same tools/call result."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        self.parser = httptools.HttpRequestParser(self)

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_complete(self) -> None:
        self.transport.write(HTTP_ANSWER)


class PongFloor(asyncio.Protocol):
    """101 to the upgrade, `registered` to the register, then a pong per chunk received."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        self.step = 0

    def data_received(self, data: bytes) -> None:
        if self.step == 2:
            self.transport.write(PONG_FRAME)
        else:
            self.transport.write(UPGRADED if self.step == 0 else REGISTERED_FRAME)
            self.step += 1


class MiniBridge:
    """What the connections of `--bridge` share: the app, its unwritten calls, the agents waiting."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.app: asyncio.Transport | None = None
        self.unwritten: list[bytes] = []
        self.waiting: dict[bytes, asyncio.Transport] = {}
        self.last_id = 0

    def call(self, agent: asyncio.Transport) -> None:
        """Queue a call frame for the app; the first of a loop turn schedules the one write."""
        self.last_id += 1
        call_id = b"%d" % self.last_id
        self.waiting[call_id] = agent
        payload = CALL_HEAD + call_id + CALL_TAIL
        if not self.unwritten:
            self.loop.call_soon(self.flush)
        self.unwritten.append(bytes((0x81, len(payload))) + payload)

    def flush(self) -> None:
        assert self.app is not None, "a call came before the app"
        self.app.write(b"".join(self.unwritten))
        self.unwritten.clear()

    def app_text(self, payload: bytes) -> None:
        """A result goes to its agent as the JSON-RPC answer (the agents' id is always 1)."""
        if payload.startswith(RESULT_HEAD):
            end = payload.index(RESULT_MEMBER, len(RESULT_HEAD))
            body = b'{"jsonrpc":"2.0","id":1,"result":' + payload[end + len(RESULT_MEMBER) : -1] + b"}"
            agent = self.waiting.pop(payload[len(RESULT_HEAD) : end])
            if not agent.is_closing():  # wrk stops with calls in flight
                agent.write(ANSWER_HEAD % len(body) + body)
        elif payload.startswith(b'{"type":"register"'):
            assert self.app is not None
            self.app.write(REGISTERED_FRAME)


class MiniBridgeConnection(asyncio.Protocol):
    """An agent (every POST is a call) until a request upgrades it; then the app."""

    def __init__(self, bridge: MiniBridge) -> None:
        self.bridge = bridge
        self.frames: FrameReader | None = None
        self.key = b""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        self.parser = httptools.HttpRequestParser(self)

    def data_received(self, data: bytes) -> None:
        if self.frames is not None:
            for opcode, _, payload in self.frames.feed(data):
                if opcode == 1:
                    self.bridge.app_text(payload)
                elif opcode == 8:
                    self.transport.write(b"\x88\x00")
                    self.transport.close()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            accept = base64.b64encode(hashlib.sha1(self.key + GUID).digest())
            self.transport.write(UPGRADED[:-2] + b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
            self.frames = FrameReader(1 << 20)
            self.bridge.app = self.transport

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"sec-websocket-key":
            self.key = value

    def on_message_complete(self) -> None:
        if not self.parser.should_upgrade():
            self.bridge.call(self.transport)


async def serve(mode: str, port: int) -> None:
    """Serve `mode` (http, pong or bridge) on `port` until killed."""
    loop = asyncio.get_running_loop()
    if mode == "bridge":
        bridge = MiniBridge(loop)
        factory: Callable[[], asyncio.Protocol] = lambda: MiniBridgeConnection(bridge)  # noqa: E731
    else:
        factory = HttpFloor if mode == "http" else PongFloor
    await loop.create_server(factory, "127.0.0.1", port, backlog=4096)
    print("up", flush=True)
    await asyncio.Future()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--http", type=int, metavar="PORT")
    mode.add_argument("--pong", type=int, metavar="PORT")
    mode.add_argument("--bridge", type=int, metavar="PORT")
    flags = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    mode = next(name for name in ("http", "pong", "bridge") if getattr(flags, name))
    uvloop.run(serve(mode, getattr(flags, mode)))
