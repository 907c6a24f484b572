"""Instances joined through an account-secured NATS with creds files (docs/scaling.md, Settings).

A real nats-server in operator mode (JWTs made here, tests/e2e/natsserver.py) refuses any
connection without a user JWT of a known account and the signature of its nonce. Two
`clientmcp serve` processes sign with CLIENTMCP_NATS_CREDS by themselves
(clientmcp_fast/net/nkeys.py): the `nkeys` package is made unimportable in them. An instance
whose user belongs to an account the server does not know says so once and serves alone.
User and password or a token in the URL, right and wrong, are tried against servers that ask
for them.
`--state nats` and `clientmcp revoke` use the same file for the generations bucket.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from agents import OFFLINE, WAIT, echo, online_app, sdk_agent
from conftest import make_token
from natsserver import Account, NatsServer, Operator
from test_cluster import ServeProcess, text_of
from test_revocation import PROMPTLY, assert_one_line_error, clientmcp, closed_within, connect_app, tool_names

from clientmcp_fast.core.generations import REVOKED_REASON

nats = pytest.importorskip("nats", reason="the cluster needs nats-py (pip install 'clientmcp-fast[nats]')")

pytestmark = pytest.mark.anyio

REFUSED = (
    "nats: the server refused this instance's credentials ('Authorization Violation'): apps on other "
    "instances are unreachable until it accepts them; retrying (CLIENTMCP_NATS, CLIENTMCP_NATS_CREDS: "
    "docs/scaling.md, Settings)"
)


@pytest.fixture
def operator() -> Operator:
    return Operator()


@pytest.fixture
def account(operator: Operator) -> Account:
    return operator.account("clientmcp")


@pytest.fixture
def secured(operator: Operator, account: Account) -> Iterator[NatsServer]:
    """A nats-server that trusts `operator` and knows only `account`."""
    server = NatsServer(jetstream=False, config=operator.config())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def no_nkeys(tmp_path: Path) -> dict[str, str]:
    """PYTHONPATH for a `serve` in which `import nkeys` fails, as in the image and dist/clientmcp."""
    folder = tmp_path / "no-nkeys"
    folder.mkdir()
    (folder / "nkeys.py").write_text("raise ImportError('the bridge must sign without the nkeys package')\n")
    return {"PYTHONPATH": str(folder)}


def creds_file(folder: Path, name: str, text: str) -> str:
    path = folder / f"{name}.creds"
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


async def lists(client, tools: int) -> None:
    """Wait until the agent's instance has heard of the app (a NATS round trip after it registered)."""
    give_up = time.monotonic() + WAIT
    while len((await client.list_tools()).tools) != tools:
        assert time.monotonic() < give_up, "the app never reached the other instance"
        await asyncio.sleep(0.1)


async def refusal_said(log: Path) -> None:
    """Wait until the instance logging to `log` has said that the server refused its credentials."""
    give_up = time.monotonic() + WAIT
    while REFUSED not in log.read_text():
        assert time.monotonic() < give_up, log.read_text()
        await asyncio.sleep(0.1)


async def serves_alone(refused: ServeProcess, own: str, elsewhere: str) -> None:
    """A refused instance calls its own app `own`; `elsewhere`, held by another instance, is offline to it."""
    async with sdk_agent(refused, own, "legacy") as local:
        assert json.loads(text_of(await local.call_tool("echo", {"a": 1}))) == {"a": 1}
    async with sdk_agent(refused, elsewhere, "legacy") as remote:
        result = await remote.call_tool("echo")
        assert result.is_error and text_of(result) == OFFLINE


async def retries_pass(refused: ServeProcess) -> None:
    """Three more attempts of a refused instance (one each 0.5 s) go by: it is still up; `said_once` reads its log."""
    await asyncio.sleep(1.5)
    assert refused.process.poll() is None


def said_once(log: Path) -> None:
    """The refusal is in `log` once, however many attempts followed, and the instance never joined."""
    lines = log.read_text().splitlines()
    assert [line for line in lines if "refused" in line] == [line for line in lines if line.endswith(REFUSED)]
    assert len([line for line in lines if "refused" in line]) == 1, lines
    assert not any("joined the cluster" in line for line in lines), lines


