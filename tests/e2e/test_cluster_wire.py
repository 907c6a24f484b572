"""The cluster's messages on a real nats-server, from an instance the test plays (docs/scaling.md, Ordering, Upgrades).

A real bridge instance joins a real `nats-server`; the test connects to it with nats-py as a
second instance, `ScriptedInstance`, whose messages a real core `Directory` writes (the
layouts of clientmcp_fast/core/directory.py, encoded by clientmcp_fast/net/nats.py), and
publishes them on the real subjects in the order the test chooses: out of order, as two
subjects' messages may be applied by a receiver. An official `mcp` SDK agent on the real
instance then says what won.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import test_cluster
from agents import OFFLINE, WAIT, eventually, sdk_agent
from conftest import SECRET
from test_cluster import gone, sees, text_of

from clientmcp_fast.core.bridge import Bridge
from clientmcp_fast.core.bus_auth import BusAuth
from clientmcp_fast.core.directory import Directory
from clientmcp_fast.core.limits import Limits
from clientmcp_fast.core.register import parse_register
from clientmcp_fast.core.tokens import TokenVerifier
from clientmcp_fast.core.wire import BEAT, WIRE_VERSION, Beat, State
from clientmcp_fast.net.nats import _encode
from clientmcp_fast.net.server import new_session_id

nats = pytest.importorskip("nats", reason="the cluster needs nats-py (pip install 'clientmcp-fast[nats]')")

pytestmark = pytest.mark.anyio

nats_server = test_cluster.nats_server
cluster = test_cluster.cluster


class ScriptedApp:
    """What the directory reads of a local app: its client ID and its tool set."""

    def __init__(self, client_id: str, *names: str) -> None:
        self.client_id = client_id
        self.declare(*names)

    def declare(self, *names: str) -> None:
        tools = msgspec.json.encode([{"name": n, "inputSchema": {"type": "object"}} for n in names])
        self.toolset = parse_register(msgspec.Raw(tools), msgspec.UNSET, 100)


class ScriptedInstance:
    """A bridge instance the test plays: a real `Directory` is its `Bus`'s caller, and what it sends is held.

    `take()` hands the held messages to the test, which publishes them (`publish`) in any
    order; heartbeats are published every 0.25 s by themselves, so that the real instance
    does not take this one as gone.
    """

    def __init__(self, nc: Any, name: str) -> None:
        self.nc = nc
        bridge = Bridge(
            Limits(),
            TokenVerifier([b"a secret no token of these tests carries"]),
            lambda when: None,
            new_session_id=new_session_id,
        )
        self.directory = bridge.router = Directory(bridge, self, name)
        self.auth = BusAuth((SECRET,), SECRET, name)  # an instance holds the cluster's secret
        self.held: list[tuple[str, tuple]] = []

    def send(self, subject: str, message: tuple) -> None:
        """The Bus port: held until the test publishes it."""
        self.held.append((subject, message))

    def take(self) -> list[tuple[str, tuple]]:
        """The (subject, message) pairs the directory sent since the last take, in order."""
        taken, self.held = self.held, []
        return taken

    async def publish(self, *items: tuple[str, tuple]) -> None:
        """Each message as one NATS message, in this order, encoded and signed as the NATS adapter does."""
        for subject, message in items:
            head, body = self.auth.seal(subject, _encode([message]), time.time())
            await self.nc.publish(subject, head + body)
        await self.nc.flush()

    @contextlib.asynccontextmanager
    async def beating(self) -> AsyncIterator[None]:
        """Publish the directory's heartbeats while the block runs."""

        async def beat() -> None:
            while True:
                self.directory.on_timer(time.monotonic())
                beats = [item for item in self.held if type(item[1]) is Beat]
                self.held = [item for item in self.held if type(item[1]) is not Beat]
                await self.publish(*beats)
                await asyncio.sleep(0.25)

        task = asyncio.ensure_future(beat())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@contextlib.asynccontextmanager
async def scripted(nats_url: str, name: str) -> AsyncIterator[ScriptedInstance]:
    """A `ScriptedInstance` on its own NATS connection, its SYNC held (as its bus came up)."""
    nc = await nats.connect(nats_url, no_echo=True)
    try:
        instance = ScriptedInstance(nc, name)
        instance.directory.bus_up(time.monotonic())
        yield instance
    finally:
        await nc.close()


async def tool_names(bridge: Any, client_id: str) -> list[str]:
    """tools/list of an official SDK agent on `bridge`."""
    async with sdk_agent(bridge, client_id, "legacy") as agent:
        return [tool.name for tool in (await agent.list_tools()).tools]


async def offline(bridge: Any, client_id: str) -> bool:
    """An SDK agent on `bridge` sees no tools, and its call gets the tool error "not connected"."""
    async with sdk_agent(bridge, client_id, "legacy") as agent:
        listed = (await agent.list_tools()).tools
        result = await agent.call_tool("one")
    return listed == [] and result.is_error and text_of(result) == OFFLINE


# -- docs/scaling.md, Ordering ------------------------------------------------------------------------


