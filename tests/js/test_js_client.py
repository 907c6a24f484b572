"""The JavaScript client's own tests (tests/js/*.test.mjs) with Node's test runner and Node 22.

They start real bridges themselves (`clientmcp serve` from this Python, so the compiled or the
pure build as the pass selects), mint tokens, and drive sdk/js/clientmcp.js. Each
test named "case: ..." is a row of the behaviour table of docs/apps.md.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "node_modules" / "node" / "bin" / "node"  # Node 22, from package.json (`npm ci`)
HERE = Path(__file__).resolve().parent
CLIENTMCP = Path(sys.executable).parent / "clientmcp"


def start_node(args: list[str], cwd: Path) -> subprocess.Popen:
    """Node 22 running `args` in a session of its own, so that it and every bridge it starts end together."""
    if not NODE.exists():
        pytest.fail(f"{NODE} is missing: run `npm ci` in {ROOT} (`make test` does)")
    return subprocess.Popen(
        [str(NODE), *args],
        cwd=cwd,
        env={**os.environ, "CLIENTMCP_COMMAND": str(CLIENTMCP)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def end_session(process: subprocess.Popen) -> None:
    """End `process`'s session (Node and the bridges it started), whatever state it is in."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


def node_tests(path: Path) -> list[str]:
    """The names of the tests a .test.mjs file declares."""
    return re.findall(r'^test\("([^"]+)"', path.read_text(), re.M)


@pytest.mark.parametrize("path", sorted(HERE.glob("*.test.mjs")), ids=lambda p: p.name)
def test_the_node_tests_pass(path):
    # On a timeout, Node and every bridge it started are ended together.
    node = start_node(["--test", "--test-reporter=tap", "--test-timeout=60000", path.name], HERE)
    try:
        stdout, stderr = node.communicate(timeout=180)
    finally:
        end_session(node)
    failed = [line for line in stdout.splitlines() if line.startswith("not ok")]
    assert node.returncode == 0 and not failed, stdout[-6000:] + stderr[-2000:]
    passed = re.findall(r"^ok \d+ - (.+)$", stdout, re.M)
    assert sorted(passed) == sorted(node_tests(path))  # every declared test ran, none skipped
