"""`python -m bench.cluster`: a call forwarded between two bridge instances through NATS against a local call.

One run, real processes (docs/benchmarks.md, Cluster). It starts a nats-server and two
instances, A and B (`clientmcp serve --nats URL`), with the compiled app of bench/app.pyx on
A, and measures with the load of `python -m bench` (wrk, legacy `tools/call` of `echo`):
- `local`: wrk on A (app and agents on the same instance);
- `forwarded`: wrk on B, so that every call goes B -> NATS -> A -> app and back;
- the same two with one agent (`local_1`, `forwarded_1`): the path's own latency, not queueing;
- the same two with 64 agents that each pause PACE_MS (or `--pace-ms`) before every call
  (`local_paced`, `forwarded_paced`): both at about the same calls/s, below what either can
  answer, so that their latencies compare the paths at one load rather than two saturated
  cores; runs with several `--pace-ms` give the added latency against the load.
A, B and their nats-server are pinned to one CPU, wrk and the app to the other, as in
`python -m bench`. CPU per call is both instances' user + system CPU over the measured run
(for `local` too, where B only sends heartbeats) divided by the calls answered; the
nats-server's is reported beside it, not in it.
Then, unpinned, with the load generator on the same two cores: calls/s of
`clientmcp serve --workers 2 --nats URL` (its own nats-server and app) against one process
without `--nats` (`one`), both under the same 64 agents.
The loads a ratio compares run next to each other, in the opposite order every other round;
each ratio is the median of the rounds' ratios. Rounds whose cores went more than 10 % to
other processes are redone and marked, as in bench/run.py. Results go to
bench/results/cluster-<time>.json and cluster-latest.json.
Needs wrk, nats-server (the Debian package) and the bench extra (`make bench-cluster`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import http.client
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import psutil

from bench import report
from bench.run import (
    FULL,
    HOST,
    OTHER_LIMIT_PCT,
    QUICK,
    RETRIES,
    ROOT,
    BenchError,
    Fleet,
    Plan,
    Progress,
    Server,
    build_app,
    build_dir,
    check_calls,
    cpu_plan,
    free_port,
    other_share,
    proc_stat,
    run_wrk,
    start_app,
    start_bridge,
    wait_healthy,
)

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"
SCRIPT = "legacy.lua"
# The targets (docs/scaling.md, Cost of a forwarded call): ratios in one run.
CPU_RATIO_TARGET = 3.0
ADDED_P99_TARGET_MS = 2.0
READY_SECONDS = 30.0
LOADS = ("local", "forwarded", "forwarded_1", "local_1", "local_paced", "forwarded_paced", "one", "workers_2")
# The paced loads' pause before each call: 64 agents then offer at most 64 / 4 ms = 16k calls/s,
# about two thirds of what the forwarded load answers on this project's machine.
PACE_MS = 4
# Fresh connections in a row that must all be answered before `--workers 2` is measured: the
# kernel spreads them over both workers, so each has then heard of the app (1 - 2**-19).
READY_IN_A_ROW = 20


@dataclass
class Nats:
    """A nats-server the bench started: its URL, its process, and its monitoring port."""

    url: str
    process: psutil.Process
    monitor: int

    def messages(self) -> int:
        """Messages published to it so far (its /varz `in_msgs`): how well the instances batch."""
        conn = http.client.HTTPConnection(HOST, self.monitor, timeout=10)
        try:
            conn.request("GET", "/varz")
            return json.loads(conn.getresponse().read())["in_msgs"]
        finally:
            conn.close()


@dataclass
class Target:
    """One load: where wrk sends it, whose CPU is the bridge's, on which cores."""

    name: str
    server: Server  # the port wrk calls, with the agent token and the session
    bridges: dict[str, psutil.Process]  # each counted with its children (the workers of `--workers 2`)
    nats: Nats | None
    app: psutil.Process
    cpus: tuple[list[int], list[int]]  # (servers, load); ([], []) for unpinned
    connections: int = 64
    delay_ms: int = 0  # each agent's pause before a call (the paced loads)
    rounds: list[dict] = field(default_factory=list)


