"""Metrics on their own listener and a log line per call (docs/operations.md).

The metrics are scraped before and after known actions, parsed with prometheus_client's
parser, and their exact deltas asserted; the log lines of the same actions are read in
both formats; no token, argument or result reaches any log line, even at debug.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import pytest
import websockets
from agents import (
    WAIT,
    RawHttp,
    answering_app,
    eventually,
    http_client,
    legacy_body,
    legacy_headers,
    modern_body,
    modern_headers,
    result_message,
)
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.anyio

TOOLS = [
    {"name": name, "description": name, "inputSchema": {"type": "object"}}
    for name in ("echo", "hold", "late", "fail")
]


def scrape(bridge: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the metrics listener: (name, sorted labels) -> value."""
    url = f"http://127.0.0.1:{bridge.server.metrics.port}/metrics"
    with urllib.request.urlopen(url, timeout=WAIT) as response:
        assert response.status == 200
        assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def delta(before: dict, after: dict) -> dict:
    """The samples that changed, by how much (process metrics, the loop lag and bytes left out)."""
    changed = {}
    for key in set(before) | set(after):
        if key[0].startswith(("process_", "clientmcp_event_loop_lag", "clientmcp_bytes")) or key[0].endswith(
            ("_sum", "_created")
        ):
            continue
        diff = after.get(key, 0) - before.get(key, 0)
        if diff:
            changed[key] = diff
    return changed


def m(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted(labels.items()))


@contextlib.asynccontextmanager
async def raw_app(bridge: Any, client_id: str, register: Any = TOOLS) -> AsyncIterator[Any]:
    """An app on bare websockets: `echo` answers at once, `late` after 1.3 s, `hold` never, `fail` with a tool error.

    `register` None sends no register; anything but a list is sent as the tools and refused.
    """
    if isinstance(register, list):

        async def answer(ws: Any, call: dict[str, Any]) -> None:
            if call["name"] == "hold":
                return
            if call["name"] == "late":
                await asyncio.sleep(1.3)
            await ws.send(result_message(call, "RESULT-SECRET-" + call["name"], call["name"] == "fail"))

        async with answering_app(bridge, client_id, {"type": "register", "tools": register}, answer) as ws:
            yield ws
        return
    token = bridge.token("client", client_id)
    async with websockets.connect(bridge.ws_url, subprotocols=["clientmcp.v1", token]) as ws:
        if register is not None:
            await ws.send(
                json.dumps({"type": "register", "tools": register})
            )  # refused: the test reads the close
        yield ws


def answer_of(response: Any) -> Any:
    """The JSON-RPC answer, sent as JSON or as the one message event of an SSE stream."""
    if response.headers["content-type"] == "text/event-stream":
        (data,) = [line for line in response.text.splitlines() if line.startswith("data: ")]
        return json.loads(data.removeprefix("data: "))
    return response.json()


async def call(bridge: Any, client_id: str, tool: str, modern: bool = False, **arguments: Any) -> Any:
    params = {"name": tool, "arguments": {"secret": "ARGUMENT-SECRET", **arguments}}
    async with http_client(bridge) as http:
        if modern:
            headers = modern_headers(bridge, client_id, "tools/call", name=tool)
            response = await http.post("/mcp", json=modern_body("tools/call", 1, params), headers=headers)
        else:
            response = await http.post(
                "/mcp", json=legacy_body("tools/call", 1, params), headers=legacy_headers(bridge, client_id)
            )
    return response


@pytest.fixture
def metered(start_bridge):
    return start_bridge(metrics=("127.0.0.1", 0), call_timeout=2.0)


def test_no_metrics_listener_by_default(bridge):
    assert bridge.server.metrics is None


def test_metrics_are_not_on_the_public_port_and_the_listener_serves_only_metrics(metered):
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(f"{metered.http_url}/metrics", timeout=WAIT)
    assert error.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(f"http://127.0.0.1:{metered.server.metrics.port}/", timeout=WAIT)
    assert error.value.code == 404
    samples = scrape(metered)
    assert m("clientmcp_apps_online") in samples
    assert any(name == "process_resident_memory_bytes" for name, _ in samples)
    (build,) = [labels for name, labels in samples if name == "clientmcp_build_info"]
    assert dict(build)["implementation"] in ("compiled", "pure")


