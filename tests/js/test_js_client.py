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


def node_tests(path: Path) -> list[str]:
    """The names of the tests a .test.mjs file declares."""
    return re.findall(r'^test\("([^"]+)"', path.read_text(), re.M)


@pytest.mark.parametrize("path", sorted(HERE.glob("*.test.mjs")), ids=lambda p: p.name)
def test_the_node_tests_pass(path):
    if not NODE.exists():
        pytest.fail(f"{NODE} is missing: run `npm ci` in {ROOT} (`make test` does)")
    # A session of its own: on a timeout, Node and every bridge it started are ended together.
    node = subprocess.Popen(
        [str(NODE), "--test", "--test-reporter=tap", "--test-timeout=60000", path.name],
        cwd=HERE,
        env={**os.environ, "CLIENTMCP_COMMAND": str(CLIENTMCP)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = node.communicate(timeout=180)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.pid, signal.SIGKILL)
        node.communicate()
    failed = [line for line in stdout.splitlines() if line.startswith("not ok")]
    assert node.returncode == 0 and not failed, stdout[-6000:] + stderr[-2000:]
    passed = re.findall(r"^ok \d+ - (.+)$", stdout, re.M)
    assert sorted(passed) == sorted(node_tests(path))  # every declared test ran, none skipped
