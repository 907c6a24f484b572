"""Every example of the README and docs is a file of examples/ that runs as written against a real bridge.

A code block that shows an example names its file in the info string (```python examples/todo_app.py)
and must hold exactly that file's text; a Python block that names no file is refused, so that
no snippet in the docs goes untested.
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import hear_ctrl_c
from test_demo import CLIENTMCP, running_demo

from clientmcp_fast.core.tokens import TokenError, TokenVerifier

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Each file of examples/ and the test below that runs it: a new example fails here until it runs.
RUN_BY = {
    "todo_app.py": "test_the_todo_app_answers_an_agent",
    "todo_app.mjs": "test_the_todo_app_answers_an_agent",
    "notes_app.py": "test_the_notes_app_answers_as_docs_apps_md_says",
    "agent_sdk.py": "test_the_agents_use_the_demo",
    "agent_curl.sh": "test_the_agents_use_the_demo",
    "backend_token.py": "test_a_backend_mints_with_the_current_generation",
    "backend_token_nats.py": "test_a_backend_mints_with_the_generation_of_the_clusters_bucket",
    "cluster_demo.py": "test_the_cluster_demo_serves_apps_and_agents_through_one_port",
    "scoped_token.py": "test_a_backend_mints_a_scoped_agent_token_with_pyjwt_and_with_jose",
    "scoped_token.mjs": "test_a_backend_mints_a_scoped_agent_token_with_pyjwt_and_with_jose",
    "consent_app.py": "test_the_consent_app_lets_a_host_in_when_its_user_says_yes",
}
FENCE = re.compile(r"^```(\S*)[ \t]*(\S*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
WAIT = 20.0
DEMO_URL = "http://127.0.0.1:8080/mcp"  # where the README's commands find `make demo`
NODE = ROOT / "node_modules" / "node" / "bin" / "node"  # Node 22, from package.json (`npm ci`)


def code_blocks() -> list[tuple[str, str, str, str]]:
    """(document, language, named file, text) of every fenced block of the README and docs."""
    return [
        (document.relative_to(ROOT).as_posix(), *match.groups())
        for document in DOCUMENTS
        for match in FENCE.finditer(document.read_text())
    ]


def environment(**values: str) -> dict[str, str]:
    """The test process's environment without any CLIENTMCP_ variable, plus `values`."""
    return {k: v for k, v in os.environ.items() if not k.startswith("CLIENTMCP_")} | values


