"""The app directory without sockets (core/directory.py; docs/scaling.md): the same behaviour, local or remote.

Bridges are joined by `MemoryBus`, which delivers what one sends to the others' matching
subscriptions when the test pumps it (a turn of the network), each message through
MessagePack as NATS carries it. Each behaviour runs twice: the agent's call made on the
app's own bridge ("local") and on another ("remote"), with the same expected outcome
(ClientMCP v1 §3.1, §4.3, §4.4, §5.3).
"""

from __future__ import annotations

import json

import msgspec
import pytest
from fakes import NOW, RecordingStream, RecordingWaiter, connect, make_bridge, register, send, tool
from wire import Op

from clientmcp_fast import log
from clientmcp_fast.core import outcomes
from clientmcp_fast.core.apps import LOCAL
from clientmcp_fast.core.consent import (
    EARLIER_RELEASE,
    FORGOTTEN,
    MAX_REQUESTS_PER_APP,
    NOT_ASKING,
    NOT_CONNECTED,
    WAIT_SECONDS,
    too_many_waiting,
)
from clientmcp_fast.core.directory import (
    BEAT_EVERY,
    CLOCK_CEILING,
    DEAD_AFTER,
    MALFORMED,
    STALLED_AFTER,
    Directory,
    epoch_floor,
    subject_id,
)
from clientmcp_fast.core.events import EventLog
from clientmcp_fast.core.forwarding import RemoteApp
from clientmcp_fast.core.limits import MAX_MESSAGE_BYTES
from clientmcp_fast.core.outcomes import Outcome
from clientmcp_fast.core.wire import MAX_INTEGER, WIRE_VERSION, decode_batch, encode

QUIET = {"app_idle_timeout": 10_000, "app_soft_seconds": 10_000}
DISCONNECTED = ("error", Outcome.DISCONNECTED.text)


class Network:
    """NATS in memory: subscriptions by subject (a trailing `*` matches one token), no echo."""

    def __init__(self) -> None:
        self.directories: list[Directory] = []
        self.queue: list[tuple[Directory, str, bytes]] = []
        self.up = True

    def join(self, directory: Directory) -> None:
        self.directories.append(directory)

    def pump(self, now: float = NOW) -> None:
        while self.queue:
            self.deliver(self.queue.pop(0), now)

    def deliver(self, item: tuple[Directory, str, bytes], now: float = NOW) -> None:
        sender, subject, payload = item
        for directory in self.directories:
            if directory is sender or not any(_matches(p, subject) for p in directory.subscriptions()):
                continue
            messages, dropped = decode_batch(payload)  # as net/nats.py reads a NATS message
            for detail in dropped:
                directory.dropped_message(MALFORMED, now, detail)
            for message in messages:
                directory.receive(message, now)

    def pump_holding(self, subject: str, now: float = NOW) -> None:
        """Deliver everything but what goes to `subject`, which stays queued (a slower path)."""
        held = []
        while self.queue:
            item = self.queue.pop(0)
            if item[1] == subject:
                held.append(item)
            else:
                self.deliver(item, now)
        self.queue = held


def logged() -> EventLog:
    """The event log the server gives a bridge, its lines written at once: what captured_log reads."""
    return log.event_log(lambda write: write())


def deliver(directory: Directory, message: list, now: float, age: float = 0.0) -> None:
    """One message as a peer could send it, read as net/nats.py reads a NATS message."""
    messages, dropped = decode_batch(msgspec.msgpack.encode([message]))
    for detail in dropped:
        directory.dropped_message(MALFORMED, now, detail)
    for typed in messages:
        directory.receive(typed, now, age)


def as_sent(message) -> tuple:
    """A message as it goes on the bus, as a tuple of its fields after its kind."""
    return tuple(msgspec.msgpack.decode(encode(message)))


def _matches(pattern: str, subject: str) -> bool:
    if pattern.endswith(".*"):
        head, _, last = subject.rpartition(".")
        return head == pattern[:-2] and last != ""
    return pattern == subject


class MemoryBus:
    def __init__(self, network: Network) -> None:
        self.network = network
        self.directory: Directory | None = None

    def send(self, subject: str, message: tuple) -> None:
        if self.network.up:
            self.network.queue.append((self.directory, subject, msgspec.msgpack.encode([message])))


def cluster(count: int = 2, where: str = "local", **limits):
    """`count` bridges joined by an in-memory bus; for `where` "alone", one bridge with no directory (LOCAL)."""
    network = Network()
    if where == "alone":
        return network, [make_bridge(events=logged(), **{**QUIET, **limits})]
    bridges = []
    for index in range(count):
        bridge = make_bridge(events=logged(), **{**QUIET, **limits})
        bus = MemoryBus(network)
        directory = bus.directory = bridge.router = Directory(bridge, bus, f"i{index}")
        network.join(directory)
        directory.bus_up(NOW)
        bridges.append(bridge)
    network.pump()
    return network, bridges


def texts(link) -> list:
    return [json.loads(payload) for opcode, payload in link.new_frames() if opcode == Op.TEXT]


def online(network, bridge, client_id="app-1", *names):
    channel, link = connect(bridge, client_id)
    register(channel, *(tool(n) for n in names))
    network.pump()
    link.new_frames()
    return channel, link


def call(network, bridge, client_id="app-1", name="echo", *, wants_stream=False, now=NOW):
    waiter = RecordingWaiter(wants_stream)
    app = bridge.apps[client_id]
    bridge.start_call(app, app.toolset.tools[name], b'{"a":1}', waiter, now)
    network.pump(now)
    return waiter


# The contract both routers pass (core/apps.py): the agent on a single process (LOCAL), on the
# app's instance of a cluster, and on another instance.
WHERE = ["alone", "local", "remote"]


def agent_side(bridges, where):
    return bridges[1] if where == "remote" else bridges[0]


@pytest.mark.parametrize("where", WHERE)
def test_a_call_reaches_the_app_and_its_result_comes_back(where):
    network, bridges = cluster(where=where)
    channel, link = online(network, bridges[0], "app-1", "echo")
    agent = agent_side(bridges, where)
    assert list(agent.apps["app-1"].toolset.tools) == ["echo"]
    waiter = call(network, agent)
    (message,) = texts(link)
    assert message["type"] == "call" and message["name"] == "echo" and message["arguments"] == {"a": 1}
    send(channel, {"type": "result", "id": message["id"], "result": {"content": []}})
    network.pump()
    assert waiter.events == [("result", b'{"content":[]}', False)]
    assert len(agent.calls) == 0 and len(bridges[0].calls) == 0


@pytest.mark.parametrize("where", WHERE)
def test_the_app_disconnecting_fails_the_call(where):
    network, bridges = cluster(where=where)
    channel, link = online(network, bridges[0], "app-1", "echo")
    agent = agent_side(bridges, where)
    waiter = call(network, agent)
    channel.close(1000, "bye", NOW)
    channel.on_close(1000, "bye")
    network.pump()
    assert waiter.events == [DISCONNECTED]
    assert "app-1" not in agent.apps


