"""`clientmcp demo`: a bridge on 127.0.0.1 with a generated secret and the todo app, usable as printed.

By default the app is the todo page the demo serves (tests/browser runs it in Chromium; here
its files, its config and its tokens); `--python-app` connects the same app written in
Python, which the tool tests below use.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import jwt
import psutil
import pytest

from clientmcp_fast.client import ClientMCP

CLIENTMCP = Path(sys.executable).parent / "clientmcp"
RISKS = {"add_todo": "operate", "list_todos": "observe", "complete_todo": "operate", "clear_done": "manage"}
ANNOTATIONS = {  # docs/apps.md, Risk levels: what each risk level implies
    "observe": {"readOnlyHint": True},
    "operate": {"readOnlyHint": False, "destructiveHint": False},
    "manage": {"destructiveHint": True, "idempotentHint": True},
}


class Demo:
    """A running `clientmcp demo --port 0` and what it printed."""

    def __init__(self, process: subprocess.Popen, lines: list[str]) -> None:
        self.process = process
        self.lines = lines
        self.url = re.search(r"agent URL:\s+(\S+)", "\n".join(lines)).group(1)
        self.token = re.search(r"agent token:\s+(\S+)", "\n".join(lines)).group(1)
        self.port = int(re.search(r":(\d+)/mcp$", self.url).group(1))
        page = re.search(r"app page:\s+(\S+)", "\n".join(lines))
        self.page_url = page.group(1) if page else None

    def rpc(self, method: str, params: dict | None = None) -> dict:
        body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params or {}}
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request(
            "POST",
            "/mcp",
            json.dumps(body),
            {"Authorization": f"Bearer {self.token}", "Accept": "application/json, text/event-stream"},
        )
        response = conn.getresponse()
        assert response.status == 200
        answer = json.loads(response.read())
        conn.close()
        assert answer["id"] == 7
        return answer["result"]

    def call(self, name: str, arguments: dict | None = None) -> dict:
        return self.rpc("tools/call", {"name": name, "arguments": arguments or {}})


def environment(**values: str) -> dict[str, str]:
    """The test process's environment without any CLIENTMCP_ setting (no secret either), plus `values`."""
    return {k: v for k, v in os.environ.items() if not k.startswith("CLIENTMCP_")} | values


