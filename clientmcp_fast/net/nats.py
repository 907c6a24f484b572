"""The cluster's bus on NATS: runs the core's `Directory` (core/directory.py) over nats-py.

Used only with `--nats` / CLIENTMCP_NATS (docs/scaling.md); a single process never imports
it. What the directory sends in one loop turn leaves as one NATS message per subject (a
MessagePack array of messages) signed by the instance (core/bus_auth.py), and what arrives
is fed to the directory with the loop's time if its signature, time and counter are good,
else dropped and counted (docs/scaling.md, Threat model). The connection is the process's
one (net/nats_connection.py, shared with `--state nats`), which holds the credentials and the
retries: the instance keeps serving its own apps while NATS is down or refuses it, and joins
when it is reached.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Callable

from clientmcp_fast.core.bus_auth import BusAuth, Refused
from clientmcp_fast.core.directory import MALFORMED, Directory, epoch_floor
from clientmcp_fast.core.wire import WIRE_VERSION, Message, decode_batch
from clientmcp_fast.core.wire import encode as _encode
from clientmcp_fast.log import logger

if TYPE_CHECKING:
    from clientmcp_fast.net.nats_connection import NatsConnection
    from clientmcp_fast.net.server import Server

TICK_SECONDS = 0.25  # how often the directory's timer runs (heartbeats, dead instances)

_ENVELOPE = 5  # an array header is at most 5 bytes
_SEAL = 1 + 32 + 18 + 64  # core/bus_auth.py: the mark, the MAC, the header and the longest sender
# Every message the protocol allows (4 MiB, docs/protocol.md, Register validation) passes a
# NATS server whose max_payload is at least this; a lower one is warned of at start.
WANTED_PAYLOAD = 8 * 1024 * 1024


def _array(items: list[bytes]) -> bytes:
    """MessagePack arrays of already-encoded elements, without decoding them again."""
    count = len(items)
    if count < 16:
        head = bytes((0x90 | count,))
    elif count < 0x10000:
        head = b"\xdc" + count.to_bytes(2, "big")
    else:
        head = b"\xdd" + count.to_bytes(4, "big")
    return head + b"".join(items)


# -- the hop without nats-py's tasks ----------------------------------------------------------
#
# nats-py writes what is published from a flusher task, and hands a subscription's messages to
# a task of the subscription's own through a queue: a loop turn more at each of the four points
# a forwarded call crosses, and CPU for each (docs/scaling.md, Design). So the bus writes a
# turn's PUBs to nats-py's socket itself, and takes each message as nats-py's reader parses it.
# Both lean on nats-py's internals (`_transport`, `_pending`, a subscription's `_pending_queue`),
# looked for here: a nats-py whose internals differ gets its public API, slower, and a test of
# tests/e2e/test_cluster.py fails on the nats-py installed, so that the loss is seen.


def _direct_writer(nc: Any) -> Any:
    """nats-py's stream writer if PUBs written to it now keep their order and it is not backed up; else None."""
    writer = getattr(getattr(nc, "_transport", None), "_io_writer", None)  # TCP and TLS, not WebSocket
    bound = getattr(nc, "_max_pending_size", None)
    if writer is None or type(bound) is not int or getattr(nc, "_pending", None) != []:
        return None  # not the nats-py we know; or it has commands of its own queued: ours go after them
    # Backed up: nats-py's publish then waits for the socket to drain, which bounds the buffer.
    if writer.transport.get_write_buffer_size() > bound:
        return None
    return writer


_HANDOVER = True  # tests turn it off to run the public way


class _Handover:
    """Stands for a subscription's queue in nats-py: each message goes to `deliver` as the reader parses it."""

    __slots__ = ("sub", "deliver")

    def __init__(self, sub: Any, deliver: Callable[[str, bytes], None]) -> None:
        self.sub = sub
        self.deliver = deliver  # must not raise: nats-py's read loop would end

    def put_nowait(self, msg: Any) -> None:
        self.sub._pending_size -= len(msg.data)  # counted as queued by nats-py; not queued here
        self.deliver(msg.subject, msg.data)

    def qsize(self) -> int:
        return 0

    def empty(self) -> bool:
        return True