def tree_times(process: psutil.Process) -> tuple[float, float]:
    """(user + system, system) seconds of a process and its descendants."""
    total = system = 0.0
    try:
        processes = [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0, 0.0
    for each in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = each.cpu_times()
            total += times.user + times.system
            system += times.system
    return total, system


def start_nats(fleet: Fleet, name: str, cpus: list[int]) -> Nats:
    """A nats-server on loopback with the max_payload docs/scaling.md asks for, and its monitoring port."""
    if not Path(NATS_SERVER).exists():
        raise BenchError("nats-server is not installed: apt-get install -y nats-server")
    port, monitor = free_port(), free_port()
    config = build_dir() / f"{name}.conf"
    config.write_text(f"listen: {HOST}:{port}\nhttp: {HOST}:{monitor}\nmax_payload: 8MB\n")
    process = fleet.start(name, [NATS_SERVER, "-c", str(config)], cpus, dict(os.environ))
    give_up = time.monotonic() + 10
    while True:
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), 0.2):
            return Nats(f"nats://{HOST}:{port}", psutil.Process(process.pid), monitor)
        if process.poll() is not None or time.monotonic() > give_up:
            raise BenchError(f"{name} did not listen on {port}:\n{fleet.log_tail(name)}")
        time.sleep(0.02)


def wait_answering(server: Server, in_a_row: int, what: str) -> None:
    """Until `in_a_row` checked calls on fresh connections are answered: the instances have joined."""
    give_up = time.monotonic() + READY_SECONDS
    answered = 0
    while answered < in_a_row:
        try:
            check_calls(server, modern_too=True)
            answered += 1
        except BenchError as error:
            answered = 0
            if time.monotonic() > give_up:
                raise BenchError(
                    f"{what}: calls were not answered within {READY_SECONDS:g} s: {error}"
                ) from None
            time.sleep(0.05)


def measured_run(fleet: Fleet, target: Target, plan: Plan) -> dict:
    """A checked warm-up, then the measured run; its figures."""
    server_cpus, load_cpus = target.cpus
    run_wrk(target.server, SCRIPT, plan.warmup, True, load_cpus, target.connections, target.delay_ms)
    ours_before = fleet.cpu_seconds()
    stat_before = proc_stat()
    bridges_before = {name: tree_times(process) for name, process in target.bridges.items()}
    nats_before = tree_times(target.nats.process)[0] if target.nats else 0.0
    messages_before = target.nats.messages() if target.nats else 0
    app_before = tree_times(target.app)[0]
    summary = run_wrk(
        target.server, SCRIPT, plan.seconds, False, load_cpus, target.connections, target.delay_ms
    )
    bridges_after = {name: tree_times(process) for name, process in target.bridges.items()}
    nats_cpu = (tree_times(target.nats.process)[0] - nats_before) if target.nats else 0.0
    messages = (target.nats.messages() - messages_before) if target.nats else 0
    app_cpu = tree_times(target.app)[0] - app_before
    stat_after = proc_stat()
    ours = fleet.cpu_seconds() - ours_before + summary["cpu_seconds"]
    other = other_share(stat_before, stat_after, ours, server_cpus + load_cpus, os.sysconf("SC_CLK_TCK"))
    calls = summary["requests"]
    per_call = 1e6 / calls
    each = {name: (bridges_after[name][0] - bridges_before[name][0]) * per_call for name in target.bridges}
    system = sum(bridges_after[name][1] - bridges_before[name][1] for name in target.bridges) * per_call
    latency = summary["latency_us"]
    return {
        "calls": calls,
        "calls_per_s": calls / (summary["duration_us"] / 1e6),
        "cpu_us_per_call": sum(each.values()),
        "system_us_per_call": system,
        "instance_us_per_call": each,
        "nats_us_per_call": nats_cpu * per_call,
        # NATS messages the instances published per call (a call and its result are 2 unbatched).
        "nats_messages_per_call": messages / calls,
        "app_us_per_call": app_cpu * per_call,
        "wrk_us_per_call": summary["cpu_seconds"] * per_call,
        "p50_ms": latency["p50"] / 1000,
        "p99_ms": latency["p99"] / 1000,
        "p999_ms": latency["p999"] / 1000,
        "other_pct": other * 100,
    }


def load_round(fleet: Fleet, target: Target, plan: Plan) -> dict:
    """One round of a load, redone while other processes took too much of the cores; the least disturbed try."""
    tries = [measured_run(fleet, target, plan)]
    while len(tries) <= RETRIES and tries[-1]["other_pct"] > OTHER_LIMIT_PCT:
        tries.append(measured_run(fleet, target, plan))
    kept = min(tries, key=lambda figures: figures["other_pct"])
    return dict(kept, tries=len(tries), disturbed=kept["other_pct"] > OTHER_LIMIT_PCT)


