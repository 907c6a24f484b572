"""The cluster when things go wrong, and what an operator sees of it (docs/scaling.md, docs/operations.md).

A real `nats-server` on loopback and bridge instances, in threads (test_cluster.py's
fixtures) or, where one must die by SIGKILL, as `clientmcp serve` processes; apps on the
project's `ClientMCP` or bare `websockets`, agents on the official `mcp` SDK or raw HTTP.
Metrics are scraped and parsed as in test_observability.py, and their exact deltas asserted.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import test_cluster
from agents import (
    DISCONNECTED,
    WAIT,
    HeldTool,
    RawHttp,
    echo,
    eventually,
    legacy_body,
    legacy_headers,
    nothing_leaks,
    online_app,
    sdk_agent,
)
from test_cluster import ServeProcess, gone, sees, text_of
from test_observability import delta, m, scrape

from clientmcp_fast.client import ClientMCP

pytest.importorskip("nats", reason="the cluster needs nats-py (pip install 'clientmcp-fast[nats]')")

pytestmark = pytest.mark.anyio

METRICS = ("127.0.0.1", 0)
# docs/scaling.md, Apps held elsewhere (written out: the test checks the package's text).
TOOLS_NOT_KEPT = (
    "The application is connected to another bridge instance, and this instance holds the tools of "
    "as many such applications as it may: they are unavailable here until that changes."
)

# test_cluster.py's fixtures: a nats-server on loopback, and bridge instances joined through it.
nats_server = test_cluster.nats_server
cluster = test_cluster.cluster


def cluster_samples(samples: dict) -> dict:
    """The samples of the cluster's own metrics."""
    return {key: value for key, value in samples.items() if key[0].startswith("clientmcp_cluster_")}


# -- docs/operations.md, Metrics: the cluster's -------------------------------------------------------


def test_a_single_process_has_no_cluster_metrics(start_bridge):
    bridge = start_bridge(metrics=METRICS)
    assert cluster_samples(scrape(bridge)) == {}


async def test_forwarded_and_served_calls_are_counted_by_outcome_on_both_instances(cluster):
    """An agent on b calls an app on a: b counts each call forwarded, a each call served, by how it ended."""
    a, b = cluster(metrics=METRICS)
    held = HeldTool()
    big = "x" * 1_500_000  # over nats-server's default max_payload (1 MB)

    async def large(arguments: dict[str, Any]) -> str:
        return big

    tools = {"echo": echo, "held": held, "large": large}
    async with online_app(a, "x", tools) as app, sdk_agent(b, "x", "legacy") as agent:
        await sees(b, "x", tools=3)
        gauges = cluster_samples(scrape(b))
        assert gauges[m("clientmcp_cluster_connected")] == 1
        assert gauges[m("clientmcp_cluster_instances")] == 1
        assert gauges[m("clientmcp_cluster_remote_apps")] == 1
        assert cluster_samples(scrape(a))[m("clientmcp_cluster_remote_apps")] == 0
        before_a, before_b = scrape(a), scrape(b)
        for n in range(2):
            assert json.loads(text_of(await agent.call_tool("echo", {"n": n}))) == {"n": n}
        result = await asyncio.wait_for(agent.call_tool("large"), WAIT)  # a's answer cannot cross
        assert result.is_error and text_of(result).startswith("The call or its answer is too large")
        with await RawHttp.open(b) as raw:  # an agent hanging up mid-call
            raw.send("POST", "/mcp", legacy_headers(b, "x"), legacy_body("tools/call", 1, {"name": "held"}))
            await asyncio.wait_for(held.started.wait(), WAIT)
        await asyncio.wait_for(held.cancelled.wait(), WAIT)
        held.started.clear()
        pending = asyncio.ensure_future(agent.call_tool("held"))  # the app leaves mid-call
        await asyncio.wait_for(held.started.wait(), WAIT)
        await app.close()
        result = await asyncio.wait_for(pending, WAIT)
        assert result.is_error and text_of(result) == DISCONNECTED
        after_a, after_b = scrape(a), scrape(b)
    forwarded = {"result": 2, "too_large": 1, "cancelled": 1, "disconnected": 1}
    assert {
        key: value
        for key, value in delta(before_b, after_b).items()
        if key[0] == "clientmcp_cluster_calls_forwarded_total"
    } == {m("clientmcp_cluster_calls_forwarded_total", outcome=o): n for o, n in forwarded.items()}
    # Every call of b's agent is a forwarded one: b's own call outcomes say the same (the answer
    # that could not cross included, which b learns of from a's error).
    assert {
        key[1]: value for key, value in delta(before_b, after_b).items() if key[0] == "clientmcp_calls_total"
    } == {(("outcome", o),): n for o, n in forwarded.items()}
    served = {"result": 3, "cancelled": 1, "disconnected": 1}  # a's app did answer `large`
    assert {
        key: value
        for key, value in delta(before_a, after_a).items()
        if key[0] == "clientmcp_cluster_calls_served_total"
    } == {m("clientmcp_cluster_calls_served_total", outcome=o): n for o, n in served.items()}
    assert not any(key[0] == "clientmcp_cluster_calls_served_total" for key in delta(before_b, after_b))
    assert not any(key[0] == "clientmcp_cluster_calls_forwarded_total" for key in delta(before_a, after_a))
    await gone(b, "x")
    await nothing_leaks(a)
    await nothing_leaks(b)


