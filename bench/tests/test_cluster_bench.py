"""bench/cluster.py: a short real run (nats-server, two instances, `--workers 2`), and its arithmetic.

Run by `make test-bench`; needs wrk, nats-server and the bench extra (bench/app.pyx is compiled).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from bench import cluster, run


def figures(cpu: float, rate: float, p99: float, nats: float = 0.0, b: float = 0.0) -> dict:
    """One round of a load, as `cluster.load_round` gives it."""
    return {
        "calls": rate,
        "calls_per_s": rate,
        "cpu_us_per_call": cpu,
        "system_us_per_call": cpu / 2,
        "instance_us_per_call": {"a": cpu - b, "b": b},
        "nats_us_per_call": nats,
        "nats_messages_per_call": 0.05,
        "app_us_per_call": 1.0,
        "wrk_us_per_call": 5.0,
        "p50_ms": p99 / 2,
        "p99_ms": p99,
        "p999_ms": p99 * 2,
        "other_pct": 1.0,
        "tries": 1,
        "disturbed": False,
    }


def test_each_ratio_is_the_median_of_the_rounds_own():
    load = {
        "local": [figures(10, 80_000, 1.0), figures(20, 40_000, 2.0), figures(10, 80_000, 1.0)],
        "forwarded": [
            figures(25, 30_000, 2.5, 8, 12),
            figures(80, 10_000, 9.0, 8, 40),
            figures(32, 25_000, 3.5, 8, 16),
        ],
        "local_1": [figures(20, 9_000, 0.2)] * 3,
        "forwarded_1": [figures(60, 3_000, 0.5)] * 3,
        "local_paced": [figures(15, 16_000, 0.8)] * 3,
        "forwarded_paced": [figures(30, 15_200, 1.5)] * 3,
        "one": [figures(12, 60_000, 2.0)] * 3,
        "workers_2": [figures(30, 45_000, 3.0)] * 3,
    }
    ratios = cluster.ratios(load)
    # Per round 2.5, 4.0, 3.2: the median, not the ratio of the medians (32 / 10).
    assert ratios["forwarded_cpu_ratio"] == pytest.approx(3.2)
    assert ratios["forwarded_cpu_ratio_with_nats"] == pytest.approx(4.0)  # (32 + 8) / 10
    assert ratios["added_p99_ms"] == pytest.approx(2.5)
    assert ratios["added_p99_ms_one_agent"] == pytest.approx(0.3)
    assert ratios["added_p99_ms_paced"] == pytest.approx(0.7)
    assert ratios["paced_calls_ratio"] == pytest.approx(0.95)
    assert ratios["workers_calls_ratio"] == pytest.approx(0.75)
    results = {
        "load": {
            name: {"median": cluster.medians(rounds), "disturbed": 0, "rounds": rounds}
            for name, rounds in load.items()
        },
        "ratios": ratios,
        "machine": {"load_average_at_start": [0.5, 0, 0], "load_average_at_end": [0.7, 0, 0]},
    }
    table = cluster.table(results)
    assert "both instances: 3.20 (target at most 3: NO)" in table
    assert "p99 +2.50 ms (target at most +2 ms: NO)" in table
    assert "64 agents paced (4 ms before each call, calls/s 0.95x): p50 +0.350 ms, p99 +0.700 ms" in table
    results["pace_ms"] = 8  # `--pace-ms 8`: the table says the pause the run had
    assert "64 agents paced (8 ms before each call, calls/s 0.95x)" in cluster.table(results)


def test_a_pause_below_one_millisecond_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        cluster.main(["--pace-ms", "0"])
    assert exit_.value.code == 2 and "--pace-ms must be at least 1" in capsys.readouterr().err


def test_a_short_run_forwards_through_nats_and_runs_two_workers(tmp_path):
    plan = dataclasses.replace(run.QUICK, seconds=1, warmup=1, rounds=1)
    results = cluster.run(plan, run.Progress())
    load = results["load"]
    assert set(load) == {
        "local",
        "forwarded",
        "forwarded_1",
        "local_1",
        "local_paced",
        "forwarded_paced",
        "one",
        "workers_2",
    }
    for name, figures_ in load.items():
        assert figures_["median"]["calls"] > 0, name
    local, forwarded = load["local"]["rounds"][0], load["forwarded"]["rounds"][0]
    # A local call never leaves A; a forwarded one crosses B, the nats-server and A.
    assert forwarded["instance_us_per_call"]["b"] > 3 * local["instance_us_per_call"]["b"]
    assert forwarded["instance_us_per_call"]["a"] > 0
    assert forwarded["nats_us_per_call"] > 3 * local["nats_us_per_call"]
    # The paced loads pause: they answer fewer calls per second than the unpaced ones.
    assert load["local_paced"]["rounds"][0]["calls_per_s"] < load["local"]["rounds"][0]["calls_per_s"]
    assert load["workers_2"]["rounds"][0]["nats_us_per_call"] > 0  # half its agents reach the other worker
    assert 0 < results["ratios"]["forwarded_cpu_ratio"] < 100
    paths = cluster.save(results, tmp_path)
    assert [path.name for path in paths][1] == "cluster-latest.json"
    assert json.loads(paths[0].read_text())["ratios"] == results["ratios"]
    assert "forwarded / local" in cluster.table(results)