@pytest.mark.parametrize("where", WHERE)
def test_a_timeout_fails_the_call_and_cancels_it_at_the_app(where):
    network, bridges = cluster(where=where, call_timeout=5.0)
    channel, link = online(network, bridges[0], "app-1", "echo")
    agent = agent_side(bridges, where)
    waiter = call(network, agent, wants_stream=True)
    (sent,) = texts(link)
    agent.on_timer(NOW + 1.0)
    assert waiter.events == [("slow",)]  # the agent's instance streams
    agent.on_timer(NOW + 5.0)
    network.pump()
    assert waiter.events[-1] == ("error", outcomes.timed_out(5.0))
    assert texts(link) == [{"type": "cancel", "id": sent["id"]}]


@pytest.mark.parametrize("where", WHERE)
def test_an_abandoned_call_is_cancelled_at_the_app(where):
    network, bridges = cluster(where=where)
    channel, link = online(network, bridges[0], "app-1", "echo")
    agent = agent_side(bridges, where)
    waiter = call(network, agent)
    (sent,) = texts(link)
    agent.abandon(waiter, NOW)
    network.pump()
    assert texts(link) == [{"type": "cancel", "id": sent["id"]}]
    assert len(bridges[0].calls) == 0 and len(agent.calls) == 0


@pytest.mark.parametrize("where", WHERE)
def test_tool_changes_reach_streams(where):
    network, bridges = cluster(where=where)
    agent = agent_side(bridges, where)
    stream = RecordingStream()
    assert agent.add_stream("app-1", stream, NOW)  # opened while the app is offline
    channel, link = online(network, bridges[0], "app-1", "one")
    agent.on_timer(NOW)
    register(channel, tool("one"), tool("two"))
    network.pump()
    agent.on_timer(NOW)
    channel.close(1000, "bye", NOW)
    channel.on_close(1000, "bye")
    network.pump()
    agent.on_timer(NOW)
    assert stream.events == ["tools_changed"] * 3


@pytest.mark.parametrize("where", WHERE)
def test_a_newer_connection_anywhere_replaces_the_older_with_4409(where):
    network, bridges = cluster(where=where)
    old, old_link = online(network, bridges[0], "app-1", "echo")
    waiter = call(network, bridges[-1])  # another instance's agent, in a cluster
    new, _ = online(network, agent_side(bridges, where), "app-1", "other")
    assert old_link.close()[0] == 4409
    old.on_close(4409, "")
    network.pump()
    assert waiter.events == [DISCONNECTED]
    for bridge in bridges:
        assert list(bridge.apps["app-1"].toolset.tools) == ["other"]


def test_concurrent_connections_leave_the_highest_epoch_and_instance_everywhere():
    network, bridges = cluster(3)
    channels = [connect(bridge, "app-1") for bridge in bridges]  # before any hears of another
    network.pump()
    closed = [link.close() for _, link in channels]
    assert [c[0] if c else None for c in closed] == [4409, 4409, None]  # i2 > i1 > i0 at one epoch
    for bridge in bridges[:2]:
        app = bridge.apps["app-1"]
        assert type(app) is RemoteApp and app.instance == "i2"
    assert bridges[2].apps["app-1"] is channels[2][0]


def test_a_silent_instance_is_gone_within_the_documented_time():
    network, (a, b) = cluster()
    online(network, a, "app-1", "echo")
    waiter = call(network, b)
    now = NOW
    while now < NOW + DEAD_AFTER + BEAT_EVERY:  # b beats, a has died: nothing from it
        now += 0.25
        b.router.on_timer(now)
        network.queue.clear()
        if waiter.events:
            break
    assert waiter.events == [DISCONNECTED] and now <= NOW + DEAD_AFTER + 0.25
    assert "app-1" not in b.apps


def test_bus_down_makes_remote_apps_offline_and_bus_up_heals():
    network, (a, b) = cluster()
    online(network, a, "app-1", "echo")
    waiter = call(network, b)
    network.up = False
    b.router.bus_down(NOW)
    assert waiter.events == [DISCONNECTED] and "app-1" not in b.apps
    network.up = True
    b.router.bus_up(NOW)
    network.pump()
    a.router.on_timer(NOW + 1)
    network.pump()
    assert list(b.apps["app-1"].toolset.tools) == ["echo"]


def test_subject_tokens_are_distinct_and_plain():
    ids = ["a.b", "a", "a.b.c", "a_b", "a:b", "a@b", "a-b", "*", ">", "é"]
    tokens = [subject_id(i) for i in ids]
    assert len(set(tokens)) == len(ids)
    assert all(t and set(t) <= set("0123456789abcdef") for t in tokens)


def test_a_single_process_has_no_directory():
    bridge = make_bridge()
    assert bridge.router is LOCAL
    channel, _ = connect(bridge, "app-1")
    assert bridge.apps["app-1"] is channel


def test_calls_from_a_silent_instance_are_cancelled_at_the_app():
    network, (a, b) = cluster()
    channel, link = online(network, a, "app-1", "echo")
    call(network, b)
    (sent,) = texts(link)
    a.router.on_timer(NOW + DEAD_AFTER + 0.5)  # nothing from b meanwhile
    assert texts(link) == [{"type": "cancel", "id": sent["id"]}]
    assert not a.router.forwarding.running and len(a.calls) == 0


def test_after_a_bus_blip_an_app_that_left_meanwhile_is_gone_everywhere():
    """a's bus drops for less than the heartbeat timeout; its app leaves meanwhile; b must not keep it."""
    network, (a, b) = cluster()
    channel, link = online(network, a, "app-1", "echo")
    waiter = call(network, b)  # forwarded to a, which drops it when its bus goes
    a.router.bus_down(NOW)
    network.up = False
    channel.close(1000, "bye", NOW)
    channel.on_close(1000, "bye")
    assert "app-1" in b.apps  # b has not noticed anything yet
    network.up = True
    a.router.bus_up(NOW + 1)
    network.pump(NOW + 1)
    assert "app-1" not in b.apps
    assert waiter.events == [DISCONNECTED]  # at once, not at the call timeout


def test_an_instance_taken_as_gone_comes_back_with_its_apps():
    """b stalls past the heartbeat timeout: a forgets b's apps; b's next heartbeat brings them back."""
    network, (a, b) = cluster()
    online(network, b, "app-1", "echo")
    assert "app-1" in a.apps
    a.router.on_timer(NOW + DEAD_AFTER + 1)
    network.pump()
    assert "app-1" not in a.apps
    b.router.on_timer(NOW + DEAD_AFTER + 1)  # its heartbeat
    network.pump()
    assert list(a.apps["app-1"].toolset.tools) == ["echo"]


