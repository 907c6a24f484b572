"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, npm) against a real bridge.

Three runs, each with a fresh bridge and the conformance app (conformance_app.py) behind it,
the suite reaching the bridge through `/mcp/<agent token>` (it cannot send an Authorization header):
- 0.1.16 `--suite all`: the legacy scenarios;
- 0.2.0-alpha.12 `--requirements 2026-07-28`: what conformance to the modern revision requires,
  at the 2026-07-28 wire, plus the not-scored pending and extension scenarios it also runs;
- 0.2.0-alpha.12 `--suite all`: every scenario of that version (legacy ones at 2025-11-25).
A run passes when every failing scenario or check is in the version's expected-failures file
and every entry there still fails: the suite's own baseline verdict (exit 0) and ours, from its
per-check JSON, must agree. docs/conformance.md shows the results.

Neither version has a server scenario of authorization (their `auth/*` scenarios test clients).
0.2.0-alpha.12 tests authorization servers (`authorization`), which the bridge is with OAuth on:
a fourth run takes it through both of its scenarios, the test playing the person who reads the
consent page and types the code the app was sent.
"""

from __future__ import annotations

import html
import json
import queue
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx2
import pytest
from peers import CLIENT_ID, NODE_MODULES, REPORTS, ROOT, node_fixture, start_app_fixture  # noqa: F401 (fixtures)

from clientmcp_fast.client import AuthorizeRequest
from clientmcp_fast.core.oauth_pages import CONSENT_COOKIE

HERE = Path(__file__).resolve().parent
FAILED = ("FAILURE", "WARNING")  # the suite's baseline counts a WARNING as a failure too
ANSI = re.compile(r"\x1b\[[0-9;]*m")
RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
AUTHORIZATION_RESULT_DIR = re.compile(r"^authorization-server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
SUITE_TIMEOUT = 600  # seconds; a run takes a few seconds on an idle machine


@dataclass(frozen=True)
class SuiteRun:
    """One invocation of the suite: which installed version, with which selection flags."""

    slug: str
    package: str  # the npm alias in package.json
    version: str
    selection: tuple[str, ...]
    expected_failures: Path
    # Scenarios this run must execute (and, unless expected to fail, pass): a guard against a
    # selection that silently stops covering them.
    must_run: frozenset[str]
    triggers_tool_change: bool = False

    @property
    def cli(self) -> Path:
        return NODE_MODULES / self.package / "dist" / "index.js"


TOOL_SCENARIOS = {
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-progress",
    "json-schema-2020-12",
    "dns-rebinding-protection",
}
LEGACY_SCENARIOS = TOOL_SCENARIOS | {
    "server-initialize",
    "ping",
    "server-sse-multiple-streams",
    "server-sse-polling",
}
MODERN_SCENARIOS = TOOL_SCENARIOS | {
    "server-stateless",
    "http-header-validation",
    "http-custom-header-server-validation",
    "caching",
    "server-sse-multiple-streams",
}

RUNS = [
    SuiteRun(
        "conformance-0.1.16-legacy",
        "conformance-legacy",
        "0.1.16",
        ("--suite", "all"),
        HERE / "expected-failures-0.1.16.yml",
        frozenset(LEGACY_SCENARIOS),
    ),
    SuiteRun(
        "conformance-0.2.0-alpha.12-requirements-2026-07-28",
        "conformance-modern",
        "0.2.0-alpha.12",
        ("--requirements", "2026-07-28"),
        HERE / "expected-failures-0.2.0-alpha.12.yml",
        frozenset(MODERN_SCENARIOS),
        triggers_tool_change=True,
    ),
    SuiteRun(
        "conformance-0.2.0-alpha.12-all",
        "conformance-modern",
        "0.2.0-alpha.12",
        ("--suite", "all"),
        HERE / "expected-failures-0.2.0-alpha.12.yml",
        frozenset(LEGACY_SCENARIOS | MODERN_SCENARIOS | {"server-session-lifecycle"}),
        triggers_tool_change=True,
    ),
]


# -- the expected-failures files ------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One line of an expected-failures file: a whole scenario, or one check of it."""

    scenario: str
    check: str | None
    reason: str  # the comment block above it, which quotes the sentence that rules it out

    @property
    def text(self) -> str:
        return f"{self.scenario}:{self.check}" if self.check else self.scenario


