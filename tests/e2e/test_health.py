"""`clientmcp health`: exit 0 when a bridge answers /healthz with ok, else 1 and one line saying why.

It is the image's HEALTHCHECK (docs/deployment.md), so every way a check can go wrong is
one line on stderr and exit 1, within its timeout; a URL it cannot ask is bad usage (2).
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from test_cli import CLIENTMCP, environment, free_port

from clientmcp_fast.health import default_url


def health(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CLIENTMCP, "health", *args], env=environment(**env), capture_output=True, text=True, timeout=30
    )


def assert_unhealthy(result: subprocess.CompletedProcess, reason: str) -> None:
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("clientmcp: unhealthy: "), (
        result.stderr
    )
    assert reason in result.stderr, result.stderr


@contextmanager
def fake_server(answer: bytes | None) -> Iterator[int]:
    """A listener on 127.0.0.1 that reads a request and sends `answer` (None: never answers)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            if answer is not None:
                conn.sendall(answer)
            else:
                stop.wait(10)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()


def test_a_running_bridge_is_healthy(bridge):
    # environment() holds no CLIENTMCP_ setting: the check needs no secret.
    result = health("--url", f"{bridge.http_url}/healthz")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"ok: {bridge.http_url}/healthz\n"


def test_the_default_url_follows_the_serve_settings(bridge):
    result = health(CLIENTMCP_PORT=str(bridge.port))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"ok: http://127.0.0.1:{bridge.port}/healthz\n"
    result = health(CLIENTMCP_PORT=str(bridge.port), CLIENTMCP_HOST="127.0.0.1")
    assert result.returncode == 0, result.stderr


def test_default_url_asks_loopback_for_a_wildcard_and_brackets_ipv6():
    assert default_url("0.0.0.0", 8080) == "http://127.0.0.1:8080/healthz"
    assert default_url("::", 8080) == "http://[::1]:8080/healthz"
    assert default_url("::1", 9) == "http://[::1]:9/healthz"
    assert default_url("10.1.2.3", 80) == "http://10.1.2.3:80/healthz"


def test_a_closed_port_is_unhealthy():
    port = free_port()
    assert_unhealthy(
        health("--url", f"http://127.0.0.1:{port}/healthz"), f"nothing listens on 127.0.0.1:{port}"
    )


def test_another_path_or_status_is_unhealthy(bridge):
    assert_unhealthy(health("--url", f"{bridge.http_url}/nowhere"), "answered 404")


def test_a_200_without_ok_is_unhealthy():
    with fake_server(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnope") as port:
        assert_unhealthy(health("--url", f"http://127.0.0.1:{port}/healthz"), "without the body ok")


def test_an_answer_that_is_not_http_is_unhealthy():
    with fake_server(b"SSH-2.0-OpenSSH\r\n") as port:
        assert_unhealthy(health("--url", f"http://127.0.0.1:{port}/healthz"), "did not answer with HTTP")


def test_a_server_that_never_answers_is_unhealthy_within_the_timeout():
    with fake_server(None) as port:
        started = time.monotonic()
        result = health("--url", f"http://127.0.0.1:{port}/healthz", "--timeout", "0.5")
        elapsed = time.monotonic() - started
    assert_unhealthy(result, "no answer from 127.0.0.1")
    assert elapsed < 5, elapsed  # the process's own start included; 3 s is the default timeout


@pytest.mark.parametrize("url", ["https://127.0.0.1:8080/healthz", "127.0.0.1:8080", "http://:8080/"])
def test_a_url_it_cannot_ask_is_bad_usage(url):
    result = health("--url", url)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("clientmcp: error: --url: ") and result.stderr.count("\n") == 1