def test_an_instance_joining_after_another_keeps_the_calls_to_its_apps_at_the_others_first_beat():
    """c joins first (its SYNC reaches no one), then h with an app: c's first heartbeat, from an
    instance h never heard of, must not make c forget h's apps and fail c's call to them."""
    network = Network()
    made = {}
    for name in ("c", "h"):
        bridge = make_bridge(events=logged(), **QUIET)
        bus = MemoryBus(network)
        bus.directory = bridge.router = Directory(bridge, bus, name)
        network.join(bus.directory)
        bus.directory.bus_up(NOW)
        network.pump()  # c's SYNC is heard by no one: h is not there yet
        made[name] = bridge
    c, h = made["c"], made["h"]
    channel, link = online(network, h, "app-1", "echo")
    waiter = call(network, c)
    (sent,) = texts(link)
    c.router.on_timer(NOW + BEAT_EVERY)  # c's heartbeat reaches h, which never heard of c
    network.pump(NOW + BEAT_EVERY)
    assert waiter.events == [] and type(c.apps["app-1"]) is RemoteApp
    send(channel, {"type": "result", "id": sent["id"], "result": {"content": []}})
    network.pump(NOW + BEAT_EVERY)
    assert waiter.events == [("result", b'{"content":[]}', False)]
    d_channel, _ = online(network, c, "app-2", "echo")  # and h learns c's apps as before
    assert list(h.apps["app-2"].toolset.tools) == ["echo"]


# -- docs/scaling.md, Ordering: STATE and GONE travel on several subjects --------------------------
#
# nats-py hands each subscription's messages to its own task, so messages one instance sent in
# order on two subjects (an app's subject, and the instance subject or the heartbeat subject
# after a SYNC) may be applied in either order. These tests deliver them reversed.


def newcomer(network):
    """A bridge joining the cluster; the others' answers to its SYNC are still on the way to it."""
    bridge = make_bridge(events=logged(), **QUIET)
    bus = MemoryBus(network)
    bus.directory = bridge.router = Directory(bridge, bus, "i9")
    network.join(bus.directory)
    bus.directory.bus_up(NOW)
    network.pump_holding(bus.directory.instance_subject("i9"))
    return bridge


def reversed_delivery(network, now=NOW):
    """Deliver what is queued in the reverse of the order it was sent."""
    network.queue.reverse()
    network.pump(now)


def test_an_older_tool_set_delivered_late_does_not_overwrite_a_newer_one():
    network, (a, b) = cluster()
    channel, link = online(network, a, "app-1", "one")
    c = newcomer(network)  # a answers its SYNC with "one" on c's instance subject
    register(channel, tool("one"), tool("two"))  # then "one, two" on the app's subject
    reversed_delivery(network)
    assert list(c.apps["app-1"].toolset.tools) == ["one", "two"]
    assert list(b.apps["app-1"].toolset.tools) == ["one", "two"]


def test_a_state_delivered_after_its_gone_does_not_bring_the_app_back():
    network, (a, b) = cluster()
    channel, link = online(network, a, "app-1", "one")
    c = newcomer(network)
    channel.close(1000, "bye", NOW)
    channel.on_close(1000, "bye")  # GONE on the app's subject, after the STATE for c
    reversed_delivery(network)
    assert "app-1" not in c.apps and "app-1" not in b.apps
    c.router.on_timer(NOW + DEAD_AFTER + 1)  # the GONE is forgotten in time
    assert not c.router.ended


def test_what_an_instance_sent_before_its_sync_is_superseded_by_the_states_after_it():
    """a's bus blips: a STATE sent before it, delivered after a's new SYNC, does not bring back a gone app."""
    network, (a, b) = cluster()
    channel, _ = online(network, a, "app-1", "one")
    register(channel, tool("one"), tool("two"))  # its STATE is still on the way
    stale = list(network.queue)
    network.queue.clear()
    a.router.bus_down(NOW)
    channel.close(1000, "bye", NOW)
    channel.on_close(1000, "bye")  # while a's bus is down: no GONE
    a.router.bus_up(NOW + 1)  # SYNC: a holds nothing
    network.pump(NOW + 1)
    assert "app-1" not in b.apps
    network.queue.extend(stale)
    network.pump(NOW + 1)
    assert "app-1" not in b.apps


def test_an_older_sync_delivered_late_does_not_undo_a_newer_one():
    network, (a, b) = cluster()
    online(network, a, "app-1", "one")
    a.router.bus_down(NOW)
    a.router.bus_up(NOW)  # SYNC and "one": delivered late
    stale = list(network.queue)
    network.queue.clear()
    channel = a.apps["app-1"]
    register(channel, tool("one"), tool("two"))
    a.router.bus_down(NOW)
    a.router.bus_up(NOW)  # SYNC and "one, two": delivered first
    network.pump()
    network.queue.extend(stale)
    network.pump()
    assert list(b.apps["app-1"].toolset.tools) == ["one", "two"]


# -- docs/scaling.md, Apps held elsewhere: a bound on the tool sets kept -------------------------------


def test_past_the_bound_a_remote_app_is_known_without_its_tools_until_there_is_room():
    network, (a, b) = cluster(max_remote_apps=2)
    first, _ = online(network, a, "app-1", "one")
    online(network, a, "app-2", "two")
    third, _ = online(network, a, "app-3", "three")
    assert [list(b.apps[i].toolset.tools) for i in ("app-1", "app-2")] == [["one"], ["two"]]
    over = b.apps["app-3"]
    assert type(over) is RemoteApp and over.toolset is None and over.over_bound
    assert (b.router.forwarding.kept, b.router.forwarding.not_kept) == (2, 1)
    assert a.router.forwarding.kept == 0 and all(
        a.apps[i].toolset is not None for i in ("app-1", "app-2", "app-3")
    )
    register(third, tool("three"), tool("four"))  # still no room
    network.pump()
    assert b.apps["app-3"].toolset is None and b.router.forwarding.not_kept == 1
    first.close(1000, "bye", NOW)
    first.on_close(1000, "bye")
    network.pump()
    assert "app-1" not in b.apps and b.router.forwarding.kept == 1
    register(third, tool("three"))  # its next state finds room
    network.pump()
    assert list(b.apps["app-3"].toolset.tools) == ["three"] and not b.apps["app-3"].over_bound
    assert b.router.forwarding.kept == 2


def test_a_replaced_or_forgotten_remote_app_frees_its_place():
    network, (a, b) = cluster(max_remote_apps=1)
    online(network, a, "app-1", "one")
    assert b.router.forwarding.kept == 1
    online(network, a, "app-1", "two")  # a newer connection for the ID: its RemoteApp replaces the old
    assert list(b.apps["app-1"].toolset.tools) == ["two"] and b.router.forwarding.kept == 1
    b.router.bus_down(NOW)
    assert b.router.forwarding.kept == 0 and "app-1" not in b.apps


# -- docs/operations.md, Metrics: which calls count as forwarded -----------------------------------


