"""The process's one NATS connection: the cluster's (net/nats.py) and the generations bucket's (net/nats_state.py).

Used only with `--nats` or `--state nats`; a single process never imports it (nor nats-py).
One place holds what every use of NATS needs alike (docs/scaling.md, Settings):

- credentials: user and password or a token in the URLs (nats-py reads them there), or a creds
  file named by CLIENTMCP_NATS_CREDS, signed by net/nkeys.py rather than the nkeys package;
  `tls://` URLs use TLS with the system's certificate authorities;
- one retry policy: an attempt times out after CONNECT_TIMEOUT_SECONDS and a server is tried
  again after RECONNECT_SECONDS; once made, a bridge's connection reconnects for ever. Only
  how long the first connection is waited for differs: `open` gives up when every server
  failed twice (`--state nats` must read the bucket before the bridge listens; a command
  fails), `wait_open` keeps trying (the cluster serves its own apps meanwhile);
- a server that refuses the credentials, said in a warning at the first refusal (and again
  after any success), not at each retry;
- its users (the cluster, the bucket's follower) told when it is lost and when it is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
from typing import Any, Callable

from clientmcp_fast.log import logger

RECONNECT_SECONDS = 0.5
CONNECT_TIMEOUT_SECONDS = 2
# What a shutdown gives NATS to take what is queued (the cluster's GONE), then to close.
CLOSE_SECONDS = 1.0

# What a NATS server answers to credentials it refuses: -ERR 'Authorization Violation', and
# 'User Authentication Expired' or 'User Authentication Revoked' for a JWT past its time.
_REFUSED = re.compile(r"authorization violation|authentication (expired|revoked)", re.IGNORECASE)


class NatsUnreachable(Exception):
    """No server took the connection in `open`'s attempts; one line naming the servers, never the credentials."""


def where(urls: tuple[str, ...] | list[str]) -> str:
    """The servers as a log line may name them: without user, password or token."""
    shown = []
    for url in urls:
        scheme, _, rest = url.partition("://")
        shown.append(f"{scheme}://{rest.rsplit('@', 1)[-1]}")
    return ", ".join(shown)


def error_text(error: BaseException) -> str:
    """What a nats-py error says, for one line: its description, else its text, else its type."""
    description = getattr(error, "description", None)
    return description or str(error) or type(error).__name__


def creds_options(path: str) -> dict[str, Any]:
    """nats.connect's options that sign with the creds file at `path` (net/nkeys.py); ConfigError if unusable."""
    from clientmcp_fast.config import ConfigError
    from clientmcp_fast.net.nkeys import CredsError, CredsSigner

    def unusable(error: CredsError) -> None:
        logger.warning(
            "nats: CLIENTMCP_NATS_CREDS %r: %s; signing with the file as it was last read", path, error
        )

    try:
        return CredsSigner(path, on_error=unusable).options()
    except CredsError as error:
        raise ConfigError(f"CLIENTMCP_NATS_CREDS: {path!r}: {error}") from None


def credentials() -> dict[str, Any]:
    """nats.connect's options for the credentials the URLs do not carry: the creds file of the environment, if any."""
    path = os.environ.get("CLIENTMCP_NATS_CREDS")
    return creds_options(path) if path else {}


Watcher = Callable[[], None]  # must not raise: nats-py's reconnecting task calls it


def _tell(watchers: list[Watcher], what: str) -> None:
    """Call each watcher; one that raises is logged, and the others are still told."""
    for watcher in list(watchers):
        try:
            watcher()
        except Exception:  # noqa: BLE001 - nats-py's reconnecting task calls this: it must go on
            logger.exception("nats: a user of the connection failed to take its %s", what)


async def _cancelled(task: asyncio.Task) -> None:
    """Cancel `task` and wait for it to end, for at most CLOSE_SECONDS.

    A cancellation can be swallowed: nats-py's connect, retrying a server that refused its
    credentials, catches it while closing its own attempt and goes on waiting to retry. So the
    task is cancelled again until it ends, and a shutdown never waits on it for longer.
    """
    give_up = asyncio.get_running_loop().time() + CLOSE_SECONDS
    while not task.done() and asyncio.get_running_loop().time() < give_up:
        task.cancel()
        await asyncio.wait({task}, timeout=0.05)
    if task.done() and not task.cancelled():
        task.exception()  # retrieved: its failure was reported when it happened, or does not matter now


