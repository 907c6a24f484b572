"""Token generations in a NATS JetStream key-value bucket for a cluster (docs/configuration.md, Revocation).

Every instance reads the bucket `clientmcp_generations` at start and then watches it, so a
raise that `clientmcp revoke` writes anywhere reaches the in-memory table of every instance
(core/generations.py) within a NATS round trip, and closes the revoked app wherever it is
connected. The verifier never waits on NATS: it reads the table in memory.

A key is the role, a dot, and the hex of the client ID's UTF-8 (`client.616c696365` for
`alice`): KV keys allow only `A-Z a-z 0-9 - / _ = .`, and hex maps every client ID to one
token of `[0-9a-f]`, as the cluster's subjects do (net/nats.py). A value is the generation
in ASCII decimal. A key absent or deleted means generation 0.

Used only with `--state nats`; a single process never imports it (nor nats-py). A bridge
reads and watches the bucket through the process's one NATS connection, the cluster's
(net/nats_connection.py); `clientmcp revoke` and `clientmcp token` open one of the same kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import TYPE_CHECKING, Any

from clientmcp_fast.core.generations import MAX_GENERATION, Generations
from clientmcp_fast.core.tokens import CLIENT_ID_PATTERN, ROLES, TokenVerifier
from clientmcp_fast.generation_store import StoreError, announce_changes
from clientmcp_fast.log import logger
from clientmcp_fast.net.nats_connection import NatsConnection, NatsUnreachable, error_text, where

if TYPE_CHECKING:
    from clientmcp_fast.core.bridge import Bridge

BUCKET = "clientmcp_generations"
# Each JetStream request (bucket info, get, update, watch set-up) fails after this.
REQUEST_TIMEOUT_SECONDS = 5
# A re-read after NATS came back that fails (JetStream not ready yet) is tried again this often.
RETRY_SECONDS = 0.5
# Compare-and-set rounds one revoke tries while other revokes of the same key win the race.
RAISE_ATTEMPTS = 100

_GENERATION = re.compile(rb"0|[1-9][0-9]{0,18}")
_HEX = re.compile(r"[0-9a-f]+")


class NatsStateError(StoreError):
    """The bucket cannot be reached or used; the message is one line for the operator."""


# -- keys and values ------------------------------------------------------------------------------


def generation_key(role: str, client_id: str) -> str:
    """The bucket key of a generation: `role.<hex of the client ID's UTF-8>`."""
    if role not in ROLES:
        raise ValueError(f"role must be client or agent, not {role!r}")
    return f"{role}.{client_id.encode('utf-8').hex()}"


def key_fields(key: str) -> tuple[str, str] | None:
    """(role, client ID) of a bucket key, or None for a key this bridge never writes."""
    role, dot, encoded = key.partition(".")
    if not dot or role not in ROLES or not _HEX.fullmatch(encoded) or len(encoded) % 2:
        return None
    try:
        client_id = bytes.fromhex(encoded).decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not CLIENT_ID_PATTERN.fullmatch(client_id):
        return None
    return role, client_id


def generation_value(generation: int) -> bytes:
    """A generation as the bucket keeps it: ASCII decimal."""
    return str(generation).encode("ascii")


def parse_generation(value: bytes | None) -> int | None:
    """The generation a value holds, or None when it is not one (0 to 2**63 - 1, plain decimal)."""
    if value is None or not _GENERATION.fullmatch(value):
        return None
    generation = int(value)
    return generation if generation <= MAX_GENERATION else None


# -- the bucket -----------------------------------------------------------------------------------


def _connection(urls: tuple[str, ...]) -> NatsConnection:
    """A command's NATS connection (made once or failed); NatsStateError if the settings cannot make one."""
    from clientmcp_fast.config import ConfigError

    if not urls:
        raise NatsStateError("--state nats needs the NATS servers: set CLIENTMCP_NATS or --nats")
    try:
        return NatsConnection(urls, reconnect=False)
    except ConfigError as error:  # nats-py missing, a creds file unusable
        raise NatsStateError(str(error)) from None


async def _open(connection: NatsConnection) -> Any:
    """The connection's nats-py client, made now if need be; NatsStateError saying why it cannot be."""
    try:
        return await connection.open()
    except NatsUnreachable as error:
        raise NatsStateError(f"state nats: {error}") from None


