"""`clientmcp serve --workers N`: N bridge processes on one port (SO_REUSEPORT), joined through NATS.

The kernel spreads new connections over the processes; each is a whole bridge and a member
of the cluster of `--nats` (docs/scaling.md, Workers), so an agent on one reaches an app on
another. This process only starts them, starts again one that ends on its own, and passes
SIGTERM and SIGINT on (each worker then shuts down gracefully, docs/protocol.md, Shutdown).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from clientmcp_fast.log import logger

POLL_SECONDS = 0.2
STOP_SECONDS = 10.0  # a worker's graceful shutdown takes at most a few seconds
BAD_SETTING = 2  # a worker's exit status for a setting it cannot use (docs/configuration.md, Exit status)


def _command() -> list[str]:
    if getattr(sys, "frozen", False):  # the PyInstaller build: the executable is the command
        return [sys.executable, *sys.argv[1:]]
    return [sys.executable, "-m", "clientmcp_fast", *sys.argv[1:]]


def run_workers(count: int, worker_env: str) -> int:
    """Run `count` workers until SIGTERM or SIGINT; the exit status of `serve`."""
    command = _command()
    stopping = False

    def start(index: int) -> subprocess.Popen[bytes]:
        # The index stays with the slot, so a worker started again keeps its metrics port.
        return subprocess.Popen(command, env={**os.environ, worker_env: str(index)})

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    workers = [start(index) for index in range(count)]
    logger.info("started %d workers: %s", count, " ".join(str(w.pid) for w in workers))
    status = 0
    while not stopping:
        time.sleep(POLL_SECONDS)
        for index, worker in enumerate(workers):
            code = worker.poll()
            if code is None or stopping:
                continue
            if code == BAD_SETTING:  # the same setting stops every worker: stop, as one process would
                logger.error("a worker could not start (exit %d): stopping", code)
                stopping, status = True, BAD_SETTING
                break
            logger.warning("worker %d ended with status %d: starting another", worker.pid, code)
            workers[index] = start(index)
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
    give_up = time.monotonic() + STOP_SECONDS
    for worker in workers:
        try:
            worker.wait(max(0.1, give_up - time.monotonic()))
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    return status
