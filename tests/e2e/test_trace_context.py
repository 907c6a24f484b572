"""The agent's W3C trace context reaching the app (docs/protocol.md, Trace context).

The bridge here does not trace itself (no `OTEL_*` settings): the app gets the agent's
`traceparent` and `tracestate` as the agent sent them, from `_meta` in either era or from
the headers, in one process and across two instances. A malformed value is dropped, never
forwarded; an app that did not register `trace: true` never sees the members.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import websockets
from agents import (
    RawHttp,
    answering_app,
    http_client,
    legacy_body,
    legacy_headers,
    legacy_session,
    modern_body,
    modern_headers,
    result_message,
    work_register,
)

pytestmark = pytest.mark.anyio

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
STATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"


@contextlib.asynccontextmanager
async def recording_app(
    bridge: Any, client_id: str, *, trace: bool = True
) -> AsyncIterator[list[dict[str, Any]]]:
    """An app with the tool `work` that records every `call` message it gets, as sent."""
    calls: list[dict[str, Any]] = []

    async def answer(ws: websockets.ClientConnection, call: dict[str, Any]) -> None:
        calls.append(call)
        await ws.send(result_message(call, "done"))

    async with answering_app(bridge, client_id, work_register(trace=trace), answer):
        yield calls


async def modern_call(http: Any, bridge: Any, headers: dict[str, str] | None = None, **meta: Any) -> None:
    body = modern_body("tools/call", 1, {"name": "work", "arguments": {}})
    body["params"]["_meta"].update(meta)
    response = await http.post(
        bridge.mcp_url,
        json=body,
        headers=modern_headers(bridge, "x", "tools/call", "work", **(headers or {})),
    )
    assert response.json()["result"]["content"][0]["text"] == "done", response.text


def trace_of(call: dict[str, Any]) -> dict[str, Any]:
    return {key: call[key] for key in ("traceparent", "tracestate") if key in call}


async def test_meta_trace_context_reaches_the_app_in_one_process_or_two(start_topology):
    """`_meta.traceparent` and `_meta.tracestate` (as the SDKs put them) are in the app's `call`."""
    topology = start_topology()
    async with recording_app(topology.app, "x") as calls, http_client(topology.agent) as http:
        await asyncio.to_thread(topology.sees, "x", 1)
        await modern_call(http, topology.agent, traceparent=PARENT, tracestate=STATE)
    assert trace_of(calls[0]) == {"traceparent": PARENT, "tracestate": STATE}
    assert set(calls[0]) == {"type", "id", "name", "arguments", "traceparent", "tracestate"}


async def test_headers_carry_it_in_the_legacy_era(bridge):
    """A legacy call's `traceparent`/`tracestate` headers reach the app; repeated tracestate headers join."""
    async with recording_app(bridge, "x") as calls, http_client(bridge) as http:
        session = await legacy_session(http, bridge)
        body = legacy_body("tools/call", 2, {"name": "work", "arguments": {}})
        headers = legacy_headers(bridge, "x", **{"Mcp-Session-Id": session})
        headers = [
            *headers.items(),
            ("traceparent", PARENT),
            ("tracestate", "rojo=1"),
            ("tracestate", "congo=2"),
        ]
        response = await http.post(bridge.mcp_url, json=body, headers=headers)
        assert response.json()["result"]["content"][0]["text"] == "done"
    assert trace_of(calls[0]) == {"traceparent": PARENT, "tracestate": "rojo=1,congo=2"}


async def test_whitespace_around_a_header_value_is_not_part_of_it(bridge):
    """RFC 9110 §5.5: a field value's leading and trailing whitespace is the header's, not the value's."""
    async with recording_app(bridge, "x") as calls:
        with await RawHttp.open(bridge) as raw:  # httpx would refuse to send the spaces
            body = modern_body("tools/call", 1, {"name": "work", "arguments": {}})
            headers = modern_headers(
                bridge, "x", "tools/call", "work", traceparent=f"  {PARENT} \t", tracestate=" a=1 "
            )
            raw.send("POST", "/mcp", headers, body)
            assert (await raw.head()).status == 200
    assert trace_of(calls[0]) == {"traceparent": PARENT, "tracestate": "a=1"}


async def test_meta_wins_over_the_headers(bridge):
    """Both present: `_meta` is the request's own, the header may be a proxy's."""
    other = "00-11111111111111111111111111111111-2222222222222222-01"
    async with recording_app(bridge, "x") as calls, http_client(bridge) as http:
        await modern_call(http, bridge, {"traceparent": other}, traceparent=PARENT)
    assert trace_of(calls[0]) == {"traceparent": PARENT}


@pytest.mark.parametrize(
    "traceparent",
    [
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",  # three fields
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # zero parent id
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  # version 00 with a fifth field
        'x"}, "name": "other',
        "",
        7,
        None,
    ],
)
async def test_a_malformed_traceparent_is_dropped_with_its_tracestate(bridge, traceparent):
    """A bad traceparent is never forwarded, nor the tracestate beside it; the call itself goes on."""
    async with recording_app(bridge, "x") as calls, http_client(bridge) as http:
        await modern_call(http, bridge, traceparent=traceparent, tracestate=STATE)
    assert trace_of(calls[0]) == {}


async def test_a_later_version_is_read_as_version_00(bridge):
    """W3C §4.3: a version above 00 is read for its first four fields; what follows is not forwarded."""
    later = "01" + PARENT[2:] + "-what-a-later-version-adds"
    async with recording_app(bridge, "x") as calls, http_client(bridge) as http:
        await modern_call(http, bridge, traceparent=later)
    assert trace_of(calls[0]) == {"traceparent": "01" + PARENT[2:]}


@pytest.mark.parametrize("tracestate", ["no equals sign", "a=1,a=2", "=1", "a=" + "x" * 600, 5])
async def test_a_malformed_tracestate_is_dropped_alone(bridge, tracestate):
    """The traceparent still goes; the tracestate that breaks W3C's rules (or the 512-character bound) does not."""
    async with recording_app(bridge, "x") as calls, http_client(bridge) as http:
        await modern_call(http, bridge, traceparent=PARENT, tracestate=tracestate)
    assert trace_of(calls[0]) == {"traceparent": PARENT}


async def test_two_traceparent_headers_are_neither_taken(bridge):
    async with recording_app(bridge, "x") as calls, http_client(bridge) as http:
        body = modern_body("tools/call", 1, {"name": "work", "arguments": {}})
        headers = [
            *modern_headers(bridge, "x", "tools/call", "work").items(),
            ("traceparent", PARENT),
            ("traceparent", PARENT),
        ]
        response = await http.post(bridge.mcp_url, json=body, headers=headers)
        assert response.status_code == 200
    assert trace_of(calls[0]) == {}


async def test_an_app_that_did_not_ask_never_sees_it(start_topology):
    """Without `trace: true` the `call` is what a v1 app expects, to the byte's members, in one process or two."""
    topology = start_topology()
    async with recording_app(topology.app, "x", trace=False) as calls, http_client(topology.agent) as http:
        await asyncio.to_thread(topology.sees, "x", 1)
        await modern_call(http, topology.agent, {"traceparent": PARENT}, traceparent=PARENT, tracestate=STATE)
    assert set(calls[0]) == {"type", "id", "name", "arguments"}