async def open_bucket(nc: Any, urls: tuple[str, ...]) -> Any:
    """The generations bucket, created if missing; NatsStateError when JetStream is not there."""
    import nats.errors
    import nats.js.errors

    js = nc.jetstream(timeout=REQUEST_TIMEOUT_SECONDS)
    try:
        try:
            return await js.key_value(BUCKET)
        except nats.js.errors.BucketNotFoundError:
            pass
        try:
            # history=1: only the current generation is kept; an operator may create the bucket
            # first with the replicas a NATS cluster wants (docs/configuration.md, Generations in a cluster).
            return await js.create_key_value(
                bucket=BUCKET, history=1, description="clientmcp token generations"
            )
        except nats.js.errors.APIError:
            return await js.key_value(BUCKET)  # another instance made it at the same moment
    except (nats.js.errors.ServiceUnavailableError, nats.errors.NoRespondersError):
        raise NatsStateError(
            f"state nats: NATS at {where(urls)} has no JetStream: start nats-server with -js "
            "(and a store directory, -sd), or enable JetStream for this account"
        ) from None
    except (nats.errors.Error, asyncio.TimeoutError) as error:
        raise NatsStateError(f"state nats: bucket {BUCKET} at {where(urls)}: {error_text(error)}") from None


def entry_row(entry: Any) -> tuple[str, str, int] | None:
    """A watched entry as a row (role, client ID, generation); a deletion is generation 0; None if not ours."""
    fields = key_fields(entry.key)
    if entry.operation in ("DEL", "PURGE"):
        generation: int | None = 0
    else:
        generation = parse_generation(entry.value)
    if fields is None or generation is None:
        logger.warning(
            "nats state: ignored %s=%r in bucket %s: not a generation of ours", entry.key, entry.value, BUCKET
        )
        return None
    return fields[0], fields[1], generation


async def read_all(kv: Any) -> tuple[Any, list[tuple[str, str, int]]]:
    """A watcher of the whole bucket and every row it holds now; the watcher then brings each change."""
    watcher = await kv.watchall()
    rows = []
    try:
        while (entry := await watcher.updates(REQUEST_TIMEOUT_SECONDS)) is not None:
            row = entry_row(entry)
            if row is not None:
                rows.append(row)
    except BaseException:
        await _stop(watcher)
        raise
    return watcher, rows


async def _stop(watcher: Any) -> None:
    try:
        await watcher.stop()
    except Exception:  # noqa: BLE001 - a watcher on a lost connection: nothing left to stop
        pass


async def current(kv: Any, role: str, client_id: str) -> tuple[int, int]:
    """The generation of a role and client ID, and the revision that holds it (0: none)."""
    import nats.js.errors

    try:
        entry = await kv.get(generation_key(role, client_id))
    except nats.js.errors.KeyNotFoundError as missing:  # KeyDeletedError too: its revision is in the entry
        entry = getattr(missing, "entry", None)
        return 0, entry.revision if entry is not None else 0
    generation = parse_generation(entry.value)
    if generation is None:
        raise NatsStateError(
            f"state nats: key {entry.key} of bucket {BUCKET} holds {entry.value!r}, not a generation"
        )
    return generation, entry.revision


async def raise_generation(kv: Any, role: str, client_id: str) -> int:
    """Add one to a generation, compare-and-set against other writers; the new generation."""
    import nats.js.errors

    key = generation_key(role, client_id)
    for _ in range(RAISE_ATTEMPTS):
        generation, revision = await current(kv, role, client_id)
        if generation >= MAX_GENERATION:
            raise NatsStateError(f"the {role} generation of {client_id} is at its largest, {MAX_GENERATION}")
        try:
            # last=revision: written only if nobody wrote the key since it was read (0: absent).
            await kv.update(key, generation_value(generation + 1), last=revision)
        except nats.js.errors.KeyWrongLastSequenceError:
            continue
        return generation + 1
    raise NatsStateError(f"state nats: {RAISE_ATTEMPTS} other writers of {key} won in a row; try again")


class NatsBucketStore:
    """The bucket as `clientmcp revoke` and `clientmcp token` use it: one call at a time, on a loop of its own."""

    def __init__(self, urls: tuple[str, ...]) -> None:
        self.urls = urls
        self.path = f"NATS bucket {BUCKET}"  # how `clientmcp token` names where it read
        self._connection = _connection(urls)
        self._loop = asyncio.new_event_loop()
        try:
            nc = self._run(_open(self._connection))
            self._kv = self._run(open_bucket(nc, urls))
            self._seq = self._run(self._last_sequence())
        except BaseException:
            self.close()
            raise

    def _run(self, work: Any) -> Any:
        import nats.errors

        try:
            return self._loop.run_until_complete(work)
        except (nats.errors.Error, asyncio.TimeoutError) as error:
            raise NatsStateError(
                f"state nats: bucket {BUCKET} at {where(self.urls)}: {error_text(error)}"
            ) from None

    async def _last_sequence(self) -> int:
        return (await self._kv.status()).stream_info.state.last_seq

    def rows(self) -> list[tuple[str, str, int]]:
        async def read() -> list[tuple[str, str, int]]:
            watcher, rows = await read_all(self._kv)
            await _stop(watcher)
            return rows

        return self._run(read())

    def changed(self) -> bool:
        # Every write to the bucket takes the next sequence of its stream.
        seq = self._run(self._last_sequence())
        if seq == self._seq:
            return False
        self._seq = seq
        return True

    def current(self, role: str, client_id: str) -> int:
        return self._run(current(self._kv, role, client_id))[0]

    def raise_generation(self, role: str, client_id: str) -> int:
        if role not in ROLES:
            raise ValueError(f"role must be client or agent, not {role!r}")
        return self._run(raise_generation(self._kv, role, client_id))

    def close(self) -> None:
        self._loop.run_until_complete(self._connection.close())
        self._loop.close()


