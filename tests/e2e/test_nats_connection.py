"""One NATS connection per process, for the cluster and the generations bucket (net/nats_connection.py).

A real `nats-server` with its monitoring endpoint counts the bridges' clients: an instance with
`--nats` and `--state nats` holds one connection, which the cluster and the bucket's follower
share. A relay in front of it drops the connection and then refuses each attempt: the one
connection retries under the one policy (an attempt every RECONNECT_SECONDS), and both its
users come back with it. The connection alone: `open` fails in one line when no server answers,
`wait_open` waits for one, and a user that fails to take a loss does not keep the others from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
import test_cluster
from agents import WAIT
from conftest import make_token
from natsserver import NatsServer, free_port
from test_cluster import sees
from test_cluster_revocation import CAUGHT_UP, STATE, CuttableProxy, eventually, revoke, token
from test_revocation import PROMPTLY, becomes_401, closed_within, connect_app, tool_names

from clientmcp_fast.config import ConfigError
from clientmcp_fast.core.generations import REVOKED_REASON

pytest.importorskip("nats", reason="NATS needs nats-py (pip install 'clientmcp-fast[nats]')")

from clientmcp_fast.net.nats_connection import (  # noqa: E402 - after the skip: nats-py may be missing
    RECONNECT_SECONDS,
    NatsConnection,
    NatsUnreachable,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def nats_server() -> Iterator[NatsServer]:
    """A nats-server with JetStream and its monitoring endpoint (`clients`)."""
    server = NatsServer(monitor=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


cluster = test_cluster.cluster  # joined through the `nats_server` above


def instance_names(*bridges: Any) -> list[str]:
    """The names the bridges' connections have on the server: `clientmcp-<instance>`."""
    return sorted(f"clientmcp-{bridge.call(lambda s: s.nats.instance)}" for bridge in bridges)


async def clients_become(server: NatsServer, names: list[str]) -> None:
    """Wait until the server's clients are these (a `clientmcp` command's may still be closing)."""
    give_up = time.monotonic() + WAIT
    while (found := sorted(await asyncio.to_thread(server.clients))) != names:
        assert time.monotonic() < give_up, found
        await asyncio.sleep(0.05)


def one_connection(server: Any) -> bool:
    """The cluster and the follower hold the server's one connection, and it is up."""
    nats = server.nats
    return (
        nats is not None
        and server.cluster.connection is nats
        and server.generations.connection is nats
        and nats.connected
        and server.cluster.directory.connected
    )


# -- one connection ----------------------------------------------------------------------------------


async def test_the_cluster_and_the_bucket_share_one_connection_per_instance(cluster, nats_server):
    """`--nats` and `--state nats`: nats-server sees one client per instance, and both uses work over it."""
    a, b = cluster(2, state=STATE)
    for bridge in (a, b):
        assert bridge.call(one_connection)
        assert bridge.call(lambda s: s.cluster.instance == s.nats.instance)
    await clients_become(nats_server, instance_names(a, b))

    app_token, _ = await token(nats_server.url, "client", "alice")
    old_agent = make_token("agent", "alice")
    ws = await connect_app(a, app_token)
    await sees(b, "alice", tools=1)  # the cluster, over the shared connection
    assert await tool_names(b, old_agent) == ["echo"]
    assert await revoke(nats_server.url, "agent", "alice") == 1  # the bucket, over it too
    assert await becomes_401(b, old_agent, PROMPTLY) < PROMPTLY
    assert await revoke(nats_server.url, "client", "alice") == 1
    assert (await closed_within(ws, PROMPTLY))[:2] == (4401, REVOKED_REASON)
    await clients_become(nats_server, instance_names(a, b))  # still one each: none was added


async def test_the_cluster_alone_holds_one_connection_too(cluster, nats_server):
    a, b = cluster(2)
    assert a.call(lambda s: s.cluster.connection is s.nats and s.generations is None)
    await clients_become(nats_server, instance_names(a, b))


# -- one retry policy --------------------------------------------------------------------------------


class RefusingProxy(CuttableProxy):
    """The relay of test_cluster_revocation.py; while `refusing`, it accepts each connection, counts it and drops it."""

    def __init__(self, target_port: int) -> None:
        self.refusing = False
        self.attempts = 0
        super().__init__(target_port)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            self.attempts += 1
            writer.transport.abort()  # type: ignore[attr-defined]
            return
        await super()._relay(reader, writer)

    async def _refuse(self) -> None:
        self.refusing, self.attempts = True, 0
        for each in list(self._writers):
            each.transport.abort()  # type: ignore[attr-defined]
        self._writers.clear()

    def refuse(self) -> None:
        """Drop every connection relayed now, and from now on every new one (counted)."""
        self._run(self._refuse())

    def relay(self) -> int:
        """Relay again; the attempts refused meanwhile."""

        async def relay() -> int:
            self.refusing = False
            return self.attempts

        return self._run(relay())


