"""`clientmcp_fast.client` against a real bridge: the rows of docs/apps.md's behaviour table that
tests/e2e/test_client_library.py does not already cover, under the names the table gives.

The JavaScript client is tested for the same rows in tests/js/client.test.mjs; the last test
here checks that every row names a test that exists in both.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from conftest import SECRET, make_token

from clientmcp_fast.client import ClientMCP, accepted, completed, rejected

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
WAIT = 10.0


async def rpc(bridge_url: str, client_id: str, method: str, params: dict | None = None) -> dict:
    """One JSON-RPC request as an agent of `client_id` (legacy era, no session): its result."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    headers = {"Authorization": f"Bearer {make_token('agent', client_id)}", "Accept": "application/json"}
    async with httpx2.AsyncClient(timeout=30) as http:
        answer = (await http.post(bridge_url, content=json.dumps(body), headers=headers)).json()
    assert "error" not in answer, answer
    return answer["result"]


async def tool_names(bridge_url: str, client_id: str) -> list[str]:
    return [tool["name"] for tool in (await rpc(bridge_url, client_id, "tools/list"))["tools"]]


async def until(predicate, what: str = "the condition") -> None:
    deadline = asyncio.get_running_loop().time() + WAIT
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, f"{what} never held"
        await asyncio.sleep(0.02)


async def ok(arguments: dict) -> str:
    return "ok"


async def test_connect_returns_on_registered_and_the_tools_carry_their_risk(bridge):
    app = ClientMCP(bridge.ws_url, bridge.token("client", "py"), instructions="A test app.", reconnect=False)
    app.expose("look", ok, description="Look", risk="observe")
    app.expose(
        "pay", ok, description="Pay", risk="transact", title="Pay now", annotations={"openWorldHint": False}
    )
    async with app:
        tools = (await rpc(bridge.mcp_url, "py", "tools/list"))["tools"]
        assert tools == [
            {
                "name": "look",
                "description": "Look",
                "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": True},
                "_meta": {"io.github.clientmcp/risk": "observe"},
            },
            {
                "name": "pay",
                "description": "Pay",
                "inputSchema": {"type": "object"},
                "annotations": {"destructiveHint": True, "idempotentHint": False, "openWorldHint": False},
                "_meta": {"io.github.clientmcp/risk": "transact"},
                "title": "Pay now",
            },
        ]
        init = await rpc(
            bridge.mcp_url,
            "py",
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        )
        assert init["instructions"] == "A test app."
        with pytest.raises(ValueError, match="risk must be one of observe, operate, manage, transact"):
            app.expose("x", ok, risk="huge")
    assert app.close_code == 1000


async def test_a_change_re_registers_the_whole_set(bridge):
    async with ClientMCP(bridge.ws_url, bridge.token("client", "py"), reconnect=False) as app:
        app.expose("echo", ok)
        await until(lambda: _names_are(bridge, ["echo"]), "the first set")
        app.expose("second", ok)
        await until(lambda: _names_are(bridge, ["echo", "second"]), "the new set")
        app.remove("echo")
        await until(lambda: _names_are(bridge, ["second"]), "the smaller set")


async def _names_are(bridge, names: list[str]) -> bool:
    return await tool_names(bridge.mcp_url, "py") == names


async def test_a_refused_register_fails_connect_with_4400_and_its_reason(bridge):
    app = ClientMCP(bridge.ws_url, bridge.token("client", "py"), backoff=(0.01, 0.02))
    app.expose("a b", ok)
    with pytest.raises(ConnectionError, match=r'closed with 4400 \(a protocol error\): tools\[0\] "a b": '):
        await app.connect()
    assert app.close_code == 4400
    assert app._attempts == 1  # never again: the bridge would refuse it again


async def test_a_token_function_is_called_once_per_connection_and_again_after_4401(bridge):
    given = [bridge.token("agent", "py"), bridge.token("client", "py"), bridge.token("client", "py")]
    calls = 0

    async def token() -> str:
        nonlocal calls
        calls += 1
        return given[calls - 1]

    app = ClientMCP(bridge.ws_url, token, backoff=(0.01, 0.02))
    app.expose("echo", ok)
    async with app:  # refused with 4401 first, then a fresh token
        assert calls == 2
        result = await rpc(bridge.mcp_url, "py", "tools/call", {"name": "echo"})
        assert result["content"][0]["text"] == "ok"
        assert calls == 2


