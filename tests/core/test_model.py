"""A model-based test of the core: random runs of apps and agents, checked against a small model.

Hypothesis drives the real core (Bridge, AppChannel, AgentEndpoint: everything below the
sockets) through random sequences of app connections, replacements, registers, results,
protocol breaks and disconnections, agents' calls, cancellations, hang-ups and notification
streams, and the clock. A few dicts say what the bridge should hold and what each side
should have received; after every step the bridge's tables, every app's link, every
agent's answer and every stream are compared with them (ClientMCP v1 §3.4, §4.3-§4.4, §5).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from fakes import (
    NOW,
    RecordingLink,
    client_text,
    connect,
    make_bridge,
    register,
    request_with_headers,
    token,
    tool,
)
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from wire import Op, client_frame, decode_server_frames

from clientmcp_fast.core import outcomes
from clientmcp_fast.core.agent import AgentEndpoint
from clientmcp_fast.core.agent_eras import MODERN
from clientmcp_fast.core.agent_streams import KEEPALIVE, META_SUBSCRIPTION
from clientmcp_fast.core.calls import STREAM_AFTER_SECONDS
from clientmcp_fast.core.channel import AppChannel
from clientmcp_fast.core.http import Exchange, Request
from clientmcp_fast.core.jsonrpc import META_CAPABILITIES, META_VERSION
from clientmcp_fast.core.outcomes import Outcome

CLIENT_IDS = ("a", "b", "c")
TOOL_NAMES = ("t0", "t1", "t2")
MISSING_TOOL = "nope"  # never declared: the agent calls a tool that does not exist
SESSIONS = (None, b"s1", b"s2")  # legacy Mcp-Session-Id values (None: no header)

# Short timeouts, so that a run of 50 steps passes each of them many times; few calls and
# streams per app, so that the limits are reached too.
CALL_TIMEOUT = 10.0
IDLE_TIMEOUT = 25.0
SOFT_SECONDS = 20.0
MAX_CALLS = 3
MAX_STREAMS = 2
LIMITS = {
    "call_timeout": CALL_TIMEOUT,
    "app_idle_timeout": IDLE_TIMEOUT,
    "app_soft_seconds": SOFT_SECONDS,
    "max_calls_per_app": MAX_CALLS,
    "max_streams_per_client": MAX_STREAMS,
}
# How often the bridge looks for idle and congested apps (Bridge.__init__): a close comes at
# most this long after it is due. Here 1.25 s, longer than the 1 s before a call switches to a
# stream, so that the sweep's own timer cannot hide a missing wake-up for a switch.
SWEEP_EVERY = min(IDLE_TIMEOUT, SOFT_SECONDS) / 16
SLACK = 1e-6  # sweep times are sums of floats
TOKEN_TTL = 86_400.0  # outlives any run's clock

TIMED_OUT = outcomes.timed_out(CALL_TIMEOUT)
SSE_MESSAGE = b"event: message\ndata: "

# A menu rather than any list: most registers then declare tools that agents call; t0' is t0
# with a title, a different tool under the same name.
TOOL_SETS = st.sampled_from(
    [(), ("t0",), ("t0'",), ("t0", "t1"), ("t1", "t0"), ("t0", "t1", "t2"), ("t2",), ("t1", "t2")]
)

# The ways an online app goes away: the clean close is echoed with 1000, a lost transport
# gets no frame, one that stops reading gets 4429, and the protocol breaks 4400
# (docs/protocol.md, Close codes).
GOING_AWAY = {
    "clean close": client_frame(Op.CLOSE, (1000).to_bytes(2, "big") + b"bye"),
    "transport lost": None,
    "stops reading": None,
    "binary": client_frame(Op.BINARY, b"{}"),
    "not JSON": client_text(b"{"),
    "result without content": client_text({"type": "result", "id": "1", "result": {}}),
    "bad tool name": client_text({"type": "register", "tools": [tool("a b")]}),
    "bridge's type": client_text({"type": "cancel", "id": "1"}),
}


class AgentExchange(Exchange):
    """One agent request as the core answers it: every answer recorded, writes after a hang-up counted."""

    __slots__ = ("events", "hung_up", "late")

    def __init__(self, request: Request) -> None:
        self.request = request
        self.on_abandon = None
        self.events: list[tuple] = []
        self.hung_up = False
        self.late = 0

    def _record(self, event: tuple) -> None:
        if self.hung_up:
            self.late += 1
        self.events.append(event)

    def respond(self, status, headers, body: bytes) -> None:
        # As the net layer's exchange: once answered, a hang-up has nothing left to abandon.
        self.on_abandon = None
        self._record(("respond", status, bytes(body)))

    def start_stream(self, headers) -> None:
        self._record(("start",))

    def stream(self, data: bytes) -> None:
        self._record(("chunk", bytes(data)))

    def end_stream(self) -> None:
        self.on_abandon = None
        self._record(("end",))

    def hang_up(self, now: float) -> None:
        """The agent goes away: the net layer calls whatever the core left in `on_abandon`."""
        abandon, self.on_abandon = self.on_abandon, None
        self.hung_up = True
        if abandon is not None:
            abandon(now)


def sse_data(chunk: bytes) -> dict:
    """The JSON of one SSE `message` event."""
    assert chunk.startswith(SSE_MESSAGE) and chunk.endswith(b"\n\n"), chunk
    return json.loads(chunk[len(SSE_MESSAGE) : -2])


def answers(exchange: AgentExchange) -> list[tuple[int, dict | None]]:
    """Every answer an exchange got, as (status, JSON-RPC message); None for a stream ended without one."""
    events = exchange.events
    if events and events[0] == ("start",):
        assert all(event[0] != "respond" for event in events), "a response after a stream started"
        assert ("end",) not in events[:-1], f"written after the stream ended: {events}"
    found: list[tuple[int, dict | None]] = []
    for event in events:
        if event[0] == "respond":
            found.append((event[1], json.loads(event[2])))
        elif event[0] == "chunk" and event[1] != KEEPALIVE:
            found.append((200, sse_data(event[1])))
        elif event[0] == "end" and not found:
            found.append((200, None))
    if found and events[0] == ("start",):
        assert events[-1] == ("end",), "a streamed answer whose stream does not end"
    return found


def wire_form(message: dict) -> tuple:
    """A message an app received, as the model writes what it expects."""
    kind = message["type"]
    if kind == "call":
        return ("call", message["id"], message["name"], message["arguments"])
    if kind == "cancel":
        return ("cancel", message["id"])
    return (kind,)


# -- the model ---------------------------------------------------------------------------------


@dataclass(eq=False)
class Conn:
    """One app connection as the model sees it."""

    key: int
    client_id: str
    channel: AppChannel = field(repr=False)
    link: RecordingLink = field(repr=False)
    last_seen: float
    online: bool = True  # attached, and still the connection of its client ID
    gone: bool = False  # the transport ended (connection_lost)
    tools: tuple | None = None  # None until its first register
    congested_since: float | None = None
    close_code: int | None = None  # the one close frame the bridge must have sent it
    expected: list = field(default_factory=list, repr=False)  # what its link must have received
    received: list = field(default_factory=list, repr=False)  # what it did receive, so far
    closes: list = field(default_factory=list, repr=False)  # close codes it received
    writes_read: int = field(default=0, repr=False)


@dataclass(eq=False)
class AgentCall:
    """One tools/call from an agent, and the one answer the model expects it to get."""

    key: int  # its JSON-RPC id: unique, so that a cancellation names one call
    client_id: str
    name: str
    modern: bool
    session: bytes | None
    wants_stream: bool
    exchange: AgentExchange = field(repr=False)
    conn: Conn | None = field(default=None, repr=False)  # the connection it was dispatched to
    call_id: str | None = None  # the id the bridge gave it in the `call` message
    started_at: float = 0.0
    in_flight: bool = False
    expected: tuple | None = None  # ("result", text, is_error), ("unknown",) or ("cancelled",)
    switched: bool = False  # its answer must come as an SSE stream
    hung_up: bool = False


@dataclass(eq=False)
class Listener:
    """One agent's notification stream, and how many list_changed it must have heard."""

    key: int
    client_id: str
    modern: bool
    exchange: AgentExchange = field(repr=False)
    changes: int = 0
    open: bool = True


