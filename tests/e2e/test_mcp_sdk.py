"""The official `mcp` 2.3.0 SDK as agent against a real bridge, in each mode (ClientMCP v1 §4, docs/protocol.md).

`legacy` does the initialize handshake (2025-11-25), `2026-07-28` pins the modern era
without a probe, `auto` (the SDK's default) probes server/discover and must end modern.
The app is always `ClientMCP`, in this test's loop. The calls' outcomes run twice
(conftest.py, `topology`): in one process, and with the app on one instance and the agent on
another, joined through a real nats-server (docs/scaling.md).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from agents import (
    DISCONNECTED,
    MODERN,
    OFFLINE,
    WAIT,
    HeldTool,
    SleepyTool,
    app_for,
    eventually,
    nothing_leaks,
    nothing_leaks_in,
    online_app,
    online_in,
    sdk_agent,
    wait_registered,
)
from mcp.types import TextContent

MODES = ["legacy", MODERN, "auto"]


pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("mode", MODES)]


async def echo(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"echoed": arguments}


async def noop(arguments: dict[str, Any]) -> str:
    return "ok"


def text_of(result: Any) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


class ListChanged:
    """Waits for notifications/tools/list_changed as the SDK surfaces it in the given mode."""

    def __init__(self) -> None:
        self.seen = asyncio.Event()

    async def on_message(self, message: Any) -> None:
        # Legacy: the SDK's GET stream hands server notifications to message_handler.
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self.seen.set()


async def expect_list_changed(client: Any, mode: str, listener: ListChanged, change: Any) -> None:
    """Run `change()` and wait for the agent to hear about it, by listen (modern) or GET stream (legacy)."""
    if mode == "legacy":
        await change()
        await asyncio.wait_for(listener.seen.wait(), WAIT)
        return
    async with client.listen(tools_list_changed=True) as subscription:
        assert subscription.honored.tools_list_changed is True
        await change()
        events = aiter(subscription)
        event = await asyncio.wait_for(anext(events), WAIT)
        assert type(event).__name__ == "ToolsListChanged"


# -- ClientMCP v1 §4.1, §4.2: connecting, listing, calling ---------------------------------------


async def test_negotiates_the_era_the_mode_asks_for(bridge, mode):
    """Legacy mode gets 2025-11-25 by initialize; pinned and auto modes end at 2026-07-28."""
    async with (
        online_app(bridge, "x", {"echo": echo}, instructions="Todo app."),
        sdk_agent(bridge, "x", mode) as client,
    ):
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else MODERN)
        if mode != MODERN:  # a pinned client skips discover, so it has no serverInfo to show
            assert client.server_info is not None and client.server_info.name == "clientmcp"
            assert client.instructions == "Todo app."
            assert client.server_capabilities.tools is not None
            assert client.server_capabilities.tools.list_changed is True
    await nothing_leaks(bridge)


async def test_lists_the_apps_tools_in_declared_order(bridge, mode):
    """tools/list shows the latest register's tools, in the order the app declared them."""
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    app = app_for(bridge, "x")
    app.expose("zeta", echo, description="Last letter", input_schema=schema)
    app.expose("alpha", echo, title="First", risk="observe")
    app.expose("mid", echo)
    async with app, sdk_agent(bridge, "x", mode) as client:
        listed = await client.list_tools()
        assert [tool.name for tool in listed.tools] == ["zeta", "alpha", "mid"]
        assert listed.next_cursor is None
        zeta, alpha, _ = listed.tools
        assert zeta.description == "Last letter"
        assert zeta.input_schema == schema
        assert alpha.title == "First"
        assert alpha.annotations is not None and alpha.annotations.read_only_hint is True
        assert alpha.meta == {"io.github.clientmcp/risk": "observe"}
    await nothing_leaks(bridge)


async def test_call_with_arguments_reaches_the_app_as_sent(topology, mode):
    """The app's handler receives the agent's arguments exactly; its result comes back."""
    seen: list[dict[str, Any]] = []

    async def record(arguments: dict[str, Any]) -> str:
        seen.append(arguments)
        return f"got {len(arguments)}"

    arguments = {"text": "héllo", "n": 3, "nested": {"list": [1, None, True]}}
    async with online_in(topology, "x", {"record": record}), sdk_agent(topology.agent, "x", mode) as client:
        result = await client.call_tool("record", arguments)
        assert result.is_error is False
        assert text_of(result) == "got 3"
        assert seen == [arguments]
    await nothing_leaks_in(topology)


async def test_call_without_arguments_reaches_the_app_as_empty_object(bridge, mode):
    """An absent `arguments` is sent to the app as {} (docs/protocol.md, Mapping)."""
    seen: list[dict[str, Any]] = []

    async def record(arguments: dict[str, Any]) -> dict[str, Any]:
        seen.append(arguments)
        return {"count": len(arguments)}

    async with online_app(bridge, "x", {"record": record}), sdk_agent(bridge, "x", mode) as client:
        result = await client.call_tool("record")
        assert result.is_error is False
        assert result.structured_content == {"count": 0}
        assert seen == [{}]
    await nothing_leaks(bridge)


# -- ClientMCP v1 §4.4: tool list changes --------------------------------------------------------