def read_expected_failures(path: Path, section: str = "server") -> list[Entry]:
    """The entries of a baseline file's `section` (the YAML subset the files use), with their reasons."""
    entries: list[Entry] = []
    comment: list[str] = []
    after_entry = False
    in_server = False
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not line.startswith(" "):
            in_server = stripped == f"{section}:"
            continue
        if stripped.startswith("#"):
            if after_entry:  # a comment after entries starts the next group's reason
                comment, after_entry = [], False
            comment.append(stripped.lstrip("# "))
            continue
        assert in_server and stripped.startswith("- "), f"{path.name}: unexpected line {line!r}"
        scenario, _, check = stripped[2:].partition(":")
        entries.append(Entry(scenario, check or None, " ".join(comment)))
        after_entry = True
    return entries


# -- running the suite ----------------------------------------------------------------------


@dataclass
class Outcome:
    """What one run produced: the suite's exit code and output, and every check by scenario."""

    returncode: int
    output: str
    checks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def failing_checks(self, scenario: str) -> dict[str, str]:
        """Failed check ids of `scenario` with their messages (ids repeat; the first failure tells)."""
        failing: dict[str, str] = {}
        for check in self.checks[scenario]:
            if check["status"] in FAILED:
                failing.setdefault(check["id"], f"{check['status']}: {check.get('errorMessage') or ''}")
        return failing

    def summary_lines(self) -> list[str]:
        """The suite's own verdict lines: `Total: ...`, `Not scored ...`, the baseline result."""
        keep = ("Total:", "Not scored", "Baseline check passed", "Unexpected failures", "Baseline is stale")
        return [line.strip() for line in self.output.splitlines() if line.strip().startswith(keep)]