@pytest.mark.parametrize("where", WHERE)
def test_a_call_over_4_mib_is_refused_where_the_agent_is_and_never_forwarded(where):
    """Counted as a local too-large call is (started, then too_large), on the agent's instance only."""
    network, bridges = cluster(where=where)
    channel, link = online(network, bridges[0], "app-1", "echo")
    agent = agent_side(bridges, where)
    waiter = RecordingWaiter(False)
    app = agent.apps["app-1"]
    arguments = b'{"s":"' + b"x" * MAX_MESSAGE_BYTES + b'"}'
    assert not agent.start_call(app, app.toolset.tools["echo"], arguments, waiter, NOW)
    assert waiter.events == [("error", Outcome.TOO_LARGE.text)]
    assert network.queue == []  # nothing left this instance
    network.pump()
    assert texts(link) == []
    assert agent.counters.calls_started == 1 and agent.counters.outcomes()[Outcome.TOO_LARGE] == 1
    for bridge in bridges:
        assert not any(bridge.counters.forwarded) and not any(bridge.counters.served)
    assert all(bridge.counters.calls_started == 0 for bridge in bridges if bridge is not agent)


def test_calls_refused_before_they_are_sent_are_not_forwarded():
    """Busy and shutting down, for an app held elsewhere: counted where the agent is, as for a local app."""
    network, (a, b) = cluster(max_calls_per_app=1)
    online(network, a, "app-1", "echo")
    app = b.apps["app-1"]
    first = RecordingWaiter(False)
    assert b.start_call(app, app.toolset.tools["echo"], b"{}", first, NOW)  # in flight: the app's one
    busy = RecordingWaiter(False)
    assert not b.start_call(app, app.toolset.tools["echo"], b"{}", busy, NOW)
    b.shutting_down = True
    late = RecordingWaiter(False)
    assert not b.start_call(app, app.toolset.tools["echo"], b"{}", late, NOW)
    assert (busy.events, late.events) == (
        [("error", Outcome.BUSY.text)],
        [("error", Outcome.SHUTTING_DOWN.text)],
    )
    counted = b.counters.outcomes()
    assert (counted[Outcome.BUSY], counted[Outcome.SHUTTING_DOWN]) == (1, 1)
    assert not any(b.counters.forwarded)


def intercepted_call():
    """B's call for A's app, taken off the bus before A sees it: network, B, waiter, subject, message."""
    network, (a, b) = cluster()
    online(network, a, "app-1", "echo")
    waiter = RecordingWaiter(False)
    app = b.apps["app-1"]
    assert b.start_call(app, app.toolset.tools["echo"], b'{"a":1}', waiter, NOW)
    ((_, subject, payload),) = network.queue
    network.queue.clear()
    ((message,), _) = decode_batch(payload)
    return network, b, waiter, subject, message


def test_a_call_the_bus_cannot_carry_is_a_forwarded_call_too_large():
    """The bus refuses a call under 4 MiB for its size (a NATS max_payload below it): a forwarded call's outcome."""
    _, b, waiter, subject, message = intercepted_call()
    b.router.undeliverable(subject, message, 10, NOW)
    assert waiter.events == [("error", outcomes.too_large_between_instances(10))]
    assert b.counters.forwarded[Outcome.TOO_LARGE] == 1 and sum(b.counters.forwarded) == 1
    assert b.counters.outcomes()[Outcome.TOO_LARGE] == 1


def test_past_the_bound_a_warning_is_logged_at_most_once_a_minute(captured_log):
    stream = captured_log("text")
    network, (a, b) = cluster(max_remote_apps=1)

    def app_online_at(client_id, now):
        channel, _ = connect(a, client_id)
        register(channel, tool("one"), now=now)
        network.pump(now)

    def warnings():
        return [line.split(" ", 1)[1] for line in stream.getvalue().splitlines() if "cluster:" in line]

    line = (
        "warn cluster: this instance keeps the tools of 1 apps held elsewhere (--max-remote-apps); "
        "agents here get a tool error for the others"
    )
    app_online_at("app-1", NOW)  # kept
    assert warnings() == []
    elapse(network, (a, b), NOW, NOW + 1)
    app_online_at("app-2", NOW + 1)
    assert warnings() == [line]
    elapse(network, (a, b), NOW + 1, NOW + 60.5)
    app_online_at("app-3", NOW + 60.5)  # within the minute of the first line: counted, not logged
    assert warnings() == [line] and b.router.forwarding.not_kept == 2
    elapse(network, (a, b), NOW + 60.5, NOW + 61)
    app_online_at("app-4", NOW + 61)  # a minute after it
    assert warnings() == [line, line] and b.router.forwarding.not_kept == 3
    elapse(network, (a, b), NOW + 61, NOW + 120)
    app_online_at("app-5", NOW + 120)
    assert warnings() == [line, line] and b.router.forwarding.not_kept == 4


# -- docs/scaling.md, Upgrades: other releases' layouts, another wire version ---------------------------

TOOLS = b'[{"name":"one","inputSchema":{"type":"object"}}]'


def test_fields_a_newer_release_added_at_the_end_are_ignored_and_so_are_unknown_kinds():
    network, (a,) = cluster(1)
    deliver(a.router, [7, "new", 1, WIRE_VERSION, False, "later"], NOW)
    deliver(a.router, [1, "app-1", 1, "new", TOOLS, None, 2, True, {"later": True}], NOW)
    deliver(a.router, [6, "new", WIRE_VERSION, "later"], NOW)
    deliver(a.router, [99, "a kind of a later release"], NOW)
    assert list(a.apps["app-1"].toolset.tools) == ["one"] and "new" in a.router.peers
    deliver(a.router, [2, "app-1", 1, "new", 3, "later"], NOW)  # GONE
    assert "app-1" not in a.apps
    assert a.router.dropped["malformed"] == 0


def elapse(network, bridges, since, until, step=0.25):
    """Run the bridges' directory timers every `step` seconds from `since` up to `until`, the bus delivering between."""
    now = since
    while now < until:
        now = min(now + step, until)
        for bridge in bridges:
            bridge.router.on_timer(now)
        network.pump(now)


MALFORMED_MESSAGES = {
    "empty": [],
    "kind not an integer": ["1", "app-1"],
    "shorter than this release's": [1, "app-1", 1, "x"],
    "an epoch past the bound": [1, "app-1", 2**64 - 1, "x", TOOLS, None, 2],
    "a negative sequence": [2, "app-1", 1, "x", -1],
    "a boolean for an integer": [6, "x", True],
    "a list for a string": [1, ["app-1"], 1, "x", TOOLS, None, 2],
    "nested lists": [6, [[[[[["x"]]]]]], WIRE_VERSION],
    "an instance that is no name": [6, "x.>", WIRE_VERSION],
    "an instance too long": [6, "x" * 65, WIRE_VERSION],
    "a call that is not JSON": [3, "x", "app-1", 1, b"{", 1000, 0],
    "an outcome no release has": [5, "app-1", "1", "text", 99],
}


