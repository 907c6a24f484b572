"""`python -m bench`: the bridge against the floors of the same run, and this machine's figures (docs/benchmarks.md).

Starts a bridge, a compiled app and wrk (and the floors, the pure-Python bridge, the `mcp`
SDK's server and idle clients), prints the ratios to the floors and this machine's figures,
and saves them as bench/results/<time>.json, latest.json and latest.png. The method is in
bench/run.py. `--quick` (CI smoke) takes about a minute; the full run several minutes, the
last three of them counting the work per call with callgrind (`--no-count` skips that).
`--idle` measures figures 3 and 4 alone, each beside the pong floor's, and saves nothing.
Needs wrk (`apt-get install -y wrk`) and the bench extra (`pip install -e '.[test,bench]'`,
which `make bench` runs).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from bench import report, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke run: short loads, 1,000 idle clients")
    parser.add_argument("--seconds", type=float, help="length of each measured load run")
    parser.add_argument("--rounds", type=int, help="rounds of every load scenario (the median is reported)")
    parser.add_argument("--clients", type=int, help="idle clients for figures 3 and 4")
    parser.add_argument(
        "--idle", action="store_true", help="only figures 3 and 4: idle RSS, memory and CPU per idle client"
    )
    parser.add_argument("--no-sdk", action="store_true", help="skip figure 5 (the mcp SDK's server)")
    parser.add_argument(
        "--no-count", action="store_true", help="skip callgrind's count of the work per call (full run only)"
    )
    flags = parser.parse_args(argv)
    plan = run.QUICK if flags.quick else run.FULL
    for name in ("seconds", "rounds", "clients"):
        if getattr(flags, name) is not None:
            plan = dataclasses.replace(plan, **{name: getattr(flags, name)})
    progress = run.Progress()
    if flags.idle:
        return idle_only(plan, progress)
    try:
        results = run.run(
            plan, progress, flags.quick, with_sdk=not flags.no_sdk, count=not (flags.quick or flags.no_count)
        )
    except run.BenchError as error:
        print(f"bench: FAILED: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    rows = report.figures(results)
    paths = report.save(results, rows)
    print(report.table(rows))
    print()
    print(report.notes(results))
    progress("saved " + ", ".join(str(path.relative_to(run.ROOT)) for path in paths))
    return 0


def idle_only(plan: run.Plan, progress: run.Progress) -> int:
    """Figures 3 and 4 alone, each beside the pong floor's of the same run; nothing saved."""
    try:
        idle = run.run_idle(plan, progress)
    except run.BenchError as error:
        print(f"bench: FAILED: {error}", file=sys.stderr)
        return 1
    mb, floor_mb = idle["idle_rss_bytes"] / 2**20, idle["floor_idle_rss_bytes"] / 2**20
    kb, floor_kb = idle["bytes_per_client"] / 1024, idle["floor_bytes_per_client"] / 1024
    print(f"idle RSS, no client: bridge {mb:.1f} MB, pong floor {floor_mb:.1f} MB ({mb / floor_mb:.2f}x)")
    print(
        f"memory per idle client (N={idle['clients']:,}): bridge {kb:.2f} KB, "
        f"pong floor {floor_kb:.2f} KB ({kb / floor_kb:.2f}x)"
    )
    print(
        f"CPU, clients pinging: bridge {idle['ping_cpu_pct']:.2f} %, pong floor "
        f"{idle['floor_ping_cpu_pct']:.2f} % of a core (quiet {idle['quiet_cpu_pct']:.2f} %)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