async def test_results_are_converted(bridge):
    async def thrown(arguments: dict) -> None:
        raise KeyError("milk")

    returns = {
        "text": "plain",
        "full": {"content": [{"type": "text", "text": "as is"}], "_meta": {"k": 1}},
        "object": {"count": 2},
        "list": [1, 2],
        "nothing": None,
    }
    app = ClientMCP(bridge.ws_url, bridge.token("client", "py"), reconnect=False)
    for name, value in returns.items():
        app.expose(name, _returning(value))
    app.expose("thrown", thrown)

    async def result(name: str) -> dict:
        return await rpc(bridge.mcp_url, "py", "tools/call", {"name": name})

    async with app:
        assert await result("text") == {"content": [{"type": "text", "text": "plain"}]}
        assert await result("full") == {"content": [{"type": "text", "text": "as is"}], "_meta": {"k": 1}}
        assert await result("object") == {
            "content": [{"type": "text", "text": '{"count": 2}'}],
            "structuredContent": {"count": 2},
        }
        assert await result("list") == {"content": [{"type": "text", "text": "[1, 2]"}]}
        assert await result("nothing") == {"content": [{"type": "text", "text": "Done."}]}
        assert await result("thrown") == {
            "content": [{"type": "text", "text": "KeyError: 'milk'"}],
            "isError": True,
        }


def _returning(value):
    async def handler(arguments: dict):
        return value

    return handler


def test_outcomes_say_how_the_call_ended():
    assert completed("Saved eggs", name="eggs") == {
        "content": [{"type": "text", "text": "Saved eggs"}],
        "structuredContent": {"status": "completed", "name": "eggs"},
    }
    assert completed() == {
        "content": [{"type": "text", "text": "Done."}],
        "structuredContent": {"status": "completed"},
    }
    assert accepted("op-1", "Mailing.", count=3) == {
        "content": [{"type": "text", "text": "Mailing."}],
        "structuredContent": {"status": "accepted", "operation": "op-1", "count": 3},
    }
    assert rejected("denied", "the user said no") == {
        "content": [{"type": "text", "text": "the user said no"}],
        "isError": True,
        "structuredContent": {
            "status": "rejected",
            "reason": {"code": "denied", "detail": "the user said no"},
        },
    }


def waiting_handler(started: asyncio.Event, cancelled: asyncio.Event):
    """A handler that sets `started`, then waits until it is cancelled, and sets `cancelled`."""

    async def wait(arguments: dict) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "too late"

    return wait


async def test_a_cancel_reaches_the_handler(bridge):
    started, cancelled = asyncio.Event(), asyncio.Event()
    wait = waiting_handler(started, cancelled)

    app = ClientMCP(bridge.ws_url, bridge.token("client", "py"), reconnect=False)
    app.expose("wait", wait)
    async with app:
        call = asyncio.ensure_future(rpc(bridge.mcp_url, "py", "tools/call", {"name": "wait"}))
        await asyncio.wait_for(started.wait(), WAIT)
        call.cancel()  # the agent hangs up: the bridge sends cancel (docs/protocol.md)
        await asyncio.wait_for(cancelled.wait(), WAIT)
        assert app.calls_cancelled == 1


@contextlib.contextmanager
def served(port: int) -> Iterator[subprocess.Popen]:
    """`clientmcp serve` on 127.0.0.1:PORT, once it logged that it listens; SIGTERM at the end."""
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "clientmcp"), "serve", "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, "CLIENTMCP_SECRET": SECRET.decode(), "CLIENTMCP_LOG": "info"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while "listening on" not in (line := process.stderr.readline()):
            assert line, "the bridge ended before listening"
        yield process
    finally:
        process.terminate()
        process.wait(10)
        process.stderr.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_the_handler_is_cancelled_when_the_connection_drops():
    port = _free_port()
    started, cancelled = asyncio.Event(), asyncio.Event()
    wait = waiting_handler(started, cancelled)

    with served(port) as bridge:
        app = ClientMCP(f"ws://127.0.0.1:{port}/connect", make_token("client", "py"), reconnect=False)
        app.expose("wait", wait)
        await app.connect()
        call = asyncio.ensure_future(
            rpc(f"http://127.0.0.1:{port}/mcp", "py", "tools/call", {"name": "wait"})
        )
        await asyncio.wait_for(started.wait(), WAIT)
        bridge.terminate()
        await asyncio.wait_for(cancelled.wait(), WAIT)
        await asyncio.gather(call, return_exceptions=True)
        await app.close()