@pytest.mark.parametrize("message", MALFORMED_MESSAGES.values(), ids=MALFORMED_MESSAGES.keys())
def test_a_malformed_message_is_dropped_counted_and_changes_nothing(captured_log, message):
    stream = captured_log("text")
    network, (a, b) = cluster()
    channel, link = online(network, a, "app-1", "echo")
    deliver(a.router, message, NOW)
    assert a.router.dropped["malformed"] == 1
    assert a.apps["app-1"] is channel and set(a.router.peers) == {"i1"} and a.router.clock < 2**62
    (line,) = [line for line in stream.getvalue().splitlines() if "cluster:" in line]
    assert "cluster: dropped a bus message (malformed: " in line
    waiter = call(network, b)  # the cluster goes on
    (sent,) = texts(link)
    send(channel, {"type": "result", "id": sent["id"], "result": {"content": []}})
    network.pump()
    assert waiter.events == [("result", b'{"content":[]}', False)]


def test_dropped_messages_are_logged_once_a_minute_per_reason(captured_log):
    stream = captured_log("text")
    network, (a,) = cluster(1)
    for offset in (0, 1, 59):
        deliver(a.router, [1, "app-1"], NOW + offset)
    a.router.dropped_message("forged", NOW + 1)  # another reason: its own line
    deliver(a.router, [2, "app-1"], NOW + 60)
    lines = [line.split(" ", 1)[1] for line in stream.getvalue().splitlines() if "dropped a bus" in line]
    assert [line.split("(", 1)[1].split(":")[0].split(")")[0] for line in lines] == [
        "malformed",
        "forged",
        "malformed",
    ]
    assert a.router.dropped["malformed"] == 4 and a.router.dropped["forged"] == 1


@pytest.mark.parametrize("announce", ["beat", "sync"])
def test_an_instance_of_another_wire_version_is_ignored_with_one_warning(captured_log, announce):
    stream = captured_log("text")
    network, (a, b) = cluster()
    channel, link = online(network, a, "app-1", "echo")
    future = WIRE_VERSION + 1
    deliver(a.router, [6, "future", future] if announce == "beat" else [7, "future", 1, future, True], NOW)
    tools = b'[{"name":"two","inputSchema":{"type":"object"}}]'
    # Its claim on app-1, with a higher epoch: applied, it would close a's app with 4409.
    deliver(a.router, [1, "app-1", 2**61, "future", tools, None, 2], NOW)
    deliver(a.router, [1, "app-2", 1, "future", tools, None, 3], NOW)
    deliver(a.router, [6, "future", future], NOW + 0.5)
    deliver(
        a.router,
        [
            3,
            "future",
            "app-1",
            a.router.local["app-1"][1],
            b'{"type":"call","id":"1","name":"echo","arguments":{}}',
            60_000,
            0,
        ],
        NOW,
    )
    deliver(a.router, [8, "app-1", b"1", None, "future"], NOW)
    lines = [line.split(" ", 1)[1] for line in stream.getvalue().splitlines() if "cluster:" in line]
    assert lines == [
        f"warn cluster: instance future speaks cluster wire version {future}, this one {WIRE_VERSION}: it is "
        "ignored and its apps are not reachable from here; a cluster runs one wire version "
        "(docs/scaling.md, Upgrades)"
    ]
    assert link.close() is None and a.apps["app-1"] is channel and "app-2" not in a.apps
    assert texts(link) == [] and not a.router.forwarding.running
    assert "future" not in a.router.peers and a.router.incompatible == {"future": future}
    network.pump()
    assert list(b.apps["app-1"].toolset.tools) == ["echo"]  # a goes on with the instances of its version


def test_every_message_sent_announces_this_wire_version_where_it_is_read():
    network, (a,) = cluster(1)
    sent = []
    a.router.bus = type("Bus", (), {"send": lambda self, subject, message: sent.append(as_sent(message))})()
    a.router.bus_down(NOW)
    a.router.bus_up(NOW)
    a.router.on_timer(NOW + BEAT_EVERY)
    a.router.cancel_elsewhere("app-1", b"7", None)
    assert [m for m in sent if m[0] in (6, 7, 8)] == [
        (7, "i0", a.router.seq, WIRE_VERSION, True),
        (6, "i0", WIRE_VERSION),
        (8, "app-1", b"7", None, "i0"),
    ]


# -- docs/scaling.md, Replacement; docs/scaling.md, Calls that never run late: restarts and stalls ---


def test_a_restarted_instance_s_new_connection_wins_over_its_previous_life_s(captured_log):
    """a dies with its app (no GONE); a new a at once, whose clock starts from a later start time:
    the app reconnecting to it holds the ID everywhere, before the old a is taken as gone."""
    network, (a, b) = cluster()
    # b started after a, and the Lamport clock carries its higher floor to a's connections.
    b.router.clock = epoch_floor(NOW + 5)
    online(network, b, "app-0", "echo")
    online(network, a, "app-1", "echo")
    old = b.apps["app-1"]
    assert type(old) is RemoteApp and old.epoch > epoch_floor(NOW + 5)
    network.directories.remove(a.router)  # killed: silent, no GONE
    bridge = make_bridge(events=logged(), **QUIET)
    bus = MemoryBus(network)
    bus.directory = bridge.router = Directory(bridge, bus, "i2", first_epoch=epoch_floor(NOW + 6))
    network.join(bus.directory)
    bus.directory.bus_up(NOW + 0.1)
    network.pump(NOW + 0.1)
    channel, link = online(network, bridge, "app-1", "echo")  # 0.3 s after the crash
    app = b.apps["app-1"]
    assert type(app) is RemoteApp and app.instance == "i2" and app.epoch > old.epoch
    waiter = call(network, b)
    (sent,) = texts(link)
    send(channel, {"type": "result", "id": sent["id"], "result": {"content": []}})
    network.pump()
    assert waiter.events == [("result", b'{"content":[]}', False)]


def test_epochs_start_above_the_start_time_and_grow_with_it():
    assert epoch_floor(NOW + 0.001) > epoch_floor(NOW) + 1000
    assert epoch_floor(4_102_444_800.0) < CLOCK_CEILING  # year 2100