def run_example(name: str, **env: str) -> subprocess.CompletedProcess:
    """Run examples/NAME to its end as the README says: `python examples/NAME` or `sh examples/NAME`."""
    assert name in RUN_BY
    command = [sys.executable] if name.endswith(".py") else ["sh"]
    result = subprocess.run(
        [*command, f"examples/{name}"],
        cwd=ROOT,
        env=environment(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result


class ExampleApp:
    """An example app in a subprocess of its own; `log` is what it wrote on stderr, once it ended."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.log = ""

    def readline(self) -> str:
        return self.process.stdout.readline()


@contextmanager
def running_app(name: str, **env: str) -> Iterator[ExampleApp]:
    """examples/NAME running as an app until the block ends; then Ctrl-C must end it cleanly.

    A .py file runs on this Python, a .mjs file on Node 22 (`node examples/NAME`).
    """
    assert name in RUN_BY
    app = ExampleApp(
        subprocess.Popen(
            [str(NODE) if name.endswith(".mjs") else sys.executable, f"examples/{name}"],
            cwd=ROOT,
            env=environment(PYTHONUNBUFFERED="1", **env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    )
    process = app.process
    try:
        yield app
        process.send_signal(signal.SIGINT)
        stdout, app.log = process.communicate(timeout=WAIT)
        assert process.returncode == 0, (stdout, app.log)
        assert "Traceback" not in app.log, app.log
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_the_apps_hear_ctrl_c_however_the_tests_were_started():
    """A run started ignoring SIGINT (`make test > log &` in a script) still starts its apps with its default."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        hear_ctrl_c()  # as the run's start does
        child = subprocess.run(
            [sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGINT))"],
            capture_output=True,
            text=True,
            timeout=WAIT,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    assert child.stdout == "<built-in function default_int_handler>\n", child


def mcp(url: str, token: str, method: str, params: dict | None = None) -> dict:
    """One JSON-RPC request to the bridge as an agent; its result."""
    (answer,) = mcp_messages(url, token, method, params)
    return answer["result"]


def mcp_messages(url: str, token: str, method: str, params: dict | None = None) -> list[dict]:
    """One JSON-RPC request to the bridge as an agent; what came back: the answer, or each event of a stream."""
    parts = urlsplit(url)
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=WAIT)
    try:
        conn.request(
            "POST",
            parts.path,
            json.dumps(body),
            {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
        )
        response = conn.getresponse()
        assert response.status == 200, response.status
        text = response.read().decode()
        if response.getheader("Content-Type", "").startswith("text/event-stream"):
            return [
                json.loads(line[5:])
                for line in text.splitlines()
                if line.startswith("data:") and line[5:].strip()
            ]
        return [json.loads(text)]
    finally:
        conn.close()


def wait_registered(bridge, client_id: str, app: ExampleApp) -> None:
    """Wait until the app's first register was accepted: its tools are then listed."""

    def registered(server) -> bool:
        assert app.process.poll() is None, f"the app ended: {app.process.communicate()}"
        channel = server.bridge.apps.get(client_id)
        return channel is not None and channel.toolset is not None

    bridge.wait_for(registered, timeout=WAIT)


# -- the docs show the files ---------------------------------------------------------------------


def test_every_example_file_is_run_by_a_test():
    assert sorted(path.name for path in EXAMPLES.iterdir() if path.is_file()) == sorted(RUN_BY)
    tests = {name for name, value in globals().items() if name.startswith("test_") and callable(value)}
    assert set(RUN_BY.values()) <= tests


def test_every_code_block_naming_an_example_is_that_files_text():
    named = [(document, file, text) for document, _, file, text in code_blocks() if file]
    assert {file for _, file, _ in named} >= {"examples/todo_app.py", "examples/agent_sdk.py"}
    for document, file, text in named:
        # examples/ are run here; deploy/ (docs/deployment.md) by test_proxies and test_deploy_files.
        assert file.startswith(("examples/", "deploy/")), (document, file)
        assert text == (ROOT / file).read_text(), f"{document}: the block of {file} is not the file's text"


def test_every_python_block_is_an_example_file():
    """No Python in the README or docs that is not a file a test runs."""
    unnamed = [document for document, language, file, _ in code_blocks() if language == "python" and not file]
    assert unnamed == []


def test_each_document_links_the_examples_it_shows():
    """A reader sees which file a block is: the document links it (GitHub shows no info string)."""
    for document, _, file, _ in code_blocks():
        if file:
            prefix = "" if document == "README.md" else "../"
            assert f"]({prefix}{file})" in (ROOT / document).read_text(), (document, file)


# -- the examples run ----------------------------------------------------------------------------


@pytest.mark.parametrize("example", ["todo_app.py", "todo_app.mjs"])
def test_the_todo_app_answers_an_agent(start_bridge, example):
    """examples/todo_app.py (or .mjs, in JavaScript) as the README's "An app" says, then the SDK agent calls it."""
    bridge = start_bridge()
    with running_app(
        example,
        CLIENTMCP_CONNECT_URL=bridge.ws_url,
        CLIENTMCP_CLIENT_TOKEN=bridge.token("client", "my-app"),
    ) as app:
        assert app.readline() == f"Connected to {bridge.ws_url} with the tool add_todo; Ctrl-C stops.\n"
        wait_registered(bridge, "my-app", app)
        agent = run_example(
            "agent_sdk.py",
            CLIENTMCP_AGENT_URL=bridge.mcp_url,
            CLIENTMCP_AGENT_TOKEN=bridge.token("agent", "my-app"),
        )
        assert agent.stdout.splitlines() == [
            "tools: add_todo",
            "add_todo: Added Buy milk {'status': 'completed', 'count': 1}",
        ]
    bridge.assert_nothing_leaks()


def test_the_agents_use_the_demo():
    """The README's "Agents": with `clientmcp demo` running, the SDK and curl examples list and call."""
    with running_demo("--port", "0", "--python-app") as demo:
        env = {"CLIENTMCP_AGENT_URL": demo.url, "CLIENTMCP_AGENT_TOKEN": demo.token}
        sdk = run_example("agent_sdk.py", **env).stdout.splitlines()
        assert sdk[0] == "tools: add_todo, list_todos, complete_todo, clear_done"
        assert sdk[1] == (
            "add_todo: Added #1: Buy milk "
            "{'status': 'completed', 'item': {'id': 1, 'title': 'Buy milk', 'done': False}}"
        )
        readme = (ROOT / "README.md").read_text()
        claude = next(line for line in readme.splitlines() if line.startswith("claude mcp add"))
        printed = next(line for line in demo.lines if "claude mcp add" in line).split(": ", 1)[1]
        assert claude.replace("$CLIENTMCP_AGENT_TOKEN", demo.token).replace(DEMO_URL, demo.url) == printed
        answers = [
            json.loads(line) for line in run_example("agent_curl.sh", **env).stdout.splitlines() if line
        ]
        assert [answer["id"] for answer in answers] == [1, 2, 3]
        assert answers[0]["result"]["serverInfo"]["name"] == "clientmcp"
        assert [tool["name"] for tool in answers[1]["result"]["tools"]][0] == "add_todo"
        assert answers[2]["result"]["structuredContent"] == {
            "status": "completed",
            "item": {"id": 2, "title": "Buy milk", "done": False},
        }


def test_the_notes_app_answers_as_docs_apps_md_says(start_bridge):
    """Each tool of examples/notes_app.py: its risk and annotations, and each kind of result."""
    bridge = start_bridge()
    token = bridge.token("agent", "notes")
    with running_app(
        "notes_app.py",
        CLIENTMCP_CONNECT_URL=bridge.ws_url,
        CLIENTMCP_CLIENT_TOKEN=bridge.token("client", "notes"),
    ) as app:
        wait_registered(bridge, "notes", app)
        listed = mcp(bridge.mcp_url, token, "tools/list")["tools"]
        assert {
            tool["name"]: (tool["_meta"]["io.github.clientmcp/risk"], tool["annotations"]) for tool in listed
        } == {
            "list_notes": ("observe", {"readOnlyHint": True}),
            "read_note": ("observe", {"readOnlyHint": True}),
            "search_notes": ("observe", {"readOnlyHint": True}),
            "write_note": ("operate", {"readOnlyHint": False, "destructiveHint": False}),
            "delete_note": ("manage", {"destructiveHint": True, "idempotentHint": True}),
            "mail_notes": (
                "transact",
                {"destructiveHint": True, "idempotentHint": False, "openWorldHint": True},
            ),
        }

        def call(tool: str, **arguments) -> dict:
            return mcp(bridge.mcp_url, token, "tools/call", {"name": tool, "arguments": arguments})

        assert call("write_note", name="eggs", text="Buy a dozen") == {
            "content": [{"type": "text", "text": "Saved eggs"}],
            "structuredContent": {"status": "completed", "name": "eggs"},
        }
        assert call("read_note", name="eggs") == {"content": [{"type": "text", "text": "Buy a dozen"}]}
        # Asked for progress, the agent hears each note searched, then the answer.
        search = {"name": "search_notes", "arguments": {"text": "dozen"}, "_meta": {"progressToken": "s"}}
        assert mcp_messages(bridge.mcp_url, token, "tools/call", search) == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": "s", "progress": 1, "total": 1, "message": "Searched eggs"},
            },
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {
                    "content": [{"type": "text", "text": '{"names": ["eggs"]}'}],
                    "structuredContent": {"names": ["eggs"]},
                },
            },
        ]
        assert call("list_notes") == {
            "content": [{"type": "text", "text": '{"names": ["eggs"]}'}],
            "structuredContent": {"names": ["eggs"]},
        }
        assert call("mail_notes", to="me@example.com") == {
            "content": [{"type": "text", "text": "Mailing 1 notes to me@example.com."}],
            "structuredContent": {"status": "accepted", "operation": "mail-1", "count": 1},
        }
        assert call("delete_note", name="milk") == {
            "content": [{"type": "text", "text": "There is no note 'milk'."}],
            "isError": True,
            "structuredContent": {
                "status": "rejected",
                "reason": {"code": "not_found", "detail": "There is no note 'milk'."},
            },
        }
        assert call("read_note", name="milk") == {
            "content": [{"type": "text", "text": "KeyError: 'milk'"}],
            "isError": True,
        }
    # logging.basicConfig's format (LEVEL:logger:message) of what the library says.
    assert f"INFO:clientmcp.client:connected to {bridge.ws_url}; registering 6 tools\n" in app.log
    assert (
        f"INFO:clientmcp.client:connection to {bridge.ws_url} closed with 1000 (a normal close)\n" in app.log
    )


