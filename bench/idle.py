"""Idle apps for figures 3 and 4: N raw WebSocket clients in one process, then pings on a schedule.

`python -m bench.idle --port P --clients N` (CLIENTMCP_SECRET in the environment) opens N
connections to `/connect`, each with its own client ID (`idle-<n>`) and token, in batches
so that the bridge's listen backlog is never overrun; each registers one tool and waits
for `registered`. Then it prints `connected N` and reads commands on stdin:
- `ping SECONDS`: send exact `{"type":"ping"}` text frames at N/25 pings per second (every
  client pinging once per 25 s, phases spread evenly) for SECONDS, wait for every pong,
  and print `pinged <sent> <pongs>`;
- end of input: close every connection and exit.
Nothing here needs to be fast: the bridge is what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import resource
import sys
import time

import uvloop

from clientmcp_fast.core.tokens import mint

PING_PERIOD_SECONDS = 25.0
BATCH = 250
REGISTER = b'{"type":"register","tools":[{"name":"echo","inputSchema":{"type":"object"}}]}'
PING = b'{"type":"ping"}'
PONG_FRAME = b"\x81\x0f" + b'{"type":"pong"}'
REGISTERED_FRAME = b"\x81\x15" + b'{"type":"registered"}'


def masked_frame(payload: bytes) -> bytes:
    """A client text frame (payload < 126 bytes) masked with a random key."""
    key = os.urandom(4)
    masked = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return bytes((0x81, 0x80 | len(payload))) + key + masked


class IdleClient(asyncio.Protocol):
    """One app: upgrade, register, then only pings when the schedule says so."""

    __slots__ = ("buffer", "ping", "received", "registered", "request", "transport", "upgraded")

    def __init__(self, request: bytes, registered: asyncio.Future) -> None:
        self.request = request
        self.registered = registered
        self.buffer = b""
        self.upgraded = False
        self.received = -1  # bytes received after `registered`; -1 until then
        self.ping = masked_frame(PING)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        if self.received >= 0:
            self.received += len(data)  # nothing but 17-byte pongs comes now
            return
        self.buffer += data
        if not self.upgraded:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            if not self.buffer.startswith(b"HTTP/1.1 101"):
                self._fail("upgrade refused: " + self.buffer.split(b"\r\n", 1)[0].decode("latin-1"))
                return
            self.upgraded = True
            self.buffer = self.buffer[end + 4 :]
            self.transport.write(masked_frame(REGISTER))
        at = self.buffer.find(REGISTERED_FRAME)
        if at >= 0:
            self.received = len(self.buffer) - at - len(REGISTERED_FRAME)
            self.buffer = b""
            if not self.registered.done():
                self.registered.set_result(None)
        elif len(self.buffer) > 4096:
            self._fail("no registered: " + self.buffer[:200].decode("latin-1"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.registered.done():
            self.registered.set_exception(ConnectionError("closed by the bridge before registered"))

    def _fail(self, problem: str) -> None:
        if not self.registered.done():
            self.registered.set_exception(ConnectionError(problem))
        self.transport.abort()


def upgrade_request(host: str, port: int, token: str) -> bytes:
    key = base64.b64encode(os.urandom(16))
    return (
        b"GET /connect HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Protocol: clientmcp.v1, %s\r\n\r\n"
    ) % (host.encode(), port, key, token.encode())


async def connect_all(host: str, port: int, count: int, secret: bytes) -> list[IdleClient]:
    """`count` registered clients, opened `BATCH` at a time."""
    loop = asyncio.get_running_loop()
    now = time.time()
    clients: list[IdleClient] = []
    for first in range(0, count, BATCH):
        batch = []
        for n in range(first, min(count, first + BATCH)):
            token = mint(secret, "client", f"idle-{n:05d}", 3600, now)
            client = IdleClient(upgrade_request(host, port, token), loop.create_future())
            batch.append(client)
        await asyncio.gather(*(loop.create_connection(lambda c=c: c, host, port) for c in batch))
        await asyncio.wait_for(asyncio.gather(*(c.registered for c in batch)), 60)
        clients += batch
    return clients


async def ping_for(clients: list[IdleClient], seconds: float) -> tuple[int, int]:
    """Pings at len(clients)/25 per second for `seconds`, round robin; (sent, pongs received)."""
    rate = len(clients) / PING_PERIOD_SECONDS
    before = sum(c.received for c in clients)
    sent = 0
    start = time.monotonic()
    while True:
        elapsed = time.monotonic() - start
        due = int(rate * min(elapsed, seconds))
        while sent < due:
            client = clients[sent % len(clients)]
            client.transport.write(client.ping)
            sent += 1
        if elapsed >= seconds:
            break
        await asyncio.sleep(0.01)
    give_up = time.monotonic() + 10
    while time.monotonic() < give_up:
        pongs = (sum(c.received for c in clients) - before) // len(PONG_FRAME)
        if pongs >= sent:
            break
        await asyncio.sleep(0.02)
    return sent, (sum(c.received for c in clients) - before) // len(PONG_FRAME)


async def main(host: str, port: int, count: int) -> None:
    secret = os.environ["CLIENTMCP_SECRET"].encode()
    clients = await connect_all(host, port, count, secret)
    print(f"connected {len(clients)}", flush=True)
    loop = asyncio.get_running_loop()
    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    while line := (await commands.readline()).decode().split():
        if line[0] == "ping":
            sent, pongs = await ping_for(clients, float(line[1]))
            print(f"pinged {sent} {pongs}", flush=True)
    for client in clients:
        client.transport.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--clients", type=int, required=True)
    flags = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    uvloop.run(main(flags.host, flags.port, flags.clients))
