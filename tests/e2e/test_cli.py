"""The `clientmcp` command as an operator runs it: subprocesses, their output, exit codes and signals.

docs/configuration.md (command line, secrets, settings from the environment and flags) and
docs/protocol.md, Shutdown (SIGTERM/SIGINT end the bridge gracefully with exit 0 within 5 s).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import jwt
import pytest
from conftest import SECRET
from rawhttp import RawHttp, mcp_post, tool_call, tool_error_text, wait_until
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

# The command under test: the virtualenv's, or a frozen build's (`make test-container` sets it).
CLIENTMCP = os.environ.get("CLIENTMCP_COMMAND") or str(Path(sys.executable).with_name("clientmcp"))
SECRET_TEXT = "cli-tests-secret-0123456789abcdef-0123456789"
DAY = 86_400


def environment(**values: str) -> dict[str, str]:
    """The test process's environment without any CLIENTMCP_ setting, plus `values`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("CLIENTMCP_")}
    env.update(values)
    return env


def run(
    *args: str, env: dict[str, str] | None = None, command: list[str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*(command or [CLIENTMCP]), *args],
        env=environment(CLIENTMCP_SECRET=SECRET_TEXT) if env is None else env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def assert_one_line_error(result: subprocess.CompletedProcess) -> str:
    """Exit 2, nothing on stdout, and exactly one line on stderr; that line."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.endswith("\n") and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("clientmcp: error: "), result.stderr
    return result.stderr


def minted(result: subprocess.CompletedProcess) -> str:
    """The token a successful `clientmcp token` printed: alone on stdout, on one line."""
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.endswith("\n") and result.stdout.count("\n") == 1, result.stdout
    return result.stdout[:-1]


def claims_of(token: str, secret: str | bytes = SECRET_TEXT) -> dict:
    key = secret.encode() if isinstance(secret, str) else secret
    assert jwt.get_unverified_header(token)["alg"] == "HS256"
    return jwt.decode(token, key, algorithms=["HS256"])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# -- `clientmcp token` ----------------------------------------------------------------------------


class TestToken:
    def test_client_token_is_a_jwt_alone_on_stdout_valid_for_24h(self):
        """`clientmcp token client alice` prints a JWT that PyJWT verifies: sub, role, exp = now + 24 h."""
        before = time.time()
        token = minted(run("token", "client", "alice"))
        after = time.time()
        claims = claims_of(token)
        assert claims["sub"] == "alice"
        assert claims["role"] == "client"
        assert before + DAY - 2 <= claims["exp"] <= after + DAY + 1

    def test_agent_token(self):
        """The agent role is minted the same way."""
        claims = claims_of(minted(run("token", "agent", "alice-wallet")))
        assert (claims["sub"], claims["role"]) == ("alice-wallet", "agent")

    @pytest.mark.parametrize(("ttl", "seconds"), [("30d", 30 * DAY), ("90s", 90), ("15m", 900), ("2h", 7200)])
    def test_ttl_units(self, ttl, seconds):
        """--ttl takes s, m, h and d."""
        before = time.time()
        claims = claims_of(minted(run("token", "client", "alice", "--ttl", ttl)))
        after = time.time()
        assert before + seconds - 2 <= claims["exp"] <= after + seconds + 1

    def test_client_ids_with_every_allowed_character(self):
        """A client ID may hold A-Z a-z 0-9 _ - . : @."""
        client_id = "Az09_-.:@user"
        assert claims_of(minted(run("token", "client", client_id)))["sub"] == client_id

    def test_minted_token_is_accepted_by_a_running_bridge(self, bridge):
        """A token from the CLI, signed with the bridge's secret, lets an app connect and register."""
        token = minted(run("token", "client", "cli-app", env=environment(CLIENTMCP_SECRET=SECRET.decode())))
        with connect(bridge.ws_url, subprotocols=["clientmcp.v1", token], open_timeout=10, legacy=True) as ws:
            ws.send(json.dumps({"type": "register", "tools": []}))
            assert json.loads(ws.recv(timeout=10)) == {"type": "registered"}

    def test_secret_bytes_are_the_key_as_they_are(self):
        """A hex-looking secret is not decoded: its UTF-8 bytes are the HMAC key."""
        hex_secret = "ab" * 32
        token = minted(run("token", "client", "alice", env=environment(CLIENTMCP_SECRET=hex_secret)))
        assert claims_of(token, hex_secret)["sub"] == "alice"
        with pytest.raises(jwt.InvalidSignatureError):
            claims_of(token, bytes.fromhex(hex_secret))

    def test_missing_secret_is_exit_2_with_one_line(self):
        """Without CLIENTMCP_SECRET(S): exit 2 and one line naming the variable."""
        assert "CLIENTMCP_SECRET" in assert_one_line_error(run("token", "client", "alice", env=environment()))

    def test_empty_secret_is_like_a_missing_one(self):
        """An empty CLIENTMCP_SECRET is not a secret."""
        assert_one_line_error(run("token", "client", "alice", env=environment(CLIENTMCP_SECRET="")))

    def test_secret_shorter_than_32_bytes_is_exit_2(self):
        """31 bytes is too short."""
        assert_one_line_error(run("token", "client", "alice", env=environment(CLIENTMCP_SECRET="s" * 31)))

    @pytest.mark.parametrize("secret", ["s" * 32, "é" * 16], ids=["32-ascii", "16-two-byte-chars"])
    def test_secret_of_32_bytes_is_enough(self, secret):
        """Exactly 32 bytes, counted in UTF-8, is long enough."""
        token = minted(run("token", "client", "alice", env=environment(CLIENTMCP_SECRET=secret)))
        assert claims_of(token, secret)["sub"] == "alice"

    def test_rotation_list_signs_with_its_first_secret(self):
        """With CLIENTMCP_SECRETS only, the first secret of the list signs."""
        first, second = "first-secret-".ljust(40, "1"), "second-secret-".ljust(40, "2")
        token = minted(
            run("token", "client", "alice", env=environment(CLIENTMCP_SECRETS=f"{first},{second}"))
        )
        assert claims_of(token, first)["sub"] == "alice"
        with pytest.raises(jwt.InvalidSignatureError):
            claims_of(token, second)

    def test_rotation_list_with_secret_set_signs_with_the_secret(self):
        """With both set, CLIENTMCP_SECRET signs."""
        signer, old = "the-signing-secret-".ljust(40, "s"), "an-older-secret-".ljust(40, "o")
        env = environment(CLIENTMCP_SECRET=signer, CLIENTMCP_SECRETS=old)
        token = minted(run("token", "agent", "alice", env=env))
        assert claims_of(token, signer)["role"] == "agent"
        with pytest.raises(jwt.InvalidSignatureError):
            claims_of(token, old)

    def test_short_secret_in_the_rotation_list_is_exit_2(self):
        """Every secret of the list must have 32 bytes."""
        env = environment(CLIENTMCP_SECRETS="long-enough-secret-".ljust(40, "x") + ",short")
        assert_one_line_error(run("token", "client", "alice", env=env))

    @pytest.mark.parametrize(
        "args",
        [
            ["--no-such-flag"],
            ["token", "client", "alice", "--no-such-flag"],
            ["token", "boss", "alice"],
            ["token", "client"],
            ["token", "client", "bad id!"],
            ["token", "client", "x" * 129],
            ["token", "client", "alice", "--ttl", "5x"],
            ["token", "client", "alice", "--ttl", "0s"],
            ["token", "client", "alice", "--ttl", "-5m"],
            ["no-such-command"],
            ["serve", "--port", "not-a-port"],
            ["serve", "--port", "70000"],
            ["serve", "--log", "loud"],
            ["serve", "--call-timeout", "soon"],
        ],
        ids=lambda args: " ".join(args)[:40],
    )
    def test_bad_arguments_are_exit_2_with_one_line(self, args):
        """A flag, role, ID, duration or setting that cannot be used: exit 2 and one line on stderr."""
        assert_one_line_error(run(*args))

    def test_bad_setting_from_the_environment_is_exit_2(self):
        """A setting from the environment is checked like the flag, and named in the error."""
        result = run("serve", env=environment(CLIENTMCP_SECRET=SECRET_TEXT, CLIENTMCP_PORT="eighty"))
        assert "CLIENTMCP_PORT" in assert_one_line_error(result)


# -- --help --------------------------------------------------------------------------------------


class TestHelp:
    def test_top_level_help_lists_commands_settings_and_the_secret(self):
        """`clientmcp --help` names the commands, every serve setting's flag, and CLIENTMCP_SECRET."""
        result = run("--help", env=environment())
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("usage: clientmcp")
        for word in ("serve", "token", "demo", "CLIENTMCP_SECRET"):
            assert word in result.stdout
        for flag in (
            "--host",
            "--port",
            "--allowed-origins",
            "--call-timeout",
            "--log",
            "--app-idle-timeout",
        ):
            assert flag in result.stdout

    @pytest.mark.parametrize(
        ("command", "expected"),
        [
            ("serve", ["--port", "--host", "--call-timeout"]),
            ("token", ["--ttl", "client", "agent"]),
            ("demo", ["--port"]),
        ],
    )
    def test_subcommand_help(self, command, expected):
        """Each command has its own --help, exit 0, without needing a secret."""
        result = run(command, "--help", env=environment())
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"usage: clientmcp {command}")
        for word in expected:
            assert word in result.stdout

    def test_python_m_clientmcp_fast_is_the_same_command(self):
        """`python -m clientmcp_fast --help` prints the same help as `clientmcp --help`."""
        module = run("--help", env=environment(), command=[sys.executable, "-m", "clientmcp_fast"])
        script = run("--help", env=environment())
        assert module.returncode == 0, module.stderr
        assert module.stdout == script.stdout