def test_a_backend_mints_with_the_current_generation(tmp_path: Path):
    """docs/configuration.md, Revocation: the generation the backend reads is the one the bridge keeps."""
    secret = "examples-backend-secret-0123456789abcdef"
    state = str(tmp_path / "state.db")
    for _ in range(2):
        subprocess.run(
            [str(CLIENTMCP), "revoke", "client", "my-app"],
            env=environment(CLIENTMCP_STATE=state),
            check=True,
            capture_output=True,
            timeout=60,
        )
    token = run_example("backend_token.py", CLIENTMCP_SECRET=secret, CLIENTMCP_STATE=state).stdout.strip()
    verifier = TokenVerifier([secret.encode()])
    verifier.generations = {"client": {"my-app": 2}, "agent": {}}
    assert verifier.verify(token, "client", time.time()) == "my-app"
    verifier.generations = {"client": {"my-app": 3}, "agent": {}}
    with pytest.raises(TokenError, match="^token revoked: gen 2, the current generation is 3$"):
        verifier.verify(token, "client", time.time())


@pytest.mark.parametrize("example", ["scoped_token.py", "scoped_token.mjs"])
def test_a_backend_mints_a_scoped_agent_token_with_pyjwt_and_with_jose(example):
    """docs/configuration.md, Scoped agent tokens: the bridge reads the scope the backend wrote."""
    secret = "examples-backend-secret-0123456789abcdef"
    command = [str(NODE)] if example.endswith(".mjs") else [sys.executable]
    done = subprocess.run(
        [*command, f"examples/{example}", "my-app", "list_todos", "read_*"],
        cwd=ROOT,
        env=environment(CLIENTMCP_SECRET=secret),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    grant = TokenVerifier([secret.encode()]).grant(done.stdout.strip(), "agent", time.time())
    assert grant.client_id == "my-app" and grant.scope is not None
    assert [name for name in ("list_todos", "read_one", "add_todo", "read") if grant.scope.allows(name)] == [
        "list_todos",
        "read_one",
    ]


def test_a_backend_mints_with_the_generation_of_the_clusters_bucket():
    """docs/configuration.md, Generations in a cluster: the backend reads the key `clientmcp revoke` wrote."""
    pytest.importorskip("nats", reason="--state nats needs nats-py")
    from test_cluster import NatsServer

    secret = "examples-backend-secret-0123456789abcdef"
    nats_server = NatsServer()
    nats_server.start()
    try:

        def revoke(client_id: str) -> None:
            subprocess.run(
                [str(CLIENTMCP), "revoke", "client", client_id],
                env=environment(CLIENTMCP_STATE="nats", CLIENTMCP_NATS=nats_server.url),
                check=True,
                capture_output=True,
                timeout=60,
            )

        revoke("another-app")  # the bucket exists, as a bridge with --state nats makes it
        fresh = run_example("backend_token_nats.py", CLIENTMCP_SECRET=secret, CLIENTMCP_NATS=nats_server.url)
        revoke("my-app")
        revoke("my-app")
        token = run_example("backend_token_nats.py", CLIENTMCP_SECRET=secret, CLIENTMCP_NATS=nats_server.url)
    finally:
        nats_server.stop()
    verifier = TokenVerifier([secret.encode()])
    verifier.generations = {"client": {}, "agent": {}}
    assert verifier.verify(fresh.stdout.strip(), "client", time.time()) == "my-app"  # no key yet: 0
    verifier.generations = {"client": {"my-app": 2}, "agent": {}}
    assert verifier.verify(token.stdout.strip(), "client", time.time()) == "my-app"
    with pytest.raises(TokenError, match="^token revoked: gen 0, the current generation is 2$"):
        verifier.verify(fresh.stdout.strip(), "client", time.time())


class _Through:
    """The cluster demo's one URL, seen as the e2e helpers see a bridge (tokens as it printed them)."""

    def __init__(self, port: int, tokens: dict[str, str]) -> None:
        self.ws_url = f"ws://127.0.0.1:{port}/connect"
        self.mcp_url = f"http://127.0.0.1:{port}/mcp"
        self.tokens = tokens

    def token(self, role: str, client_id: str) -> str:
        return self.tokens[role]


def test_the_cluster_demo_serves_apps_and_agents_through_one_port():
    """`make cluster-demo`: nginx on loopback in front of three instances joined through NATS.

    docs/scaling.md, Three instances behind one port.

    An app connects through nginx to one instance; official SDK agents, in both eras, through
    nginx too, each request to the next instance in turn (no sticky sessions): every call
    reaches the app, and nginx's access log shows that all three instances served them.
    Ctrl-C then stops everything and removes the demo's folder.
    """
    import asyncio

    import psutil
    from agents import sdk_agent

    from clientmcp_fast.client import ClientMCP

    demo = subprocess.Popen(
        [sys.executable, "examples/cluster_demo.py", "--port", "0", "--client-id", "team.todos"],
        cwd=ROOT,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # Ctrl-C reaches the whole group, as in a terminal
    )
    try:
        printed = ""
        while "Ctrl-C stops them all." not in printed:
            line = demo.stdout.readline()
            assert line, (printed, demo.stderr.read())
            printed += line
        instances = set(re.search(r"127\.0\.0\.1 ports ([\d, ]+)\)", printed).group(1).split(", "))
        port = int(re.search(r"apps connect to: +ws://127\.0\.0\.1:(\d+)/connect", printed).group(1))
        tokens = dict(re.findall(r"^(client|agent) token: (\S+)$", printed, re.M))
        folder = Path(re.search(r"naming the instance of each request: (\S+)", printed).group(1))
        assert len(instances) == 3 and set(tokens) == {"client", "agent"}
        # Its nats-server asks for the demo's password (docs/scaling.md, Threat model).
        nats_port = int(
            re.search(r"joined through nats-server \(127\.0\.0\.1:(\d+), with a password", printed).group(1)
        )
        assert "Authorization Violation" in _nats_refusal(f"nats://127.0.0.1:{nats_port}")
        through = _Through(port, tokens)
        children = psutil.Process(demo.pid).children()
        assert len(children) == 5  # nats-server, three bridges, nginx

        async def use() -> None:
            async def echo(arguments: dict) -> str:
                return json.dumps(arguments)

            app = ClientMCP(through.ws_url, tokens["client"], reconnect=False)
            app.expose("echo", echo)
            async with app:
                for n in range(6):
                    async with sdk_agent(through, "team.todos", ("legacy", "auto")[n % 2]) as agent:
                        give_up = time.monotonic() + WAIT
                        # An instance other than the app's hears of it within a NATS round trip.
                        while [tool.name for tool in (await agent.list_tools()).tools] != ["echo"]:
                            assert time.monotonic() < give_up
                            await asyncio.sleep(0.05)
                        result = await agent.call_tool("echo", {"n": n})
                        assert not result.is_error and json.loads(result.content[0].text) == {"n": n}

        asyncio.run(use())
        served = [line.split() for line in (folder / "access.log").read_text().splitlines()]
        assert {upstream.rpartition(":")[2] for path, _, upstream in served if path == "/mcp"} == instances
        (connect,) = [line for line in served if line[0] == "/connect"]  # logged when it closed
        assert connect[1] == "101" and connect[2].rpartition(":")[2] in instances
        os.killpg(demo.pid, signal.SIGINT)
        assert demo.wait(30) == 0, demo.stderr.read()
        assert not folder.exists()
        assert not [
            child for child in children if child.is_running() and child.status() != psutil.STATUS_ZOMBIE
        ]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(demo.pid, signal.SIGKILL)
        demo.wait(10)
        demo.stdout.close()
        demo.stderr.close()


def _nats_refusal(url: str) -> str:
    """Why a client with no credentials is not let onto the NATS server at `url` ("accepted" if it is)."""
    import asyncio

    import nats

    async def connect() -> str:
        try:
            nc = await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=2)
        except Exception as error:  # noqa: BLE001 - nats-py's refusal, whatever its class
            return str(error)
        await nc.close()
        return "accepted"

    return asyncio.run(connect())