def run_suite(node: Path, run: SuiteRun, url: str) -> Outcome:
    report_dir = REPORTS / run.slug
    shutil.rmtree(report_dir, ignore_errors=True)
    results = report_dir / "results"
    results.mkdir(parents=True)
    command = [
        str(node),
        str(run.cli),
        "server",
        "--url",
        url,
        *run.selection,
        "--expected-failures",
        str(run.expected_failures),
        "-o",
        str(results),
    ]
    completed = subprocess.run(
        command,
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SUITE_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    output = ANSI.sub("", completed.stdout + completed.stderr)
    outcome = Outcome(completed.returncode, output)
    read_results(outcome, results, RESULT_DIR)
    write_report(report_dir, run.version, run.selection, outcome)
    return outcome


def read_results(outcome: Outcome, results: Path, folders: re.Pattern[str]) -> None:
    """Every scenario's checks, from the suite's result folders (named by `folders`) under `results`."""
    for folder in sorted(results.iterdir()):
        match = folders.match(folder.name)
        assert match, f"unexpected result folder {folder.name}"
        outcome.checks[match["scenario"]] = json.loads((folder / "checks.json").read_text())


def write_report(report_dir: Path, version: str, selection: tuple[str, ...], outcome: Outcome) -> None:
    """The run's output and a summary of its checks, for reading after `make test`."""
    (report_dir / "output.txt").write_text(outcome.output)
    (report_dir / "summary.json").write_text(
        json.dumps(
            {
                "version": version,
                "selection": list(selection),
                "returncode": outcome.returncode,
                "summary": outcome.summary_lines(),
                "scenarios": {
                    name: {
                        "passed": sum(c["status"] == "SUCCESS" for c in checks),
                        "failed": sum(c["status"] == "FAILURE" for c in checks),
                        "warnings": sum(c["status"] == "WARNING" for c in checks),
                        "failing": outcome.failing_checks(name),
                    }
                    for name, checks in outcome.checks.items()
                },
            },
            indent=2,
        )
    )


def judge(outcome: Outcome, entries: list[Entry]) -> tuple[list[str], list[str]]:
    """Unexpected failures and stale entries, by the suite's rules (expected-failures.ts)."""
    whole = {entry.scenario for entry in entries if entry.check is None}
    per_check: dict[str, set[str]] = {}
    for entry in entries:
        if entry.check is not None:
            per_check.setdefault(entry.scenario, set()).add(entry.check)
    unexpected: list[str] = []
    stale: list[str] = []
    for scenario in outcome.checks:
        failing = outcome.failing_checks(scenario)
        if scenario in whole:
            if not failing:
                stale.append(scenario)
            continue
        allowed = per_check.get(scenario, set())
        unexpected += [
            f"{scenario}:{check} {message}" for check, message in failing.items() if check not in allowed
        ]
        passed = {c["id"] for c in outcome.checks[scenario] if c["status"] == "SUCCESS"}
        stale += [f"{scenario}:{check}" for check in allowed if check in passed and check not in failing]
    return unexpected, stale


# -- the authorization server scenarios (0.2.0-alpha.12 `authorization`) ---------------------

AUTHORIZATION_SCENARIOS = frozenset({"authorization-server-metadata-endpoint", "authorization-code-grant"})
PERSON_WAITS = 60  # seconds: for the suite to print its authorization URL, for the app to be asked


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class SuiteProcess:
    """The suite running in the background, its output read line by line as it comes."""

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.output: list[str] = []
        self._reader = threading.Thread(target=self._read, name="conformance-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    def text(self) -> str:
        return ANSI.sub("", "".join(self.output))

    def line_starting(self, prefix: str, timeout: float) -> str:
        """The first line of output starting with `prefix`; the test fails if none comes within `timeout` seconds."""
        give_up = time.monotonic() + timeout
        while True:
            ended = not self._reader.is_alive()  # before reading: a line read after it is still seen
            for line in list(self.output):
                if line.startswith(prefix):
                    return line.strip()
            if ended or time.monotonic() > give_up:
                pytest.fail(f"the suite printed no line starting {prefix!r}:\n{self.text()[-3000:]}")
            time.sleep(0.02)

    def finish(self, timeout: float) -> int:
        """Wait for the suite to exit (killed after `timeout` seconds): its exit code."""
        try:
            return self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._reader.join(10)


def consent_as_the_person(url: str, public_url: str, asked: queue.Queue[AuthorizeRequest]) -> str:
    """Open the consent page at `url` and type the code the app was sent: where the browser is sent then."""
    with httpx2.Client(timeout=PERSON_WAITS, follow_redirects=False) as browser:
        page = browser.get(url)
        assert page.status_code == 200, page.text
        cookie = page.headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]
        browser.cookies.clear()  # the cookie goes with the form, as the browser would send it
        action = html.unescape(re.search('<form method="post" action="([^"]*)"', page.text).group(1))
        fields = {
            name: html.unescape(re.search(f'name="{name}" value="([^"]*)"', page.text).group(1))
            for name in ("request", "csrf")
        }
        code = asked.get(timeout=PERSON_WAITS).code  # what the app shows its user
        headers = {"origin": public_url, "cookie": f"{CONSENT_COOKIE}={cookie}"}
        answer = browser.post(urljoin(url, action), data={**fields, "code": code}, headers=headers)
        assert answer.status_code == 303, answer.text
    return answer.headers["location"]


# -- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("run", RUNS, ids=[run.slug for run in RUNS])
def test_suite_passes_except_what_clientmcp_v1_cannot_serve(
    node: Path, start_bridge: Callable[..., Any], start_app: Callable[..., Any], run: SuiteRun
) -> None:
    """Every scenario passes but the expected failures, which all still fail; the suite agrees."""
    bridge = start_bridge()
    app = start_app(bridge)
    url = f"{bridge.mcp_url}/{bridge.token('agent', CLIENT_ID)}"

    outcome = run_suite(node, run, url)

    assert outcome.checks, f"the suite ran no scenario:\n{outcome.output[-3000:]}"
    missing = run.must_run - set(outcome.checks)
    assert not missing, f"scenarios not run: {sorted(missing)}"
    unexpected, stale = judge(outcome, read_expected_failures(run.expected_failures))
    assert not unexpected, "unexpected failures:\n" + "\n".join(unexpected)
    assert not stale, "expected failures that pass (remove them from the file):\n" + "\n".join(stale)
    # The suite's own baseline evaluation says the same, and says so in its summary.
    assert outcome.returncode == 0, outcome.output[-3000:]
    summary = outcome.summary_lines()
    assert any(line.startswith("Total:") for line in summary), summary
    assert "Baseline check passed: all failures are expected." in summary, summary
    if run.triggers_tool_change:
        # server-stateless's list_changed checks went through the app: it re-registered changed sets.
        assert app.app.tool_changes >= 2

    app.stop()
    bridge.assert_nothing_leaks()


def test_the_authorization_server_scenarios_pass_through_the_apps_consent(
    node: Path, start_bridge: Callable[..., Any], start_app: Callable[..., Any]
) -> None:
    """0.2.0-alpha.12 `authorization`: the metadata, then a code grant through the page, the app and the person.

    The suite prints the authorization URL for a person to open and listens for the redirect
    on its own port; the test opens the page, types the code the conformance app was sent
    (the app allows), and follows the redirect. The suite then redeems the code with its
    verifier at the token endpoint.
    """
    port, callback = free_port(), free_port()
    public_url = f"http://127.0.0.1:{port}"
    bridge = start_bridge(port=port, oauth=True, public_url=public_url)
    asked: queue.Queue[AuthorizeRequest] = queue.Queue()
    requests: list[AuthorizeRequest] = []

    def allow(request: AuthorizeRequest) -> bool:
        requests.append(request)
        asked.put(request)
        return True

    app = start_app(bridge, on_authorize=allow)
    redirect_uri = f"http://127.0.0.1:{callback}/callback"  # where the suite listens (its --port)
    registered = httpx2.post(
        f"{public_url}/oauth/register",
        json={"redirect_uris": [redirect_uri], "client_name": "MCP conformance suite"},
        timeout=PERSON_WAITS,
    )
    assert registered.status_code == 201, registered.text
    report_dir = REPORTS / "conformance-0.2.0-alpha.12-authorization"
    shutil.rmtree(report_dir, ignore_errors=True)
    results = report_dir / "results"
    results.mkdir(parents=True)
    selection = (
        "authorization",
        "--url",
        public_url,
        "--client-id",
        registered.json()["client_id"],
        "--resource",
        f"{public_url}/apps/{CLIENT_ID}/mcp",
        "--port",
        str(callback),
    )
    suite = SuiteProcess([str(node), str(NODE_MODULES / "conformance-modern" / "dist" / "index.js"),
                          *selection, "-o", str(results)])  # fmt: skip
    try:
        url = suite.line_starting(f"{public_url}/oauth/authorize?", PERSON_WAITS)
        location = consent_as_the_person(url, public_url, asked)
        # The browser follows the redirect to the suite's listener, once it listens.
        suite.line_starting(f"Callback server started: http://127.0.0.1:{callback}", PERSON_WAITS)
        back = httpx2.get(location, timeout=PERSON_WAITS)
        assert back.status_code == 200, back.text
    finally:
        returncode = suite.finish(SUITE_TIMEOUT)
    outcome = Outcome(returncode, suite.text())
    read_results(outcome, results, AUTHORIZATION_RESULT_DIR)
    write_report(report_dir, "0.2.0-alpha.12", selection[:1], outcome)  # not the client ID and ports

    assert set(outcome.checks) == AUTHORIZATION_SCENARIOS, outcome.output[-3000:]
    # No failure and no warning is expected (a WARNING counts as a failure, as in the server runs).
    unexpected, _ = judge(outcome, [])
    assert not unexpected, "unexpected failures:\n" + "\n".join(unexpected)
    assert outcome.returncode == 0, outcome.output[-3000:]
    assert any(line.startswith("Total:") for line in outcome.summary_lines()), outcome.output[-3000:]
    # The grant went through the consent step: the app was asked once, for this client, and
    # the suite's browser went back to it with a code; then one token response, for that code.
    assert location.startswith(redirect_uri + "?code="), location
    assert [(r.client_name, r.client_origin) for r in requests] == [
        ("MCP conformance suite", f"http://127.0.0.1:{callback}")
    ]
    issued = bridge.call(lambda s: (s.oauth.codes_issued, dict(s.oauth.authorization.tokens_issued)))
    assert issued == (1, {"authorization_code": 1, "refresh_token": 0})

    app.stop()
    bridge.assert_nothing_leaks()


@pytest.mark.parametrize(
    "package, path, kind",
    [
        ("conformance-legacy", HERE / "expected-failures-0.1.16.yml", "server"),
        ("conformance-modern", HERE / "expected-failures-0.2.0-alpha.12.yml", "server"),
    ],
)
def test_expected_failures_name_real_scenarios_each_with_its_reason(
    node: Path, package: str, path: Path, kind: str
) -> None:
    """Every entry names a scenario of that suite version and sits under a comment quoting the rule that excuses it."""
    listed = subprocess.run(
        [str(node), str(NODE_MODULES / package / "dist" / "index.js"), "list", f"--{kind}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    scenarios = set(re.findall(r"^\s+- (\S+)", listed, re.MULTILINE))
    entries = read_expected_failures(path, kind)
    assert entries
    for entry in entries:
        assert entry.scenario in scenarios, f"{path.name}: {entry.text} is not a scenario of {package}"
        assert "§" in entry.reason and '"' in entry.reason, f"{path.name}: {entry.text} has no quoted rule"
    texts = [entry.text for entry in entries]
    assert len(texts) == len(set(texts)), "duplicate entries"