class Model:
    """What the bridge should hold: connections, agent calls, listeners, and changes not yet announced."""

    def __init__(self) -> None:
        self.conns: dict[int, Conn] = {}
        self.calls: dict[int, AgentCall] = {}  # by JSON-RPC id, in start order
        self.listeners: dict[int, Listener] = {}
        self.dirty: set[str] = set()  # client IDs whose tool set changed since the last timer

    def holder(self, client_id: str) -> Conn | None:
        """The connection that holds `client_id`, if any."""
        for conn in self.conns.values():
            if conn.online and conn.client_id == client_id:
                return conn
        return None

    def tool_set(self, client_id: str) -> tuple:
        """The tools agents of `client_id` see: the holder's latest register, else none."""
        holder = self.holder(client_id)
        return holder.tools or () if holder is not None else ()

    def in_flight(self, conn: Conn | None = None) -> list[AgentCall]:
        return [c for c in self.calls.values() if c.in_flight and (conn is None or c.conn is conn)]

    def open_listeners(self, client_id: str | None = None) -> list[Listener]:
        return [s for s in self.listeners.values() if s.open and client_id in (None, s.client_id)]

    def live(self, online: bool = False) -> list[int]:
        """Keys of the connections whose transport is still there (and that hold their ID, if `online`)."""
        return [k for k, c in self.conns.items() if not c.gone and (c.online or not online)]

    def closing(self) -> list[int]:
        """Keys of the connections closed (by either side, or refused) whose transport is still there."""
        return [k for k, c in self.conns.items() if not c.gone and not c.online]


