"""The agent endpoint's notification streams: modern `subscriptions/listen` and the legacy GET stream.

Both are the bridge's `NotificationStream` (core/bridge.py); `sse_event` and the SSE heads
serve every SSE answer, a slow tools/call's too (core/agent_context.py).
"""

from __future__ import annotations

from clientmcp_fast.core import jsonrpc
from clientmcp_fast.core.http import Exchange
from clientmcp_fast.speedups import jsonrpc_result

META_SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"

SSE_HEADERS = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
)
KEEPALIVE = b": keep-alive\n\n"
_LIST_CHANGED = jsonrpc.notification("notifications/tools/list_changed")


def sse_event(payload: bytes) -> bytes:
    """One SSE `message` event; JSON's own line breaks are whitespace, so they become spaces."""
    if b"\n" in payload or b"\r" in payload:
        # Raw line breaks can only sit between JSON tokens (strings escape theirs), so
        # replacing them keeps the JSON intact and the event one line of data.
        payload = payload.replace(b"\r", b" ").replace(b"\n", b" ")
    return b"event: message\ndata: " + payload + b"\n\n"


class _CoalescingStream:
    """What both eras' notification streams share: nothing piles up for an agent that does not read.

    A list_changed says only "read the tools again", so one still unsent covers every change
    after it; a keep-alive is for a stream that sends nothing else. So while the agent has
    not taken what was written, a further list_changed or keep-alive is not written: an
    unread stream holds at most a keep-alive and one list_changed, however many changes come.
    """

    __slots__ = ("exchange", "_last_was_change")

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self._last_was_change = False

    def _change(self, event: bytes) -> None:
        if self._last_was_change and self.exchange.backlog():
            return
        self._last_was_change = True
        self.exchange.stream(event)

    def keep_alive(self) -> None:
        if self.exchange.backlog():
            return
        self._last_was_change = False
        self.exchange.stream(KEEPALIVE)


class ListenStream(_CoalescingStream):
    """A modern `subscriptions/listen` stream (MCP 2026-07-28, subscriptions): the bridge's `NotificationStream`."""

    __slots__ = ("id_json", "tools")

    def __init__(self, exchange: Exchange, id_json: bytes, tools: bool) -> None:
        super().__init__(exchange)
        self.id_json = id_json
        self.tools = tools

    def _tag(self) -> bytes:
        return b'{"' + META_SUBSCRIPTION.encode() + b'":' + self.id_json + b"}"

    def acknowledge(self) -> None:
        honored = b'{"toolsListChanged":true}' if self.tools else b"{}"
        params = b'{"_meta":' + self._tag() + b',"notifications":' + honored + b"}"
        self.exchange.stream(
            sse_event(jsonrpc.notification("notifications/subscriptions/acknowledged", params))
        )

    def tools_changed(self) -> None:
        if self.tools:
            params = b'{"_meta":' + self._tag() + b"}"
            self._change(sse_event(jsonrpc.notification("notifications/tools/list_changed", params)))

    def end(self) -> None:
        final = b'{"resultType":"complete","_meta":' + self._tag() + b"}"
        self.exchange.on_abandon = None
        self.exchange.stream(sse_event(jsonrpc_result(self.id_json, final)))
        self.exchange.end_stream()


class LegacyStream(_CoalescingStream):
    """A legacy GET notification stream (MCP 2025-11-25, basic/transports): the bridge's `NotificationStream`."""

    __slots__ = ()

    def tools_changed(self) -> None:
        self._change(sse_event(_LIST_CHANGED))

    def end(self) -> None:
        self.exchange.on_abandon = None
        self.exchange.end_stream()
