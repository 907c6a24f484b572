"""The JavaScript client package (sdk/js) on each runtime it promises: Node 22, Deno 2, Bun, Chromium.

One test file, tests/js/runtimes/cases.mjs, runs on each against real bridges (`clientmcp serve`
from this Python, so the compiled or the pure build as the pass selects). The bridges are
started by tests/js/runtimes/control.mjs on Node 22, which every runtime asks over HTTP, a page
included; Node, Deno and Bun run the cases from the command line (runtimes/run.mjs), Chromium
(Debian's, driven by Playwright, never a downloaded browser) in a page that loads the module.
Node, Deno, Bun and TypeScript come from the committed package-lock.json (`npm ci`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_js_client import end_session, start_node

ROOT = Path(__file__).resolve().parents[2]
RUNTIMES = Path(__file__).resolve().parent / "runtimes"
BIN = ROOT / "node_modules" / ".bin"
NODE = ROOT / "node_modules" / "node" / "bin" / "node"
CLIENTMCP = Path(sys.executable).parent / "clientmcp"
CHROMIUM = os.environ.get("CLIENTMCP_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
TIMEOUT = 180  # seconds for one runtime's whole run, on a busy 2-core machine


def declared_cases() -> list[str]:
    return re.findall(r'^test\("([^"]+)"', (RUNTIMES / "cases.mjs").read_text(), re.M)


@pytest.fixture
def control() -> Iterator[str]:
    """control.mjs on Node 22: the URL every runtime asks for bridges, tokens and agent calls."""
    process = start_node(["control.mjs"], RUNTIMES)  # the bridges it starts end with it
    try:
        line = process.stdout.readline()
        assert line.startswith("control on http://"), line + process.stderr.read()
        yield line.split()[-1]
    finally:
        end_session(process)


def command(runtime: str, url: str) -> list[str]:
    if runtime == "node":
        return [str(NODE), "run.mjs", url]
    # --allow-net only: the cases read no file and no variable, and start no process.
    if runtime == "deno":
        return [str(BIN / "deno"), "run", "--allow-net", "--no-config", "run.mjs", url]
    return [str(BIN / "bun"), "run.mjs", url]


def run_on_command_line(runtime: str, url: str) -> str:
    executable = NODE if runtime == "node" else BIN / runtime
    if not executable.exists():
        pytest.fail(f"{executable} is missing: run `npm ci` in {ROOT} (`make test` does)")
    with tempfile.TemporaryDirectory(prefix=f"clientmcp-{runtime}-") as home:
        # Deno and Bun keep caches under HOME: a fresh one, and no update check (nothing is downloaded).
        env = {
            **os.environ,
            "HOME": home,
            "DENO_DIR": home,
            "DENO_NO_UPDATE_CHECK": "1",
            "BUN_INSTALL_CACHE_DIR": home,
        }
        process = subprocess.Popen(
            command(runtime, url),
            cwd=RUNTIMES,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = process.communicate(timeout=TIMEOUT)
        finally:
            end_session(process)
    assert process.returncode == 0, stdout[-6000:] + stderr[-3000:]
    return stdout


def run_in_chromium(url: str) -> str:
    from playwright.sync_api import sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (`.ci/run` does)")
    with (
        tempfile.TemporaryDirectory(prefix="clientmcp-chromium-") as profile,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(url + "/page")
            page.wait_for_function("window.finished !== undefined", timeout=30_000)
            report = page.evaluate("window.finished", None)
        finally:
            browser.close()
    assert not errors, errors
    return report


@pytest.mark.parametrize("runtime", ["node", "deno", "bun", "chromium"])
def test_the_same_cases_pass_on_each_runtime(control, runtime):
    report = run_in_chromium(control) if runtime == "chromium" else run_on_command_line(runtime, control)
    assert f"# runtime {runtime}\n" in report, report[:500]
    failed = [line for line in report.splitlines() if line.startswith("not ok")]
    assert not failed, report[-6000:]
    passed = re.findall(r"^ok \d+ - (.+)$", report, re.M)
    assert passed == declared_cases()  # every case ran, in order, none skipped
    assert len(passed) >= 7