# -- `clientmcp serve` ------------------------------------------------------------------------------


class Served:
    """A `clientmcp` server process on a port of ours; stopped by the test or at teardown."""

    def __init__(
        self,
        args: list[str],
        env: dict[str, str],
        port: int,
        command: list[str] | None = None,
        new_group: bool = False,
    ) -> None:
        self.port = port
        self.process = subprocess.Popen(
            [*(command or [CLIENTMCP]), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=new_group,  # a process group of its own, as systemd and a shell's job make
        )

    def wait_listening(self) -> None:
        def listening() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"clientmcp exited with {self.process.returncode}: {self.process.stderr.read()}"
                )
            return healthz(self.port) == (200, b"ok")

        wait_until(listening, timeout=20, what=f"clientmcp answering on port {self.port}")

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, float]:
        """Send `sig`; the exit status and the seconds it took to exit."""
        sent = time.monotonic()
        self.process.send_signal(sig)
        code = self.process.wait(30)
        return code, time.monotonic() - sent

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process.stdout.close()
        self.process.stderr.close()


def healthz(port: int) -> tuple[int, bytes] | None:
    """GET /healthz on `port`: (status, body), or None when nothing listens."""
    try:
        with RawHttp(port, timeout=5) as conn:
            conn.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            response = conn.read_response()
            return response.status, response.body
    except ConnectionRefusedError:
        return None


