"""The metrics listener's bounds (docs/limits.md), against a bridge process and raw sockets.

`--metrics HOST:PORT` is a second listener, so it has bounds of its own: a cap on its
connections (`MAX_METRICS_CONNECTIONS`, 64) and the main port's head and keep-alive
timeouts. Without them, idle connections to it took every descriptor of the process, and
the main port refused new agents and apps (docs/reliability.md, row 6b).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rawhttp import PeerClosed, RawHttp, wait_until
from test_faults import BridgeProcess, EchoApp, closed_by_peer, echo_round_trips, healthz

from clientmcp_fast.metrics import MAX_METRICS_CONNECTIONS

SCRAPE = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
CAP_WARNING = f"metrics listener at its cap of {MAX_METRICS_CONNECTIONS} connections"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def metered(tmp_path: Path) -> Iterator[Callable[..., tuple[BridgeProcess, int]]]:
    """A factory of bridge processes with `--metrics` on a free port: each bridge and that port."""
    started: list[BridgeProcess] = []

    def start(*flags: str, **options: Any) -> tuple[BridgeProcess, int]:
        port = free_port()
        log = tmp_path / f"bridge-{len(started)}.log"
        bridge = BridgeProcess(log, "--metrics", f"127.0.0.1:{port}", *flags, **options)
        started.append(bridge)
        # The main port answers before the metrics listener has started.
        wait_until(
            lambda: f"metrics on http://127.0.0.1:{port}/metrics" in bridge.log(), what="metrics listening"
        )
        return bridge, port

    yield start
    for bridge in started:
        bridge.kill()


def assert_scrape(conn: RawHttp) -> None:
    """A scrape on `conn` is answered 200 with the bridge's metrics, and the connection stays."""
    conn.send(SCRAPE)
    response = conn.read_response()
    assert response.status == 200, response
    assert b"clientmcp_build_info" in response.body
    assert response.header("connection") is None, response.headers


def held(bridge: BridgeProcess, port: int) -> int:
    """Connections to `port` that the bridge holds open."""
    return sum(
        1
        for conn in bridge.ps.net_connections(kind="tcp")
        if conn.laddr.port == port and conn.status == "ESTABLISHED"
    )


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    """Raw connections a test opens, every one closed at its end."""
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def connect(port: int, sockets: list[socket.socket], count: int) -> list[socket.socket]:
    """`count` new connections to `port` that send nothing."""
    new = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    sockets.extend(new)
    return new


def test_metrics_connections_over_the_cap_are_closed_at_once_and_scrapes_resume(metered, sockets):
    """64 silent connections: a 65th is closed at once, warned of once; the head timeout frees them."""
    bridge, port = metered("--head-timeout", "2", "--keepalive-timeout", "30")
    idle = connect(port, sockets, MAX_METRICS_CONNECTIONS)
    wait_until(lambda: held(bridge, port) == MAX_METRICS_CONNECTIONS, what="the idle connections taken")
    opened = time.monotonic()
    over = connect(port, sockets, 5)
    wait_until(lambda: all(map(closed_by_peer, over)), timeout=1, what="connections over the cap closed")
    with pytest.raises(PeerClosed), RawHttp(port) as refused:  # a scrape meanwhile: no room for it
        refused.send(SCRAPE)
        refused.read_response()
    assert not any(map(closed_by_peer, idle))
    assert bridge.log().count(CAP_WARNING) == 1, bridge.log()
    # Silent for the head timeout, the idle ones are closed, and there is room again.
    wait_until(lambda: all(map(closed_by_peer, idle)), timeout=5, what="the idle connections timed out")
    assert time.monotonic() - opened >= 1.5
    with RawHttp(port) as conn:
        assert_scrape(conn)
    assert bridge.log().count(CAP_WARNING) == 1


@pytest.mark.parametrize("phase", ["nothing sent", "half a head", "idle keep-alive"])
def test_a_metrics_connection_is_closed_by_the_timeout_of_its_phase(metered, phase):
    """A head (or none) is closed at the head timeout, an idle keep-alive one at the keep-alive timeout."""
    head_timeout, keepalive_timeout = (1.0, 3.0) if phase != "idle keep-alive" else (3.0, 1.0)
    bridge, port = metered(
        "--head-timeout", f"{head_timeout:g}", "--keepalive-timeout", f"{keepalive_timeout:g}"
    )
    with RawHttp(port) as conn:
        if phase == "half a head":
            conn.send(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        elif phase == "idle keep-alive":
            assert_scrape(conn)
            assert_scrape(conn)  # the same connection serves the next scrape
        started = time.monotonic()
        conn.assert_closed(timeout=10)
        took = time.monotonic() - started
    # The two timeouts are set apart to tell which applied.
    assert 0.7 <= took <= 1.6, f"closed after {took:.2f} s"


@pytest.mark.parametrize("ended", [False, True], ids=["still coming", "ended in one write"])
def test_a_metrics_request_head_over_8_kib_is_431_and_closed(metered, ended):
    """docs/limits.md: a head past 8 KiB is answered 431 and the connection closed, however it comes."""
    bridge, port = metered()
    head = SCRAPE[:-2] + b"X-Padding: " + b"a" * 8192 + b"\r\n" + (b"\r\n" if ended else b"")
    with RawHttp(port) as conn:
        conn.send(head)
        response = conn.read_response()
        assert response.status == 431 and response.header("connection") == "close", response
        conn.assert_closed(timeout=5)
    with RawHttp(port) as conn:  # one just under the bound is served
        conn.send(SCRAPE[:-2] + b"X-Padding: " + b"a" * 7000 + b"\r\n\r\n")
        assert conn.read_response().status == 200


def test_the_main_port_serves_while_the_metrics_port_is_flooded(metered, sockets):
    """docs/reliability.md row 6b: idle connections to the metrics port leave descriptors to agents and apps."""
    limit = 160
    bridge, port = metered(nofile=limit)
    flood = connect(port, sockets, 2 * limit)
    wait_until(
        lambda: held(bridge, port) + sum(map(closed_by_peer, flood)) == len(flood),
        what="every flood connection taken or closed",
    )
    assert healthz(bridge.port) == 200
    app = EchoApp(bridge, "flooded")
    try:
        assert len(echo_round_trips(bridge, "flooded", 5)) == 5
    finally:
        app.close()
    assert held(bridge, port) == MAX_METRICS_CONNECTIONS
    assert bridge.log().count(CAP_WARNING) == 1, bridge.log()
    assert "open-file limit reached" not in bridge.log()
    for sock in flood:
        sock.close()
    wait_until(lambda: held(bridge, port) == 0, what="the flood's connections released")
    with RawHttp(port) as conn:
        assert_scrape(conn)


def test_pipelined_scrapes_are_answered_in_order_and_a_close_is_honoured(metered):
    """Requests in one write each get their answer; `Connection: close`, HTTP/1.0 or a body end the connection."""
    bridge, port = metered()
    with RawHttp(port) as conn:
        conn.send(
            SCRAPE + b"GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + SCRAPE.replace(b"GET", b"HEAD")
        )
        assert conn.read_response().status == 200
        assert conn.read_response().status == 404
        head = conn.read_response(head_request=True)
        assert (head.status, conn.buffer) == (200, b"")
        assert_scrape(conn)
    for last in (
        b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        b"GET /metrics HTTP/1.0\r\n\r\n",
        b"POST /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}",
    ):
        with RawHttp(port) as conn:
            conn.send(last)
            response = conn.read_response()
            assert response.header("connection") == "close", response.headers
            conn.assert_closed(timeout=5)
