"""Instructions per tools/call, counted by callgrind: a measure of the bridge's own work that noise cannot move.

    python -m bench.instructions [--era legacy|modern|ping] [--calls 1000]

One tools/call goes through the real `HttpProtocol` (request in, answer out) and the
app's `AppChannel` (call out, result in) over fake transports, so no syscall or event
loop is counted (what the bridge schedules with `call_soon` is run by the harness, see
`StepLoop`); `--era ping` counts an app's exact `{"type":"ping"}` and its pong instead.
The command runs itself under `valgrind --tool=callgrind` for N and 2N calls and prints
the difference divided by N, once with the bridge and once with the bridge's three
entry points replaced by canned answers: the second is the harness's own share, and the
first minus the second is the bridge's. `--drive N [--stub]` (used by that) just makes
the calls. CLIENTMCP_NO_EXTENSIONS=1 counts the pure-Python twins.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable

import uvloop

from clientmcp_fast.config import Settings
from clientmcp_fast.core.channel import AppChannel
from clientmcp_fast.core.tokens import mint
from clientmcp_fast.net.http import HttpProtocol
from clientmcp_fast.net.server import Server
from clientmcp_fast.net.websocket import WebSocketProtocol

SECRET = b"bench-instructions-secret-0123456789abcdef"
REGISTER = b'{"type":"register","tools":[{"name":"echo","inputSchema":{"type":"object"}}]}'
LEGACY = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}',
    b"MCP-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: abc\r\n",
)
MODERN = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},'
    b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}',
    b"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n",
)
PONG_FRAME = b'\x81\x0f{"type":"pong"}'


class FakeTransport:
    """Keeps what is written; everything else a transport does is a no-op."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        # C methods, not Python ones, for what the bridge calls per call: a real transport's
        # work is not ours to count, and an interpreted stand-in would cost more than uvloop's.
        self.write = self.written.append
        self.is_closing = False.__bool__  # always False
        self.get_write_buffer_size = (0).__index__  # always 0

    def close(self) -> None: ...
    def abort(self) -> None: ...
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None: ...


