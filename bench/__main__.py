"""`python -m bench`: the bridge against the floors of the same run, and this machine's figures (docs/benchmarks.md).

Starts a bridge, a compiled app and wrk (and the floors, the pure-Python bridge, the `mcp`
SDK's server and idle clients), prints the ratios to the floors and this machine's figures,
and saves them as bench/results/<time>.json, latest.json and latest.png. The method is in
bench/run.py. `--quick` (CI smoke) takes about a minute; the full run several minutes, the
last three of them counting the work per call with callgrind (`--no-count` skips that).
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


if __name__ == "__main__":
    raise SystemExit(main())
