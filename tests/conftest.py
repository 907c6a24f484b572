"""Shared fixtures: a real bridge on 127.0.0.1 run by its own event loop in a thread, and tokens for it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import io
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from clientmcp_fast import log
from clientmcp_fast.config import Settings
from clientmcp_fast.core.limits import Limits
from clientmcp_fast.core.tokens import mint
from clientmcp_fast.net.server import Server, new_event_loop

SECRET = b"tests-only-secret-0123456789abcdef0123456789"

T = TypeVar("T")
_LIMIT_FIELDS = {f.name for f in dataclasses.fields(Limits)}


def hear_ctrl_c() -> None:
    """Let the programs the tests start take Ctrl-C as a terminal's foreground job does.

    A run started in the background of a shell script (`make test > log &`) ignores SIGINT, and
    every process it starts inherits that: a Python example app, which keeps an inherited ignore as
    Python does, would never see the Ctrl-C a test sends it. A handled SIGINT reaches a child as
    the default.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: pytest.Config) -> None:
    """Before any test starts a program: see hear_ctrl_c."""
    hear_ctrl_c()


def make_token(role: str, client_id: str, ttl: float = 3600, secret: bytes = SECRET) -> str:
    """A token signed with the test secret."""
    return mint(secret, role, client_id, ttl, time.time())


class RunningBridge:
    """A real bridge listening on 127.0.0.1 with a free port, its loop in a background thread."""

    def __init__(self, server_class: type[Server] = Server, **overrides: Any) -> None:
        self.server_class = server_class
        limits = {k: v for k, v in overrides.items() if k in _LIMIT_FIELDS}
        rest = {k: v for k, v in overrides.items() if k not in _LIMIT_FIELDS}
        self.settings = Settings(
            secrets=(SECRET,),
            signing_secret=SECRET,
            host="127.0.0.1",
            port=rest.pop("port", 0),  # a port chosen before: with --oauth, the public URL names it
            limits=dataclasses.replace(Limits(), **limits),
            **rest,
        )
        self.loop: asyncio.AbstractEventLoop | None = None
        self.server: Server | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="bridge", daemon=True)

    def _run(self) -> None:
        loop = new_event_loop()
        asyncio.set_event_loop(loop)
        self.loop = loop
        try:
            self.server = self.server_class(self.settings, loop)
            loop.run_until_complete(self.server.start())
        except BaseException as error:  # surfaced by start()
            self._error = error
            self._started.set()
            return
        self._started.set()
        loop.run_forever()
        loop.close()

    def start(self) -> RunningBridge:
        self._thread.start()
        self._started.wait(10)
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        """Shut the bridge down gracefully (as on SIGTERM) and stop its loop."""
        if self.loop is None or not self._thread.is_alive():
            return
        future = asyncio.run_coroutine_threadsafe(self.server.shutdown(), self.loop)  # type: ignore[union-attr]
        future.result(15)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    # -- addresses and credentials ----------------------------------------------------------

    @property
    def port(self) -> int:
        return self.server.port  # type: ignore[union-attr]

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.http_url}/mcp"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/connect"

    def token(self, role: str, client_id: str, ttl: float = 3600) -> str:
        return make_token(role, client_id, ttl)

    # -- looking inside, from the test thread -----------------------------------------------

    def call(self, fn: Callable[[Server], T]) -> T:
        """Run `fn(server)` on the bridge's loop and return its result (the state is not thread-safe)."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn(self.server))  # type: ignore[arg-type]
            except BaseException as error:
                future.set_exception(error)

        self.loop.call_soon_threadsafe(run)  # type: ignore[union-attr]
        return future.result(10)

    def wait_for(self, predicate: Callable[[Server], bool], timeout: float = 5.0) -> None:
        """Wait until `predicate(server)` holds on the bridge's loop; fail the test after `timeout`."""
        give_up = time.monotonic() + timeout
        while not self.call(predicate):
            if time.monotonic() > give_up:
                raise AssertionError(f"bridge state never satisfied {predicate}")
            time.sleep(0.01)

    def assert_nothing_leaks(self) -> None:
        """No call in flight, no app connection left, no stream left."""
        self.wait_for(
            lambda s: (
                len(s.bridge.calls) == 0
                and s.bridge.app_connections == 0
                and not s.websockets
                and s.bridge.stream_count == 0
            )
        )


