"""A real nats-server on loopback for the tests of a cluster of bridges (docs/scaling.md)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class NatsServer:
    """A nats-server on 127.0.0.1, started and stopped by the tests (it may be stopped and started again)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [NATS_SERVER, "-a", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        give_up = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2):
                return
            if time.monotonic() > give_up or self.process.poll() is not None:
                raise RuntimeError("nats-server did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)
        self.process = None