async def test_the_nats_connection_state_and_its_reconnects_are_metrics(cluster, nats_server):
    a, b = cluster(metrics=METRICS)
    before = scrape(a)
    assert before[m("clientmcp_cluster_connected")] == 1
    nats_server.stop()
    await scraped(a, lambda s: s[m("clientmcp_cluster_connected")] == 0)
    await scraped(a, lambda s: s[m("clientmcp_cluster_instances")] == 0)
    nats_server.start()
    await scraped(
        a, lambda s: s[m("clientmcp_cluster_connected")] == 1 and s[m("clientmcp_cluster_instances")] == 1
    )
    after = scrape(a)
    assert cluster_samples(delta(before, after)) == {m("clientmcp_cluster_reconnects_total"): 1}


async def scraped(bridge: Any, predicate: Any, timeout: float = WAIT) -> None:
    """Wait until the bridge's metrics satisfy `predicate`."""
    give_up = time.monotonic() + timeout
    while not predicate(await asyncio.to_thread(scrape, bridge)):
        if time.monotonic() > give_up:
            raise AssertionError("the metrics never showed it")
        await asyncio.sleep(0.05)


# -- docs/scaling.md, Failure detection: an instance killed with SIGKILL -------------------------------


class Balancer:
    """A TCP load balancer on loopback: each connection goes to the first instance that accepts it."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> Balancer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/connect"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for port in self.ports:
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
                break
            except OSError:
                continue  # that instance is down: the next one
        else:
            writer.close()
            return

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except ConnectionError:
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


def instances(count: int):
    return lambda s: s.cluster.directory.connected and len(s.cluster.directory.peers) == count


async def test_after_sigkill_of_its_instance_the_app_reconnects_elsewhere_and_answers_agents(
    cluster, nats_server
):
    """A holds the app and dies by SIGKILL: the call in flight fails on C within 5 s as a disconnection;
    the app (ClientMCP, reconnecting by itself through a load balancer) comes back on B, and C's agent
    calls it there, also once A has been taken as gone."""
    b, c = cluster(2)
    doomed = ServeProcess(nats_server.url)
    try:
        for bridge in (b, c):
            await asyncio.to_thread(bridge.wait_for, instances(2), WAIT)
        held = HeldTool()
        async with Balancer([doomed.port, b.port]) as balancer:
            app = ClientMCP(balancer.ws_url, b.token("client", "x"), backoff=(0.1, 0.5))
            app.expose("held", held)
            app.expose("echo", echo)
            async with app, sdk_agent(c, "x", "legacy") as agent:
                await sees(c, "x", tools=2)
                await sees(b, "x", tools=2)
                assert b.call(lambda s: s.bridge.apps["x"].instance) == c.call(
                    lambda s: s.bridge.apps["x"].instance
                )
                doomed_instance = c.call(lambda s: s.bridge.apps["x"].instance)
                pending = asyncio.ensure_future(agent.call_tool("held"))
                await asyncio.wait_for(held.started.wait(), WAIT)
                killed = time.monotonic()
                doomed.kill()
                result = await asyncio.wait_for(pending, WAIT)
                took = time.monotonic() - killed
                assert result.is_error and text_of(result) == DISCONNECTED
                assert took <= 5.0, took
                b_instance = b.call(lambda s: s.cluster.instance)
                await eventually(c, lambda s: getattr(s.bridge.apps.get("x"), "instance", None) == b_instance)
                await sees(c, "x", tools=2)  # and registered there
                assert json.loads(text_of(await agent.call_tool("echo", {"k": 1}))) == {"k": 1}
                await eventually(c, instances(1))  # A is taken as gone: the app, now on B, stays
                assert json.loads(text_of(await agent.call_tool("echo", {"k": 2}))) == {"k": 2}
                assert doomed_instance != b_instance
    finally:
        doomed.kill()
    await nothing_leaks(b)
    await nothing_leaks(c)


# -- docs/scaling.md, Apps held elsewhere: the bound on the tool sets an instance keeps -----------------


async def test_past_max_remote_apps_an_agent_gets_a_specific_tool_error_until_there_is_room(cluster):
    a, b = cluster(max_remote_apps=1, metrics=METRICS)
    async with online_app(a, "x", {"echo": echo}) as x:
        await sees(b, "x", tools=1)
        async with online_app(a, "y", {"echo": echo}) as y:
            await eventually(b, lambda s: "y" in s.bridge.apps)
            before = scrape(b)
            async with sdk_agent(b, "y", "legacy") as agent:
                assert (await agent.list_tools()).tools == []
                result = await agent.call_tool("echo", {"k": 1})
                assert result.is_error and text_of(result) == TOOLS_NOT_KEPT
            async with sdk_agent(b, "x", "legacy") as agent:
                assert json.loads(text_of(await agent.call_tool("echo", {"k": 2}))) == {"k": 2}
            after = scrape(b)
            assert after[m("clientmcp_cluster_remote_apps")] == 2
            assert after[m("clientmcp_cluster_remote_apps_without_tools")] == 1
            assert after[m("clientmcp_cluster_tools_not_kept_total")] == 1
            assert {k: v for k, v in delta(before, after).items() if k[0] == "clientmcp_calls_total"} == {
                m("clientmcp_calls_total", outcome="not_registered"): 1,
                m("clientmcp_calls_total", outcome="result"): 1,
            }
            await x.close()
            await gone(b, "x")
            y.expose("other", echo)  # its next register finds room
            await sees(b, "y", tools=2)
            async with sdk_agent(b, "y", "legacy") as agent:
                assert json.loads(text_of(await agent.call_tool("echo", {"k": 3}))) == {"k": 3}
            assert scrape(b)[m("clientmcp_cluster_remote_apps_without_tools")] == 0
    await nothing_leaks(a)
    await nothing_leaks(b)
