"""The bridge's WebSocket layer against the Autobahn TestSuite (`wstest -m fuzzingclient`), RFC 6455 end to end.

wstest (PyPI `autobahntestsuite`, Python 2.7, installed into .autobahn/ by `make test` from
requirements-py27.txt) drives every case of sections 1-10 against `/connect` of an `EchoServer`
(echo_server.py): the bridge's server with an echo in place of the app's channel, on the same
WebSocket code. Sections 12 and 13 (permessage-deflate) are excluded:
the bridge declines compression by design. All of section 9 (performance) runs; it takes well
under a minute. Each case must end OK, NON-STRICT or INFORMATIONAL, and so must its closing
handshake, except the four 9.x cases whose messages (8 and 16 MiB) are over the 4 MiB limit of
every client channel message (ClientMCP v1 §3.2, docs/configuration.md): those must be refused with 1009.
A missing Python 2.7 or wstest fails the test: this suite is never skipped.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from echo_server import EchoServer

from clientmcp_fast.speedups import IMPLEMENTATION

ROOT = Path(__file__).resolve().parents[2]
PY27 = Path(os.environ.get("CLIENTMCP_PY27", "/root/.pyenv/versions/2.7.18/bin/python2.7"))
AUTOBAHN = ROOT / ".autobahn"
REPORT = ROOT / "reports" / IMPLEMENTATION / "autobahn"
AGENT = "clientmcp_fast"
WSTEST_TIMEOUT = 1800  # seconds; the run takes about 35 s on an idle machine

ACCEPTED = {"OK", "NON-STRICT", "INFORMATIONAL"}
ACCEPTED_CLOSE = {"OK", "INFORMATIONAL"}
# 9.1.5/9.1.6 text and 9.2.5/9.2.6 binary messages of 8 and 16 MiB: over the 4 MiB limit.
OVER_THE_LIMIT = {"9.1.5", "9.1.6", "9.2.5", "9.2.6"}
# What autobahntestsuite 25.10.1 (pinned) runs with 12.* and 13.* excluded.
CASES = 301


@pytest.fixture(scope="session")
def wstest() -> list[str]:
    """The wstest command, from .autobahn/ with the Python 2.7 interpreter; fails loudly when missing."""
    if not PY27.exists():
        pytest.fail(f"Python 2.7 is missing at {PY27} (set CLIENTMCP_PY27): the Autobahn TestSuite needs it")
    script = AUTOBAHN / "bin" / "wstest"
    if not (script.exists() and (AUTOBAHN / "zope" / "__init__.py").exists()):
        pytest.fail(f"wstest is not installed in {AUTOBAHN}: run `make test` (or `make autobahn`)")
    return [str(PY27), str(script)]


def case_key(case: str) -> tuple[int, ...]:
    return tuple(int(part) for part in case.split("."))


def test_fuzzingclient_cases_end_ok_non_strict_or_informational(
    wstest: list[str], start_bridge: Callable[..., Any]
) -> None:
    """Every case of sections 1-10 passes against the echo; messages over 4 MiB get 1009 by design."""
    bridge = start_bridge(server_class=EchoServer)
    shutil.rmtree(REPORT, ignore_errors=True)
    REPORT.mkdir(parents=True)
    spec = {
        "outdir": str(REPORT),
        "servers": [{"agent": AGENT, "url": f"ws://127.0.0.1:{bridge.port}/connect"}],
        "cases": ["*"],
        "exclude-cases": ["12.*", "13.*"],
        "exclude-agent-cases": {},
    }
    (REPORT / "fuzzingclient.json").write_text(json.dumps(spec, indent=2))

    completed = subprocess.run(
        [*wstest, "-m", "fuzzingclient", "-s", str(REPORT / "fuzzingclient.json")],
        check=False,
        cwd=REPORT,
        env={**os.environ, "PYTHONPATH": str(AUTOBAHN)},
        capture_output=True,
        text=True,
        timeout=WSTEST_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    (REPORT / "wstest.log").write_text(completed.stdout + completed.stderr)
    assert completed.returncode == 0, (completed.stdout + completed.stderr)[-3000:]

    results = json.loads((REPORT / "index.json").read_text())[AGENT]
    assert len(results) == CASES, f"{len(results)} cases ran, not {CASES}"
    assert not [case for case in results if case.split(".")[0] in ("12", "13")]
    wrong = []
    for case in sorted(results, key=case_key):
        result = results[case]
        if case in OVER_THE_LIMIT:
            if result["remoteCloseCode"] != 1009:
                wrong.append(f"{case}: closed with {result['remoteCloseCode']}, not 1009 (over 4 MiB)")
        elif result["behavior"] not in ACCEPTED or result["behaviorClose"] not in ACCEPTED_CLOSE:
            wrong.append(
                f"{case}: {result['behavior']} / close {result['behaviorClose']} ({result['reportfile']})"
            )
    assert not wrong, "\n".join(wrong)

    counts = collections.Counter(result["behavior"] for result in results.values())
    close_counts = collections.Counter(result["behaviorClose"] for result in results.values())
    (REPORT / "counts.json").write_text(
        json.dumps(
            {"behavior": dict(counts), "behaviorClose": dict(close_counts), "cases": len(results)}, indent=2
        )
    )
    assert counts["OK"] >= 250, counts
    bridge.assert_nothing_leaks()