def start_targets(fleet: Fleet, secret: str, progress: Progress, pace_ms: int = PACE_MS) -> dict[str, Target]:
    """Every process of the run, started and checked; the loads by name, in the order they run."""
    server_cpus, load_cpus = cpu_plan()
    pinned = (server_cpus, load_cpus)
    unpinned: tuple[list[int], list[int]] = ([], [])
    wait_for_build = build_app(progress)
    progress(f"nats-server, instances A and B on CPU {server_cpus}; apps and wrk on CPU {load_cpus}")
    # Each app waits quiet while the other loads run, longer than the default 90 s without a ping.
    quiet = ("--app-idle-timeout", "3600")
    nats = start_nats(fleet, "nats", server_cpus)
    a = start_bridge(fleet, "instance-a", secret, False, server_cpus, *quiet, "--nats", nats.url)
    b = start_bridge(fleet, "instance-b", secret, False, server_cpus, *quiet, "--nats", nats.url)
    workers_nats = start_nats(fleet, "nats-workers", [])
    one = start_bridge(fleet, "one-process", secret, False, [], *quiet)
    workers = start_bridge(
        fleet, "workers-2", secret, False, [], *quiet, "--nats", workers_nats.url, "--workers", "2"
    )
    build = wait_for_build()
    for server in (a, one):
        wait_healthy(fleet, server.name, server.port, "/healthz")
    start_app(fleet, a, secret, build, load_cpus)
    check_calls(a, modern_too=True)
    forwarded = dataclasses.replace(b, name="instance-b (forwarded to A)", token=a.token)
    wait_answering(forwarded, 1, "B forwarding to A's app")
    start_app(fleet, one, secret, build, [])
    check_calls(one, modern_too=True)
    wait_healthy(fleet, workers.name, workers.port, "/healthz")
    start_app(fleet, workers, secret, build, [])
    wait_answering(workers, READY_IN_A_ROW, "--workers 2")
    if len(workers.process.children()) != 2:
        raise BenchError(f"--workers 2 runs {len(workers.process.children())} workers")
    progress("every load answered checked tools/calls; forwarded ones through B, NATS and A")
    pair = {"a": a.process, "b": b.process}
    targets = [
        Target("local", a, pair, nats, a.app, pinned),
        Target("forwarded", forwarded, pair, nats, a.app, pinned),
        Target("forwarded_1", forwarded, pair, nats, a.app, pinned, connections=1),
        Target("local_1", a, pair, nats, a.app, pinned, connections=1),
        Target("local_paced", a, pair, nats, a.app, pinned, delay_ms=pace_ms),
        Target("forwarded_paced", forwarded, pair, nats, a.app, pinned, delay_ms=pace_ms),
        Target("one", one, {"one": one.process}, None, one.app, unpinned),
        Target("workers_2", workers, {"workers": workers.process}, workers_nats, workers.app, unpinned),
    ]
    return {target.name: target for target in targets}


def medians(rounds: list[dict]) -> dict:
    """Each number's median over the rounds."""
    numbers = [key for key, value in rounds[0].items() if type(value) in (int, float)]
    return {key: statistics.median(r[key] for r in rounds) for key in numbers}


def ratios(load: dict[str, list[dict]]) -> dict:
    """The comparisons of the loads that ran (forwarded / local, workers / one process), each the median per round."""

    def median(pair: tuple[str, str], figure) -> float:
        return statistics.median(figure(base, other) for base, other in zip(load[pair[0]], load[pair[1]]))

    both, one_agent, processes = ("local", "forwarded"), ("local_1", "forwarded_1"), ("one", "workers_2")
    paced = ("local_paced", "forwarded_paced")
    comparisons = {
        "forwarded_cpu_ratio": (both, lambda lo, f: f["cpu_us_per_call"] / lo["cpu_us_per_call"]),
        "forwarded_cpu_ratio_with_nats": (
            both,
            lambda lo, f: (
                (f["cpu_us_per_call"] + f["nats_us_per_call"])
                / (lo["cpu_us_per_call"] + lo["nats_us_per_call"])
            ),
        ),
        "forwarded_extra_cpu_us": (both, lambda lo, f: f["cpu_us_per_call"] - lo["cpu_us_per_call"]),
        "added_p50_ms": (both, lambda lo, f: f["p50_ms"] - lo["p50_ms"]),
        "added_p99_ms": (both, lambda lo, f: f["p99_ms"] - lo["p99_ms"]),
        "forwarded_calls_ratio": (both, lambda lo, f: f["calls_per_s"] / lo["calls_per_s"]),
        "added_p50_ms_one_agent": (one_agent, lambda lo, f: f["p50_ms"] - lo["p50_ms"]),
        "added_p99_ms_one_agent": (one_agent, lambda lo, f: f["p99_ms"] - lo["p99_ms"]),
        "added_p50_ms_paced": (paced, lambda lo, f: f["p50_ms"] - lo["p50_ms"]),
        "added_p99_ms_paced": (paced, lambda lo, f: f["p99_ms"] - lo["p99_ms"]),
        "paced_calls_ratio": (paced, lambda lo, f: f["calls_per_s"] / lo["calls_per_s"]),
        "workers_calls_ratio": (processes, lambda o, w: w["calls_per_s"] / o["calls_per_s"]),
        "workers_cpu_ratio": (processes, lambda o, w: w["cpu_us_per_call"] / o["cpu_us_per_call"]),
    }
    return {
        name: median(pair, figure)
        for name, (pair, figure) in comparisons.items()
        if pair[0] in load and pair[1] in load
    }