class NatsGenerationFollower:
    """Keeps a bridge's generations current from the bucket: read at start, then watched.

    It reads through the process's NATS connection (net/nats_connection.py), which the cluster
    shares and the server owns: stopping the follower leaves the connection open. NATS lost
    while serving: the last generations read stay in force (one warning). When the connection
    is back, the bucket is read again whole, so raises made meanwhile count then (and apps they
    revoke are closed), and the watch goes on from there.
    """

    def __init__(
        self,
        connection: NatsConnection | None,
        verifier: TokenVerifier,
        bridge: Bridge,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.connection = connection
        self.generations = Generations()
        self._verifier = verifier
        self._bridge = bridge
        self._loop = loop
        self._kv: Any = None
        self._watcher: Any = None
        self._task: asyncio.Task | None = None
        self._lost = False
        self._stopping = False

    async def start(self) -> None:
        """Connect if need be, read the bucket and start watching it; NatsStateError if any of it fails."""
        connection = self.connection
        if connection is None:
            raise NatsStateError("--state nats needs the NATS servers: set CLIENTMCP_NATS or --nats")
        nc = await _open(connection)
        connection.watch(self._disconnected, self._reconnected)
        try:
            self._kv = await open_bucket(nc, connection.urls)
            watcher, rows = await read_all(self._kv)
        except NatsStateError:
            await self.stop()
            raise
        except Exception as error:  # noqa: BLE001 - a timeout or an API error while reading
            await self.stop()
            raise NatsStateError(
                f"state nats: bucket {BUCKET} at {where(connection.urls)}: {error_text(error)}"
            ) from None
        self.generations.replace(rows)
        self.generations.attach(self._verifier)
        self._task = self._loop.create_task(self._follow(watcher))
        raised = sum(len(table) for table in self.generations.tables.values())
        logger.info("token generations kept in NATS bucket %s (%d raised)", BUCKET, raised)

    async def _follow(self, watcher: Any) -> None:
        """Apply each change the watcher brings, until it is stopped."""
        self._watcher = watcher
        async for entry in watcher:
            if entry is None:  # the end of what was there at the start: already read
                continue
            row = entry_row(entry)
            if row is not None:
                changed = self.generations.update([row])
                announce_changes(self.generations, self._bridge, changed, self._loop.time())

    async def _resync(self) -> None:
        """After a reconnection: read the whole bucket again (changes made meanwhile), then watch on."""
        if self._watcher is not None:
            await _stop(self._watcher)
            self._watcher = None
        failing = False
        while not self._stopping:
            try:
                watcher, rows = await read_all(self._kv)
                break
            except Exception as error:  # noqa: BLE001 - JetStream not back yet, a timeout: again
                if not failing:
                    failing = True
                    logger.warning(
                        "nats state: cannot read bucket %s yet (%s); retrying", BUCKET, error_text(error)
                    )
                await asyncio.sleep(RETRY_SECONDS)
        else:
            return
        changed = self.generations.replace(rows)
        self._lost = False
        logger.info(
            "nats state: bucket %s read again after the outage, %d generations changed", BUCKET, len(changed)
        )
        announce_changes(self.generations, self._bridge, changed, self._loop.time())
        await self._follow(watcher)

    def _disconnected(self) -> None:
        if not self._stopping and not self._lost:
            self._lost = True
            logger.warning("nats state: NATS lost; keeping the last token generations read until it is back")

    def _reconnected(self) -> None:
        if self._stopping:
            return
        logger.info("nats state: NATS back; reading the token generations again")
        if self._task is not None:
            self._task.cancel()
        self._task = self._loop.create_task(self._resync())

    async def stop(self) -> None:
        """Stop watching; the connection stays, for its owner to close."""
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            # Awaited: the bridge's loop stops soon after, and a task it never resumed is reported.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._watcher is not None:
            await _stop(self._watcher)
            self._watcher = None
            await asyncio.sleep(0)  # the watcher's heartbeat tasks, cancelled by stop(), end now