async def test_the_server_refuses_a_connection_without_creds(secured):
    """The server of these tests is really secured: what passes below passes by the creds file."""
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(secured.url, allow_reconnect=False, connect_timeout=2)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_two_instances_join_with_creds_files_and_carry_a_call(
    secured, account, tmp_path, no_nkeys, mode
):
    """Each instance with a user of the bridge's account: the app on one, the SDK agent on the other."""
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    instances = []
    try:
        for index, log in enumerate(logs):
            creds = creds_file(tmp_path, f"bridge-{index}", account.creds(f"bridge-{index}"))
            with log.open("w") as stderr:
                instances.append(ServeProcess(secured.url, stderr, CLIENTMCP_NATS_CREDS=creds, **no_nkeys))
        a, b = instances
        async with online_app(a, "x", {"echo": echo}), sdk_agent(b, "x", mode) as client:
            await lists(client, 1)
            results = await asyncio.gather(*(client.call_tool("echo", {"n": n}) for n in range(5)))
            assert [json.loads(text_of(result)) for result in results] == [{"n": n} for n in range(5)]
    finally:
        for instance in instances:
            instance.kill()
    for log in logs:
        text = log.read_text()
        assert "nats: joined the cluster as instance" in text, text
        assert "refused" not in text and "Traceback" not in text, text


async def test_a_user_of_an_unknown_account_is_said_once_and_the_instance_serves_alone(
    secured, account, tmp_path
):
    """Creds signed by another operator's account: a warning at the first refusal, not one per retry.

    The instance keeps serving its own apps and retrying (a refusal can be mended on the NATS
    side, as when NATS is down); what is held elsewhere stays offline to its agents.
    """
    good = creds_file(tmp_path, "good", account.creds("bridge-good"))
    stranger = creds_file(tmp_path, "stranger", Operator().account("elsewhere").creds("bridge-stranger"))
    log = tmp_path / "refused.log"
    instances = []
    try:
        instances.append(ServeProcess(secured.url, CLIENTMCP_NATS_CREDS=good))
        with log.open("w") as stderr:
            instances.append(ServeProcess(secured.url, stderr, CLIENTMCP_NATS_CREDS=stranger))
        held, alone = instances
        await refusal_said(log)
        async with online_app(held, "x", {"echo": echo}), online_app(alone, "y", {"echo": echo}):
            await serves_alone(alone, "y", "x")
        await retries_pass(alone)
    finally:
        for instance in instances:
            instance.kill()
    said_once(log)


@pytest.mark.parametrize("auth", ["user and password", "token"])
async def test_credentials_in_the_url_join_and_wrong_ones_are_said_once_without_the_secret(tmp_path, auth):
    """docs/scaling.md, Settings: user and password or a token in CLIENTMCP_NATS; a wrong one is refused.

    Two instances with the right URL carry a call; a third with a wrong secret says the
    refusal once, serves its own apps, and never writes either secret to its log.
    """
    if auth == "token":
        config, good, bad = 'authorization { token: "tok-right-5c1d" }', "tok-right-5c1d", "tok-wrong-a7e2"
    else:
        config, good, bad = (
            'authorization { user: "bridge", password: "pw-right-5c1d" }',
            "pw-right-5c1d",
            "pw-wrong-a7e2",
        )
    server = NatsServer(jetstream=False, config=config)
    server.start()
    host = f"127.0.0.1:{server.port}"

    def url(secret: str) -> str:
        return f"nats://{secret}@{host}" if auth == "token" else f"nats://bridge:{secret}@{host}"

    logs = [tmp_path / f"{name}.log" for name in ("a", "b", "refused")]
    instances = []
    try:
        for log, secret in zip(logs, (good, good, bad)):
            with log.open("w") as stderr:
                instances.append(ServeProcess(url(secret), stderr))
        a, b, refused = instances
        await refusal_said(logs[2])
        async with online_app(a, "x", {"echo": echo}), online_app(refused, "y", {"echo": echo}):
            async with sdk_agent(b, "x", "legacy") as client:
                await lists(client, 1)
                assert json.loads(text_of(await client.call_tool("echo", {"n": 1}))) == {"n": 1}
            await serves_alone(refused, "y", "x")
        await retries_pass(refused)
    finally:
        for instance in instances:
            instance.kill()
        server.stop()
    texts = [log.read_text() for log in logs]
    for text in texts[:2]:
        assert "nats: joined the cluster as instance" in text and "refused" not in text, text
    said_once(logs[2])
    for text in texts:
        assert good not in text and bad not in text, text