async def test_out_of_order_states_gone_and_sync_on_nats_leave_the_newest_state(cluster, nats_server):
    """Each step is provoked on one subscription of the real instance, where NATS keeps the order,
    and ends with a marker (a later message there) that the instance is waited on to apply."""
    (bridge,) = cluster(1)
    real = bridge.call(lambda s: s.cluster.instance)
    async with scripted(nats_server.url, "scripted0") as peer, peer.beating():
        directory = peer.directory
        await peer.publish(*peer.take())  # its SYNC: the real instance starts over with it
        to_real = directory.instance_subject(real)

        # A newer tool set, then the older one delivered late on the same subscription: the
        # older is dropped (a STATE older than the last applied for its connection).
        app = ScriptedApp("app-1", "one")
        directory.attached(app, time.monotonic())
        (older,) = peer.take()
        app.declare("one", "two")
        directory.registered(app)
        (newer,) = peer.take()
        assert type(older[1]) is type(newer[1]) is State and older[1].seq < newer[1].seq
        marker = ScriptedApp("marker-1", "m")
        directory.attached(
            marker, time.monotonic()
        )  # on the app subjects' subscription too: applied after `older`
        await peer.publish(newer, older, *peer.take())
        await sees(bridge, "marker-1", tools=1)
        assert await tool_names(bridge, "app-1") == ["one", "two"]

        # Its GONE, then its STATE delivered after it (as the answer to a SYNC travels, on the
        # real instance's own subject): the app stays offline.
        directory.detached(app)
        (gone_message,) = peer.take()
        await peer.publish(gone_message)
        await gone(bridge, "app-1")
        directory.attached(ScriptedApp("marker-2", "m"), time.monotonic())
        late = (to_real, newer[1])
        await peer.publish(late, *[(to_real, m) for _, m in peer.take()])
        await sees(bridge, "marker-2", tools=1)
        assert await offline(bridge, "app-1")

        # A STATE sent before the instance's latest SYNC, delivered after it: superseded. Its
        # bus blips while app-3 leaves, so no GONE is sent; the states after the SYNC say
        # app-3 is not there.
        app3 = ScriptedApp("app-3", "one")
        directory.attached(app3, time.monotonic())
        (stale,) = peer.take()
        await peer.publish(stale)
        await sees(bridge, "app-3", tools=1)
        directory.bus_down(time.monotonic())
        directory.detached(app3)
        directory.bus_up(time.monotonic())
        await peer.publish(*peer.take())  # SYNC, then the states of marker-1 and marker-2
        await gone(bridge, "app-3")
        marker.declare("m", "n")
        directory.registered(marker)  # after `stale`, on the same subscription
        await peer.publish(stale, *peer.take())
        await sees(bridge, "marker-1", tools=2)
        assert await offline(bridge, "app-3")
        assert await tool_names(bridge, "marker-2") == ["m"]


# -- docs/scaling.md, Upgrades ------------------------------------------------------------------------


async def test_an_instance_of_another_wire_version_is_ignored_with_one_warning(
    start_bridge, nats_server, captured_log
):
    stream = captured_log("text")
    bridge = start_bridge(nats=(nats_server.url,))
    bridge.wait_for(lambda s: s.cluster is not None and s.cluster.directory.connected, WAIT)
    lines = stream.getvalue().splitlines()
    assert any(
        line.endswith(f" (wire version {WIRE_VERSION})") and "nats: joined the cluster as instance" in line
        for line in lines
    )
    async with scripted(nats_server.url, "future0") as peer, scripted(nats_server.url, "current0") as current:
        directory = peer.directory
        directory.attached(ScriptedApp("app-1", "one"), time.monotonic())
        _, state = peer.take()  # its SYNC is not sent: the heartbeat comes first
        # What an instance of the next wire version would announce: the same heartbeat, another version.
        beat = (directory.beat_subject, (BEAT, "future0", WIRE_VERSION + 1))
        for _ in range(3):
            await peer.publish(beat)
        # An instance of this version, after it on the same subscriptions: once it is heard
        # from, so were the messages before it.
        (current_sync,) = current.take()
        await current.publish(current_sync)
        await eventually(bridge, lambda s: "current0" in s.cluster.directory.peers)
        await peer.publish(state)
        directory.attached(ScriptedApp("app-2", "one"), time.monotonic())
        await peer.publish(*peer.take())
        current.directory.attached(ScriptedApp("marker", "m"), time.monotonic())
        await current.publish(*current.take())
        await sees(bridge, "marker", tools=1)
        assert await offline(bridge, "app-1") and await offline(bridge, "app-2")
        assert bridge.call(lambda s: "future0" not in s.cluster.directory.peers)
    warnings = [
        line.split(" ", 2)[2]
        for line in stream.getvalue().splitlines()
        if "wire version" in line and " warn " in line
    ]
    assert warnings == [
        f"cluster: instance future0 speaks cluster wire version {WIRE_VERSION + 1}, this one {WIRE_VERSION}: it "
        "is ignored and its apps are not reachable from here; a cluster runs one wire version "
        "(docs/scaling.md, Upgrades)"
    ]
