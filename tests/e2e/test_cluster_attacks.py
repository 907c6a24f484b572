"""The cluster under attack and faults, on a real nats-server with real instances (docs/scaling.md, Threat model).

A client of the nats-server that is no instance (it lacks CLIENTMCP_SECRET) reads the bus and
publishes on it; a party that has the secret sends messages out of bounds; an instance dies
and comes back at once; an instance's loop, or the nats-server, stalls past the heartbeat
timeout while a call is on the way. Each failed on the bridge before the bus was signed,
epochs grew across restarts and calls carried their floor.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import test_cluster
from agents import DISCONNECTED, WAIT, HeldTool, app_for, echo, online_app, sdk_agent
from conftest import SECRET
from test_cluster import ServeProcess, sees, text_of
from test_observability import m, scrape

from clientmcp_fast.core.bus_auth import BusAuth
from clientmcp_fast.core.directory import DEAD_AFTER, subject_id
from clientmcp_fast.core.wire import BEAT, CANCEL, MAX_INTEGER, STATE, SYNC, WIRE_VERSION, Cancel

nats = pytest.importorskip("nats", reason="the cluster needs nats-py (pip install 'clientmcp-fast[nats]')")

pytestmark = pytest.mark.anyio

nats_server = test_cluster.nats_server
cluster = test_cluster.cluster

TOOLS = b'[{"name":"echo","inputSchema":{"type":"object"}}]'


class Counting:
    """A tool handler that answers its arguments and counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, arguments: dict[str, Any]) -> Any:
        self.calls += 1
        return await echo(arguments)


@contextlib.asynccontextmanager
async def bus_client(url: str) -> AsyncIterator[tuple[Any, list[tuple[str, bytes]]]]:
    """A plain NATS client of the server, reading every message of the bridge's subjects."""
    nc = await nats.connect(url)
    heard: list[tuple[str, bytes]] = []

    async def keep(msg: Any) -> None:
        heard.append((msg.subject, msg.data))

    await nc.subscribe("clientmcp.>", cb=keep)
    await nc.flush()
    try:
        yield nc, heard
    finally:
        await nc.close()


def dropped(bridge: Any) -> dict[str, int]:
    return bridge.call(lambda s: dict(s.cluster.directory.dropped))


async def test_a_bus_client_without_the_secret_can_neither_forge_nor_replay(
    cluster, nats_server, captured_log
):
    stream = captured_log("text")
    a, b = cluster(metrics=("127.0.0.1", 0))
    a_subject = f"clientmcp.i.{a.call(lambda s: s.cluster.instance)}"
    b_subject = f"clientmcp.i.{b.call(lambda s: s.cluster.instance)}"
    counting = Counting()
    async with bus_client(nats_server.url) as (nc, heard), online_app(a, "x", {"echo": counting}) as app:
        await sees(b, "x", tools=1)
        async with sdk_agent(b, "x", "legacy") as agent:
            assert json.loads(text_of(await agent.call_tool("echo", {"n": 1}))) == {"n": 1}
            await nc.flush()
            assert any(subject == a_subject for subject, _ in heard)  # it read the call (not encrypted)

            # Every message it read, published again: none is taken a second time, by anyone.
            replays = list(heard)
            for subject, data in replays:
                await nc.publish(subject, data)
            broadcast = ("clientmcp.beat", "clientmcp.app.")  # what both instances subscribe to
            refusals = sum(2 if subject.startswith(broadcast) else 1 for subject, _ in replays)
            # What the previous release took from anyone: a newer claim on x, a call for x with no
            # token, a result for b's next call, heartbeats of a hundred made-up instances.
            forged = [
                (f"clientmcp.app.{subject_id('x')}", [[STATE, "x", MAX_INTEGER, "zzzz", TOOLS, None, 1]]),
                (
                    a_subject,
                    [[3, "zzzz", "x", 1, b'{"type":"call","id":"9","name":"echo","arguments":{}}', 1000, 0]],
                ),
                (b_subject, [[4, "x", "2", b'{"content":[{"type":"text","text":"forged"}]}', False]]),
                *[("clientmcp.beat", [[BEAT, f"fake{n}", WIRE_VERSION]]) for n in range(100)],
            ]
            for subject, messages in forged:
                await nc.publish(subject, msgspec.msgpack.encode(messages))
            # The same signed with a key of its own choosing.
            other = b"not the cluster's secret, 32 bytes or more"
            outsider = BusAuth((other,), other, "zzzz")
            for subject, messages in forged[:3]:
                head, body = outsider.seal(subject, msgspec.msgpack.encode(messages), time.time())
                await nc.publish(subject, head + body)
            await nc.flush()

            async def counted() -> bool:
                total = dropped(a)["replayed"] + dropped(b)["replayed"]
                return total == refusals and dropped(b)["forged"] >= 1 and dropped(a)["forged"] >= 1

            give_up = time.monotonic() + WAIT
            while not await counted():
                assert time.monotonic() < give_up, (dropped(a), dropped(b), refusals)
                await asyncio.sleep(0.05)
            assert dropped(a)["unsigned"] >= 2 and dropped(b)["unsigned"] >= 2
            # Nothing it sent took effect: x is where it was, it ran one call, b knows one instance.
            assert json.loads(text_of(await agent.call_tool("echo", {"n": 2}))) == {"n": 2}
            assert counting.calls == 2 and app.close_code is None
            assert b.call(lambda s: type(s.bridge.apps["x"]).__name__ == "RemoteApp")
            assert b.call(lambda s: set(s.cluster.directory.peers)) == {a.call(lambda s: s.cluster.instance)}
            assert a.call(lambda s: s.cluster.directory.clock) < MAX_INTEGER
            samples = await asyncio.to_thread(scrape, b)
            assert samples[m("clientmcp_cluster_instances")] == 1
            assert samples[m("clientmcp_cluster_connected")] == 1
            for reason in ("unsigned", "forged", "replayed"):
                assert samples[m("clientmcp_cluster_messages_dropped_total", reason=reason)] >= 1, reason
            assert samples[m("clientmcp_cluster_messages_dropped_total", reason="malformed")] == 0
    for reason in ("unsigned", "forged", "replayed"):
        lines = [
            line for line in stream.getvalue().splitlines() if f"dropped a bus message ({reason}" in line
        ]
        assert 1 <= len(lines) <= 2, (reason, lines)  # one a minute per instance