async def test_an_app_connects_registers_and_answers(metered):
    before = scrape(metered)
    async with raw_app(metered, "app-a"):
        await eventually(metered, lambda server: "app-a" in server.bridge.apps)
        online = scrape(metered)
        assert delta(before, online) == {
            m("clientmcp_apps_online"): 1,
            m("clientmcp_app_connections"): 1,
            m("clientmcp_app_connections_opened_total"): 1,
            m("clientmcp_registers_total", result="accepted"): 1,
            m("clientmcp_tools_registered"): 4,
        }
        response = await call(metered, "app-a", "echo")
        assert response.status_code == 200
        answered = scrape(metered)
    assert delta(online, answered) == {
        m("clientmcp_agent_requests_total", era="legacy", method="tools/call"): 1,
        m("clientmcp_calls_started_total"): 1,
        m("clientmcp_calls_total", outcome="result"): 1,
        m("clientmcp_http_responses_total", status="200"): 1,
        **{m("clientmcp_call_duration_seconds_bucket", le=le): 1 for le in _buckets_from(answered, 0)},
        m("clientmcp_call_duration_seconds_count"): 1,
    }
    for side in ("http", "websocket"):
        for direction in ("in", "out"):
            key = m("clientmcp_bytes_total", side=side, direction=direction)
            assert answered[key] > online[key] if side == "http" else answered[key] > before[key]
    await eventually(metered, lambda server: not server.bridge.apps)
    after = scrape(metered)
    assert delta(answered, after) == {
        m("clientmcp_apps_online"): -1,
        m("clientmcp_app_connections"): -1,
        m("clientmcp_app_connections_closed_total", code="1000"): 1,
        m("clientmcp_tools_registered"): -4,
    }


def _buckets_from(samples: dict, seconds: float) -> list[str]:
    """The `le` labels of the duration buckets a duration of `seconds` counts in."""
    return [
        dict(labels)["le"]
        for name, labels in samples
        if name == "clientmcp_call_duration_seconds_bucket" and float(dict(labels)["le"]) >= seconds
    ]


async def test_each_outcome_is_counted(metered):
    """Offline, not registered, unknown tool, tool error, timeout, streamed, replaced, cancelled, disconnected."""
    before = scrape(metered)
    assert answer_of(await call(metered, "nobody", "echo"))["result"]["isError"] is True
    async with raw_app(metered, "quiet", register=None):
        await eventually(metered, lambda server: "quiet" in server.bridge.apps)
        assert answer_of(await call(metered, "quiet", "echo", modern=True))["result"]["isError"] is True
    async with raw_app(metered, "app-b"):
        await eventually(metered, lambda server: "app-b" in server.bridge.apps)
        assert answer_of(await call(metered, "app-b", "nosuch"))["error"]["code"] == -32602
        assert answer_of(await call(metered, "app-b", "fail"))["result"]["isError"] is True  # the app's own
        assert answer_of(await call(metered, "app-b", "hold"))["result"]["isError"] is True  # 2 s timeout
        late = await call(metered, "app-b", "late")  # streamed after 1 s, answered at 1.3 s
        assert late.headers["content-type"] == "text/event-stream"
        # The agent hangs up on a call in flight: cancelled.
        with await RawHttp.open(metered) as raw:
            raw.send(
                "POST",
                "/mcp",
                legacy_headers(metered, "app-b"),
                legacy_body("tools/call", 5, {"name": "hold"}),
            )
            await eventually(metered, lambda server: len(server.bridge.calls) == 1)
        await eventually(metered, lambda server: len(server.bridge.calls) == 0)
        # A call in flight when a newer connection takes the ID: replaced (4409).
        held = asyncio.ensure_future(call(metered, "app-b", "hold"))
        await eventually(metered, lambda server: len(server.bridge.calls) == 1)
        async with raw_app(metered, "app-b"):
            assert answer_of(await held)["result"]["isError"] is True
            # A call in flight when the app goes away: disconnected.
            held = asyncio.ensure_future(call(metered, "app-b", "hold"))
            await eventually(metered, lambda server: len(server.bridge.calls) == 1)
        assert answer_of(await held)["result"]["isError"] is True
    await eventually(metered, lambda server: not server.bridge.apps)
    changed = delta(before, scrape(metered))
    outcomes = {
        dict(labels)["outcome"]: n for (name, labels), n in changed.items() if name == "clientmcp_calls_total"
    }
    assert outcomes == {
        "offline": 1,
        "not_registered": 1,
        "unknown_tool": 1,
        "timeout": 1,
        "result": 1,
        "tool_error": 1,
        "cancelled": 1,
        "replaced": 1,
        "disconnected": 1,
    }
    assert changed[m("clientmcp_calls_started_total")] == 6
    assert changed[m("clientmcp_calls_streamed_total")] == 2  # late, and hold until its timeout
    assert changed[m("clientmcp_call_duration_seconds_count")] == 6
    assert changed[m("clientmcp_app_connections_opened_total")] == 3
    assert changed[m("clientmcp_app_connections_closed_total", code="4409")] == 1
    assert changed[m("clientmcp_app_connections_closed_total", code="1000")] == 2
    assert changed[m("clientmcp_registers_total", result="accepted")] == 2
    # Each bucket counts the calls that ended within it: the timeout (2 s) is over 1 and within 2.5.
    assert changed.get(m("clientmcp_call_duration_seconds_bucket", le="1.0"), 0) <= 4
    assert changed[m("clientmcp_call_duration_seconds_bucket", le="2.5")] >= 3