async def test_a_creds_file_gone_bad_keeps_the_last_good_one_with_one_warning(secured, account, tmp_path):
    """The file is read again at each reconnect: garbled, it is warned of once and the instance rejoins."""
    creds = [creds_file(tmp_path, f"bridge-{index}", account.creds(f"bridge-{index}")) for index in range(2)]
    log = tmp_path / "a.log"
    instances = []
    try:
        with log.open("w") as stderr:
            instances.append(ServeProcess(secured.url, stderr, CLIENTMCP_NATS_CREDS=creds[0]))
        instances.append(ServeProcess(secured.url, CLIENTMCP_NATS_CREDS=creds[1]))
        a, b = instances
        async with online_app(a, "x", {"echo": echo}), sdk_agent(b, "x", "legacy") as client:
            await lists(client, 1)
            Path(creds[0]).write_text("-----BEGIN NATS USER JWT-----\nnot a jwt\n")
            for _ in range(2):  # two reconnects: the fault is said at the first only
                secured.stop()
                await lists(client, 0)  # b forgot the app: its instance is unreachable
                secured.start()
                await lists(client, 1)
            assert json.loads(text_of(await client.call_tool("echo", {"n": 1}))) == {"n": 1}
    finally:
        for instance in instances:
            instance.kill()
    lines = log.read_text().splitlines()
    said = [line for line in lines if "signing with the file as it was last read" in line]
    assert len(said) == 1 and f"CLIENTMCP_NATS_CREDS {creds[0]!r}" in said[0], lines
    assert not any("refused" in line for line in lines), lines


async def test_revocation_through_the_bucket_of_an_account_secured_nats(tmp_path, no_nkeys):
    """docs/scaling.md, Revocation in a cluster: `--state nats` and `clientmcp revoke` sign with the creds file."""
    operator = Operator()
    account = operator.account("clientmcp", jetstream=True)
    server = NatsServer(jetstream=True, config=operator.config())
    server.start()
    instances = []
    try:
        for name in ("holder", "caller"):
            creds = creds_file(tmp_path, name, account.creds(name))
            env = {"CLIENTMCP_NATS_CREDS": creds, "CLIENTMCP_STATE": "nats", **no_nkeys}
            instances.append(ServeProcess(server.url, **env))
        holder, caller = instances
        ws = await connect_app(holder, make_token("client", "alice"))
        agent = make_token("agent", "alice")
        give_up = time.monotonic() + WAIT
        while await tool_names(caller, agent) != ["echo"]:
            assert time.monotonic() < give_up, "the app never reached the other instance"
            await asyncio.sleep(0.1)
        admin = creds_file(tmp_path, "admin", account.creds("admin"))
        nats_env = {"CLIENTMCP_NATS": server.url, **no_nkeys}
        revoked = await clientmcp("nats", "revoke", "client", "alice", CLIENTMCP_NATS_CREDS=admin, **nats_env)  # type: ignore[arg-type]
        assert (revoked.returncode, revoked.stdout) == (0, "1\n"), revoked.stderr
        code, reason, _ = await closed_within(ws, PROMPTLY)
        assert (code, reason) == (4401, REVOKED_REASON)
        stranger = creds_file(tmp_path, "stranger", Operator().account("elsewhere").creds("stranger"))
        refused = await clientmcp(
            "nats", "revoke", "client", "alice", CLIENTMCP_NATS_CREDS=stranger, **nats_env
        )  # type: ignore[arg-type]
        line = assert_one_line_error(refused)
        assert (
            line.startswith("clientmcp: error: state nats: cannot connect to NATS at")
            and "Authorization Violation" in line
        )
    finally:
        for instance in instances:
            instance.kill()
        server.stop()
