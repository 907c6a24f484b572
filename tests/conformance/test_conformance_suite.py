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
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from peers import CLIENT_ID, NODE_MODULES, REPORTS, ROOT, node_fixture, start_app_fixture  # noqa: F401 (fixtures)

HERE = Path(__file__).resolve().parent
FAILED = ("FAILURE", "WARNING")  # the suite's baseline counts a WARNING as a failure too
ANSI = re.compile(r"\x1b\[[0-9;]*m")
RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
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


def read_expected_failures(path: Path) -> list[Entry]:
    """The `server:` entries of a baseline file (the YAML subset the files use), with their reasons."""
    entries: list[Entry] = []
    comment: list[str] = []
    after_entry = False
    in_server = False
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not line.startswith(" "):
            in_server = stripped == "server:"
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
    (report_dir / "output.txt").write_text(output)
    outcome = Outcome(completed.returncode, output)
    for folder in sorted(results.iterdir()):
        match = RESULT_DIR.match(folder.name)
        assert match, f"unexpected result folder {folder.name}"
        outcome.checks[match["scenario"]] = json.loads((folder / "checks.json").read_text())
    (report_dir / "summary.json").write_text(
        json.dumps(
            {
                "version": run.version,
                "selection": list(run.selection),
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
    return outcome


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


@pytest.mark.parametrize(
    "package, path",
    [
        ("conformance-legacy", HERE / "expected-failures-0.1.16.yml"),
        ("conformance-modern", HERE / "expected-failures-0.2.0-alpha.12.yml"),
    ],
)
def test_expected_failures_name_real_scenarios_each_with_its_reason(
    node: Path, package: str, path: Path
) -> None:
    """Every entry names a scenario of that suite version and sits under a comment citing a section of ClientMCP v1."""
    listed = subprocess.run(
        [str(node), str(NODE_MODULES / package / "dist" / "index.js"), "list", "--server"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    scenarios = set(re.findall(r"^\s+- (\S+)", listed, re.MULTILINE))
    entries = read_expected_failures(path)
    assert entries
    for entry in entries:
        assert entry.scenario in scenarios, f"{path.name}: {entry.text} is not a scenario of {package}"
        assert "§" in entry.reason and '"' in entry.reason, f"{path.name}: {entry.text} has no quoted rule"
    texts = [entry.text for entry in entries]
    assert len(texts) == len(set(texts)), "duplicate entries"
