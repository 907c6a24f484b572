"""`clientmcp health`: asks a running bridge's `/healthz`, for container health checks and scripts.

A container built FROM scratch has no shell and no curl, so the executable checks itself.
It speaks just enough HTTP/1.1 over a plain socket for one GET (urllib would bring
http.client and email into every frozen image for this alone).
"""

from __future__ import annotations

import socket
from typing import NamedTuple
from urllib.parse import urlsplit

from clientmcp_fast.config import address_text, reachable_host

MAX_ANSWER_BYTES = 64 * 1024


def default_url(host: str, port: int) -> str:
    """The `/healthz` URL of a bridge listening on `host`:`port` (the serve settings)."""
    return f"http://{address_text(reachable_host(host), port)}/healthz"


class Target(NamedTuple):
    """Where to ask: the address to connect to and the request to send."""

    url: str
    host: str
    port: int
    request: bytes


def target(url: str) -> Target:
    """The target of an http:// URL; raises ValueError for any other URL."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// URL (the check asks the bridge itself, behind any TLS)")
    try:
        port = parts.port or 80
    except ValueError:
        raise ValueError(f"{url!r} has no valid port") from None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host_header = parts.netloc.rsplit("@", 1)[-1]
    request = f"GET {path} HTTP/1.1\r\nHost: {host_header}\r\nConnection: close\r\n\r\n".encode("latin-1")
    return Target(url, parts.hostname, port, request)


def problem(asked: Target, timeout: float) -> str | None:
    """None when the target answers 200 with the body `ok`; otherwise what went wrong, in one line."""
    url = asked.url
    where = address_text(asked.host, asked.port)
    try:
        with socket.create_connection((asked.host, asked.port), timeout=timeout) as conn:
            conn.sendall(asked.request)
            answer = b""
            while len(answer) <= MAX_ANSWER_BYTES:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                answer += chunk
    except ConnectionRefusedError:
        return f"nothing listens on {where} (connection refused)"
    except TimeoutError:
        return f"no answer from {where} within {timeout:g} s"
    except OSError as error:
        return f"cannot reach {where}: {error.strerror or error}"
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    status = status_line.split(" ", 2)
    if len(status) < 2 or not status[0].startswith("HTTP/"):
        return f"{url} did not answer with HTTP"
    if status[1] != "200":
        return f"{url} answered {' '.join(status[1:])}"
    if body.strip() != b"ok":
        return f"{url} answered 200 without the body ok"
    return None
