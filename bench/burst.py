"""`python -m bench.burst`: what one app's burst of registers costs every other client.

A bridge (the virtualenv's, started as `python -m bench` starts it) with STREAMS legacy
notification streams open for the app's client ID, each on a connection with a 4 KiB
receive window that never reads, and one app that sends REGISTERS registers as fast as it
can, alternating two tool sets (so each changes the set and is announced). Meanwhile
another process asks `/healthz` every 5 ms on a keep-alive connection; the figures are the
time until every register is answered and the worst `/healthz` answer seen, and the
bridge's RSS before and after (the unread streams must not hold the announcements). docs/protocol.md,
Notification streams, explains the two rules these figures are for.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import multiprocessing.sharedctypes
import multiprocessing.synchronize
import secrets
import socket
import sys
import time

import websockets

from bench.run import HOST, BenchError, Fleet, start_bridge, wait_healthy
from clientmcp_fast.core.tokens import mint

CLIENT_ID = "burst"


def unread_stream(port: int, token: str) -> socket.socket:
    """A legacy GET stream whose agent reads nothing after sending the request."""
    conn = socket.socket()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    conn.connect((HOST, port))
    conn.sendall(
        f"GET /mcp HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {token}\r\n"
        "Accept: text/event-stream\r\n\r\n".encode()
    )
    return conn


def probe_health(
    port: int, stop: multiprocessing.synchronize.Event, worst: multiprocessing.sharedctypes.Synchronized
) -> None:
    """Ask /healthz every 5 ms on a keep-alive connection until `stop`; the worst answer's seconds into `worst`.

    It runs in a process of its own: in the burst's process it would wait for the
    interpreter's lock behind the burst client, and count that wait as the bridge's.
    """
    with socket.create_connection((HOST, port), timeout=30) as conn:
        while not stop.is_set():
            started = time.monotonic()
            conn.sendall(f"GET /healthz HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
            answer = b""
            while not answer.endswith(b"\r\n\r\nok"):
                data = conn.recv(256)
                if not data:
                    raise SystemExit("bench.burst: the bridge closed the /healthz connection")
                answer += data
            worst.value = max(worst.value, time.monotonic() - started)
            time.sleep(0.005)


async def burst(port: int, secret: bytes, registers: int) -> float:
    """Send `registers` registers and wait for every answer; the seconds it took."""
    token = mint(secret, "client", CLIENT_ID, 3600, time.time())
    async with websockets.connect(f"ws://{HOST}:{port}/connect", subprotocols=["clientmcp.v1", token]) as app:
        frames = [
            json.dumps(
                {"type": "register", "tools": [{"name": f"t{n % 2}", "inputSchema": {"type": "object"}}]}
            )
            for n in range(registers)
        ]
        started = time.monotonic()

        async def send_all() -> None:
            for frame in frames:
                await app.send(frame)

        sending = asyncio.create_task(send_all())
        for _ in range(registers):
            if json.loads(await asyncio.wait_for(app.recv(), 60)) != {"type": "registered"}:
                raise SystemExit("bench.burst: a register was not answered with registered")
        await sending
        return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.burst", description=__doc__.splitlines()[0])
    parser.add_argument("--registers", type=int, default=50_000)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--pure", action="store_true", help="run the bridge with its pure-Python twins")
    flags = parser.parse_args(argv)
    secret = secrets.token_hex(32)
    fleet = Fleet()  # bench.run's: the bridge's log goes to bench/_build/logs, and it is stopped at the end
    try:
        bridge = start_bridge(fleet, "burst-bridge", secret, flags.pure, [])
        wait_healthy(fleet, bridge.name, bridge.port, "/healthz")
        agent = mint(secret.encode(), "agent", CLIENT_ID, 3600, time.time())
        streams = [unread_stream(bridge.port, agent) for _ in range(flags.streams)]
        time.sleep(0.5)
        rss_before = bridge.process.memory_info().rss
        worst = multiprocessing.Value("d", 0.0)
        stop = multiprocessing.Event()
        prober = multiprocessing.Process(target=probe_health, args=(bridge.port, stop, worst))
        prober.start()
        try:
            took = asyncio.run(burst(bridge.port, secret.encode(), flags.registers))
        finally:
            stop.set()
            prober.join()
        rss_after = bridge.process.memory_info().rss
        for conn in streams:
            conn.close()
    except BenchError as error:
        print(f"bench.burst: FAILED: {error}", file=sys.stderr)
        return 1
    finally:
        fleet.stop_all()
    print(
        f"{flags.registers:,} registers with {flags.streams} unread streams: all answered in {took:.2f} s; "
        f"worst /healthz {worst.value * 1000:.0f} ms; bridge RSS {rss_before / 2**20:.1f} -> {rss_after / 2**20:.1f} MB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