async def test_it_reconnects_and_re_registers_after_a_bridge_restart():
    port = _free_port()
    tokens = 0

    def token() -> str:
        nonlocal tokens
        tokens += 1
        return make_token("client", "py")

    app = ClientMCP(f"ws://127.0.0.1:{port}/connect", token, backoff=(0.05, 0.2))
    app.expose("echo", ok)
    with served(port):
        await app.connect()
    await until(lambda: _closed_with(app, 1001), "closed by the bridge's shutdown")
    with served(port):
        await until(lambda: _online(app), "registered again")
        assert await tool_names(f"http://127.0.0.1:{port}/mcp", "py") == ["echo"]
    assert tokens == app._attempts  # the token function: once per connection attempt
    await app.close()


async def _closed_with(app: ClientMCP, code: int) -> bool:
    return app.close_code == code


async def _online(app: ClientMCP) -> bool:
    return app._conn is not None and app._registered.is_set()


@pytest.mark.parametrize("code", [1000, 1001, 1006, 1009, 1011, 4408, 4429, 4401, 4409, 4400, 1002, 1007])
def test_reconnect_rules_by_close_code(code):
    """docs/apps.md, Connecting: which closes are followed by a reconnect, with a plain token and a function."""
    for token, follows in [
        ("t", code not in {4401, 4409, 4400, 1002, 1007}),
        (lambda: "t", code not in {4409, 4400, 1002, 1007}),
    ]:
        app = ClientMCP("ws://127.0.0.1:1/connect", token)
        app.close_code = code
        assert (app._no_reconnect_reason() is None) == follows, (code, token)


# -- the table -----------------------------------------------------------------------------------

APPS = (ROOT / "docs" / "apps.md").read_text()
PYTHON_TESTS = [Path(__file__), ROOT / "tests" / "e2e" / "test_client_library.py"]
NODE_TESTS = ROOT / "tests" / "js" / "client.test.mjs"


RUNTIME_CASES = ROOT / "tests" / "js" / "runtimes" / "cases.mjs"
RUNTIMES = ["Node 22", "Deno 2", "Bun", "Chromium"]


def behaviour_table() -> list[tuple[str, str, str, list[str]]]:
    """(behaviour, Python test, JavaScript test, [a cell per runtime]) of each row of docs/apps.md's table."""
    section = APPS.split("## One behaviour, two libraries", 1)[1].split("\n## ", 1)[0]
    assert f"| behaviour | Python | JavaScript | {' | '.join(RUNTIMES)} |" in section
    rows = re.findall(r"^\| (.+?) \| `(test_\w+)` \| `(case: [^`]+)` \|((?: [^|]+ \|){4})$", section, re.M)
    return [(*row[:3], [cell.strip() for cell in row[3].strip(" |").split("|")]) for row in rows]


def behaviour_rows() -> list[tuple[str, str, str]]:
    """(behaviour, Python test, JavaScript test) of each row of docs/apps.md's behaviour table."""
    return [row[:3] for row in behaviour_table()]


def test_every_row_of_the_behaviour_table_is_tested_in_both_languages():
    rows = behaviour_rows()
    assert len(rows) >= 15
    python = "\n".join(path.read_text() for path in PYTHON_TESTS)
    javascript = NODE_TESTS.read_text()
    for behaviour, python_test, node_test in rows:
        assert re.search(rf"^(async )?def {python_test}\(", python, re.M), (behaviour, python_test)
        assert f'test("{node_test}"' in javascript, (behaviour, node_test)
    declared = set(re.findall(r'^test\("(case: [^"]+)"', javascript, re.M))
    assert declared == {node_test for _, _, node_test in rows}  # no JavaScript case outside the table


def test_the_runtime_columns_say_which_rows_every_runtime_runs():
    """A row is `yes` on Deno, Bun and Chromium exactly when tests/js/runtimes/cases.mjs covers it."""
    covered = re.findall(r"^// row: (case: .+)$", RUNTIME_CASES.read_text(), re.M)
    rows = behaviour_table()
    assert len(covered) >= 7 and set(covered) <= {node_test for _, _, node_test, _ in rows}
    for behaviour, _, node_test, cells in rows:
        other = "yes" if node_test in covered else "—"
        assert cells == ["yes", other, other, other], (behaviour, cells)