class StepLoop(uvloop.Loop):
    """A uvloop loop whose `call_soon` callbacks run when the harness says, not in a loop turn.

    Never running, a real loop would keep every scheduled handle: they pile up and the
    garbage collector walks them all, a cost growing with the number of calls made. The
    bridge's hot path schedules only callbacks without arguments, so `call_soon` here is
    a list's `append`: next to nothing, like the handle a real loop turn would make and run.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ready: list[Callable[[], object]] = []
        self.call_soon = self.ready.append  # type: ignore[method-assign,assignment]

    def run_ready(self) -> None:
        """Run what was scheduled, as the end of a loop turn would."""
        ready = self.ready
        while ready:
            ready.pop(0)()


MASKED_HEADS = [bytes((0x81, 0x80 | size)) + b"\0\0\0\0" for size in range(126)]
RESULT_HEAD = b'{"type":"result","id":"'
RESULT_TAIL = b'","result":{"content":[{"type":"text","text":"hi"}]}}'


def client_text(payload: bytes) -> bytes:
    """A masked client text frame (with a zero key, so the payload reads as it is)."""
    size = len(payload)
    if size < 126:
        return MASKED_HEADS[size] + payload
    return bytes((0x81, 0x80 | 126)) + size.to_bytes(2, "big") + b"\0\0\0\0" + payload


def call_id_of(frame: bytes) -> bytes:
    """The id of the `call` in an unmasked server frame."""
    start = frame.index(b'"id":"') + 6
    return frame[start : frame.index(b'"', start)]


def round_trip(era: str, stub_calls: int = 0) -> Callable[[], bytes]:
    """A bridge with one app online, and a function making one tools/call (or ping) through it: the answer.

    With `stub_calls`, the bridge's entry points are replaced by list appends and its
    answers are canned, enough for that many calls: what is left is the harness alone.
    """
    loop = StepLoop()
    server = Server(Settings(secrets=(SECRET,), signing_secret=SECRET, host="127.0.0.1", port=0), loop)
    now = time.time()
    app_transport = FakeTransport()
    link = WebSocketProtocol(server, app_transport)  # type: ignore[arg-type]
    channel = AppChannel(server.bridge, link, loop.time())
    link.start(channel, mint(SECRET, "client", "bench", 3600, now), b"")
    channel.receive_data(client_text(REGISTER), loop.time())
    loop.run_ready()
    agent_transport = FakeTransport()
    http = HttpProtocol(server)
    http.connection_made(agent_transport)  # type: ignore[arg-type]
    body, headers = MODERN if era == "modern" else LEGACY
    token = mint(SECRET, "agent", "bench", 3600, now).encode()
    request = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAuthorization: Bearer " + token + b"\r\n"
        b"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
        + headers
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )
    ping = client_text(b'{"type":"ping"}')
    on_request, on_app_data, on_link_data = http.data_received, channel.receive_data, link.data_received
    if stub_calls:
        # What the bridge would write, already written; what it is fed, kept.
        fed: list[object] = []
        on_request = on_link_data = fed.append
        on_app_data = lambda data, now: None  # noqa: E731
        if era == "ping":
            app_transport.written[:] = [PONG_FRAME] * stub_calls
        else:
            call = b'{"type":"call","id":"1","name":"echo","arguments":{"text":"hi"}}'
            app_transport.written[:] = [b"\x81" + bytes((len(call),)) + call] * stub_calls
            agent_transport.written[:] = [b"HTTP/1.1 200 OK\r\n\r\n"] * stub_calls

    def one() -> bytes:
        on_request(request)
        loop.run_ready()
        on_app_data(
            client_text(b"".join((RESULT_HEAD, call_id_of(app_transport.written.pop()), RESULT_TAIL))), 0.0
        )
        loop.run_ready()
        return agent_transport.written.pop()

    def one_ping() -> bytes:
        on_link_data(ping)
        loop.run_ready()
        return app_transport.written.pop()

    return one_ping if era == "ping" else one


def drive(era: str, calls: int, stub: bool = False) -> float:
    """Make `calls` tool calls (or pings) after a checked one and a warm-up; the CPU seconds they took."""
    one = round_trip(era, calls + 201 if stub else 0)
    answer = one()
    if era == "ping":
        assert answer == PONG_FRAME, answer
    elif not stub:
        assert answer.startswith(b"HTTP/1.1 200 OK") and b'"text":"hi"' in answer, answer
    for _ in range(200):
        one()
    started = time.process_time()
    for _ in range(calls):
        one()
    return time.process_time() - started


def count(era: str, calls: int, stub: bool = False) -> int:
    """Instructions per call: callgrind totals for N and 2N calls, differenced."""
    totals = []
    for n in (calls, 2 * calls):
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
             sys.executable, "-m", "bench.instructions", "--era", era, "--drive", str(n),
             *(["--stub"] if stub else [])],
            capture_output=True, text=True, check=True,
            # A fixed hash seed: dict and set layouts, so the counts, repeat run after run.
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )  # fmt: skip
        totals.append(int(re.search(r"Collected : (\d+)", done.stderr).group(1)))
    return (totals[1] - totals[0]) // calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--era", choices=("legacy", "modern", "ping"), default="legacy")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--drive", type=int, metavar="N", help="only make N calls (what callgrind runs)")
    parser.add_argument(
        "--stub", action="store_true", help="with --drive: the harness alone, the bridge stubbed"
    )
    flags = parser.parse_args()
    if flags.drive is not None:
        drive(flags.era, flags.drive, flags.stub)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is needed: apt-get install valgrind")
    what = "ping and pong" if flags.era == "ping" else "tools/call round trip"
    total = count(flags.era, flags.calls)
    harness = count(flags.era, flags.calls, stub=True)
    print(f"{flags.era}: {total - harness:,} instructions per {what} in the bridge "
          f"({total:,} counted, less {harness:,} for the harness)")  # fmt: skip


if __name__ == "__main__":
    main()
