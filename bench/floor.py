"""The machine's floor, measured in the same run: what a server that does next to nothing costs here.

Two bare uvloop servers, for reading figures 1, 2 and 4 on a noisy, virtualised machine:
- `--http PORT`: httptools parses each request and the answer is a fixed tools/call result
  (no app behind it, no checks): the least a Python HTTP server can spend per call;
- `--pong PORT`: accepts the idle clients' upgrade and register with fixed bytes, then
  answers every frame with the pong frame: the least a process woken by each ping spends.
Prints `up` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import resource

import httptools
import uvloop

RESULT = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}'
HTTP_ANSWER = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
    len(RESULT),
    RESULT,
)
UPGRADED = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
REGISTERED_FRAME = b"\x81\x15" + b'{"type":"registered"}'
PONG_FRAME = b"\x81\x0f" + b'{"type":"pong"}'


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


async def serve(protocol: type[asyncio.Protocol], port: int) -> None:
    await asyncio.get_running_loop().create_server(protocol, "127.0.0.1", port, backlog=4096)
    print("up", flush=True)
    await asyncio.Future()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--http", type=int, metavar="PORT")
    mode.add_argument("--pong", type=int, metavar="PORT")
    flags = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    uvloop.run(serve(HttpFloor, flags.http) if flags.http else serve(PongFloor, flags.pong))
