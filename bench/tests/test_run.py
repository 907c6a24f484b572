"""The bench's own arithmetic: the share of a round's cores that went to other processes,
the rounds redone for it, and the report's ratios and marks. Run by `make test-bench`."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from bench import report, run

HZ = 100
# user nice system idle iowait irq softirq steal guest guest_nice
ZERO = [0] * 10


def stat(**cpus: list[int]) -> dict[str, list[int]]:
    """A `run.proc_stat()` snapshot: the given lines, padded to /proc/stat's ten fields."""
    return {name: fields + [0] * (10 - len(fields)) for name, fields in cpus.items()}


def test_other_processes_get_the_busy_time_that_is_not_ours():
    # Two cores, 2 s each (400 jiffies): 240 busy, of which 2.0 s (200 jiffies) ours.
    before = stat(cpu=ZERO, cpu0=ZERO, cpu1=ZERO)
    after = stat(cpu=[200, 0, 40, 160], cpu0=[150, 0, 40, 10], cpu1=[50, 0, 0, 150])
    assert run.other_share(before, after, 2.0, [0, 1], HZ) == pytest.approx(0.10)


def test_only_the_rounds_cores_count():
    before = stat(cpu=ZERO, cpu0=ZERO, cpu1=ZERO, cpu2=ZERO)
    after = stat(cpu=[500, 0, 0, 100], cpu0=[100, 0, 0, 100], cpu1=[200], cpu2=[200])
    assert run.other_share(before, after, 1.0, [0], HZ) == 0.0
    assert run.other_share(before, after, 1.0, [0, 1], HZ) == pytest.approx(0.5)


def test_without_pinning_every_cpu_counts():
    before = stat(cpu=[100, 0, 0, 100])
    after = stat(cpu=[400, 0, 100, 300])  # 400 busy of 600, 1 s ours
    assert run.other_share(before, after, 1.0, [], HZ) == pytest.approx(0.5)


def test_iowait_is_idle_steal_is_busy_and_guest_time_is_not_counted_twice():
    before = stat(cpu0=ZERO)
    # 100 jiffies: 20 user (10 of it a guest's), 30 idle, 20 iowait, 10 irq, 10 softirq, 10 steal.
    after = stat(cpu0=[20, 0, 0, 30, 20, 10, 10, 10, 10, 0])
    assert run.other_share(before, after, 0.0, [0], HZ) == pytest.approx(0.5)


def test_the_share_stays_between_0_and_1():
    before = stat(cpu0=ZERO)
    after = stat(cpu0=[50, 0, 0, 50])
    assert run.other_share(before, after, 5.0, [0], HZ) == 0.0  # our seconds rounded up past the busy ones
    assert run.other_share(before, before, 0.0, [0], HZ) == 0.0  # no time passed


def test_proc_stat_reads_every_cpu_and_the_total():
    snapshot = run.proc_stat()
    cpus = [name for name in snapshot if name != "cpu"]
    assert cpus and all(len(fields) >= 8 for fields in snapshot.values())
    per_cpu = sum(sum(snapshot[name][:8]) for name in cpus)
    assert per_cpu == pytest.approx(sum(snapshot["cpu"][:8]), rel=0.01)


BUSY = "import time\nwhile time.process_time() < {}: pass\ntime.sleep({})"


def test_our_cpu_seconds_include_running_and_ended_children():
    # A shell whose first child burns 0.3 s and ends, and whose second burns 0.2 s and lives on.
    script = (
        f"{sys.executable} -c '{BUSY.format(0.3, 0)}'; {sys.executable} -c '{BUSY.format(0.2, 30)}' & wait"
    )
    fleet = run.Fleet()
    try:
        shell = fleet.start("children", ["sh", "-c", script], [], {})
        give_up = time.monotonic() + 20
        while run.tree_cpu_seconds(shell.pid) < 0.45 and time.monotonic() < give_up:
            time.sleep(0.1)
        assert run.tree_cpu_seconds(shell.pid) >= 0.45
        assert fleet.cpu_seconds() >= 0.45
    finally:
        fleet.stop_all()
    assert run.tree_cpu_seconds(shell.pid) == 0.0  # gone