@contextlib.contextmanager
def running_demo(*args: str, **env: str) -> Iterator[Demo]:
    """`clientmcp demo ARGS` with the environment `env`, once it printed how to connect."""
    process = subprocess.Popen(
        [str(CLIENTMCP), "demo", *args],
        env=environment(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        while not any(line.startswith("Ctrl-C") for line in lines):
            line = process.stdout.readline()
            assert line, f"demo ended early: {process.stderr.read()}"
            lines.append(line.rstrip("\n"))
        yield Demo(process, lines)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stderr.close()


@pytest.fixture
def demo() -> Iterator[Demo]:
    """The demo with its todo app in Python, which answers calls without a browser."""
    with running_demo("--port", "0", "--python-app") as running:
        yield running


@pytest.fixture
def page_demo() -> Iterator[Demo]:
    """The demo as `make demo` runs it: the todo app is the page it serves."""
    with running_demo("--port", "0") as running:
        yield running


def get(url: str) -> http.client.HTTPResponse:
    parts = re.fullmatch(r"http://([^:/]+):(\d+)(/.*)", url)
    conn = http.client.HTTPConnection(parts.group(1), int(parts.group(2)), timeout=10)
    conn.request("GET", parts.group(3))
    response = conn.getresponse()
    response.body = response.read()
    conn.close()
    return response


def test_it_prints_the_agent_url_a_token_and_the_claude_line(demo):
    assert demo.url == f"http://127.0.0.1:{demo.port}/mcp"
    claude = next(line for line in demo.lines if "claude mcp add" in line)
    assert claude.split(": ", 1)[1] == (
        f'claude mcp add --transport http demo-todos {demo.url} --header "Authorization: Bearer {demo.token}"'
    )
    assert any(line.strip() == f"no headers?  {demo.url}/{demo.token}" for line in demo.lines)


def test_it_listens_on_loopback_only(demo):
    listening = [
        c for c in psutil.Process(demo.process.pid).net_connections() if c.status == psutil.CONN_LISTEN
    ]
    assert [c.laddr for c in listening] == [("127.0.0.1", demo.port)]


def test_the_todo_tools_carry_their_risk_and_its_annotations(demo):
    tools = {tool["name"]: tool for tool in demo.rpc("tools/list")["tools"]}
    assert list(tools) == list(RISKS)
    for name, risk in RISKS.items():
        assert tools[name]["_meta"]["io.github.clientmcp/risk"] == risk
        assert tools[name]["annotations"] == ANNOTATIONS[risk]


def test_add_list_complete_and_clear_with_outcomes(demo):
    added = demo.call("add_todo", {"title": "Buy eggs"})
    assert added["structuredContent"]["status"] == "completed"
    item = added["structuredContent"]["item"]
    assert item["title"] == "Buy eggs" and item["done"] is False
    listed = demo.call("list_todos")
    assert listed["structuredContent"]["items"] == [item]
    done = demo.call("complete_todo", {"id": item["id"]})
    assert done["structuredContent"] == {"status": "completed", "item": {**item, "done": True}}
    cleared = demo.call("clear_done")
    assert cleared["structuredContent"]["status"] == "completed"
    assert demo.call("list_todos")["structuredContent"]["items"] == []


def test_refusals_are_rejected_outcomes_with_is_error(demo):
    missing = demo.call("complete_todo", {"id": 999})
    assert missing["isError"] is True
    assert missing["structuredContent"]["status"] == "rejected"
    assert missing["structuredContent"]["reason"]["code"] == "not_found"
    untitled = demo.call("add_todo", {"title": "  "})
    assert untitled["isError"] is True and untitled["structuredContent"]["reason"]["code"] == "invalid_title"


def test_ctrl_c_stops_it_cleanly(demo):
    demo.process.send_signal(signal.SIGINT)
    assert demo.process.wait(10) == 0


# -- the settings of `serve`, where they apply (docs/configuration.md) ---------------------------


def free_port() -> int:
    """A free port P whose P + 1 is free too: the demo's page listens beside the bridge by default."""
    for _ in range(100):
        with socket.socket() as probe, socket.socket() as beside:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
            try:
                beside.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise AssertionError("no two free ports side by side on 127.0.0.1")


def test_it_listens_on_CLIENTMCP_PORT():
    """`CLIENTMCP_PORT=P clientmcp demo` (and so `CLIENTMCP_PORT=P make demo`) listens on P and says so."""
    port = free_port()
    with running_demo(CLIENTMCP_PORT=str(port)) as demo:
        assert demo.url == f"http://127.0.0.1:{port}/mcp"
        assert demo.page_url == f"http://127.0.0.1:{port + 1}/"  # beside the bridge's port
        assert get(demo.page_url).status == 200


def test_the_port_flag_wins_over_the_environment():
    port = free_port()
    with running_demo("--port", str(port), "--page-port", "0", CLIENTMCP_PORT="1") as demo:
        assert demo.port == port


def test_it_listens_on_CLIENTMCP_HOST():
    """A host of the operator's, here the wildcard: the printed URLs then name loopback."""
    port = free_port()
    with running_demo("--port", str(port), "--python-app", CLIENTMCP_HOST="0.0.0.0") as demo:
        listening = [
            c.laddr
            for c in psutil.Process(demo.process.pid).net_connections()
            if c.status == psutil.CONN_LISTEN
        ]
        assert listening == [("0.0.0.0", port)]
        assert demo.url == f"http://127.0.0.1:{port}/mcp"
        assert demo.rpc("tools/list")["tools"]


def _one_line_failure(*args: str, **env: str) -> str:
    result = subprocess.run(
        [str(CLIENTMCP), "demo", *args], env=environment(**env), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr


def test_a_busy_port_is_one_line_and_exit_2():
    """Port taken, by flag or by CLIENTMCP_PORT: one line saying so, exit 2 (no OSError traceback)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        expected = f"clientmcp: error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
        assert _one_line_failure("--port", str(port)) == expected
        assert _one_line_failure(CLIENTMCP_PORT=str(port)) == expected


def test_a_bad_setting_is_one_line_and_exit_2():
    assert (
        _one_line_failure(CLIENTMCP_PORT="abc")
        == "clientmcp: error: CLIENTMCP_PORT: 'abc' is not a whole number\n"
    )


def test_it_never_signs_with_the_operators_secret():
    """A CLIENTMCP_SECRET in the environment is not used: the tokens printed are valid on the demo alone."""
    operators = "an-operators-real-secret-0123456789abcdef"
    with running_demo("--port", "0", "--python-app", CLIENTMCP_SECRET=operators) as demo:
        assert demo.rpc("tools/list")["tools"]
        with pytest.raises(jwt.InvalidSignatureError):
            jwt.decode(demo.token, operators, algorithms=["HS256"])


# -- the todo page (the default app) -------------------------------------------------------------


def test_it_prints_the_page_url_beside_the_agent_url(page_demo):
    assert page_demo.lines[1].strip().startswith("app page:")
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", page_demo.page_url)
    assert page_demo.lines[2].strip().startswith("agent URL:")
    assert any("claude mcp add --transport http demo-todos" in line for line in page_demo.lines)
    assert page_demo.rpc("tools/list")["tools"] == []  # no app until the page is open
    page_port = int(re.search(r":(\d+)/$", page_demo.page_url).group(1))
    listening = [
        c for c in psutil.Process(page_demo.process.pid).net_connections() if c.status == psutil.CONN_LISTEN
    ]
    assert sorted(c.laddr for c in listening) == sorted(
        [("127.0.0.1", page_demo.port), ("127.0.0.1", page_port)]
    )


def test_it_serves_the_page_the_client_and_where_the_bridge_is(page_demo):
    page = get(page_demo.page_url)
    assert page.status == 200 and page.getheader("Content-Type") == "text/html; charset=utf-8"
    assert b'<script type="module" src="todo.js">' in page.body
    for name, kind in [
        ("todo.js", "text/javascript"),
        ("todo.css", "text/css"),
        ("clientmcp.js", "text/javascript"),
    ]:
        served = get(page_demo.page_url + name)
        assert served.status == 200 and served.getheader("Content-Type").startswith(kind)
        assert (
            served.body
            == (Path(__file__).resolve().parents[2] / "clientmcp_fast" / "web" / name).read_bytes()
        )
    config = json.loads(get(page_demo.page_url + "config.json").body)
    assert config == {"url": f"ws://127.0.0.1:{page_demo.port}/connect", "clientId": "demo-todos"}
    assert get(page_demo.page_url + "nothing-here").status == 404
    assert get(page_demo.page_url + "../pyproject.toml").status == 404


def test_the_page_gets_a_fresh_short_lived_client_token_each_time(page_demo):
    first, second = (get(page_demo.page_url + "token") for _ in range(2))
    assert first.status == 200 and first.getheader("Cache-Control") == "no-store"
    claims = [jwt.decode(t.body, options={"verify_signature": False}) for t in (first, second)]
    for claim in claims:
        assert claim["sub"] == "demo-todos" and claim["role"] == "client"
        assert claim["exp"] - claim["iat"] == 600  # checked when the page connects only (ClientMCP v1 §2)

    # Signed with the demo's secret: the bridge takes it, and a connection with it registers.
    async def connect() -> list[str]:
        app = ClientMCP(f"ws://127.0.0.1:{page_demo.port}/connect", first.body.decode(), reconnect=False)
        app.expose("probe", _probe)
        async with app:
            return [tool["name"] for tool in page_demo.rpc("tools/list")["tools"]]

    assert asyncio.run(connect()) == ["probe"]


async def _probe(arguments: dict) -> str:
    return "ok"


def test_a_busy_page_port_is_one_line_and_exit_2():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        expected = (
            f"clientmcp: error: --page-port: cannot listen on 127.0.0.1:{port}: Address already in use\n"
        )
        assert _one_line_failure("--port", "0", "--page-port", str(port)) == expected
    assert (
        _one_line_failure("--page-port", "70000")
        == "clientmcp: error: --page-port: 70000 is not a TCP port (0-65535)\n"
    )


def test_every_file_of_the_page_is_package_data():
    """`pip install .` carries clientmcp_fast/web (pyproject.toml's package-data), so the demo can serve it."""
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    web = sorted(
        p.relative_to(root / "clientmcp_fast").as_posix() for p in (root / "clientmcp_fast" / "web").iterdir()
    )
    assert {"web/clientmcp.js", "web/index.html", "web/todo.js", "web/todo.css"} <= set(web)
    for name in web:
        assert any(fnmatch.fnmatch(name, pattern) for pattern in patterns["clientmcp_fast"]), name


# -- OAuth: `clientmcp demo --oauth` (docs/oauth.md, Try it with the demo) ------------------------

LABELS = ["app page:", "agent URL:", "agent token:", "Claude Code:", "no headers?"]


def labels(demo: Demo) -> list[str]:
    """The label of each line the demo printed between its headline and `Ctrl-C`."""
    return [re.match(r"(.+?[:?])\s", line.strip()).group(1) for line in demo.lines[1:-1]]


def well_known(demo: Demo, path: str) -> http.client.HTTPResponse:
    return get(f"http://127.0.0.1:{demo.port}/.well-known/{path}")


def test_with_oauth_it_prints_the_apps_resource_url_and_the_metadata_answers():
    with running_demo("--port", "0", "--oauth") as demo:
        bridge = f"http://127.0.0.1:{demo.port}"
        resource = f"{bridge}/apps/demo-todos/mcp"
        assert labels(demo) == [*LABELS, "OAuth URL:", "then:"]
        assert demo.lines[-3].split()[2] == resource
        assert demo.lines[-2].strip() == (
            "then:        the host opens the bridge's consent page, and the todo page shows the request "
            "and a code: allow it there, and type the code into the consent page."
        )
        protected = well_known(demo, "oauth-protected-resource/apps/demo-todos/mcp")
        assert protected.status == 200
        assert json.loads(protected.body)["resource"] == resource
        assert json.loads(protected.body)["authorization_servers"] == [bridge]
        server = well_known(demo, "oauth-authorization-server")
        assert server.status == 200 and json.loads(server.body)["issuer"] == bridge
        # The page is told to ask its user; the static token still works on /mcp.
        config = json.loads(get(demo.page_url + "config.json").body)
        assert config == {"url": f"ws://{bridge[7:]}/connect", "clientId": "demo-todos", "oauth": True}
        assert demo.rpc("tools/list")["tools"] == []


def test_without_oauth_it_prints_what_it_did_and_discovery_is_404(page_demo):
    assert labels(page_demo) == LABELS
    assert not any("OAuth" in line for line in page_demo.lines)
    for path in ("oauth-protected-resource/apps/demo-todos/mcp", "oauth-authorization-server"):
        assert well_known(page_demo, path).status == 404


def test_oauth_and_the_public_url_come_from_the_environment_too():
    port = free_port()
    env = {"CLIENTMCP_OAUTH": "on", "CLIENTMCP_PUBLIC_URL": f"http://localhost:{port}"}
    with running_demo("--port", str(port), **env) as demo:
        assert demo.lines[-3].split()[2] == f"http://localhost:{port}/apps/demo-todos/mcp"
        server = well_known(demo, "oauth-authorization-server")
        assert json.loads(server.body)["issuer"] == f"http://localhost:{port}"
    with running_demo("--port", "0", "--oauth", "off") as demo:
        assert labels(demo) == LABELS


def test_oauth_that_the_demo_cannot_serve_is_one_line_and_exit_2():
    assert _one_line_failure("--port", "0", "--oauth", "--python-app") == (
        "clientmcp: error: --oauth: the todo page asks its user to allow each MCP host that signs in, "
        "and the Python app has no one to ask: run the demo without --python-app\n"
    )
    assert _one_line_failure("--oauth", "--host", "192.0.2.1", "--port", "8080") == (
        "clientmcp: error: --oauth: the demo's own URL http://192.0.2.1:8080 is not on loopback, the one "
        "place OAuth takes http://: give --public-url, the https:// origin agents reach the bridge at\n"
    )
    assert _one_line_failure("--oauth", "maybe") == (
        "clientmcp: error: --oauth: 'maybe' is not one of off, on\n"
    )