class NatsConnection:
    """One connection to the `urls`, for every user of NATS in the process; ConfigError if unusable as set.

    `reconnect=False` is a command's connection (`clientmcp revoke`): made once or failed.
    """

    def __init__(self, urls: tuple[str, ...] | list[str], *, reconnect: bool = True) -> None:
        try:
            import nats  # noqa: F401 - only with --nats
        except ImportError:
            from clientmcp_fast.config import ConfigError

            raise ConfigError("--nats needs nats-py: pip install 'clientmcp-fast[nats]'") from None
        self.urls = list(urls)
        # Names the connection on the server (`clientmcp-<instance>`) and the process in the cluster.
        self.instance = secrets.token_hex(6)
        self.reconnect = reconnect
        self.nc: Any = None
        self.reconnects = 0  # times it came back after it was lost (read by the metrics collector)
        self._credentials = credentials()
        self._on_lost: list[Watcher] = []
        self._on_back: list[Watcher] = []
        self._opening: asyncio.Task | None = None  # `wait_open`'s attempts, in the background
        self._quiet = False  # within `open`: a failure makes its error, not a warning
        self._failure: BaseException | None = None  # the last attempt's, which `open` names
        self._refusal: str | None = None  # the last refusal of our credentials, said once
        self._closing = False

    @property
    def connected(self) -> bool:
        """Whether the connection is up now (not yet made, lost, or closed: False)."""
        return self.nc is not None and self.nc.is_connected

    def watch(self, lost: Watcher, back: Watcher) -> None:
        """Have `lost()` called when the connection is lost, and `back()` when it is back."""
        self._on_lost.append(lost)
        self._on_back.append(back)

    async def open(self) -> Any:
        """The nats-py client, connected now if it is not yet; NatsUnreachable when every server failed twice."""
        if self.nc is not None:
            return self.nc
        self._quiet = True
        try:
            # max_reconnect_attempts=1: each server is tried twice, then connect() fails (0 would
            # try for ever); made, a bridge's connection then reconnects for ever (below).
            nc = await self._connect(max_reconnect_attempts=1)
        except Exception as error:  # noqa: BLE001 - refused, timed out, TLS, authorization: all one line
            reason = self._failure or error
            raise NatsUnreachable(
                f"cannot connect to NATS at {where(self.urls)}: {error_text(reason)}"
            ) from None
        finally:
            self._quiet = False
        if self.reconnect:
            nc.options["max_reconnect_attempts"] = -1
        return self._made(nc)

    async def wait_open(self) -> Any:
        """The nats-py client once connected, tried in the background for as long as it takes."""
        if self.nc is not None:
            return self.nc
        if self._opening is None:
            self._opening = asyncio.get_running_loop().create_task(self._open_for_ever())
        # Shielded: a user that stops waiting (a cluster stopped) does not end the attempts of the others.
        return await asyncio.shield(self._opening)

    async def _open_for_ever(self) -> Any:
        while True:
            try:
                nc = await self._connect(max_reconnect_attempts=-1)  # nats-py retries every server itself
                break
            except Exception as error:  # noqa: BLE001 - what nats-py does not retry by itself: again
                logger.warning("nats: cannot connect (%s); retrying", error_text(error))
                await asyncio.sleep(RECONNECT_SECONDS)
        return self._made(nc)

    async def _connect(self, max_reconnect_attempts: int) -> Any:
        import nats

        return await nats.connect(
            servers=self.urls,
            name=f"clientmcp-{self.instance}",
            # The cluster must not hear its own messages (docs/scaling.md, Threat model); JetStream's
            # answers and deliveries come from the server, which no_echo leaves alone.
            no_echo=True,
            allow_reconnect=self.reconnect,
            max_reconnect_attempts=max_reconnect_attempts,
            reconnect_time_wait=RECONNECT_SECONDS,
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
            disconnected_cb=self._lost,
            reconnected_cb=self._back,
            error_cb=self._error,
            **self._credentials,
        )

    def _made(self, nc: Any) -> Any:
        self.nc = nc
        self._refusal = None
        return nc

    async def _lost(self) -> None:
        if self._closing or self.nc is None:
            return  # our own close, or a failed first attempt: nobody was told it was up
        _tell(self._on_lost, "loss")

    async def _back(self) -> None:
        self.reconnects += 1
        self._refusal = None
        _tell(self._on_back, "return")

    async def _error(self, error: BaseException) -> None:
        self._failure = error
        text = str(error) or type(error).__name__
        if self._quiet or not _REFUSED.search(text):
            logger.debug("nats: %s", text)
            return
        # Said once per refusal, not at every retry (twice a second): the instance serves its
        # own apps meanwhile, and the refusal may be mended on the NATS side without a restart.
        if text != self._refusal:
            self._refusal = text
            logger.warning(
                "nats: the server refused this instance's credentials (%s): apps on other "
                "instances are unreachable until it accepts them; retrying (CLIENTMCP_NATS, "
                "CLIENTMCP_NATS_CREDS: docs/scaling.md, Settings)",
                text.removeprefix("nats: "),
            )

    async def close(self) -> None:
        """Send what is queued (the cluster's GONE), then leave NATS; attempts still under way end."""
        self._closing = True
        opening, self._opening = self._opening, None
        if opening is not None:
            await _cancelled(opening)
        nc = self.nc
        if nc is None or nc.is_closed:
            return
        for step in (nc.flush, nc.close):
            with contextlib.suppress(Exception):  # a connection already lost: nothing left to send
                await asyncio.wait_for(step(), CLOSE_SECONDS)