# -- the cluster demo's supervisor, without starting anything -------------------------------------


def _cluster_demo():
    """examples/cluster_demo.py as a module."""
    spec = importlib.util.spec_from_file_location("cluster_demo", EXAMPLES / "cluster_demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Child:
    """Stands for one of the demo's processes; `ending` runs as poll() first sees it ended."""

    def __init__(self, program: str, *, ended: bool = False, ending=None) -> None:
        self.args = [program]
        self.returncode = 0 if ended else None
        self.ending = ending

    def poll(self) -> int | None:
        if self.ending is not None:
            self.ending()
            self.returncode = 0
        return self.returncode


@pytest.fixture
def signals_as_in_a_script():
    """SIGINT ignored, as a shell script's background job gets it; both handlers restored after."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_the_cluster_demo_takes_a_childs_end_after_ctrl_c_as_the_stop(signals_as_in_a_script, sig, capsys):
    """The group's Ctrl-C ends nats-server too: the demo sees it end, and stops with 0, saying nothing.

    Its handler is installed over an ignored SIGINT; the signal is raised as poll() finds the child
    ended, as a Ctrl-C reaching the whole group at once is by then.
    """
    demo = _cluster_demo()
    stop: list[bool] = []
    demo.stop_on_signals(stop)
    nats = _Child("/usr/sbin/nats-server", ending=lambda: signal.raise_signal(sig))
    assert demo.supervise([nats, _Child("/usr/sbin/nginx")], stop) == 0
    assert capsys.readouterr().err == ""
    # While it starts: the same is a stop too, not "a process ended".
    stop.clear()
    nats = _Child("/usr/sbin/nats-server", ending=lambda: signal.raise_signal(sig))
    with pytest.raises(demo.Stopped):
        demo.wait_for("nginx did not listen", lambda: False, [nats], stop)


def test_the_cluster_demo_reports_a_child_that_ends_by_itself(capsys):
    """Without a Ctrl-C, a process that ends is a failure: status 1, saying which."""
    demo = _cluster_demo()
    nats = _Child("/usr/sbin/nats-server", ended=True)
    assert demo.supervise([nats, _Child("/usr/sbin/nginx")], []) == 1
    assert capsys.readouterr().err == "cluster-demo: /usr/sbin/nats-server ended (0): stopping\n"
    with pytest.raises(SystemExit) as exited:
        demo.wait_for("nginx did not listen", lambda: False, [nats], [])
    assert str(exited.value) == "cluster-demo: nginx did not listen: a process ended with status 0"


# -- examples/consent_app.py: the app's user lets a host in (docs/apps.md, Consent) -------------


def _read_until(stream, end: str) -> str:
    """What the app printed up to and including `end` (its question has no newline after it)."""
    text = ""
    while not text.endswith(end):
        char = stream.read(1)
        assert char, f"the app ended before asking: {text!r}"
        text += char
    return text


@pytest.mark.anyio
@pytest.mark.parametrize("says", ["y", "n"])
async def test_the_consent_app_lets_a_host_in_when_its_user_says_yes(start_bridge, says):
    """The host's person opens the page, the app's user reads the request and its code on the
    app's terminal and answers; with `y` the typed code lets the host in, with `n` it does not."""
    import asyncio

    from test_oauth_http import APP, OAuthBridge, Person, answer_of, authorize_url, free_port

    port = free_port()
    oauth = OAuthBridge(start_bridge(port=port, oauth=True, public_url=f"http://127.0.0.1:{port}"))
    client_id = oauth.register()
    process = subprocess.Popen(
        [sys.executable, "examples/consent_app.py"],
        cwd=ROOT,
        env=environment(
            PYTHONUNBUFFERED="1",
            CLIENTMCP_CONNECT_URL=oauth.bridge.ws_url,
            CLIENTMCP_CLIENT_TOKEN=oauth.bridge.token("client", APP),
        ),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=hear_ctrl_c,
    )
    person = Person(oauth)
    try:
        assert "Connected to" in await asyncio.to_thread(process.stdout.readline)
        await person.open(authorize_url(oauth, client_id))  # the page is shown: the app is asked
        question = await asyncio.wait_for(asyncio.to_thread(_read_until, process.stdout, "[y/N] "), WAIT)
        code = re.search(r"type (\S+) into the page", question).group(1)
        assert "asks to use this app" in question and "http://127.0.0.1:33418" in question
        process.stdin.write(says + "\n")
        process.stdin.flush()
        answer = answer_of(await person.type_code(code))
        if says == "y":
            assert set(answer) == {"code", "state", "iss"}
        else:
            assert answer["error"] == ["access_denied"]
    finally:
        await person.http.aclose()
        process.send_signal(signal.SIGINT)
        _, log = process.communicate(timeout=WAIT)  # closes its stdin too
    assert process.returncode == 0 and "Traceback" not in log, log
