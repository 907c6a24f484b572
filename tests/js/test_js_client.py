"""The JavaScript client's own tests (tests/js/*.test.mjs) with Node's test runner and Node 22.

They start real bridges themselves (`clientmcp serve` from this Python, so the compiled or the
pure build as the pass selects), mint tokens, and drive clientmcp_fast/web/clientmcp.js. Each
test named "case: ..." is a row of the behaviour table of docs/apps.md.
"""

from __future__ import annotations

import os
import re
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
    done = subprocess.run(
        [str(NODE), "--test", "--test-reporter=tap", "--test-timeout=60000", path.name],
        cwd=HERE,
        env={**os.environ, "CLIENTMCP_COMMAND": str(CLIENTMCP)},
        capture_output=True,
        text=True,
        timeout=180,
    )
    failed = [line for line in done.stdout.splitlines() if line.startswith("not ok")]
    assert done.returncode == 0 and not failed, done.stdout[-6000:] + done.stderr[-2000:]
    passed = re.findall(r"^ok \d+ - (.+)$", done.stdout, re.M)
    assert sorted(passed) == sorted(node_tests(path))  # every declared test ran, none skipped