async def test_a_refused_register_is_counted(metered):
    before = scrape(metered)
    async with raw_app(metered, "bad", register="not a list") as ws:
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), WAIT)
    assert closed.value.rcvd.code == 4400
    await eventually(metered, lambda server: not server.bridge.apps)
    changed = delta(before, scrape(metered))
    assert changed == {
        m("clientmcp_app_connections_opened_total"): 1,
        m("clientmcp_app_connections_closed_total", code="4400"): 1,
        m("clientmcp_registers_total", result="refused"): 1,
    }


async def test_no_label_holds_a_client_id_or_a_tool_name(metered):
    ids = [f"client-id-{n}" for n in range(12)]
    for client_id in ids:
        tools = [{"name": f"tool-name-{client_id}", "description": "x", "inputSchema": {"type": "object"}}]
        async with raw_app(metered, client_id, register=tools):
            await eventually(metered, lambda server, c=client_id: c in server.bridge.apps)
            await call(metered, client_id, f"tool-name-{client_id}")
            await call(metered, client_id, f"unknown-name-{client_id}")
        await call(metered, client_id, f"offline-name-{client_id}")
    url = f"http://127.0.0.1:{metered.server.metrics.port}/metrics"
    text = urllib.request.urlopen(url, timeout=WAIT).read().decode()
    assert "client-id" not in text and "-name-" not in text
    labels = {
        value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        for value in s.labels.values()
    }
    assert not any("client" in value or "name" in value for value in labels)