@contextmanager
def echo_app(port: int, client_id: str) -> Iterator[ClientConnection]:
    """A `websockets` app on `port`, its token from `clientmcp token`, registered with one tool, `echo`."""
    token = minted(run("token", "client", client_id))
    with connect(
        f"ws://127.0.0.1:{port}/connect", subprotocols=["clientmcp.v1", token], open_timeout=10, legacy=True
    ) as ws:
        ws.send(
            json.dumps({"type": "register", "tools": [{"name": "echo", "inputSchema": {"type": "object"}}]})
        )
        assert json.loads(ws.recv(timeout=10)) == {"type": "registered"}
        yield ws


@pytest.fixture
def serve() -> Iterator:
    """A factory for `clientmcp` server processes, all killed at teardown if still running."""
    started: list[Served] = []

    def start(
        args: list[str], port: int, command: list[str] | None = None, new_group: bool = False, **env: str
    ) -> Served:
        served = Served(args, environment(CLIENTMCP_SECRET=SECRET_TEXT, **env), port, command, new_group)
        started.append(served)
        served.wait_listening()
        return served

    yield start
    for served in started:
        served.kill()


class TestServe:
    @pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
    def test_serves_then_closes_apps_with_1001_and_exits_0_on_signal(self, serve, sig):
        """`clientmcp serve` answers /healthz; on SIGTERM or SIGINT apps get 1001 and it exits 0 in 5 s."""
        port = free_port()
        served = serve(["serve", "--host", "127.0.0.1", "--port", str(port)], port)
        with echo_app(port, "alice") as ws:
            code, took = served.stop(sig)
            with pytest.raises(ConnectionClosed) as caught:
                ws.recv(timeout=10)
        assert caught.value.rcvd is not None
        assert (caught.value.rcvd.code, caught.value.rcvd.reason) == (1001, "bridge shutting down")
        assert code == 0
        assert took < 5
        assert healthz(port) is None

    def test_a_signal_to_its_whole_process_group_exits_0(self, serve):
        """SIGTERM to the group (systemd's KillMode, a shell's job control): every process of it gets
        it, and dist/clientmcp's bootloaders forward it again to the bridge, which shuts down once and
        exits 0 (with CLIENTMCP_COMMAND=dist/clientmcp, `make test-container` runs this on the binary)."""
        port = free_port()
        served = serve(["serve", "--host", "127.0.0.1", "--port", str(port)], port, new_group=True)
        with echo_app(port, "alice") as ws:
            sent = time.monotonic()
            os.killpg(served.process.pid, signal.SIGTERM)
            code = served.process.wait(30)
            with pytest.raises(ConnectionClosed) as caught:
                ws.recv(timeout=10)
        assert caught.value.rcvd is not None and caught.value.rcvd.code == 1001
        assert code == 0 and time.monotonic() - sent < 5

    def test_a_second_signal_while_it_shuts_down_changes_nothing(self, serve):
        """Two SIGTERMs 2 ms apart, or SIGTERM then SIGINT: one shutdown, exit 0."""
        for second in (signal.SIGTERM, signal.SIGINT):
            port = free_port()
            served = serve(["serve", "--host", "127.0.0.1", "--port", str(port)], port)
            served.process.send_signal(signal.SIGTERM)
            time.sleep(0.002)
            served.process.send_signal(second)
            assert served.process.wait(30) == 0
            assert served.process.stderr.read().count("shutting down") == 1

    def test_secret_never_reaches_the_log(self, serve):
        """The log on stderr holds neither the secret nor a token from /mcp/<token>."""
        port = free_port()
        served = serve(["serve", "--host", "127.0.0.1", "--port", str(port), "--log", "debug"], port)
        agent = minted(run("token", "agent", "alice"))
        with RawHttp(port) as conn:
            # The origin form and the absolute form (RFC 9112 §3.2.2) both carry the token.
            for target in (f"/mcp/{agent}", f"http://127.0.0.1:{port}/mcp/{agent}"):
                conn.send(mcp_post(b'{"jsonrpc":"2.0","id":1,"method":"ping"}', None, target=target))
                assert conn.read_response().status == 200
        assert served.stop()[0] == 0
        log = served.process.stderr.read()
        assert SECRET_TEXT not in log
        assert agent not in log and agent.split(".")[2] not in log

    def test_no_subcommand_runs_serve_with_settings_from_the_environment(self, serve):
        """`clientmcp` alone serves, on CLIENTMCP_HOST and CLIENTMCP_PORT."""
        port = free_port()
        served = serve([], port, CLIENTMCP_HOST="127.0.0.1", CLIENTMCP_PORT=str(port))
        assert served.stop()[0] == 0

    def test_flag_overrides_the_environment(self, serve):
        """--port wins over CLIENTMCP_PORT: the bridge listens on the flag's port only."""
        env_port, flag_port = free_port(), free_port()
        assert env_port != flag_port
        served = serve(
            ["serve", "--port", str(flag_port)],
            flag_port,
            CLIENTMCP_HOST="127.0.0.1",
            CLIENTMCP_PORT=str(env_port),
        )
        assert healthz(env_port) is None
        assert served.stop()[0] == 0

    def test_call_timeout_from_the_environment_and_from_the_flag(self, serve):
        """CLIENTMCP_CALL_TIMEOUT sets the call timeout; --call-timeout overrides it."""
        for args, seconds in (([], 1), (["--call-timeout", "2"], 2)):
            port = free_port()
            served = serve(
                ["serve", "--host", "127.0.0.1", "--port", str(port), *args], port, CLIENTMCP_CALL_TIMEOUT="1"
            )
            with echo_app(port, "mute") as ws:
                with RawHttp(port) as conn:
                    started = time.monotonic()
                    conn.send(mcp_post(tool_call("echo", {}, 1), minted(run("token", "agent", "mute"))))
                    assert json.loads(ws.recv(timeout=10))["type"] == "call"  # never answered
                    text = tool_error_text(conn.read_response())
                    assert text == f"The application did not answer within {seconds} s."
                    assert time.monotonic() - started >= seconds - 0.2
                cancel = json.loads(ws.recv(timeout=10))
                assert cancel["type"] == "cancel"
            assert served.stop()[0] == 0

    def test_python_m_clientmcp_fast_serves(self, serve):
        """`python -m clientmcp_fast serve` runs the same bridge."""
        port = free_port()
        served = serve(
            ["serve", "--host", "127.0.0.1", "--port", str(port)],
            port,
            command=[sys.executable, "-m", "clientmcp_fast"],
        )
        assert served.stop()[0] == 0

    def test_port_in_use_is_an_error_exit(self):
        """A port already taken ends `serve` with a non-zero exit, not a hang."""
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            result = run("serve", "--host", "127.0.0.1", "--port", str(port))
        assert result.returncode != 0