async def test_a_lost_connection_is_retried_once_per_policy_interval_and_both_users_come_back(
    nats_server, start_bridge
):
    """NATS dropped and refused for a while: one connection retries, every RECONNECT_SECONDS; back, both uses resume.

    Two connections (one each for the cluster and the bucket) would make twice the attempts.
    A raise made meanwhile counts once the connection is back: the follower read the bucket again.
    """
    proxy = RefusingProxy(nats_server.port)
    try:
        bridge = start_bridge(nats=(proxy.url,), state=STATE)
        bridge.wait_for(one_connection, WAIT)
        app_token, _ = await token(nats_server.url, "client", "dan")
        ws = await connect_app(bridge, app_token)

        await asyncio.to_thread(proxy.refuse)
        refused = time.monotonic()
        await eventually(bridge, lambda s: not s.nats.connected and not s.cluster.directory.connected)
        assert await revoke(nats_server.url, "client", "dan") == 1  # the instance cannot hear of it yet
        await asyncio.sleep(2.0)
        assert ws.close_code is None  # the last generations read stay in force meanwhile
        attempts = await asyncio.to_thread(proxy.relay)
        outage = time.monotonic() - refused
        # One attempt at once, then one each RECONNECT_SECONDS (fewer on a busy machine, never more).
        assert 2 <= attempts <= 2 + outage / RECONNECT_SECONDS, (attempts, outage)

        await eventually(bridge, one_connection, CAUGHT_UP)
        assert bridge.call(lambda s: s.nats.reconnects) == 1
        code, reason, _ = await closed_within(ws, CAUGHT_UP)
        assert (code, reason) == (4401, REVOKED_REASON)
        await clients_become(nats_server, instance_names(bridge))  # the same one, through the relay
    finally:
        await asyncio.to_thread(proxy.close)


# -- the connection alone ------------------------------------------------------------------------------


async def test_open_fails_in_one_line_naming_the_servers_without_credentials():
    """Nobody listening: every server is tried twice, then one line, without the password."""
    port = free_port()
    connection = NatsConnection((f"nats://user:secret-5c1d@127.0.0.1:{port}",))
    started = time.monotonic()
    with pytest.raises(NatsUnreachable) as raised:
        await connection.open()
    assert time.monotonic() - started < 5
    assert str(raised.value).startswith(f"cannot connect to NATS at nats://127.0.0.1:{port}: ")
    assert "secret" not in str(raised.value) and "\n" not in str(raised.value)
    assert connection.nc is None and not connection.connected
    await connection.close()


async def test_wait_open_keeps_trying_until_a_server_answers():
    """The cluster's way: no error while NATS is not there yet; the connection is made when it is."""
    server = NatsServer(jetstream=False)
    connection = NatsConnection((server.url,))
    waiting = asyncio.ensure_future(connection.wait_open())
    again = asyncio.ensure_future(connection.wait_open())  # a second user waits for the same attempts
    try:
        await asyncio.sleep(1.2)
        assert not waiting.done() and not connection.connected
        await asyncio.to_thread(server.start)
        nc = await asyncio.wait_for(waiting, WAIT)
        assert await asyncio.wait_for(again, WAIT) is nc is connection.nc
        assert connection.connected and connection.reconnects == 0
        assert nc.options["name"] == f"clientmcp-{connection.instance}"
    finally:
        await connection.close()
        server.stop()
    assert not connection.connected


async def test_a_user_that_fails_to_take_a_loss_does_not_keep_the_others_from_it(caplog):
    """Each user is told of the loss and the return, whatever another one does with it."""
    server = NatsServer(jetstream=False)
    server.start()
    connection = NatsConnection((server.url,))
    heard: list[str] = []

    def fails() -> None:
        raise RuntimeError("a user's bug")

    connection.watch(fails, fails)
    connection.watch(lambda: heard.append("lost"), lambda: heard.append("back"))
    try:
        await connection.open()
        await asyncio.to_thread(server.stop)
        give_up = time.monotonic() + WAIT
        while heard != ["lost"]:
            assert time.monotonic() < give_up, heard
            await asyncio.sleep(0.02)
        await asyncio.to_thread(server.start)
        while heard != ["lost", "back"]:
            assert time.monotonic() < give_up, heard
            await asyncio.sleep(0.02)
        assert connection.connected and connection.reconnects == 1
    finally:
        await connection.close()
        server.stop()
    failed = [record for record in caplog.records if "failed to take its" in record.getMessage()]
    assert [record.getMessage() for record in failed] == [
        "nats: a user of the connection failed to take its loss",
        "nats: a user of the connection failed to take its return",
    ]


def test_an_unusable_creds_file_is_a_setting_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CLIENTMCP_NATS_CREDS", str(tmp_path / "missing.creds"))
    with pytest.raises(ConfigError, match=r"CLIENTMCP_NATS_CREDS: '.*missing\.creds': cannot read it"):
        NatsConnection(("nats://127.0.0.1:4222",))


async def test_close_ends_the_attempts_of_a_connection_never_made():
    connection = NatsConnection((f"nats://127.0.0.1:{free_port()}",))
    waiting = asyncio.ensure_future(connection.wait_open())
    await asyncio.sleep(0.3)
    await asyncio.wait_for(connection.close(), WAIT)
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(waiting, WAIT)
    assert waiting.cancelled() and connection.nc is None