@pytest.mark.parametrize("form", ["text", "json"])
async def test_log_lines_of_calls_and_apps_and_nothing_secret(start_bridge, captured_log, form):
    stream = captured_log(form)
    bridge = start_bridge(call_timeout=2.0)
    secrets = []
    async with raw_app(bridge, "logged"):
        await eventually(bridge, lambda server: "logged" in server.bridge.apps)
        await call(bridge, "logged", "echo")
        await call(bridge, "logged", "late", modern=True)
        await call(bridge, "logged", "nosuch")
        # A token in the path, and tokens refused (an agent's and an app's).
        token = bridge.token("agent", "logged")
        secrets.append(token)
        async with http_client(bridge) as http:
            body = legacy_body("tools/call", 2, {"name": "echo", "arguments": {"secret": "ARGUMENT-SECRET"}})
            response = await http.post(f"/mcp/{token}", json=body, headers={"Accept": "application/json"})
            assert response.status_code == 200
            refused = token[:-4] + "AAAA"
            secrets.append(refused)
            response = await http.post(
                "/mcp",
                json=body,
                headers={**legacy_headers(bridge, "logged"), "Authorization": f"Bearer {refused}"},
            )
            assert response.status_code == 401
            response = await http.post(f"/mcp/{refused}", json=body, headers={"Accept": "application/json"})
            assert response.status_code == 401
            # A batch (an unknown tool answered at once, then the app's answer), a tool error from
            # the app, and error bodies that could echo what was sent.
            batch = [
                legacy_body("tools/call", 3, {"name": "echo", "arguments": {"secret": "ARGUMENT-SECRET"}}),
                legacy_body("tools/call", 4, {"name": "nosuch", "arguments": {"secret": "ARGUMENT-SECRET"}}),
            ]
            response = await http.post("/mcp", json=batch, headers=legacy_headers(bridge, "logged"))
            assert response.status_code == 200 and len(response.json()) == 2
            await call(bridge, "logged", "fail")
            bad_arguments = legacy_body("tools/call", 5, {"name": "echo", "arguments": "ARGUMENT-SECRET"})
            response = await http.post("/mcp", json=bad_arguments, headers=legacy_headers(bridge, "logged"))
            assert response.json()["error"]["code"] == -32602
            response = await http.post(
                "/mcp",
                content=b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"ARGUMENT-SECRET"',
                headers=legacy_headers(bridge, "logged"),
            )
            assert response.json()["error"]["code"] == -32700
        # A notification stream opened with the token in its path.
        with await RawHttp.open(bridge) as raw:
            raw.send(
                "GET", f"/mcp/{token}", {"Accept": "text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
            )
            assert (await raw.head()).status == 200
        bad_app_token = bridge.token("client", "logged")[:-4] + "AAAA"
        secrets.append(bad_app_token)
        async with websockets.connect(bridge.ws_url, subprotocols=["clientmcp.v1", bad_app_token]) as ws:
            with pytest.raises(websockets.ConnectionClosed):
                await asyncio.wait_for(ws.recv(), WAIT)
    async with raw_app(bridge, "refused", register="not a list") as ws:
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), WAIT)
    await eventually(bridge, lambda server: not server.bridge.apps)
    secrets.append(bridge.token("client", "logged"))
    text = stream.getvalue()
    for secret in (*secrets, "ARGUMENT-SECRET", "RESULT-SECRET"):
        assert secret not in text
    lines = text.splitlines()
    if form == "json":
        records = [json.loads(line) for line in lines]
        assert all({"timestamp", "level", "event"} <= set(record) for record in records)
    else:
        records = [_text_record(line) for line in lines]
    calls = [r for r in records if r["event"] == "call"]
    assert [(r["client_id"], r["tool"], r["era"], r["outcome"], r["streamed"]) for r in calls] == [
        ("logged", "echo", "legacy", "result", False),
        ("logged", "late", "modern", "result", True),
        ("logged", "nosuch", "legacy", "unknown_tool", False),
        ("logged", "echo", "legacy", "result", False),
        ("logged", "nosuch", "legacy", "unknown_tool", False),
        ("logged", "echo", "legacy", "result", False),
        ("logged", "fail", "legacy", "tool_error", False),
    ]
    assert "GET /mcp/<redacted>" in text  # the stream's request line, at debug
    assert 1.0 < float(calls[1]["seconds"]) < 2.0 and float(calls[0]["seconds"]) < 1.0
    events = [r["event"] for r in records]
    assert events.count("app_connected") == 2 and events.count("app_refused") == 1
    closes = [(r["client_id"], int(r["code"])) for r in records if r["event"] == "app_closed"]
    assert closes == [("logged", 1000), ("refused", 4400)]
    (register,) = [r for r in records if r["event"] == "register_refused"]
    assert register["client_id"] == "refused" and register["reason"]
    assert all(r["level"] == "info" for r in records if r["event"] in ("call", "app_connected", "app_closed"))


def _text_record(line: str) -> dict[str, Any]:
    """A text line, `STAMP LEVEL EVENT name=value ...`, as the JSON line's members."""
    stamp, level, rest = line.split(" ", 2)
    event, _, fields = rest.partition(" ")
    record: dict[str, Any] = {"timestamp": stamp, "level": level, "event": event}
    for part in _fields(fields):
        name, _, value = part.partition("=")
        if value.startswith('"'):
            value = json.loads(value)
        record[name] = {"True": True, "False": False}.get(value, value)
    return record


def _fields(text: str) -> list[str]:
    parts, current, quoted, escaped = [], "", False, False
    for char in text:
        if char == " " and not quoted:
            parts.append(current)
            current = ""
            continue
        current += char
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
    if current:
        parts.append(current)
    return parts


