"""A real nats-server on loopback for the tests of a cluster of bridges (docs/scaling.md)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class NatsServer:
    """A nats-server on 127.0.0.1, started and stopped by the tests (it may be stopped and started again).

    With JetStream (`-js`) unless told otherwise, for `--state nats`
    (docs/configuration.md, Revocation); its store directory outlives a stop and a start, as a
    server's disk does.
    """

    def __init__(self, jetstream: bool = True) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.jetstream = jetstream
        self._store = tempfile.TemporaryDirectory(prefix="nats-js-")

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        jetstream = ["-js", "-sd", self._store.name] if self.jetstream else []
        self.process = subprocess.Popen(
            [NATS_SERVER, "-a", "127.0.0.1", "-p", str(self.port), *jetstream],
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