@pytest.mark.parametrize(
    ("shares", "kept", "disturbed"),
    [([3.0], 3.0, False), ([30.0, 5.0], 5.0, False), ([30.0, 12.0, 25.0], 12.0, True)],
)
def test_a_disturbed_round_is_redone_twice_at_most_then_marked(monkeypatch, shares, kept, disturbed):
    left = list(shares)
    monkeypatch.setattr(run, "measured_run", lambda *args: {"other_pct": left.pop(0)})
    figures = run.load_round(None, None, "legacy.lua", run.QUICK, ([0], [1]))
    assert figures == {"other_pct": kept, "tries": len(shares), "disturbed": disturbed}
    assert not left


def load_round(cpu: float, rate: float, other: float = 2.0) -> dict:
    """The figures of one round, as `run.load_round` gives them."""
    return {
        "calls": rate * 2,
        "calls_per_s": rate,
        "cpu_us_per_call": cpu,
        "system_us_per_call": cpu / 2,
        "p50_ms": 1.0,
        "p99_ms": 2.0,
        "p999_ms": 3.0,
        "server_core_pct": 99.0,
        "load_core_pct": 70.0,
        "other_pct": other,
        "wrk_us_per_call": 10.0,
        "app_us_per_call": 1.0,
        "tries": 1 if other <= run.OTHER_LIMIT_PCT else 3,
        "disturbed": other > run.OTHER_LIMIT_PCT,
    }


def results(legacy_other: float = 2.0) -> dict:
    """A quick run's raw numbers: the bridge at 12 µs, the minimal bridge at 10, the bare server at 7."""
    load = {
        "floor_bridge": [load_round(10.0, 90_000)],
        "legacy": [load_round(12.0, 80_000, legacy_other)],
        "pure_legacy": [load_round(30.0, 30_000)],
        "modern": [load_round(14.0, 70_000)],
        "floor_http": [load_round(7.0, 120_000)],
    }
    return {
        "when": "2026-12-02T00:00:00Z",
        "quick": True,
        "plan": {"rounds": 1, "seconds": 2, "clients": 1000, "ping_seconds": 4},
        "machine": {
            "cpu_model": "test",
            "cpus": 2,
            "python": "3.11",
            "uvloop": "0",
            "speedups": "compiled",
            "mcp_sdk": "0",
            "wrk": "wrk",
            "load_average_at_start": [0.0, 0.0, 0.0],
        },
        "pinning": {"server_cpus": [0], "load_cpus": [1]},
        "load": {key: {"median": run.median_of(rounds), "rounds": rounds} for key, rounds in load.items()},
        "idle": {
            "clients": 1000,
            "idle_rss_bytes": 23 * 2**20,
            "bytes_per_client": 1600.0,
            "floor_idle_rss_bytes": 20 * 2**20,
            "floor_bytes_per_client": 1300.0,
            "quiet_cpu_pct": 0.1,
            "ping_cpu_pct": 0.3,
            "floor_ping_cpu_pct": 0.2,
        },
        "count": None,
    }


def test_the_headline_is_the_ratios_to_the_same_runs_floors_against_ratio_targets():
    rows = {row["label"]: row for row in report.figures(results())}
    minimal = rows["CPU per call, legacy: bridge / minimal bridge"]
    assert (minimal["section"], minimal["text"], minimal["target"], minimal["met"]) == (
        "ratio",
        "1.20",
        "≤ 1.16",
        False,
    )
    bare = rows["CPU per call, legacy: bridge / bare server"]
    assert (bare["text"], bare["target"], bare["met"]) == ("1.71", "≤ 1.69", False)
    modern = rows["CPU per call, 2026-07-28: bridge / minimal bridge"]
    assert (modern["text"], modern["target"], modern["met"]) == ("1.40", "≤ 1.38", False)
    assert rows["CPU per call, 2026-07-28: bridge / bare server"]["met"] is True  # 2.00 against ≤ 2.00
    assert rows["calls/s, legacy: bridge / minimal bridge"]["text"] == "0.89"
    # This machine's speed figures are shown beside the targets as set, not judged on them.
    absolute = rows["bridge CPU per tools/call, legacy"]
    assert (absolute["section"], absolute["target"], absolute["met"]) == ("machine", "≤ 11 µs", None)
    assert rows["bridge RSS, idle, no client"]["met"] is True
    assert rows["bridge RSS, idle, no client"]["text"] == "23.0 MB (pong floor 20.0 MB)"
    assert rows["memory per idle connected client (N=1,000)"]["text"] == "1.56 KB (pong floor 1.27 KB)"
    assert rows["memory per idle connected client (N=1,000)"]["met"] is True
    tables = report.table(report.figures(results()))
    assert tables.index("bridge / minimal bridge") < tables.index("This machine's figures")