def run(plan: Plan, progress: Progress, only: tuple[str, ...] = (), pace_ms: int = PACE_MS) -> dict:
    """Every figure of the run (of the loads named in `only`, if any), measured; the raw numbers for `table`."""
    if shutil.which("wrk") is None:
        raise BenchError("wrk is not installed: apt-get install -y wrk")
    allowed = os.sched_getaffinity(0)
    secret = secrets.token_hex(32)
    load_at_start = list(os.getloadavg())
    fleet = Fleet()
    try:
        targets = start_targets(fleet, secret, progress, pace_ms)
        unknown = set(only) - set(targets)
        if unknown:
            raise BenchError(f"no load named {', '.join(sorted(unknown))}; the loads: {', '.join(targets)}")
        order = [target for target in targets.values() if not only or target.name in only]
        for number in range(1, plan.rounds + 1):
            for target in order if number % 2 else order[::-1]:
                # This process waits for wrk: it shares the load's core, or every core when unpinned.
                os.sched_setaffinity(0, target.cpus[1] or allowed)
                figures = load_round(fleet, target, plan)
                target.rounds.append(figures)
                progress(
                    f"round {number}/{plan.rounds} {target.name:<12} {figures['calls_per_s']:>8,.0f} calls/s  "
                    f"bridge {figures['cpu_us_per_call']:6.1f} µs/call  nats {figures['nats_us_per_call']:5.1f} µs, "
                    f"{figures['nats_messages_per_call']:.3f} msgs  "
                    f"p50 {figures['p50_ms']:.2f} ms  p99 {figures['p99_ms']:.2f} ms  "
                    f"other processes {figures['other_pct']:.0f} %"
                    + (" DISTURBED" if figures["disturbed"] else "")
                )
    finally:
        fleet.stop_all()
        os.sched_setaffinity(0, allowed)
    load = {target.name: target.rounds for target in order}
    server_cpus, load_cpus = cpu_plan()
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "plan": dataclasses.asdict(plan),
        "pace_ms": pace_ms,
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_at_start": load_at_start,
            "load_average_at_end": list(os.getloadavg()),
            "nats_server": subprocess.run(
                [NATS_SERVER, "--version"], check=False, capture_output=True, text=True
            ).stdout.strip(),
            "nats_py": version("nats-py"),
        },
        "pinning": {"server_cpus": server_cpus, "load_cpus": load_cpus},
        "load": {
            name: {
                "median": medians(rounds),
                "disturbed": sum(r["disturbed"] for r in rounds),
                "rounds": rounds,
            }
            for name, rounds in load.items()
        },
        "ratios": ratios(load),
    }