# -- what the process loads (docs/benchmarks.md, idle RSS) -----------------------------------

# A JWT library and what it brings: cryptography (about 10 MB) where installed, and PyJWT's key
# fetcher (urllib.request, http.client, email: about 1.3 MB), for algorithms the bridge refuses.
_KEPT_OUT = ("jwt", "cryptography", "urllib.request", "http.client", "email")


def test_the_command_imports_no_jwt_library_and_its_tokens_are_pyjwts():
    """The bridge signs and verifies HS256 with the standard library, by ordinary imports alone."""
    script = (
        "import sys, time\n"
        "import clientmcp_fast.cli, clientmcp_fast.net.server\n"
        "from clientmcp_fast.core.tokens import TokenVerifier, mint\n"
        f"token = mint({SECRET!r}, 'agent', 'alice', 60, time.time())\n"
        f"print(token, TokenVerifier([{SECRET!r}]).verify(token, 'agent', time.time()))\n"
        f"print(sorted(name for name in {_KEPT_OUT!r} if name in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    signed, loaded = result.stdout.splitlines()
    token, client_id = signed.split()
    assert client_id == "alice"
    assert loaded == "[]"
    assert jwt.decode(token, SECRET, algorithms=["HS256"])["sub"] == "alice"


# What a default `serve` leaves out, each resident in the idle bridge for nothing otherwise
# (docs/benchmarks.md, Idle footprint): the cluster's modules and nats-py (--nats,
# --state nats), the state file's (--state), the metrics listener's (--metrics), OAuth's (--oauth
# on), the other commands', and the idna codec that uvloop would use for a str host
# (net/server.py, listen_hosts).
_SERVE_LEAVES_OUT = {
    "": (
        "nats",
        "clientmcp_fast.net.nats",
        "clientmcp_fast.net.nats_connection",
        "clientmcp_fast.net.nats_state",
        "clientmcp_fast.net.nkeys",
        "clientmcp_fast.state",
        "clientmcp_fast.generation_store",
        "sqlite3",
        "clientmcp_fast.metrics",
        "prometheus_client",
        "clientmcp_fast.workers",
        "clientmcp_fast.health",
        "clientmcp_fast.demo",
        "clientmcp_fast.client",
        "clientmcp_fast.net.oauth",
        "clientmcp_fast.net.client_documents",
        "clientmcp_fast.core.oauth",
        "clientmcp_fast.core.oauth_pages",
        "encodings.idna",
    ),
    # The same names are imported when their option asks for them: the list names real modules.
    "--state": ("clientmcp_fast.state", "clientmcp_fast.generation_store", "sqlite3"),
    "--metrics": ("clientmcp_fast.metrics", "prometheus_client"),
    "--oauth": (
        "clientmcp_fast.net.oauth",
        "clientmcp_fast.net.client_documents",
        "clientmcp_fast.core.oauth",
        "clientmcp_fast.core.oauth_pages",
    ),
    # The pure twins read requests with httptools; the compiled build with its own llhttp: it
    # loads neither httptools nor its extension modules (_pure/http_reader.py imports it late).
    "compiled": ("httptools", "httptools.parser", "httptools.parser.parser", "httptools.parser.url_parser"),
}


def imported_by_serve(serve, *flags: str) -> set[str]:
    """The modules a venv `serve` with `flags` imported by the time it answered /healthz (-X importtime)."""
    port = free_port()
    command = [sys.executable, "-X", "importtime", "-m", "clientmcp_fast"]
    served = serve(["serve", "--host", "127.0.0.1", "--port", str(port), *flags], port, command)
    # At once after /healthz, while --metrics may still be starting: a graceful stop all the same.
    assert served.stop()[0] == 0
    lines = served.process.stderr.read().splitlines()
    return {line.rpartition("|")[2].strip() for line in lines if line.startswith("import time:")}


def test_a_default_serve_imports_no_cluster_state_or_metrics_module(serve):
    """No --nats, --state or --metrics: none of their modules is imported, nor the idna codec."""
    imported = imported_by_serve(serve)
    assert {"clientmcp_fast.net.server", "uvloop", "msgspec"} <= imported  # the list is the real one
    assert sorted(imported & set(_SERVE_LEAVES_OUT[""])) == []
    if "clientmcp_fast._speedups.http_reader" in imported:  # the served bridge runs compiled
        assert sorted(imported & set(_SERVE_LEAVES_OUT["compiled"])) == []
    else:
        assert "httptools" in imported  # the name is real: the pure twin's /healthz read took it


def test_the_modules_a_default_serve_leaves_out_come_with_their_options(serve, tmp_path):
    """--state FILE imports sqlite3, --metrics prometheus_client, --oauth its modules: the names are real."""
    with_state = imported_by_serve(serve, "--state", str(tmp_path / "state.db"))
    with_metrics = imported_by_serve(serve, "--metrics", f"127.0.0.1:{free_port()}")
    with_oauth = imported_by_serve(serve, "--oauth", "on", "--public-url", "https://bridge.example")
    assert set(_SERVE_LEAVES_OUT["--state"]) <= with_state
    assert set(_SERVE_LEAVES_OUT["--metrics"]) <= with_metrics
    assert set(_SERVE_LEAVES_OUT["--oauth"]) <= with_oauth
    assert "encodings.idna" in with_metrics  # uvloop's, for the metrics listener's str host
    for name in (
        "nats",
        "clientmcp_fast.net.nats",
        "clientmcp_fast.net.nats_connection",
        "clientmcp_fast.net.nats_state",
        "clientmcp_fast.net.nkeys",
    ):
        assert importlib.util.find_spec(name) is not None, name


def test_token_agent_tools_scopes_the_token():
    """`clientmcp token agent ID --tools a,b,read_*`: the `tools` claim of docs/protocol.md, Scoped agent tokens."""
    result = run(
        "token", "agent", "my-app", "--tools", "a, b,read_*", env=environment(CLIENTMCP_SECRET=SECRET_TEXT)
    )
    assert result.returncode == 0, result.stderr
    claims = jwt.decode(result.stdout.strip(), SECRET_TEXT, algorithms=["HS256"])
    assert claims["tools"] == ["a", "b", "read_*"] and claims["role"] == "agent"


@pytest.mark.parametrize(
    "args",
    [["agent", "my-app", "--tools", "a,,b"], ["agent", "my-app", "--tools", ""], ["agent", "my-app", "--tools", "a b"],
     ["client", "my-app", "--tools", "a"]],
    ids=["empty entry", "empty", "space", "client"],
)  # fmt: skip
def test_token_tools_that_are_not_a_scope_are_one_line_and_exit_2(args):
    result = run("token", *args, env=environment(CLIENTMCP_SECRET=SECRET_TEXT))
    line = assert_one_line_error(result)
    assert "--tools" in line