@pytest.mark.parametrize("epoch", [CLOCK_CEILING + 1, MAX_INTEGER])
def test_an_epoch_at_the_bound_leaves_room_for_the_connections_made_after_it(epoch):
    """A holder of the secret claims an app with an epoch the bus allows, at or near its bound:
    it may hold that client ID, as any instance may, but every app connected after it is still
    announced within the bound and reached from the other instances."""
    network, (a, b) = cluster()
    for bridge in (a, b):
        deliver(bridge.router, [1, "y", epoch, "insider", TOOLS, None, 1], NOW)
    assert a.router.clock == b.router.clock == CLOCK_CEILING
    channel, link = online(network, a, "app-9", "echo")
    app = b.apps["app-9"]
    assert type(app) is RemoteApp and app.epoch == CLOCK_CEILING + 1
    assert a.router.dropped["malformed"] == b.router.dropped["malformed"] == 0
    waiter = call(network, b, "app-9")
    (sent,) = texts(link)
    send(channel, {"type": "result", "id": sent["id"], "result": {"content": []}})
    network.pump()
    assert waiter.events == [("result", b'{"content":[]}', False)]
    a.router.clock = MAX_INTEGER  # 2**32 connections later: the next ones keep the bound
    online(network, a, "app-10", "echo")
    assert b.apps["app-10"].epoch == MAX_INTEGER and b.router.dropped["malformed"] == 0


def stalled_with_a_call_on_the_way():
    """b's call for a's app is on the way when a's loop stalls; b takes a as gone and fails the call."""
    network, (a, b) = cluster()
    channel, link = online(network, a, "app-1", "echo")
    waiter = RecordingWaiter(False)
    app = b.apps["app-1"]
    b.start_call(app, app.toolset.tools["echo"], b"{}", waiter, NOW)  # to a's socket, unread: a stalls
    held = list(network.queue)
    network.queue.clear()
    now = NOW
    while not waiter.events:  # b runs on and hears nothing from a
        now += 0.25
        b.router.on_timer(now)
        held += network.queue
        network.queue.clear()
    assert waiter.events == [DISCONNECTED]
    return network, a, b, channel, link, held, now


def test_a_call_failed_while_its_app_s_instance_stalled_never_reaches_the_app(captured_log):
    stream = captured_log("text")
    network, a, b, channel, link, held, now = stalled_with_a_call_on_the_way()
    resumed = now + 2.0
    network.queue[:0] = held  # a resumes and reads its backlog first
    network.pump(resumed)
    assert texts(link) == [] and not a.router.forwarding.running and len(a.calls) == 0
    assert a.router.restarts == 1
    assert any("sent no heartbeat for" in line for line in stream.getvalue().splitlines())
    elapse(network, (a, b), resumed, resumed + 2)  # the two start over: calls cross again
    waiter = call(network, b, now=resumed + 2)
    (sent,) = texts(link)
    send(channel, {"type": "result", "id": sent["id"], "result": {"content": []}})
    network.pump(resumed + 2)
    assert waiter.events == [("result", b'{"content":[]}', False)]


def test_a_call_already_running_when_its_instance_stalled_is_cancelled_at_the_app():
    network, (a, b) = cluster()
    channel, link = online(network, a, "app-1", "echo")
    waiter = call(network, b)
    (sent,) = texts(link)
    a.router.on_timer(NOW + STALLED_AFTER)  # a's timer runs again after a stall
    assert texts(link) == [{"type": "cancel", "id": sent["id"]}] and not a.router.forwarding.running
    network.pump(NOW + STALLED_AFTER)  # a's SYNC: b fails its call at once
    assert waiter.events == [DISCONNECTED]


def test_a_stall_shorter_than_stalled_after_keeps_the_calls():
    network, (a, b) = cluster()
    channel, link = online(network, a, "app-1", "echo")
    waiter = call(network, b)
    (sent,) = texts(link)
    a.router.on_timer(NOW + STALLED_AFTER - 0.01)
    network.pump(NOW + STALLED_AFTER - 0.01)
    assert texts(link) == [] and a.router.restarts == 0
    send(channel, {"type": "result", "id": sent["id"], "result": {"content": []}})
    network.pump(NOW + STALLED_AFTER - 0.01)
    assert waiter.events == [("result", b'{"content":[]}', False)]


def test_calls_held_back_past_a_peer_taken_as_gone_are_refused_when_the_bus_delivers_them():
    """nats-server stalls: each instance takes the other as gone; what it held back is delivered after."""
    network, (a, b) = cluster()
    channel, link = online(network, a, "app-1", "echo")
    waiter = RecordingWaiter(False)
    app = b.apps["app-1"]
    b.start_call(app, app.toolset.tools["echo"], b"{}", waiter, NOW)  # held in the stalled nats-server
    held = list(network.queue)
    network.queue.clear()
    now = NOW
    while now < NOW + DEAD_AFTER + 1:  # both loops run; the bus carries nothing
        now += 0.25
        for bridge in (a, b):
            bridge.router.on_timer(now)
        held += network.queue
        network.queue.clear()
    assert waiter.events == [DISCONNECTED]
    network.queue[:0] = held
    network.pump(now)
    assert texts(link) == [] and len(a.calls) == 0


def test_a_call_that_arrives_past_its_timeout_is_dropped():
    network, (a, b) = cluster(call_timeout=5.0)
    channel, link = online(network, a, "app-1", "echo")
    waiter = RecordingWaiter(False)
    app = b.apps["app-1"]
    b.start_call(app, app.toolset.tools["echo"], b"{}", waiter, NOW)
    ((_, subject, payload),) = network.queue
    network.queue.clear()
    (message,) = msgspec.msgpack.decode(payload)
    assert message[5] == 5000
    deliver(a.router, message, NOW, age=5.0)  # held back 5 s on the way
    assert texts(link) == [] and len(a.calls) == 0
    deliver(a.router, message, NOW, age=4.9)
    assert [m["type"] for m in texts(link)] == ["call"]


def answering_instance():
    """An instance holding three apps, its bus recording what it sends; and the kinds it sent to instance "x"."""
    network, (a,) = cluster(1)
    for index in range(3):
        online(network, a, f"app-{index}", "echo")
    sent = []
    a.router.bus = type(
        "Bus", (), {"send": lambda self, subject, message: sent.append((subject, as_sent(message)))}
    )()

    def answers():
        return [m[0] for subject, m in sent if subject == a.router.instance_subject("x")]

    return a, answers


def test_answers_to_syncs_are_sent_at_most_once_a_second_per_instance():
    a, answers = answering_instance()
    for seq in range(1, 101):  # a hundred SYNCs asking for an answer within a second
        deliver(a.router, [7, "x", seq, WIRE_VERSION, True], NOW + seq / 1000)
    assert answers() == [7, 1, 1, 1]  # one answer: a SYNC and the three states
    a.router.on_timer(NOW + 0.5)
    assert answers() == [7, 1, 1, 1]
    a.router.on_timer(NOW + 1.001)  # the answer owed, once
    assert answers() == [7, 1, 1, 1] * 2
    a.router.on_timer(NOW + 2.5)
    assert answers() == [7, 1, 1, 1] * 2


