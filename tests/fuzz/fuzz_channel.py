"""The client channel (`core.channel.AppChannel`): an app signed in as app-1 sends any text messages.

The input is the messages, one per line, each sent as one text frame. Once the app has
registered a tool, the harness keeps up to two calls to it in flight, so that results
find calls (their ids are "1", "2", ... in start order).

A failure is an exception out of `receive_data`, a close code other than 4400 (or 1007,
for text that is not UTF-8), a bridge message that is not JSON, a call that ends other
than exactly once, or a result passed on that is not an object with a content array.
"""

from __future__ import annotations

import orjson
from fakes import NOW, RecordingWaiter, client_text, connect, is_open, make_bridge

from clientmcp_fast.core.messages import BRIDGE_TYPES

CLOSE_CODES = {4400, 1007}
ARGUMENTS = b'{"q":1}'


def TestOneInput(data: bytes) -> None:
    bridge = make_bridge()
    channel, link = connect(bridge, "app-1")
    waiters: list[RecordingWaiter] = []
    for message in data.split(b"\n"):
        channel.receive_data(client_text(message), NOW)
        toolset = channel.toolset
        if is_open(channel) and toolset is not None and toolset.tools and len(channel.calls) < 2:
            waiter = RecordingWaiter()
            waiters.append(waiter)
            bridge.start_call(channel, next(iter(toolset.tools.values())), ARGUMENTS, waiter, NOW)
    channel.connection_lost(NOW)
    assert not bridge.apps and not len(bridge.calls) and bridge.app_connections == 0
    closed = link.close()  # every server frame parses; at most one close, of at most 125 bytes
    assert closed is None or closed[0] in CLOSE_CODES, closed
    for text in link.texts():
        assert orjson.loads(text)["type"] in BRIDGE_TYPES, text
    for waiter in waiters:
        assert [event[0] for event in waiter.events] in (["result"], ["error"]), waiter.events
        if waiter.events[0][0] == "result":
            _, result, has_result_type = waiter.events[0]
            members = orjson.loads(result)
            assert type(members) is dict and type(members["content"]) is list, result
            assert has_result_type == ("resultType" in members), result