@pytest.fixture
def anyio_backend() -> str:
    """Tests marked `anyio` run on asyncio only, the loop `ClientMCP` and the `mcp` SDK run on here."""
    return "asyncio"


@pytest.fixture
def start_bridge() -> Iterator[Callable[..., RunningBridge]]:
    """A factory: `start_bridge(app_idle_timeout=0.5, ...)` runs a bridge with those settings."""
    running: list[RunningBridge] = []

    def start(**overrides: Any) -> RunningBridge:
        bridge = RunningBridge(**overrides).start()
        running.append(bridge)
        return bridge

    yield start
    for bridge in running:
        bridge.stop()


@pytest.fixture
def bridge(start_bridge: Callable[..., RunningBridge]) -> RunningBridge:
    """A bridge with the default settings."""
    return start_bridge()


@dataclasses.dataclass
class Topology:
    """Where an app connects (`app`) and where agents call (`agent`): one bridge, or two instances.

    With two, they are joined through a real nats-server (docs/scaling.md), and `online` waits
    until the agent's instance has heard of the app's tools, as one process knows them at once.
    """

    app: RunningBridge
    agent: RunningBridge

    @property
    def bridges(self) -> tuple[RunningBridge, ...]:
        return (self.app,) if self.app is self.agent else (self.app, self.agent)

    def sees(self, client_id: str, tools: int, timeout: float = 10.0) -> None:
        """Wait until the agent's bridge knows `client_id`'s app with `tools` tools."""

        def known(server: Server) -> bool:
            app = server.bridge.apps.get(client_id)
            return app is not None and app.toolset is not None and len(app.toolset.tools) == tools

        self.agent.wait_for(known, timeout)


@pytest.fixture(params=["one process", "two instances"])
def start_topology(request: pytest.FixtureRequest, start_bridge: Callable[..., RunningBridge]):
    """A factory of `Topology` with these settings: each test runs in one process, then across two.

    Two instances: the app on one, the agents on the other, joined through a nats-server
    started for the test (tests/e2e/natsserver.py); the outcomes must be the same.
    """
    servers = []
    clustered: list[RunningBridge] = []

    def start(**overrides: Any) -> Topology:
        if request.param == "one process":
            bridge = start_bridge(**overrides)
            return Topology(bridge, bridge)
        from natsserver import NatsServer

        nats = NatsServer()
        nats.start()
        servers.append(nats)
        app, agent = (start_bridge(nats=(nats.url,), **overrides) for _ in range(2))
        clustered.extend((app, agent))
        for bridge in (app, agent):  # subscribed: each hears of the other's apps from now on
            bridge.wait_for(lambda s: s.cluster is not None and s.cluster.directory.connected, 10.0)
        return Topology(app, agent)

    yield start
    for bridge in clustered:  # before their NATS goes (start_bridge's own stop is then a no-op)
        bridge.stop()
    for nats in servers:
        nats.stop()


@pytest.fixture
def topology(start_topology: Callable[..., Topology]) -> Topology:
    """The app's and the agents' bridges with the default settings, in one process or two."""
    return start_topology()


@pytest.fixture
def captured_log():
    """The bridge's log at debug, as text, then as JSON: configure it before starting the bridge."""
    saved = (list(log.logger.handlers), log.logger.level, log.logger.propagate, log.debug_enabled)
    stream = io.StringIO()

    def start(form: str) -> io.StringIO:
        log.configure("debug", stream, form)
        return stream

    yield start
    log.logger.handlers[:], log.logger.level, log.logger.propagate, log.debug_enabled = saved