def test_answers_to_heartbeats_are_sent_at_most_once_a_second_per_instance():
    """Heartbeats flooding in from one instance draw its answer once: when first heard, and when
    heard again after it was taken as gone; a SYNC it sends meanwhile is answered when due."""
    a, answers = answering_instance()
    for n in range(100):  # a hundred heartbeats of an instance never heard of, within a second
        deliver(a.router, [6, "x", WIRE_VERSION], NOW + n / 1000)
    assert answers() == [1, 1, 1]  # its states, without a SYNC: it lost nothing of ours
    deliver(a.router, [7, "x", 1, WIRE_VERSION, True], NOW + 0.5)
    assert answers() == [1, 1, 1]
    a.router.on_timer(NOW + 1.0)  # the SYNC's answer, when due
    assert answers() == [1, 1, 1, 7, 1, 1, 1]
    for step in range(1, 17):  # x silent, a's timer running: x is taken as gone
        a.router.on_timer(NOW + 1.0 + step / 4)
    assert "x" not in a.router.peers and a.router.restarts == 0
    for n in range(100):  # heard again: a SYNC and the states, once
        deliver(a.router, [6, "x", WIRE_VERSION], NOW + 5.5 + n / 1000)
    assert answers() == [1, 1, 1, 7, 1, 1, 1, 7, 1, 1, 1]
    a.router.on_timer(NOW + 6.6)
    assert answers() == [1, 1, 1, 7, 1, 1, 1, 7, 1, 1, 1]


@pytest.mark.parametrize("phase", [0.0, 0.25, 0.5, 0.75, 0.99])
def test_an_instance_is_taken_as_gone_two_to_three_and_a_quarter_seconds_after_it_dies(phase):
    """docs/scaling.md, Failure detection: the times stated there, whatever the phase of its last beat."""
    network, (a, b) = cluster()
    online(network, a, "app-1", "echo")
    now = NOW
    killed = NOW + 10 + phase
    while "app-1" in b.apps and now < killed + 10:
        now = round(now + 0.25, 6)
        if now < killed:
            a.router.on_timer(now)
        elif a.router in network.directories:
            network.directories.remove(a.router)  # SIGKILL: a says and hears nothing more
        b.router.on_timer(now)
        network.pump(now)
    assert 2.0 <= now - killed <= 3.25


def test_an_app_that_lost_to_a_connection_of_a_dead_instance_takes_over_when_it_is_taken_as_gone():
    """A restarted instance's clock behind the dead one's (its host's clock is behind): its app is
    first older than the dead connection everywhere, then holds the ID once that instance is gone."""
    network, (a, b) = cluster()
    a.router.clock = epoch_floor(NOW + 60)  # a runs a minute ahead
    online(network, a, "app-1", "echo")
    network.directories.remove(a.router)  # killed: silent, no GONE
    bridge = make_bridge(events=logged(), **QUIET)
    bus = MemoryBus(network)
    bus.directory = bridge.router = Directory(bridge, bus, "i2", first_epoch=epoch_floor(NOW + 1))
    network.join(bus.directory)
    bus.directory.bus_up(NOW)
    network.pump(NOW)
    channel, link = online(network, bridge, "app-1", "echo")
    assert b.apps["app-1"].instance == "i0"  # older than the dead connection: kept aside
    assert b.router.runners_up["app-1"][1] == "i2"
    elapse(network, (b, bridge), NOW, NOW + DEAD_AFTER + 0.5)
    app = b.apps["app-1"]
    assert type(app) is RemoteApp and app.instance == "i2" and not b.router.runners_up
    assert link.close() is None
    waiter = call(network, b, now=NOW + DEAD_AFTER + 0.5)
    (sent,) = texts(link)
    send(channel, {"type": "result", "id": sent["id"], "result": {"content": []}})
    network.pump(NOW + DEAD_AFTER + 0.5)
    assert waiter.events == [("result", b'{"content":[]}', False)]


def test_a_connection_replaced_by_a_newer_one_elsewhere_is_no_runner_up():
    """a and c take app-1 at once, a's epoch higher: c closes its connection with 4409 and says so,
    so that b, which kept it aside, does not bring it back when a dies."""
    network, (a, b, c) = cluster(3)
    a.router.clock = epoch_floor(NOW + 60)
    connect(a, "app-1")
    c_channel, c_link = connect(c, "app-1")
    network.pump()
    assert c_link.close()[0] == 4409
    assert not b.router.runners_up and b.apps["app-1"].instance == "i0"
    network.directories.remove(a.router)  # a dies
    elapse(network, (b, c), NOW, NOW + DEAD_AFTER + 0.5)
    assert "app-1" not in b.apps and "app-1" not in c.apps


# -- docs/scaling.md, Consent across instances: the page on one instance, the app on another -------


class Request:
    """What ConsentRequests reads of an authorization request (core/oauth.py's AuthorizeRequest)."""

    def __init__(self, request_id: str, app_id: str = "app-1") -> None:
        self.id = request_id
        self.app_id = app_id


def consenting(network, bridge, client_id="app-1"):
    """An app on `bridge` that registered `consent: true`, its state heard everywhere."""
    channel, link = connect(bridge, client_id)
    register(channel, tool("echo"), consent=True)
    network.pump()
    link.new_frames()
    return channel, link


def page(bridge, request_id="req-1", client_id="app-1", now=NOW):
    """What net/oauth.py does when it shows the consent page on `bridge`: open the request, ask the app."""
    app = bridge.apps[client_id]
    consent = bridge.consents.open(Request(request_id, client_id), app, "HJK2M3NP", now)
    problem = app.ask_consent(request_id, "Claude", "https://claude.ai", consent.code)
    if problem is not None:
        bridge.consents.end(consent)
    return consent, problem


@pytest.mark.parametrize("allow", [True, False])
def test_a_page_on_another_instance_asks_the_app_and_hears_its_answer(allow):
    network, (a, b) = cluster()
    channel, link = consenting(network, a)
    assert b.apps["app-1"].consent is True
    consent, problem = page(b)
    heard = []
    consent.waiter = heard.append  # a form waiting for the answer, as net/oauth.py's
    assert problem is None
    network.pump()
    assert texts(link) == [
        {
            "type": "authorize",
            "id": "req-1",
            "client": {"name": "Claude", "uri": "https://claude.ai"},
            "code": "HJK2M3NP",
        }
    ]
    assert len(a.consents) == 1 and consent.allow is None  # a remembers where the answer goes
    send(channel, {"type": "consent", "id": "req-1", "allow": allow})
    network.pump()
    assert consent.allow is allow and consent.problem is None and heard == [consent]
    assert len(a.consents) == 0 and len(b.consents) == 1  # b's page still checks the code
    # Counted once in the cluster: where the app answered.
    assert a.consents.answers == {"allow": int(allow), "deny": int(not allow)}
    assert b.consents.answers == {"allow": 0, "deny": 0}


