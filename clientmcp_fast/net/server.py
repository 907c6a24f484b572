"""The bridge process: the listener, its connections, the core's timers, and a graceful end."""

from __future__ import annotations

import asyncio
import errno
import os
import resource
import signal
import socket
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from clientmcp_fast import log
from clientmcp_fast.config import ConfigError, Settings, address_text
from clientmcp_fast.core.agent import AgentEndpoint
from clientmcp_fast.core.bridge import Bridge
from clientmcp_fast.core.channel import AppChannel, client_channel_handshake
from clientmcp_fast.core.tokens import TokenVerifier
from clientmcp_fast.log import logger
from clientmcp_fast.net.http import HttpProtocol
from clientmcp_fast.net.websocket import Links, WebSocketProtocol

if TYPE_CHECKING:
    from clientmcp_fast.core.limits import Limits
    from clientmcp_fast.generation_store import GenerationFollower
    from clientmcp_fast.metrics import MetricsListener
    from clientmcp_fast.net.nats import NatsCluster
    from clientmcp_fast.net.nats_connection import NatsConnection
    from clientmcp_fast.net.oauth import OAuthEndpoints
    from clientmcp_fast.otel import OtelCallTracing

SHUTDOWN_GRACE_SECONDS = 4.0
# Out of open files, libuv accepts each new connection and closes it at once (its reserved
# descriptor makes room), so nothing reaches the bridge: it looks again this often to log the
# recovery, and warns of a new episode at most this often.
FILES_RECHECK_SECONDS = 1.0
FILES_WARN_EVERY_SECONDS = 60.0
# Descriptors the process holds besides its connections (listener, loop, logs, libraries):
# only this close to the limit does a new connection pay for the look.
FILES_SPARE = 64


def timeout_sweep_every(limits: Limits) -> float:
    """How often connections are looked at for their head and keep-alive timeouts (docs/limits.md)."""
    # One sweep over all connections instead of a timer per connection re-armed on every
    # request: cheaper on the hot path, and exact enough for 10-75 s timeouts.
    return max(0.01, min(1.0, limits.head_timeout / 4, limits.keepalive_timeout / 4))


def app_connection_limit(limits: Limits) -> int:
    """App connections allowed: the setting, else the open-file limit (raised) less 10 % for agents."""
    if limits.max_app_connections:
        return limits.max_app_connections
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for target in (hard, 1 << 20):
        if target == resource.RLIM_INFINITY or target <= soft:
            continue
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
            break
        except (ValueError, OSError):
            continue
    return max(1, int(soft * 0.9))


def new_session_id() -> bytes:
    """A fresh MCP session id for a legacy `initialize`: 16 random bytes, as hex."""
    return os.urandom(16).hex().encode()  # secrets.token_hex, without importing `secrets`


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A uvloop loop when uvloop is installed, else asyncio's own (which works, slower)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on every POSIX platform
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def listen_hosts(host: str, loop: asyncio.AbstractEventLoop) -> str | list[bytes]:
    """`host` as `loop.create_server` takes it: for uvloop, an ASCII host in bytes.

    uvloop encodes a str host with the idna codec, whose first use imports encodings.idna,
    stringprep and unicodedata: about 0.2 MB, resident for the bridge's whole life, for a
    host that is the same in ASCII. asyncio's own loop takes str hosts only.
    """
    if host and host.isascii() and type(loop).__module__.partition(".")[0] == "uvloop":
        return [host.encode("ascii")]
    return host


def listen_failure(error: OSError) -> str:
    """Why a listen failed, in the system's words (uvloop's own message repeats the address)."""
    if isinstance(error, socket.gaierror) or not error.errno:
        return error.strerror or str(error)
    return os.strerror(error.errno)


def call_tracing(environ: Mapping[str, str]) -> OtelCallTracing | None:
    """The bridge's own tracer when OpenTelemetry's variables ask for one (docs/operations.md, Tracing); else None.

    Without an OTEL_ variable, clientmcp_fast.otel is not even imported, so that a bridge that
    does not trace loads nothing of OpenTelemetry.
    """
    if not any(name.startswith("OTEL_") for name in environ):
        return None
    from clientmcp_fast.otel import call_tracing as otel_call_tracing

    return otel_call_tracing(environ)