def table(results: dict) -> str:
    """The loads' medians and the ratios, beside the targets."""
    load, ratio = results["load"], results["ratios"]
    lines = [
        "load        agents  calls/s  bridge CPU/call (A, B)  nats-server  NATS msgs/call  p50      p99     "
        "other processes",
    ]
    for name, figures in load.items():
        m = figures["median"]
        rounds = figures["rounds"]
        each = ", ".join(
            f"{statistics.median(r['instance_us_per_call'][key] for r in rounds):.1f}"
            for key in rounds[0]["instance_us_per_call"]
        )
        agents = 1 if name.endswith("_1") else 64
        mark = f" ({figures['disturbed']} disturbed)" if figures["disturbed"] else ""
        lines.append(
            f"{name:<11} {agents:>6} {m['calls_per_s']:>8,.0f} {m['cpu_us_per_call']:7.1f} µs ({each:<11}) "
            f"{m['nats_us_per_call']:7.1f} µs {m['nats_messages_per_call']:15.3f}  {m['p50_ms']:5.2f} ms "
            f"{m['p99_ms']:5.2f} ms {m['other_pct']:4.0f} %{mark}"
        )
    lines.append("")
    if "forwarded_cpu_ratio" in ratio:
        cpu_met = "yes" if round(ratio["forwarded_cpu_ratio"], 2) <= CPU_RATIO_TARGET else "NO"
        p99_met = "yes" if round(ratio["added_p99_ms"], 2) <= ADDED_P99_TARGET_MS else "NO"
        lines += [
            f"forwarded / local, CPU per call of both instances: {ratio['forwarded_cpu_ratio']:.2f} "
            f"(target at most {CPU_RATIO_TARGET:g}: {cpu_met}); "
            f"with the nats-server's: {ratio['forwarded_cpu_ratio_with_nats']:.2f}; "
            f"extra {ratio['forwarded_extra_cpu_us']:.1f} µs per call",
            f"forwarded - local, 64 agents: p50 {ratio['added_p50_ms']:+.2f} ms, p99 {ratio['added_p99_ms']:+.2f} ms "
            f"(target at most +{ADDED_P99_TARGET_MS:g} ms: {p99_met}); calls/s {ratio['forwarded_calls_ratio']:.2f}x",
        ]
    if "added_p50_ms_one_agent" in ratio:
        lines.append(
            f"forwarded - local, 1 agent: p50 {ratio['added_p50_ms_one_agent']:+.3f} ms, "
            f"p99 {ratio['added_p99_ms_one_agent']:+.3f} ms"
        )
    if "added_p99_ms_paced" in ratio:
        lines.append(
            f"forwarded - local, 64 agents paced ({results.get('pace_ms', PACE_MS)} ms before each call, calls/s "
            f"{ratio['paced_calls_ratio']:.2f}x): p50 {ratio['added_p50_ms_paced']:+.3f} ms, "
            f"p99 {ratio['added_p99_ms_paced']:+.3f} ms"
        )
    if "workers_calls_ratio" in ratio:
        lines.append(
            f"--workers 2 / one process (unpinned, wrk and the app on the same 2 cores): calls/s "
            f"{ratio['workers_calls_ratio']:.2f}x, bridge CPU per call {ratio['workers_cpu_ratio']:.2f}x"
        )
    lines.append(
        f"load average {results['machine']['load_average_at_start'][0]:.2f} at the start, "
        f"{results['machine']['load_average_at_end'][0]:.2f} at the end"
    )
    return "\n".join(lines)


def save(results: dict, directory: Path = report.RESULTS) -> list[Path]:
    """cluster-<time>.json and cluster-latest.json in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = results["when"].replace("-", "").replace(":", "")
    text = json.dumps(results, indent=1, ensure_ascii=False) + "\n"
    paths = [directory / f"cluster-{stamp}.json", directory / "cluster-latest.json"]
    for path in paths:
        path.write_text(text)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke run: one round of 2 s")
    parser.add_argument("--seconds", type=float, help="length of each measured load run")
    parser.add_argument("--rounds", type=int, help="rounds of every load (the median is reported)")
    parser.add_argument(
        "--loads", default="", help="comma-separated loads to run (default all): " + ", ".join(LOADS)
    )
    parser.add_argument(
        "--pace-ms",
        type=int,
        default=PACE_MS,
        help=f"the paced loads' pause before each call (default {PACE_MS})",
    )
    flags = parser.parse_args(argv)
    if flags.pace_ms < 1:
        parser.error("--pace-ms must be at least 1")
    plan = QUICK if flags.quick else FULL
    for name in ("seconds", "rounds"):
        if getattr(flags, name) is not None:
            plan = dataclasses.replace(plan, **{name: getattr(flags, name)})
    progress = Progress()
    try:
        results = run(plan, progress, tuple(filter(None, flags.loads.split(","))), flags.pace_ms)
    except BenchError as error:
        print(f"bench.cluster: FAILED: {error}", file=sys.stderr)
        return 1
    results["quick"] = flags.quick
    paths = save(results)
    print(table(results))
    progress("saved " + ", ".join(str(path.relative_to(ROOT)) for path in paths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