async def test_signed_messages_out_of_bounds_are_dropped_and_delivery_goes_on(cluster, nats_server):
    """A party with the secret (a buggy or hostile instance): nothing it sends ends delivery or the clock.

    The epoch at the bound failed before the clock had a ceiling: the app connected after it
    got an epoch past the bound, which every other instance dropped as malformed. The counter's
    jump failed before the window was left behind on a jump: shifting it by 2**64 raised
    MemoryError out of the delivery callback, and nothing was delivered after.
    """
    a, b = cluster()
    insider = BusAuth((SECRET,), SECRET, "insider")
    deep = b"\x91" * 5001 + b"\x01"  # one message, nested 5,000 deep
    out_of_bounds = [
        deep,
        msgspec.msgpack.encode([[STATE, "y", 2**64 - 1, "insider", TOOLS, None, 1]]),
        msgspec.msgpack.encode([[SYNC, "insider", -1, WIRE_VERSION, True]]),
        msgspec.msgpack.encode([[BEAT, "insider.>", WIRE_VERSION]]),
        b"\xc1 not MessagePack",
    ]
    async with bus_client(nats_server.url) as (nc, _):
        for body in out_of_bounds:
            head, signed = insider.seal("clientmcp.beat", body, time.time())
            await nc.publish("clientmcp.beat", head + signed)
        # Within the bounds, an epoch at the bound: it may claim y, as an instance may, but must
        # not leave the connections made after it without an epoch the bus allows.
        at_bound = msgspec.msgpack.encode([[STATE, "y", MAX_INTEGER, "insider", TOOLS, None, 1]])
        head, signed = insider.seal("clientmcp.beat", at_bound, time.time())
        await nc.publish("clientmcp.beat", head + signed)
        # A header whose counter jumps to the last of 64 bits, on a sender heard before.
        jumper = BusAuth((SECRET,), SECRET, "jumper")
        for counter in (0, 2**64 - 2):
            jumper._counter = counter
            head, signed = jumper.seal("clientmcp.beat", msgspec.msgpack.encode([]), time.time())
            await nc.publish("clientmcp.beat", head + signed)
        await nc.flush()
        give_up = time.monotonic() + WAIT
        while dropped(b)["malformed"] < len(out_of_bounds):
            assert time.monotonic() < give_up, dropped(b)
            await asyncio.sleep(0.05)
        await sees(a, "y")
        await sees(b, "y")
    assert b.call(lambda s: s.cluster.directory.clock) < MAX_INTEGER
    assert a.call(lambda s: s.cluster.directory.clock) < MAX_INTEGER
    assert b.call(lambda s: s.cluster.directory.connected and s.cluster.nc.is_connected)
    async with online_app(a, "z", {"echo": echo}), sdk_agent(b, "z", "legacy") as agent:  # delivery goes on
        await sees(b, "z", tools=1)
        assert json.loads(text_of(await agent.call_tool("echo", {"n": 3}))) == {"n": 3}
    assert dropped(b)["malformed"] == len(out_of_bounds)