def test_an_app_elsewhere_that_does_not_ask_for_consent_is_refused_at_once():
    network, (a, b) = cluster()
    channel, link = online(network, a, "app-1", "echo")  # registered without consent
    assert b.apps["app-1"].consent is False
    assert page(b)[1] == NOT_ASKING  # the same text as for an app of b
    assert network.queue == [] and len(b.consents) == 0  # no round trip
    connect(a, "app-2")  # not registered yet: it cannot be asked either
    network.pump()
    assert page(b, "req-2", "app-2")[1] == NOT_ASKING


def test_an_app_on_an_instance_of_the_first_release_is_refused_at_once():
    network, (a,) = cluster(1)
    deliver(a.router, [6, "old", WIRE_VERSION], NOW)
    deliver(a.router, [1, "app-1", 1, "old", TOOLS, None, 2], NOW)  # its STATE says nothing of consent
    assert a.apps["app-1"].consent is None
    assert page(a)[1] == EARLIER_RELEASE
    assert network.queue == []  # no AUTHORIZE, which that release would ignore


@pytest.mark.parametrize("how", ["closed", "replaced", "stopped asking"])
def test_an_app_that_changed_before_authorize_arrived_is_told_back_at_once(how):
    network, (a, b) = cluster()
    channel, link = consenting(network, a)
    consent, problem = page(b)
    heard = []
    consent.waiter = heard.append
    # Before a reads the AUTHORIZE, its app changes.
    if how == "closed":
        channel.close(1000, "bye", NOW)
        channel.on_close(1000, "bye")
    elif how == "replaced":
        connect(a, "app-1")
    else:
        register(channel, tool("echo"))
    network.pump_holding(b.router.app_subject("app-1"))  # b has not heard of it yet
    assert problem is None and consent.allow is False and heard == [consent]
    assert consent.problem == (NOT_ASKING if how == "stopped asking" else NOT_CONNECTED)
    assert len(a.consents) == 0 and [m for m in texts(link) if m["type"] == "authorize"] == []


def test_only_the_asked_connection_answers_once_and_unknown_ids_are_ignored():
    network, (a, b) = cluster()
    channel, link = consenting(network, a)
    other, _ = consenting(network, a, "app-2")
    consent, _ = page(b)
    network.pump()
    send(other, {"type": "consent", "id": "req-1", "allow": True})  # another app of a
    send(channel, {"type": "consent", "id": "req-9", "allow": True})  # no such request
    network.pump()
    assert consent.allow is None and len(a.consents) == 1
    send(channel, {"type": "consent", "id": "req-1", "allow": False})
    send(channel, {"type": "consent", "id": "req-1", "allow": True})  # a second answer
    network.pump()
    assert consent.allow is False and a.consents.answers == {"allow": 0, "deny": 1}


def test_a_consent_from_another_instance_or_connection_or_for_no_request_is_ignored():
    network, (a, b) = cluster()
    channel, link = consenting(network, a)
    consent, _ = page(b)
    network.pump()
    epoch = b.apps["app-1"].epoch
    for message in (
        [11, "app-1", epoch, "i9", "req-1", True, None],  # an instance that was not asked
        [11, "app-1", epoch + 1, "i0", "req-1", True, None],  # another connection of the app
        [11, "app-2", epoch, "i0", "req-1", True, None],  # another app
        [11, "app-1", epoch, "i0", "req-2", True, None],  # a request b never showed
    ):
        deliver(b.router, message, NOW)
    assert consent.allow is None and b.router.dropped["malformed"] == 0
    deliver(b.router, [11, "app-1", epoch, "i0", "req-1", True, None], NOW)
    assert consent.allow is True


def test_a_consent_for_a_request_that_ended_is_ignored():
    network, (a, b) = cluster()
    channel, link = consenting(network, a)
    consent, _ = page(b)
    network.pump()
    b.consents.end(consent)  # the person typed a wrong code 5 times, say
    send(channel, {"type": "consent", "id": "req-1", "allow": True})
    network.pump()
    assert consent.allow is None and len(a.consents) == 0 and len(b.consents) == 0


def test_the_apps_instance_remembers_a_request_for_its_10_minutes_only():
    network, (a, b) = cluster()
    channel, link = consenting(network, a)
    consent, _ = page(b)
    network.pump()
    later = NOW + WAIT_SECONDS
    send(channel, {"type": "consent", "id": "req-1", "allow": True}, later)
    network.pump(later)
    assert len(a.consents) == 0 and consent.allow is None  # its page's request ended as long ago


def test_pages_on_every_instance_share_the_apps_bound_on_its_instance():
    """docs/limits.md: 8 requests per app wait for its answer, wherever their pages are."""
    network, (a, b) = cluster()
    channel, link = consenting(network, a)
    for n in range(MAX_REQUESTS_PER_APP - 1):
        page(b, f"b{n}")
    network.pump()
    page(a, "a0")  # a page of a's own: the app's 8th
    assert len(texts(link)) == MAX_REQUESTS_PER_APP
    consent, problem = page(b, "b-last")  # b's 8th, but the app's 9th
    network.pump()
    assert problem is None and consent.problem == too_many_waiting(MAX_REQUESTS_PER_APP)
    assert texts(link) == [] and len(a.consents) == MAX_REQUESTS_PER_APP  # never sent to the app


def test_a_request_forgotten_for_the_process_bound_is_told_back():
    network, (a, b) = cluster()
    a.consents.max_requests = 2
    channel, link = consenting(network, a)
    first, _ = page(b, "req-1")
    page(b, "req-2")
    network.pump()
    consenting(network, a, "app-2")
    page(a, "req-3", "app-2")  # the 3rd in a's memory: the oldest is forgotten
    network.pump()
    assert first.problem == FORGOTTEN and a.consents.forgotten == 1 and len(a.consents) == 2


def test_an_app_that_took_over_as_runner_up_keeps_its_consent():
    """As test_an_app_that_lost_to_a_connection_of_a_dead_instance_takes_over_when_it_is_taken_as_gone,
    with an app that asks for consent: kept aside, then holding the ID, it can still be asked."""
    network, (a, b) = cluster()
    a.router.clock = epoch_floor(NOW + 60)
    online(network, a, "app-1", "echo")
    network.directories.remove(a.router)
    bridge = make_bridge(events=logged(), **QUIET)
    bus = MemoryBus(network)
    bus.directory = bridge.router = Directory(bridge, bus, "i2", first_epoch=epoch_floor(NOW + 1))
    network.join(bus.directory)
    bus.directory.bus_up(NOW)
    network.pump(NOW)
    channel, link = consenting(network, bridge)
    assert b.apps["app-1"].instance == "i0" and b.apps["app-1"].consent is False
    assert b.router.runners_up["app-1"][1] == "i2"
    elapse(network, (b, bridge), NOW, NOW + DEAD_AFTER + 0.5)
    assert b.apps["app-1"].instance == "i2" and b.apps["app-1"].consent is True
    assert page(b, now=NOW + DEAD_AFTER + 0.5)[1] is None
    network.pump(NOW + DEAD_AFTER + 0.5)
    assert [message["type"] for message in texts(link)] == ["authorize"]