async def _subscribe(nc: Any, subject: str, deliver: Callable[[str, bytes], None]) -> bool:
    """Subscribe `deliver` to `subject`; True if it is handed each message directly, False through nats-py's task."""
    sub = await nc.subscribe(subject)  # without a callback, nats-py starts no task for it
    queue = getattr(sub, "_pending_queue", None)
    if _HANDOVER and isinstance(queue, asyncio.Queue) and hasattr(sub, "_pending_size"):
        sub._pending_queue = _Handover(sub, deliver)
        return True
    await sub.unsubscribe()

    async def callback(msg: Any) -> None:
        deliver(msg.subject, msg.data)

    await nc.subscribe(subject, cb=callback)
    return False


class NatsCluster:
    """This instance's membership of the cluster: the directory, its timer, its use of the process's NATS connection."""

    def __init__(self, server: Server, connection: NatsConnection, prefix: str = "clientmcp") -> None:
        self.server = server
        self.loop = server.loop
        self.connection = connection
        self.instance = connection.instance
        self.directory = Directory(server.bridge, self, self.instance, prefix, epoch_floor(time.time()))
        server.bridge.router = self.directory
        settings = server.settings
        self.auth = BusAuth(settings.secrets, settings.signing_secret, self.instance)
        self.nc: Any = None  # the connection's nats-py client, once joined
        self._pending: dict[str, list[Message]] = {}
        self._flush_due = False  # `_flush` is scheduled for the end of this turn
        self._publisher: asyncio.Task | None = None
        self._connector: asyncio.Task | None = None
        self._tick: asyncio.TimerHandle | None = None
        self._stopping = False
        self._joined = False  # subscribed: the connection's returns bring the bus up again
        self.direct = True  # every subscription handed its messages without nats-py's task

    # -- the Bus port ------------------------------------------------------------------------

    def send(self, subject: str, message: Message) -> None:
        """Queue a message; this turn's messages leave together, one NATS message per subject."""
        batch = self._pending.get(subject)
        if batch is None:
            self._pending[subject] = [message]
        else:
            batch.append(message)
        if not self._flush_due:
            self._flush_due = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        """After the turn: what it queued, written to the socket at once (or through nats-py when it must wait)."""
        self._flush_due = False
        if self._publisher is not None or not self._pending:
            return  # a publisher waiting on nats-py takes what is queued, in order
        nc = self.nc
        if nc is None or not nc.is_connected:
            self._pending = {}  # dropped: peers learn from the heartbeats that we are gone
            return
        writer = _direct_writer(nc)
        if writer is None:
            self._publisher = self.loop.create_task(self._publish())
            return
        batches, self._pending = self._pending, {}
        limit = nc.max_payload - _ENVELOPE - _SEAL
        seal = self.auth.seal
        now = time.time()
        parts: list[bytes] = []
        count = size = 0
        for subject, messages in batches.items():
            pub = f"PUB {subject} ".encode()
            for payload in self._payloads(subject, messages, limit, self.loop.time()):
                head, body = seal(subject, payload, now)
                length = len(head) + len(body)
                parts += (pub, b"%d\r\n" % length, head, body, b"\r\n")
                count += 1
                size += length
        if parts:
            writer.writelines(parts)
            stats = nc.stats
            stats["out_msgs"] += count
            stats["out_bytes"] += size

    async def _publish(self) -> None:
        """Through nats-py's publish, which waits while its buffer is full, until nothing is queued."""
        try:
            while self._pending:
                batches, self._pending = self._pending, {}
                nc = self.nc
                if nc is None or not nc.is_connected:
                    continue  # dropped: peers learn from the heartbeats that we are gone
                limit = nc.max_payload - _ENVELOPE - _SEAL
                for subject, messages in batches.items():
                    for payload in self._payloads(subject, messages, limit, self.loop.time()):
                        head, body = self.auth.seal(subject, payload, time.time())
                        try:
                            await nc.publish(subject, head + body)
                        except Exception as error:  # noqa: BLE001 - a lost connection, a full buffer
                            logger.warning("nats: publish to %s failed: %s", subject, error)
        finally:
            self._publisher = None

    def _payloads(self, subject: str, messages: list[Message], limit: int, now: float) -> list[bytes]:
        """The messages in as few payloads as the server's max_payload allows; one too large alone is answered here."""
        whole = _encode(messages)  # the usual turn: all in one payload, encoded by one call
        if len(whole) <= limit:
            return [whole]
        payloads: list[bytes] = []
        items: list[bytes] = []
        size = 0
        for message in messages:
            encoded = _encode(message)
            if len(encoded) > limit:
                self.directory.undeliverable(subject, message, limit, now)
                continue
            if size + len(encoded) > limit:
                payloads.append(_array(items))
                items, size = [], 0
            items.append(encoded)
            size += len(encoded)
        if items:
            payloads.append(_array(items))
        return payloads

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Join in the background once NATS is reached: the bridge serves its own apps and agents meanwhile."""
        self.connection.watch(self._disconnected, self._reconnected)
        self._connector = self.loop.create_task(self._join())
        self._tick = self.loop.call_later(TICK_SECONDS, self._on_tick)

    async def _join(self) -> None:
        self.nc = nc = await self.connection.wait_open()
        for subject in self.directory.subscriptions():
            self.direct = await _subscribe(nc, subject, self._deliver) and self.direct
        try:
            await nc.flush()  # subscribed on the server before anyone is asked to answer
        except Exception as error:  # noqa: BLE001 - lost meanwhile: its return brings the bus up
            logger.debug("nats: joining: %s", error)
        self._joined = True
        logger.info("nats: joined the cluster as instance %s (wire version %d)", self.instance, WIRE_VERSION)
        if nc.max_payload < WANTED_PAYLOAD:
            logger.warning(
                "nats: the server's max_payload is %d bytes: calls and results above it between "
                "instances get a tool error; set max_payload to 8MB (docs/scaling.md, Settings)",
                nc.max_payload,
            )
        if nc.is_connected:
            self.directory.bus_up(self.loop.time())

    def _disconnected(self) -> None:
        if not self._joined:
            return
        if not self._stopping:
            logger.warning("nats: disconnected; apps on other instances are unreachable until it is back")
        self.directory.bus_down(self.loop.time())

    def _reconnected(self) -> None:
        if not self._joined:
            return
        logger.info("nats: reconnected")
        self.directory.bus_up(self.loop.time())

    def _deliver(self, subject: str, data: bytes) -> None:
        """A NATS message's payload: if signed by an instance and fresh, each message in it, to the directory.

        It must never raise: nats-py's read loop, which calls it, would end, and with it every
        delivery, while the connection still looks up (docs/scaling.md, Bounds).
        """
        directory = self.directory
        now = self.loop.time()
        try:
            body, age = self.auth.open(subject, data, time.time())
        except Refused as refused:
            directory.dropped_message(refused.reason, now, f"on {subject}")
            return
        except Exception:  # noqa: BLE001 - a header core/bus_auth.py failed to read: this message alone
            directory.dropped_message(MALFORMED, now, f"its header raised, on {subject}")
            logger.debug("nats: message on %s", subject, exc_info=True)
            return
        messages, dropped = decode_batch(body)
        for detail in dropped:
            directory.dropped_message(MALFORMED, now, f"{detail}, on {subject}")
        for message in messages:
            try:
                directory.receive(message, now, age)
            except Exception:  # noqa: BLE001 - one bad message must not stop the others
                directory.dropped_message(MALFORMED, now, f"it raised in the directory, on {subject}")
                logger.debug("nats: message on %s", subject, exc_info=True)

    def _on_tick(self) -> None:
        self.directory.on_timer(self.loop.time())
        self.auth.forget_quiet(time.time())
        self._tick = self.loop.call_later(TICK_SECONDS, self._on_tick)

    async def stop(self) -> None:
        """After the bridge's shutdown: what is queued (the apps' GONE) handed to the connection, left open."""
        self._stopping = True
        if self._tick is not None:
            self._tick.cancel()
        if self._connector is not None and not self._connector.done():
            self._connector.cancel()
        if self._flush_due:
            self._flush()  # what this turn queued (the apps' GONE), before the connection's last flush
        for _ in range(50):
            if self._publisher is None:
                break
            await asyncio.sleep(0.01)