async def test_list_changed_when_the_app_registers_a_changed_tool_set(bridge, mode):
    """A register with a different tool set reaches the agent as notifications/tools/list_changed."""
    listener = ListChanged()
    async with (
        online_app(bridge, "x", {"first": noop}) as app,
        sdk_agent(bridge, "x", mode, message_handler=listener.on_message) as client,
    ):
        if mode == "legacy":
            await eventually(bridge, lambda s: s.bridge.stream_count == 1)  # the SDK's GET stream is open

        async def change() -> None:
            app.expose("second", noop)
            await wait_registered(app)

        await expect_list_changed(client, mode, listener, change)
        listed = await client.list_tools()
        assert [tool.name for tool in listed.tools] == ["first", "second"]
    await nothing_leaks(bridge)


async def test_replacing_connection_announces_its_tools(bridge, mode):
    """A second connection with the same client ID replaces the first (4409) and announces its tool set."""
    listener = ListChanged()
    old = app_for(bridge, "x")
    old.expose("old_tool", noop)
    async with old, sdk_agent(bridge, "x", mode, message_handler=listener.on_message) as client:
        if mode == "legacy":
            await eventually(bridge, lambda s: s.bridge.stream_count == 1)
        assert [tool.name for tool in (await client.list_tools()).tools] == ["old_tool"]
        new = app_for(bridge, "x")
        new.expose("new_tool", noop)

        async def replace() -> None:
            await new.connect()

        try:
            await expect_list_changed(client, mode, listener, replace)
            await asyncio.wait_for(old.closed(), WAIT)
            assert old.close_code == 4409
            assert [tool.name for tool in (await client.list_tools()).tools] == ["new_tool"]
            assert text_of(await client.call_tool("new_tool")) == "ok"
        finally:
            await new.close()
    await nothing_leaks(bridge)


# -- ClientMCP v1 §4.3, docs/protocol.md, Call outcomes ------------------------------------------


async def test_offline_app_has_no_tools_and_calls_fail_with_a_tool_error(topology, mode):
    """With no app connected, tools/list is empty and tools/call is an isError result saying why."""
    async with sdk_agent(topology.agent, "x", mode) as client:
        assert (await client.list_tools()).tools == []
        result = await client.call_tool("anything", {"a": 1})
        assert result.is_error is True
        assert text_of(result) == OFFLINE
    await nothing_leaks_in(topology)


async def test_timed_out_call_fails_and_cancels_the_apps_handler(start_topology, mode):
    """No result within the call timeout: a tool error naming it, and `cancel` to the app."""
    topology = start_topology(call_timeout=0.5)
    slow = SleepyTool(30)
    async with (
        online_in(topology, "x", {"slow": slow}) as app,
        sdk_agent(topology.agent, "x", mode) as client,
    ):
        result = await client.call_tool("slow")
        assert result.is_error is True
        assert text_of(result) == "The application did not answer within 0.5 s."
        await asyncio.wait_for(slow.cancelled.wait(), WAIT)
        assert app.calls_cancelled == 1
    await nothing_leaks_in(topology)


async def test_slow_call_is_answered_after_keep_alives(topology, mode):
    """A call that takes 2.5 s is streamed (docs/protocol.md, Call outcomes) and its result still arrives intact."""
    slow = SleepyTool(
        2.5, result={"content": [{"type": "text", "text": "done\nafter a while"}], "isError": False}
    )
    async with (
        online_in(topology, "x", {"slow": slow}) as app,
        sdk_agent(topology.agent, "x", mode) as client,
    ):
        result = await client.call_tool("slow")
        assert result.is_error is False
        assert text_of(result) == "done\nafter a while"
        assert app.calls_cancelled == 0
    await nothing_leaks_in(topology)


async def test_cancelled_call_reaches_the_app_as_cancel(topology, mode):
    """The SDK abandoning a call (legacy: notifications/cancelled; modern: aborting its POST) cancels it."""
    posted: list[bytes] = []

    async def remember(request: Any) -> None:
        if request.method == "POST":
            posted.append(request.content)

    held = HeldTool()
    async with (
        online_in(topology, "x", {"held": held}) as app,
        sdk_agent(topology.agent, "x", mode, event_hooks={"request": [remember]}) as client,
    ):
        call = asyncio.ensure_future(client.call_tool("held", {"step": 1}))
        await asyncio.wait_for(held.started.wait(), WAIT)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.wait_for(held.cancelled.wait(), WAIT)
        assert app.calls_cancelled == 1
        cancels = [body for body in posted if b'"notifications/cancelled"' in body]
        # mcp 2.3.0 spells a cancel per era (MCP 2025-11-25, basic/utilities/cancellation; MCP
        # 2026-07-28, basic/transports): a notification in legacy, closing the request's own
        # stream in 2026-07-28, which the bridge reads as a cancel.
        assert len(cancels) == (1 if mode == "legacy" else 0)
    await nothing_leaks_in(topology)


async def test_app_disconnecting_mid_call_fails_the_call_at_once(topology, mode):
    """The app going away before answering gives the agent a tool error saying so, at once."""
    held = HeldTool()
    async with (
        online_in(topology, "x", {"held": held}) as app,
        sdk_agent(topology.agent, "x", mode) as client,
    ):
        call = asyncio.ensure_future(client.call_tool("held"))
        await asyncio.wait_for(held.started.wait(), WAIT)
        closed = time.monotonic()
        await app.close()
        result = await asyncio.wait_for(call, WAIT)
        assert time.monotonic() - closed < 2  # not the heartbeat's 3 s, let alone the call timeout
        assert result.is_error is True
        assert text_of(result) == DISCONNECTED
        assert (await client.list_tools()).tools == []
    await nothing_leaks_in(topology)
