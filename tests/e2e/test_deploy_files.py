"""deploy/'s files that no test can run here are at least read by their own tools.

The systemd unit goes through `systemd-analyze verify`, which names every unknown key or
bad value (systemd is not PID 1 on these machines, so the unit is not started). Compose has
no engine here at all: deploy/compose.yaml is shown in docs/deployment.md and not run, and
deploy/compose-cluster.yaml is checked against the nginx site it mounts (which
tests/e2e/test_examples.py runs through `make cluster-demo`).
The proxies' files are run by test_proxies.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "clientmcp.service"


def test_the_systemd_unit_is_one_systemd_reads_without_a_complaint(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is missing (apt-get install systemd); .ci/run installs it")
    unit = UNIT.read_text()
    assert unit.count("ExecStart=/usr/local/bin/clientmcp serve") == 1
    # verify wants the executable to exist: any will do for reading the rest.
    copy = tmp_path / "clientmcp.service"
    copy.write_text(unit.replace("/usr/local/bin/clientmcp", shutil.which("true") or "/bin/true"))
    done = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout == "", done.stderr


def test_systemd_analyze_would_complain_of_a_bad_key(tmp_path):
    """The check above can fail: an unknown key is named on stderr."""
    analyze = shutil.which("systemd-analyze") or "systemd-analyze"
    copy = tmp_path / "bad.service"
    copy.write_text("[Service]\nExecStart=/bin/true\nKillSignall=SIGTERM\n")
    done = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60)
    assert "Unknown key" in done.stderr


def test_the_cluster_compose_file_names_the_instances_its_nginx_site_balances():
    compose = (ROOT / "deploy" / "compose-cluster.yaml").read_text()
    site = (ROOT / "deploy" / "nginx-cluster.conf").read_text()
    upstream = re.findall(r"^    server (\S+):8080;$", site, re.M)
    services = re.findall(r"^  (clientmcp-\d+): \*clientmcp$", compose, re.M)
    # Twice: every request round robin, and a browser's consent page always to one instance.
    assert upstream == services * 2 and services == ["clientmcp-1", "clientmcp-2", "clientmcp-3"]
    assert "location = /oauth/authorize {\n        proxy_pass http://clientmcp_consent;" in site
    assert "./nginx-cluster.conf:/etc/nginx/conf.d/default.conf:ro" in compose
    assert "./nats.conf:/etc/nats/nats.conf:ro" in compose
    assert "CLIENTMCP_NATS: nats://clientmcp:${CLIENTMCP_NATS_PASSWORD" in compose
    assert (ROOT / "deploy" / "nats.conf").read_text().count("max_payload: 8MB") == 1


def test_the_documented_nats_password_is_always_a_string_to_nats_server():
    """nats-server reads CLIENTMCP_NATS_PASSWORD as a value of deploy/nats.conf: random hex that
    begins like a number (12e4...) stops it, so every place that makes one begins it with letters."""
    from natsserver import NATS_SERVER

    conf = str(ROOT / "deploy" / "nats.conf")
    digits_first = "12e4" + "0" * 60  # as openssl rand -hex 32 gives about one time in ten

    def config_test(password: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "CLIENTMCP_NATS_PASSWORD": password}
        return subprocess.run(
            [NATS_SERVER, "-c", conf, "-t"], env=env, capture_output=True, text=True, timeout=60
        )

    assert config_test(digits_first).returncode != 0  # why the prefix
    assert config_test("nats-" + digits_first).returncode == 0
    made = "CLIENTMCP_NATS_PASSWORD=$(openssl rand -hex 32)"
    places = [
        ROOT / "deploy" / "nats.conf",
        ROOT / "deploy" / "compose-cluster.yaml",
        *sorted((ROOT / "docs").glob("*.md")),
    ]
    assert not [place.name for place in places if made in place.read_text()]
    assert 'password = f"nats-{secrets.token_hex(32)}"' in (ROOT / "examples" / "cluster_demo.py").read_text()


def test_the_shipped_nats_conf_lets_only_the_instances_on_the_bus(tmp_path):
    """deploy/nats.conf on a real nats-server: no password set, no server; anonymous clients refused."""
    import asyncio

    from natsserver import NATS_SERVER, free_port

    nats = pytest.importorskip("nats")
    conf = str(ROOT / "deploy" / "nats.conf")
    env = {k: v for k, v in os.environ.items() if k != "CLIENTMCP_NATS_PASSWORD"}
    refused = subprocess.run(
        [NATS_SERVER, "-c", conf, "-t"], env=env, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0 and "CLIENTMCP_NATS_PASSWORD" in refused.stdout + refused.stderr
    port = free_port()
    server = subprocess.Popen(
        [NATS_SERVER, "-c", conf, "-a", "127.0.0.1", "-p", str(port)],
        env={**env, "CLIENTMCP_NATS_PASSWORD": "a-password-of-this-test"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    async def connect(url: str) -> str:
        for _ in range(100):
            try:
                nc = await nats.connect(
                    url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=1
                )
            except Exception as error:  # noqa: BLE001
                if "onnect call failed" in str(error) or isinstance(error, ConnectionRefusedError):
                    await asyncio.sleep(0.05)  # not listening yet
                    continue
                return str(error)
            await nc.close()
            return "accepted"
        return "never listened"

    try:
        assert (
            asyncio.run(connect(f"nats://clientmcp:a-password-of-this-test@127.0.0.1:{port}")) == "accepted"
        )
        assert "Authorization Violation" in asyncio.run(connect(f"nats://127.0.0.1:{port}"))
        assert "Authorization Violation" in asyncio.run(connect(f"nats://clientmcp:wrong@127.0.0.1:{port}"))
    finally:
        server.kill()
        server.wait(5)