def test_settings_of_logs_and_metrics():
    from clientmcp_fast.config import ConfigError, load

    env = {"CLIENTMCP_SECRET": "s" * 32}
    settings = load({**env, "CLIENTMCP_LOG": "INFO", "CLIENTMCP_LOG_FORMAT": "Json"})
    assert (settings.log, settings.log_format, settings.metrics) == ("info", "json", None)
    assert load({**env, "CLIENTMCP_METRICS": "127.0.0.1:9464"}).metrics == ("127.0.0.1", 9464)
    assert load({**env, "CLIENTMCP_METRICS": "[::1]:9464"}).metrics == ("::1", 9464)
    for bad, message in (
        ({"CLIENTMCP_METRICS": "9464"}, "CLIENTMCP_METRICS: '9464' is not HOST:PORT, e.g. 127.0.0.1:9464"),
        (
            {"CLIENTMCP_METRICS": "localhost:99999"},
            "CLIENTMCP_METRICS: '99999' is not a TCP port (0 to 65535)",
        ),
        ({"CLIENTMCP_LOG_FORMAT": "xml"}, "CLIENTMCP_LOG_FORMAT: 'xml' is not one of text, json"),
        (
            {
                "CLIENTMCP_METRICS": "127.0.0.1:65535",
                "CLIENTMCP_WORKERS": "2",
                "CLIENTMCP_NATS": "nats://127.0.0.1:4222",
            },
            "--metrics: worker 1 would listen on port 65536, above 65535 "
            "(worker k listens on the metrics port + k)",
        ),
    ):
        with pytest.raises(ConfigError) as error:
            load({**env, **bad})
        assert str(error.value) == message


def test_worker_k_gets_the_metrics_port_plus_k():
    from clientmcp_fast.config import load, worker_settings

    env = {"CLIENTMCP_SECRET": "s" * 32, "CLIENTMCP_NATS": "nats://127.0.0.1:4222", "CLIENTMCP_WORKERS": "3"}
    settings = load({**env, "CLIENTMCP_METRICS": "127.0.0.1:9464"})
    workers = [worker_settings(settings, k) for k in range(3)]
    assert [w.metrics for w in workers] == [("127.0.0.1", 9464), ("127.0.0.1", 9465), ("127.0.0.1", 9466)]
    assert {(w.workers, w.reuse_port) for w in workers} == {(1, True)}
    free = load({**env, "CLIENTMCP_METRICS": "127.0.0.1:0"})  # port 0: each its own free port
    assert worker_settings(free, 2).metrics == ("127.0.0.1", 0)
    assert worker_settings(load(env), 2).metrics is None


async def test_a_stream_hears_of_a_register(metered):
    """A legacy GET stream opens (by era), then an app registers: one list_changed sent to it."""
    before = scrape(metered)
    headers = {"Authorization": f"Bearer {metered.token('agent', 'app-s')}", "Accept": "text/event-stream"}
    with await RawHttp.open(metered) as raw:
        raw.send("GET", "/mcp", headers)
        assert (await raw.head()).status == 200
        await eventually(metered, lambda server: server.bridge.stream_count == 1)
        opened = scrape(metered)
        assert delta(before, opened) == {
            m("clientmcp_notification_streams", era="legacy"): 1,
            m("clientmcp_http_responses_total", status="200"): 1,
        }
        async with raw_app(metered, "app-s"):
            assert (await raw.sse_item())[0] == "message"
            changed = delta(opened, scrape(metered))
    assert changed[m("clientmcp_list_changed_sent_total")] == 1


def test_the_command_serves_metrics_and_logs_json():
    """`clientmcp serve --metrics HOST:PORT --log-format json --log INFO`, as an operator runs it."""
    import socket
    import subprocess
    import time

    from test_cli import CLIENTMCP, SECRET_TEXT, environment, free_port

    port, metrics = free_port(), free_port()
    env = environment(CLIENTMCP_SECRET=SECRET_TEXT, CLIENTMCP_LOG="INFO", CLIENTMCP_LOG_FORMAT="json")
    args = [
        CLIENTMCP,
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--metrics",
        f"127.0.0.1:{metrics}",
    ]
    process = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True)
    try:
        lines = [json.loads(process.stderr.readline()) for _ in range(2)]
        assert [line["message"] for line in lines] == [
            f"metrics on http://127.0.0.1:{metrics}/metrics",
            f"listening on 127.0.0.1:{port}",
        ]
        assert all(line["level"] == "info" and line["event"] == "message" for line in lines)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=WAIT) as response:
            assert b"clientmcp_apps_online 0.0" in response.read()
    finally:
        process.terminate()
        process.wait(WAIT)
    # A metrics address that cannot be listened on stops the bridge as a bad setting does.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        where = f"127.0.0.1:{taken.getsockname()[1]}"
        started = time.monotonic()
        result = subprocess.run(
            [*args[:5], str(free_port()), "--metrics", where],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2 and time.monotonic() - started < 30
    assert result.stderr == f"clientmcp: error: --metrics: cannot listen on {where}: Address already in use\n"