def test_the_idle_footprint_is_judged_on_its_targets_and_older_runs_have_no_floor():
    """≤ 24 MB idle RSS and ≤ 1.6 KB per idle app; a run from before the pong floor's RSS still reports."""
    data = results()
    data["idle"].update(idle_rss_bytes=int(24.5 * 2**20), bytes_per_client=1700.0)
    del data["idle"]["floor_idle_rss_bytes"], data["idle"]["floor_bytes_per_client"]
    rows = {row["label"]: row for row in report.figures(data)}
    rss = rows["bridge RSS, idle, no client"]
    assert (rss["text"], rss["target"], rss["met"]) == ("24.5 MB", "≤ 24 MB", False)
    per_app = rows["memory per idle connected client (N=1,000)"]
    assert (per_app["text"], per_app["target"], per_app["met"]) == ("1.66 KB", "≤ 1.6 KB", False)


def test_a_disturbed_round_is_marked_in_the_table_and_the_notes():
    data = results(legacy_other=23.4)
    rows = {row["label"]: row for row in report.figures(data)}
    mark = "disturbed: 23 % to other processes"
    assert rows["CPU per call, legacy: bridge / minimal bridge"]["disturbed"] == mark
    assert rows["CPU per call, legacy: bridge / minimal bridge"]["text"] == f"1.20 ({mark})"
    assert rows["CPU per call, 2026-07-28: bridge / minimal bridge"]["disturbed"] == ""
    assert f"({mark})" in report.table(report.figures(data))
    assert "legacy: " in report.notes(data) and "other processes 23 % of the two cores" in report.notes(data)
    assert "1 round(s) DISTURBED" in report.notes(data)


def test_the_table_compares_the_counted_work_when_there_is_a_count():
    data = results()
    assert report.work_rows(data["count"]) == []  # a quick run counts nothing
    data["count"] = {
        "legacy": {"Ir": 39_600.0, "cycles": 91_000.0},
        "minimal": {"Ir": 36_000.0, "cycles": 65_000.0},
    }
    rows = {row["label"]: row for row in report.figures(data)}
    work = rows["work per legacy call, bridge / minimal bridge: instructions (callgrind)"]
    assert (work["text"], work["met"]) == ("39.6k / 36.0k = 1.10", True)
    cycles = rows[
        "work per legacy call, bridge / minimal bridge: cycles estimated from simulated cache misses"
    ]
    assert (cycles["text"], cycles["met"]) == ("91.0k / 65.0k = 1.40", False)


def test_the_committed_runs_render():
    listed = subprocess.run(
        ["git", "ls-files", "bench/results/2*.json"], cwd=run.ROOT, capture_output=True, text=True, check=True
    )
    paths = listed.stdout.split()
    assert paths
    for path in paths:
        data = json.loads((run.ROOT / path).read_text())
        assert report.table(report.figures(data)).count("\n|") > 10, path


def test_a_ratio_is_judged_as_shown():
    data = results()
    data["load"]["legacy"]["rounds"][0]["cpu_us_per_call"] = 11.601  # 1.1601: shown 1.16, against ≤ 1.16
    row = {row["label"]: row for row in report.figures(data)}["CPU per call, legacy: bridge / minimal bridge"]
    assert (row["text"], row["met"]) == ("1.16", True)