async def _follow_generations(server: Server, state: str) -> GenerationFollower:
    """Token generations from the state store, followed from now on (docs/configuration.md, Revocation).

    A store that cannot be used stops the bridge before it serves, as a bad setting does: a
    bridge that ignored the store would accept every revoked token.
    """
    from clientmcp_fast.generation_store import StoreError
    from clientmcp_fast.state import new_follower  # sqlite3 only when used

    follower = new_follower(state, server.nats, server.verifier, server.bridge, server.loop)
    try:
        await follower.start()  # a file is read in the follower's thread: the loop never waits for it
    except StoreError as error:
        raise ConfigError(str(error)) from None
    return follower


class Server:
    """Accepts connections, drives the bridge's timers and coalesced writes, and shuts down."""

    def __init__(self, settings: Settings, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.settings = settings
        self.limits = settings.limits
        self.loop = loop or asyncio.get_running_loop()
        self.time = self.loop.time
        self.verifier = TokenVerifier(settings.secrets)
        self._sync_wall_clock()
        self.events = log.event_log(self.loop.call_soon)  # what is logged (docs/operations.md, Log events)
        self.tracing = call_tracing(os.environ)  # a span per call, when OTEL_ variables ask for it
        self.bridge = Bridge(
            self.limits,
            self.verifier,
            self.wake,
            app_connection_limit(self.limits),
            new_session_id=new_session_id,
            events=self.events,
            tracing=self.tracing,
        )
        self.agents = AgentEndpoint(self.bridge, self.verifier, settings.allowed_origins)
        self.http_connections: set[HttpProtocol] = set()
        # A list, each protocol holding its place (`WebSocketProtocol.index`): a set's sparse
        # table costs an idle app several times a list's slot (docs/benchmarks.md, Idle footprint).
        self.websockets: list[WebSocketProtocol] = []
        self.shutting_down = False
        self.port = settings.port
        self._listener: asyncio.base_events.Server | None = None
        self.links = Links(self)  # what app connections share, and their coalesced writes
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._http_sweep: asyncio.TimerHandle | None = None
        limits = self.limits
        self._http_sweep_every = timeout_sweep_every(limits)
        self._probe_fd = -1  # the listener's descriptor, duplicated to learn whether one is left
        self._files_near = 0  # connections past which a new one checks that a descriptor is left
        self._files_out = False  # no descriptor left, as of the last look
        self._files_warned = False  # and that episode was logged
        self._files_warned_at: float | None = None
        # with a state store (--state): a file, or the cluster's bucket
        self.generations: GenerationFollower | None = None
        # with --nats: the process's one NATS connection, the cluster's and the bucket's
        self.nats: NatsConnection | None = None
        self.cluster: NatsCluster | None = None  # with --nats (docs/scaling.md)
        self.metrics: MetricsListener | None = None  # with --metrics (docs/operations.md)
        self.oauth: OAuthEndpoints | None = None  # with --oauth on (docs/oauth.md)
        if settings.oauth:
            from clientmcp_fast.net.oauth import OAuthEndpoints  # only with --oauth on

            self.oauth = OAuthEndpoints(self)
            self.verifier.resource_prefix = f"{self.oauth.authorization.issuer}/apps/"

    async def start(self) -> None:
        """Listen; `port` is the bound port afterwards (useful with port 0)."""
        host = self.settings.host
        if self.settings.nats and self.nats is None:
            from clientmcp_fast.net.nats_connection import NatsConnection  # nats-py only with --nats

            self.nats = NatsConnection(self.settings.nats)
        if self.settings.state is not None and self.generations is None:
            try:
                self.generations = await _follow_generations(self, self.settings.state)
            except BaseException:
                await self._let_go()
                raise
        try:
            self._listener = await self.loop.create_server(
                lambda: HttpProtocol(self),
                listen_hosts(host, self.loop),
                self.settings.port,
                backlog=4096,
                reuse_address=True,
                reuse_port=self.settings.reuse_port or None,
            )
        except OSError as error:
            await self._let_go()
            # A port taken, an address not on this machine, a name that does not resolve: the
            # operator changes a setting, so it is reported and exits as a bad setting does.
            where = address_text(host, self.settings.port)
            raise ConfigError(f"cannot listen on {where}: {listen_failure(error)}") from None
        self.port = self._listener.sockets[0].getsockname()[1]
        if self.nats is not None and self.cluster is None:
            from clientmcp_fast.net.nats import NatsCluster  # nats-py only with --nats

            self.cluster = NatsCluster(self, self.nats)
            await self.cluster.start()
        if self.settings.metrics is not None and self.metrics is None:
            await self._start_metrics(*self.settings.metrics)
        self._probe_fd = self._listener.sockets[0].fileno()
        self._files_near = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - FILES_SPARE
        logger.info("listening on %s", address_text(host, self.port))

    async def _start_metrics(self, host: str, port: int) -> None:
        from clientmcp_fast.metrics import MetricsListener  # prometheus_client only when asked for

        metrics = MetricsListener(self)
        try:
            await metrics.start(host, port)
        except OSError as error:
            self._listener.close()  # type: ignore[union-attr]
            await self._let_go()
            where = address_text(host, port)
            raise ConfigError(f"--metrics: cannot listen on {where}: {listen_failure(error)}") from None
        self.metrics = metrics
        logger.info("metrics on http://%s/metrics", address_text(host, metrics.port))

    async def _let_go(self) -> None:
        """What a start that failed had opened: the generations' follower, the cluster, the NATS connection."""
        if self.generations is not None:
            await self.generations.stop()
            self.generations = None
        if self.cluster is not None:
            await self.cluster.stop()
            self.cluster = None
        if self.nats is not None:
            await self.nats.close()
            self.nats = None
        if self.tracing is not None:
            self.tracing.shut_down()  # no call has started: nothing to wait for
            self.tracing = None

    async def run(self) -> None:
        """Serve until SIGTERM or SIGINT, then shut down gracefully (docs/protocol.md, Shutdown)."""
        stop = self.loop.create_future()
        # Before the listeners open: a signal sent as soon as /healthz answers (while the metrics
        # listener or NATS still start) must stop gracefully too, not kill with the default action.
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
        try:
            await self.start()
            await stop
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                self.loop.remove_signal_handler(sig)
                # A second signal must not kill the shutdown under way with the default action: a
                # process group's SIGTERM reaches the bridge again through each bootloader of
                # dist/clientmcp, and the shutdown ends within 5 s by itself (docs/protocol.md, Shutdown).
                signal.signal(sig, signal.SIG_IGN)
        await self.shutdown()

    # -- connections ------------------------------------------------------------------------

    def admit_http(self, conn: HttpProtocol) -> bool:
        """Take a new HTTP connection, unless the total cap is reached (docs/configuration.md, Settings)."""
        if len(self.http_connections) >= self.limits.max_agent_connections or self.shutting_down:
            return False
        self.http_connections.add(conn)
        if self._http_sweep is None:
            self._http_sweep = self.loop.call_later(self._http_sweep_every, self._sweep_http)
        if (
            not self._files_out
            and len(self.http_connections) + len(self.websockets) >= self._files_near
            and self._no_file_left()
        ):
            self._files_out = True
            now = self.loop.time()
            self._files_warned = (
                self._files_warned_at is None or now - self._files_warned_at >= FILES_WARN_EVERY_SECONDS
            )
            if self._files_warned:
                self._files_warned_at = now
                logger.warning(
                    "open-file limit reached (%d): new connections are closed at once until some end",
                    resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                )
            self.loop.call_later(FILES_RECHECK_SECONDS, self._recheck_files)
        return True

    def _no_file_left(self) -> bool:
        """Whether this process can open no further descriptor (docs/reliability.md, Descriptor exhaustion)."""
        if self._probe_fd < 0:
            return False
        try:
            os.close(os.dup(self._probe_fd))
        except OSError as error:
            return error.errno in (errno.EMFILE, errno.ENFILE)
        return False

    def _recheck_files(self) -> None:
        if self._no_file_left() and not self.shutting_down:
            self.loop.call_later(FILES_RECHECK_SECONDS, self._recheck_files)
            return
        self._files_out = False
        if self._files_warned and not self.shutting_down:
            logger.info("open files available again: new connections are served")

    def _sync_wall_clock(self) -> None:
        # Tokens carry Unix times while `now` is the loop's monotonic clock; the offset is
        # refreshed every sweep so that a corrected system clock is followed.
        self.verifier.wall_offset = time.time() - self.loop.time()

    def _sweep_http(self) -> None:
        self._sync_wall_clock()
        now = self.loop.time()
        for conn in list(self.http_connections):
            if conn.deadline is not None and conn.deadline <= now:
                conn.expire()
        self._http_sweep = (
            self.loop.call_later(self._http_sweep_every, self._sweep_http) if self.http_connections else None
        )

    def handshake(self, headers: dict[bytes, bytes]) -> tuple[bytes, str | None]:
        """The answer to a WebSocket upgrade on /connect and the token it offered; raises HandshakeError."""
        return client_channel_handshake(headers)

    def hand_off(self, transport: asyncio.Transport, token: str | None, tail: bytes) -> None:
        """An upgrade was accepted: the transport now runs the app's channel."""
        protocol = WebSocketProtocol(self, transport)
        transport.set_protocol(protocol)
        protocol.index = len(self.websockets)
        self.websockets.append(protocol)
        protocol.start(self.new_session(protocol), token, tail)

    def new_session(self, protocol: WebSocketProtocol) -> AppChannel:
        """What runs on an accepted WebSocket: an app's channel to the bridge."""
        return AppChannel(self.bridge, protocol, self.loop.time())

    def websocket_closed(self, protocol: WebSocketProtocol) -> None:
        index = protocol.index
        if index < 0:
            return
        protocol.index = -1
        last = self.websockets.pop()  # the last takes the closed one's place
        if last is not protocol:
            self.websockets[index] = last
            last.index = index

    # -- the core's timers ------------------------------------------------------------------

    def wake(self, when: float) -> None:
        """The bridge has a deadline at `when` (-inf: at once): make sure the timer fires by then."""
        when = max(when, self.loop.time())
        if self._timer_at is not None and self._timer_at <= when:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self.loop.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        now = self.loop.time()
        self.bridge.on_timer(now)
        when = self.bridge.next_deadline()
        if when is not None:
            self.wake(when)

    # -- the end ----------------------------------------------------------------------------

    async def shutdown(self) -> None:
        """Stop accepting, fail calls, close apps with 1001, end streams; all within a few seconds."""
        if self.shutting_down:
            return
        self.shutting_down = True
        logger.info("shutting down")
        if self._listener is not None:
            self._listener.close()
        # Connections first: idle ones close, busy ones learn that their answer is their last
        # (it says `connection: close`), before the bridge fails the calls in flight.
        for conn in list(self.http_connections):
            conn.shutdown()
        self.bridge.shutdown(self.loop.time())
        self.links.flush()
        # The calls' spans have all ended: they are exported while the connections close, in the same bound.
        exporting = self.tracing.shut_down() if self.tracing is not None else None
        give_up = self.loop.time() + SHUTDOWN_GRACE_SECONDS
        while (self.http_connections or self.websockets) and self.loop.time() < give_up:
            await asyncio.sleep(0.02)
        for conn in list(self.http_connections):
            conn.transport.abort()
        for protocol in list(self.websockets):
            protocol.transport.abort()
        for handle in (self._timer, self._http_sweep):
            if handle is not None:
                handle.cancel()
        if self.generations is not None:
            await self.generations.stop()
        if self.cluster is not None:
            await self.cluster.stop()
        if self.nats is not None:
            await self.nats.close()  # after the cluster's GONE
        if self.metrics is not None:
            await self.metrics.stop()
        if self._listener is not None:
            await self._listener.wait_closed()
        if exporting is not None:
            while exporting.is_alive() and self.loop.time() < give_up:
                await asyncio.sleep(0.02)
            if exporting.is_alive():
                logger.warning(
                    "tracing: spans not exported within %g s of the shutdown are lost", SHUTDOWN_GRACE_SECONDS
                )
        self.events.flush()
        logger.info("stopped")