class BridgeMachine(RuleBasedStateMachine):
    """Random app and agent events against one bridge, each step checked against the model."""

    def __init__(self) -> None:
        super().__init__()
        self.model = Model()
        self.now = NOW
        self.timer_at: float | None = None  # the server's single timer
        self.bridge = make_bridge(wake=self._wake, **LIMITS)
        self.endpoint = AgentEndpoint(self.bridge, self.bridge.verifier, None)
        self.bearers = {c: b"Bearer " + token(c, "agent", ttl=TOKEN_TTL).encode() for c in CLIENT_IDS}
        self.next_key = 1

    # -- the server's part: one timer, re-armed at next_deadline() (net/server.py) -------------

    def _wake(self, when: float) -> None:
        when = max(when, self.now)
        if self.timer_at is None or when < self.timer_at:
            self.timer_at = when

    def _run_timers(self, until: float) -> None:
        """Fire the server's timer whenever it is due, up to `until`, as the event loop would."""
        for _ in range(100_000):
            if self.timer_at is None or self.timer_at > until:
                break
            self.now = when = max(self.timer_at, self.now)
            self.timer_at = None
            self._expect_timer_work(when)
            self.bridge.on_timer(when)
            self._observe_sweep(when)
            deadline = self.bridge.next_deadline()
            # Work left due at `when` would wait for a timer nobody set; only a change on_timer
            # made itself (an app it closed) may ask to be announced at once.
            assert deadline is None or deadline > when or (deadline == -math.inf and self.model.dirty)
            if deadline is not None:
                self._wake(deadline)
        else:
            raise AssertionError("the bridge's timer never settles")
        self.now = until
        for key in self.model.live(online=True):
            self._assert_not_overdue(self.model.conns[key], until)

    def _expect_timer_work(self, when: float) -> None:
        """What on_timer(when) must do before its sweep: announce, time calls out, switch to streams."""
        model = self.model
        for client_id in model.dirty:
            for listener in model.open_listeners(client_id):
                listener.changes += 1
        model.dirty.clear()
        for call in model.in_flight():
            if call.started_at + CALL_TIMEOUT <= when:
                call.conn.expected.append(("cancel", call.call_id))
                self._answer(call, ("result", TIMED_OUT, True))
        for call in model.in_flight():
            if call.wants_stream and call.started_at + STREAM_AFTER_SECONDS <= when:
                call.switched = True

    def _observe_sweep(self, when: float) -> None:
        """Take the closes the sweep made, each checked to be due (docs/protocol.md, Close codes)."""
        for key in self.model.live(online=True):
            conn = self.model.conns[key]
            self._read(conn)
            if not conn.closes:
                continue
            (code,) = conn.closes
            idle = when - conn.last_seen >= IDLE_TIMEOUT
            if code == 4408:
                assert idle, f"4408 after {when - conn.last_seen} s of silence"
            else:
                assert code == 4429 and not idle, f"the sweep closed with {code}"
                assert conn.congested_since is not None and when - conn.congested_since >= SOFT_SECONDS
            self._ends(conn, code)

    def _assert_not_overdue(self, conn: Conn, when: float) -> None:
        assert when - conn.last_seen < IDLE_TIMEOUT + SWEEP_EVERY + SLACK, "an idle app is still online"
        if conn.congested_since is not None:
            assert when - conn.congested_since < SOFT_SECONDS + SWEEP_EVERY + SLACK, "a congested app"

    # -- the model's bookkeeping ------------------------------------------------------------

    def _read(self, conn: Conn) -> None:
        """Decode what the bridge wrote to the connection since the last read (one frame per write)."""
        fresh = conn.link.writes[conn.writes_read :]
        conn.writes_read += len(fresh)
        for fin, opcode, payload in decode_server_frames(b"".join(fresh)):
            assert fin
            if opcode == Op.TEXT:
                conn.received.append(wire_form(json.loads(payload)))
            else:
                assert opcode == Op.CLOSE, opcode
                conn.closes.append(int.from_bytes(payload[:2], "big"))

    def _answer(self, call: AgentCall, expected: tuple) -> None:
        assert call.expected is None
        call.expected = expected
        call.in_flight = False

    def _tools_changed(self, client_id: str, before: tuple) -> None:
        """Its streams hear of a change when the turn ends; with none open, nobody is told (Bridge._announce)."""
        if self.model.tool_set(client_id) != before and self.model.open_listeners(client_id):
            self.model.dirty.add(client_id)

    def _ends(self, conn: Conn, close_code: int | None) -> None:
        """The connection stops holding its client ID: its calls fail, its tools go (ClientMCP v1 §5.3)."""
        if not conn.online:
            return  # already closed: nothing more happens, not even a second close frame
        conn.close_code = close_code
        before = self.model.tool_set(conn.client_id)
        conn.online = False
        for call in self.model.in_flight(conn):
            self._answer(call, ("result", Outcome.DISCONNECTED.text, True))
        self._tools_changed(conn.client_id, before)

    def _new_conn(self, client_id: str, offered: str) -> Conn:
        channel, link = connect(self.bridge, None, now=self.now, offered=offered)
        conn = Conn(len(self.model.conns), client_id, channel, link, self.now)
        self.model.conns[conn.key] = conn
        return conn

    def _connect(self, client_id: str) -> None:
        older = self.model.holder(client_id)
        if older is not None:
            self._ends(older, 4409)  # the newest connection wins (ClientMCP v1 §3.1)
        self._new_conn(client_id, token(client_id, ttl=TOKEN_TTL))

    def _draw_conn(self, data, online: bool = False) -> Conn:
        return self.model.conns[data.draw(st.sampled_from(self.model.live(online)), label="conn")]

    def _send(self, conn: Conn, frame: bytes) -> None:
        conn.channel.receive_data(frame, self.now)
        if conn.online:
            conn.last_seen = self.now

    def _post(self, client_id: str, body: dict, headers: dict, accept: bytes) -> AgentExchange:
        """One POST to /mcp from an agent of `client_id`."""
        headers = {
            b"content-type": b"application/json",
            b"accept": accept,
            b"authorization": self.bearers[client_id],
            **headers,
        }
        request = request_with_headers(b"POST", b"/mcp", headers, (), json.dumps(body).encode(), True)
        exchange = AgentExchange(request)
        self.endpoint.handle(exchange, b"", self.now)
        return exchange

    def _key(self) -> int:
        self.next_key += 1
        return self.next_key

    # -- apps -------------------------------------------------------------------------------

    @initialize(tools=st.lists(TOOL_SETS, min_size=len(CLIENT_IDS), max_size=len(CLIENT_IDS)))
    def apps_start_online(self, tools):
        """Each client ID's app connects and registers first, so that calls have somewhere to go."""
        for client_id, declared in zip(CLIENT_IDS, tools):
            self._connect(client_id)
            self._register(self.model.holder(client_id), declared, None)

    @rule(client_id=st.sampled_from(CLIENT_IDS), refused=st.booleans())
    def app_connects(self, client_id, refused):
        """A connection for the ID (a newer one replaces its holder), or one offering an agent's token (4401)."""
        if not refused:
            self._connect(client_id)
            return
        conn = self._new_conn(client_id, token(client_id, "agent", ttl=TOKEN_TTL))
        conn.online = False  # it never holds the ID, nor takes it from the holder
        conn.close_code = 4401

    @precondition(lambda self: self.model.live(online=True))
    @rule(data=st.data(), tools=TOOL_SETS, instructions=st.sampled_from([None, "x"]))
    def app_registers(self, data, tools, instructions):
        """A register: new tools, the same set again, or none at all (how an app withdraws every tool)."""
        self._register(self._draw_conn(data, online=True), tools, instructions)

    def _register(self, conn: Conn, tools: tuple, instructions: str | None) -> None:
        members = {} if instructions is None else {"instructions": instructions}
        declared = (tool(name[:2], title="T") if name.endswith("'") else tool(name) for name in tools)
        register(conn.channel, *declared, now=self.now, **members)
        conn.last_seen = self.now
        before = self.model.tool_set(conn.client_id)
        conn.tools = tools
        conn.expected.append(("registered",))
        self._tools_changed(conn.client_id, before)

    @precondition(lambda self: self.model.live(online=True))
    @rule(data=st.data(), exact=st.booleans())
    def app_pings(self, data, exact):
        conn = self._draw_conn(data, online=True)
        self._send(conn, client_text(b'{"type":"ping"}' if exact else {"type": "ping", "n": 1}))
        conn.expected.append(("pong",))

    def _app_result(self, conn: Conn, call_id: str, is_error: bool) -> None:
        text = f"conn {conn.key} answers {call_id}"
        result: dict = {"content": [{"type": "text", "text": text}]}
        if is_error:
            result["isError"] = True  # the tool's own error passes through like any result
        self._send(conn, client_text({"type": "result", "id": call_id, "result": result}))
        for call in self.model.in_flight(conn):
            if conn.online and call.call_id == call_id:
                self._answer(call, ("result", text, is_error))

    @precondition(lambda self: self.model.in_flight())
    @rule(data=st.data(), is_error=st.booleans())
    def app_answers(self, data, is_error):
        call = self.model.calls[data.draw(st.sampled_from([c.key for c in self.model.in_flight()]))]
        self._app_result(call.conn, call.call_id, is_error)

    @precondition(lambda self: self.model.live())
    @rule(data=st.data())
    def app_sends_a_stray_result(self, data):
        """A result from any connection, closed ones too, for any id: finished, another's, or never given."""
        conn = self._draw_conn(data)
        ids = sorted({c.call_id for c in self.model.calls.values() if c.call_id} | {"0", "x"})
        self._app_result(conn, data.draw(st.sampled_from(ids), label="id"), False)

    @precondition(lambda self: self.model.live(online=True))
    @rule(data=st.data(), drained=st.booleans())
    def app_congests_or_drains(self, data, drained):
        """Unsent data to the app rises over the soft limit, or falls back (the net layer tells the channel)."""
        conn = self._draw_conn(data, online=True)
        if drained:
            conn.channel.drained()
            conn.congested_since = None
        else:
            conn.channel.congested(self.now)
            if conn.congested_since is None:
                conn.congested_since = self.now

    @precondition(lambda self: self.model.live(online=True))
    @rule(data=st.data(), how=st.sampled_from(sorted(GOING_AWAY)))
    def app_goes_away(self, data, how):
        """An online app closes cleanly, loses its transport, breaks the protocol, or stops reading."""
        conn = self._draw_conn(data, online=True)
        if how == "transport lost":
            self._transport_ends(conn)
        elif how == "stops reading":
            conn.channel.overflowed(self.now)
            self._ends(conn, 4429)
        else:
            self._send(conn, GOING_AWAY[how])
            self._ends(conn, 1000 if how == "clean close" else 4400)

    @precondition(lambda self: self.model.closing())
    @rule(data=st.data(), replies=st.booleans())
    def closed_app_finishes(self, data, replies):
        """A connection closed but not yet gone: the app replies with its close frame (or not), then TCP ends."""
        conn = self.model.conns[data.draw(st.sampled_from(self.model.closing()), label="conn")]
        if replies:
            self._send(conn, GOING_AWAY["clean close"])  # the bridge sends nothing more
        self._transport_ends(conn)

    def _transport_ends(self, conn: Conn) -> None:
        conn.channel.connection_lost(self.now)
        conn.gone = True
        self._ends(conn, None)

    # -- agents -----------------------------------------------------------------------------

    @rule(
        data=st.data(),
        aimed=st.sampled_from([True, True, False]),
        modern=st.booleans(),
        wants_stream=st.booleans(),
        session=st.sampled_from(SESSIONS),
    )
    def agent_calls(self, data, aimed, modern, wants_stream, session):
        """A tools/call: `aimed`, to a tool an online app declared; else to any tool of any client ID."""
        declared = {
            (c.client_id, name[:2]) for c in self.model.conns.values() if c.online for name in c.tools or ()
        }
        if aimed and declared:
            client_id, name = data.draw(st.sampled_from(sorted(declared)), label="tool")
        else:
            client_id = data.draw(st.sampled_from(CLIENT_IDS), label="client_id")
            name = data.draw(st.sampled_from((*TOOL_NAMES, MISSING_TOOL)), label="name")
        key = self._key()
        params: dict = {"name": name, "arguments": {"n": key}}
        if modern:
            params["_meta"] = {META_VERSION: MODERN, META_CAPABILITIES: {}}
            headers = {b"mcp-protocol-version": MODERN.encode(), b"mcp-method": b"tools/call"}
            headers[b"mcp-name"] = name.encode()
            session = None
        else:
            headers = {b"mcp-protocol-version": b"2025-11-25"}
            if session is not None:
                headers[b"mcp-session-id"] = session
        accept = b"application/json, text/event-stream" if wants_stream else b"application/json"
        holder = self.model.holder(client_id)
        body = {"jsonrpc": "2.0", "id": key, "method": "tools/call", "params": params}
        exchange = self._post(client_id, body, headers, accept)
        call = AgentCall(key, client_id, name, modern, session, wants_stream, exchange, started_at=self.now)
        self.model.calls[key] = call
        # docs/protocol.md, Call outcomes: the ones decided at once, else a `call` to the holder.
        if holder is None:
            self._answer(call, ("result", Outcome.OFFLINE.text, True))
        elif holder.tools is None:
            self._answer(call, ("result", Outcome.NOT_REGISTERED.text, True))
        elif name not in {declared[:2] for declared in holder.tools}:
            self._answer(call, ("unknown",))
        elif holder.congested_since is not None or len(self.model.in_flight(holder)) >= MAX_CALLS:
            self._answer(call, ("result", Outcome.BUSY.text, True))
        else:
            self._read(holder)
            fresh = holder.received[len(holder.expected) :]
            assert len(fresh) == 1 and fresh[0][0] == "call", fresh
            _, call_id, sent_name, arguments = fresh[0]
            assert (sent_name, arguments) == (name, {"n": key})
            assert call_id not in {c.call_id for c in self.model.calls.values()}, "a call id used twice"
            holder.expected.append(fresh[0])
            call.conn, call.call_id, call.in_flight = holder, call_id, True

    @precondition(lambda self: any(not c.modern for c in self.model.calls.values()))
    @rule(data=st.data(), aimed=st.booleans(), wrong=st.sampled_from([None, None, "session", "client ID"]))
    def agent_cancels(self, data, aimed, wrong):
        """A legacy notifications/cancelled: it ends only its own client ID's and session's call.

        `aimed`: at a call in flight, if there is one; else at any legacy call, finished ones too.
        """
        keys = [c.key for c in self.model.calls.values() if not c.modern and (c.in_flight or not aimed)]
        keys = keys or [c.key for c in self.model.calls.values() if not c.modern]
        call = self.model.calls[data.draw(st.sampled_from(keys), label="call")]
        session = call.session if wrong != "session" else next(s for s in SESSIONS if s != call.session)
        client_id = (
            call.client_id if wrong != "client ID" else next(c for c in CLIENT_IDS if c != call.client_id)
        )
        headers = {} if session is None else {b"mcp-session-id": session}
        body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": call.key}}
        exchange = self._post(client_id, body, headers, b"application/json")
        assert exchange.events == [("respond", 202, b"")]
        if call.in_flight and wrong is None:
            call.conn.expected.append(("cancel", call.call_id))
            self._answer(call, ("cancelled",))

    @precondition(lambda self: self.model.in_flight())
    @rule(data=st.data())
    def agent_hangs_up(self, data):
        """The agent's connection closes before the answer: the app gets `cancel`, the agent nothing more."""
        call = self.model.calls[data.draw(st.sampled_from([c.key for c in self.model.in_flight()]))]
        call.exchange.hang_up(self.now)
        call.conn.expected.append(("cancel", call.call_id))
        call.in_flight = False
        call.hung_up = True

    @rule(client_id=st.sampled_from(CLIENT_IDS), modern=st.booleans())
    def agent_listens(self, client_id, modern):
        """A modern subscriptions/listen, or a legacy GET stream."""
        key = self._key()
        refused = len(self.model.open_listeners(client_id)) >= MAX_STREAMS
        if modern:
            params = {
                "notifications": {"toolsListChanged": True},
                "_meta": {META_VERSION: MODERN, META_CAPABILITIES: {}},
            }
            body = {"jsonrpc": "2.0", "id": key, "method": "subscriptions/listen", "params": params}
            headers = {b"mcp-protocol-version": MODERN.encode(), b"mcp-method": b"subscriptions/listen"}
            exchange = self._post(client_id, body, headers, b"application/json, text/event-stream")
        else:
            headers = {b"accept": b"text/event-stream", b"authorization": self.bearers[client_id]}
            exchange = AgentExchange(request_with_headers(b"GET", b"/mcp", headers, (), b"", True))
            self.endpoint.handle(exchange, b"", self.now)
        if refused:
            ((kind, status, _),) = exchange.events
            assert (kind, status) == ("respond", 429)
        else:
            self.model.listeners[key] = Listener(key, client_id, modern, exchange)

    @precondition(lambda self: self.model.open_listeners())
    @rule(data=st.data())
    def agent_stops_listening(self, data):
        listener = self.model.listeners[
            data.draw(st.sampled_from([s.key for s in self.model.open_listeners()]))
        ]
        listener.exchange.hang_up(self.now)
        listener.open = False

    # -- time -------------------------------------------------------------------------------

    # 0: the event loop's turn ends, and what the bridge asked to do at once is done (the
    # announcements). Else mostly a few seconds, so that apps stay online across several steps;
    # now and then exactly a timeout, past which whatever waited for it must have happened.
    @rule(
        seconds=st.one_of(
            st.sampled_from([0.0, STREAM_AFTER_SECONDS, CALL_TIMEOUT, IDLE_TIMEOUT]), st.floats(0.01, 3.0)
        )
    )
    def time_passes(self, seconds):
        self._run_timers(self.now + seconds)

    # -- what must hold after every step ----------------------------------------------------

    @invariant()
    def each_call_has_its_one_answer(self):
        """One answer, the predicted one, never two; none while pending, none after a hang-up."""
        for call in self.model.calls.values():
            exchange = call.exchange
            assert exchange.late == 0, "written to an agent that hung up"
            got = [self._outcome(call, status, message) for status, message in answers(exchange)]
            assert got == ([] if call.expected is None else [call.expected]), call
            # docs/protocol.md, Call outcomes: a stream only for an agent that accepts one, after a second.
            assert (("start",) in exchange.events) == call.switched, call

    def _outcome(self, call: AgentCall, status: int, message: dict | None) -> tuple:
        """An answer as the model writes what it expects."""
        if message is None:
            return ("cancelled",)  # a streamed answer ended without an event
        assert message["jsonrpc"] == "2.0" and message["id"] == call.key
        if "error" in message:
            error = message["error"]
            if error["code"] == -32800:
                assert status == 200
                return ("cancelled",)
            assert error == {"code": -32602, "message": f"Unknown tool: {call.name}"}, error
            assert status == (400 if call.modern else 200)
            return ("unknown",)
        assert status == 200
        result = message["result"]
        assert result.pop("resultType", None) == ("complete" if call.modern else None)
        (content,) = result.pop("content")
        is_error = result.pop("isError", False)
        assert result == {} and content["type"] == "text"
        return ("result", content["text"], is_error)

    @invariant()
    def each_app_got_what_was_meant_for_it(self):
        """Calls, cancels, registered and pongs: to this connection only, in order; one close at most."""
        for conn in self.model.conns.values():
            self._read(conn)
            assert conn.received == conn.expected, conn
            assert conn.closes == ([] if conn.close_code is None else [conn.close_code]), conn
            assert conn.link.written_after_end == 0

    @invariant()
    def each_stream_hears_its_own_changes(self):
        """Exactly one list_changed per announced change of its own client ID, tagged with its own id."""
        for listener in self.model.listeners.values():
            exchange = listener.exchange
            assert exchange.late == 0, "written to a stream whose agent went away"
            assert exchange.events[0] == ("start",)
            chunks = [event[1] for event in exchange.events[1:] if event[0] == "chunk"]
            assert len(chunks) == len(exchange.events) - 1, "a stream the bridge ended by itself"
            messages = [sse_data(chunk) for chunk in chunks if chunk != KEEPALIVE]
            if listener.modern:
                ack = messages.pop(0)
                assert ack["method"] == "notifications/subscriptions/acknowledged"
                for message in messages:
                    assert message["params"]["_meta"] == {META_SUBSCRIPTION: listener.key}
            assert [m["method"] for m in messages] == ["notifications/tools/list_changed"] * listener.changes

    @invariant()
    def the_bridge_holds_what_the_model_does(self):
        bridge, model = self.bridge, self.model
        assert bridge.apps == {c.client_id: c.channel for c in model.conns.values() if c.online}
        assert len(bridge.calls) == len(model.in_flight())
        for conn in model.conns.values():
            assert set(conn.channel.calls) == {c.call_id for c in model.in_flight(conn)}
        counts = {c: len(model.open_listeners(c)) for c in CLIENT_IDS if model.open_listeners(c)}
        assert {c: len(s) for c, s in bridge.streams.items()} == counts
        assert bridge.stream_count == len(model.open_listeners())
        assert bridge.app_connections == len(model.live())
        deadline = bridge.next_deadline()
        assert (deadline == -math.inf) == bool(model.dirty)
        # The server's one timer fires at or before whatever the bridge has to do next.
        assert deadline is None or (self.timer_at is not None and self.timer_at <= max(deadline, self.now))

    # -- the end of a run -------------------------------------------------------------------

    def teardown(self):
        """No call is left unanswered past the timeout, and once everything closes nothing is left."""
        self._run_timers(self.now + CALL_TIMEOUT)
        for call in self.model.calls.values():
            assert call.expected is not None or call.hung_up, call
        for listener in self.model.open_listeners():
            listener.exchange.hang_up(self.now)
            listener.open = False
        for key in self.model.live():
            self._transport_ends(self.model.conns[key])
        # Past the next sweep (which forgets it had apps) and the next keep-alive tick.
        self._run_timers(self.now + IDLE_TIMEOUT + 20)
        self.each_call_has_its_one_answer()
        self.each_app_got_what_was_meant_for_it()
        self.each_stream_hears_its_own_changes()
        self.the_bridge_holds_what_the_model_does()
        bridge = self.bridge
        assert bridge.apps == {} and bridge.streams == {} and bridge.stream_count == 0
        assert len(bridge.calls) == 0 and bridge.app_connections == 0
        assert all(conn.channel.calls == {} for conn in self.model.conns.values())
        # Nothing due at all: no announcement pending, no call deadline or streamed call's tick,
        # no sweep, no stream keep-alive; this covers the private tables behind them
        # (InFlightCalls' streamed calls, Bridge._announcing) without reading them.
        assert bridge.next_deadline() is None
        assert self.timer_at is None


# derandomize: every run, here and on CI, tries the same examples, so a failure is never a
# flake and a pass means the same thing each time; database=None: nothing is written to the
# checkout, and no failure found on one machine is replayed only there. deadline=None: a
# step's time varies with the twin and the machine's load, and is not what is tested.
TestBridgeModel = BridgeMachine.TestCase
TestBridgeModel.settings = settings(
    max_examples=200, stateful_step_count=50, derandomize=True, database=None, deadline=None
)