async def test_a_message_the_directory_raises_on_is_dropped_alone_and_delivery_goes_on(cluster, nats_server):
    """The last guard of the delivery callback: should the directory raise on a message (a bug, not
    a bound), that message is dropped and counted, and nats-py's read loop, which calls the
    callback, goes on delivering: the rest of its batch, and everything after."""
    a, b = cluster()
    insider = BusAuth((SECRET,), SECRET, "insider")

    def raising(message: Any, now: float, age: float) -> None:
        raise RuntimeError("a bug in the directory")

    b.call(lambda s: s.cluster.directory._handlers.__setitem__(Cancel, raising))
    # A cancel the directory raises on, then a heartbeat in the same NATS message.
    batch = msgspec.msgpack.encode([[CANCEL, "x", b"1", None, "insider"], [BEAT, "insider", WIRE_VERSION]])
    async with bus_client(nats_server.url) as (nc, _):
        head, signed = insider.seal("clientmcp.beat", batch, time.time())
        await nc.publish("clientmcp.beat", head + signed)
        await nc.flush()
        give_up = time.monotonic() + WAIT
        while dropped(b)["malformed"] < 1 or "insider" not in b.call(
            lambda s: set(s.cluster.directory.peers)
        ):
            assert time.monotonic() < give_up, dropped(b)
            await asyncio.sleep(0.05)
    assert b.call(lambda s: s.cluster.directory.connected and s.cluster.nc.is_connected)
    async with online_app(a, "z", {"echo": echo}), sdk_agent(b, "z", "legacy") as agent:  # delivery goes on
        await sees(b, "z", tools=1)
        assert json.loads(text_of(await agent.call_tool("echo", {"n": 4}))) == {"n": 4}


async def test_an_app_back_on_a_restarted_instance_is_reachable_from_the_others(cluster, nats_server):
    """The instance holding x is killed and started again at once; x reconnects to it 0.3 s later."""
    (b,) = cluster(1)
    first = ServeProcess(nats_server.url)
    second = None
    try:
        for _ in range(3):  # a few connections: its Lamport clock is above the next process's start
            app = app_for(first, "x")
            app.expose("echo", echo)
            async with app:
                await sees(b, "x", tools=1)
        app = app_for(first, "x")
        app.expose("echo", echo)
        await app.__aenter__()
        await sees(b, "x", tools=1)
        first.kill()
        second = ServeProcess(nats_server.url)
        await asyncio.sleep(0.3)
        back = app_for(second, "x")
        back.expose("echo", echo)
        async with back:
            reconnected = time.monotonic()
            async with sdk_agent(b, "x", "legacy") as agent:
                while True:
                    result = await agent.call_tool("echo", {"back": 1})
                    if not result.is_error:
                        break
                    assert time.monotonic() - reconnected < 2.0, text_of(result)
                    await asyncio.sleep(0.05)
                took = time.monotonic() - reconnected
                assert json.loads(text_of(result)) == {"back": 1}
        assert took < 2.0, took  # a NATS round trip, not the old process's detection (or never)
    finally:
        first.kill()
        if second is not None:
            second.kill()


async def test_a_call_failed_while_the_apps_instance_stalled_never_runs_and_running_ones_are_cancelled(
    cluster, nats_server
):
    """The app's instance stops (SIGSTOP) for 5 s: calls its agents were told failed never reach the app later."""
    (b,) = cluster(1)
    stalled = ServeProcess(nats_server.url)
    try:
        counting, held = Counting(), HeldTool()
        async with (
            online_app(stalled, "x", {"echo": counting, "held": held}),
            sdk_agent(b, "x", "legacy") as agent,
        ):
            await sees(b, "x", tools=2)
            running = asyncio.ensure_future(agent.call_tool("held"))
            await asyncio.wait_for(held.started.wait(), WAIT)
            stalled.process.send_signal(signal.SIGSTOP)
            stopped = time.monotonic()
            try:
                late = await agent.call_tool("echo", {"late": 1})  # sent into the stalled instance's socket
                assert late.is_error and text_of(late) == DISCONNECTED
                result = await asyncio.wait_for(running, WAIT)
                assert result.is_error and text_of(result) == DISCONNECTED
                await asyncio.sleep(max(0.0, stopped + 5.0 - time.monotonic()))
            finally:
                stalled.process.send_signal(signal.SIGCONT)
            await asyncio.wait_for(held.cancelled.wait(), WAIT)  # the call it was running: cancelled
            await asyncio.sleep(DEAD_AFTER)
            assert counting.calls == 0  # the late call never ran
            await sees(b, "x", tools=2)
            assert json.loads(text_of(await agent.call_tool("echo", {"after": 1}))) == {"after": 1}
            assert counting.calls == 1
    finally:
        stalled.kill()


async def test_calls_held_in_a_stalled_nats_server_never_reach_the_app(cluster, nats_server):
    """nats-server stops for 5 s with a call in it: the agent is told the app disconnected, and it never runs."""
    a, b = cluster()
    counting = Counting()
    async with online_app(a, "x", {"echo": counting}), sdk_agent(b, "x", "legacy") as agent:
        await sees(b, "x", tools=1)
        nats_server.process.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            late = await agent.call_tool("echo", {"late": 1})
            assert late.is_error and text_of(late) == DISCONNECTED
            await asyncio.sleep(max(0.0, stopped + 5.0 - time.monotonic()))
        finally:
            nats_server.process.send_signal(signal.SIGCONT)
        await sees(b, "x", tools=1)
        await asyncio.sleep(1.0)
        assert counting.calls == 0
        assert json.loads(text_of(await agent.call_tool("echo", {"after": 1}))) == {"after": 1}
        assert counting.calls == 1
