"""Runs the fuzz targets under atheris: `python -m tests.fuzz [--target NAME] [--runs N] [--merge] [-- FLAGS]`.

Each target runs in a process of its own (libFuzzer ends the process when it is done),
on the twin the environment selects (CLIENTMCP_NO_EXTENSIONS=1: pure), reading its corpus
tests/fuzz/corpus/<target>/. The inputs it finds go to build/fuzz/<twin>/<target>/, a
failing input to build/fuzz/crashes/, its log to build/fuzz/<twin>/<target>.log.
`--merge` instead adds to the corpus those inputs either twin found that bring new coverage.
FLAGS are libFuzzer's (-max_total_time=600, -jobs=2, ...).
"""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys
import time
from pathlib import Path

from . import CORPUS, TARGETS

BUILD = Path(__file__).resolve().parents[2] / "build" / "fuzz"
DEFAULT_RUNS = 100_000
# Seconds one input may take before libFuzzer calls it a hang (the slowest seed takes 20 ms).
TIMEOUT = 10


def child(target: str, flags: list[str]) -> None:
    """Fuzz one target in this process; libFuzzer exits when it is done."""
    import atheris

    # Imported first, uninstrumented: with CLIENTMCP_NO_EXTENSIONS=1 it puts its finder of .py
    # sources first on sys.meta_path, and atheris's finder must come before it to see them.
    import clientmcp_fast  # noqa: F401

    # The pure twins and the interpreted modules give coverage; compiled ones are opaque to it.
    with atheris.instrument_imports(include=["clientmcp_fast", "jwt"]):
        module = importlib.import_module(f"{__package__}.fuzz_{target}")
    atheris.Setup([str(_command(target)), *flags], module.TestOneInput)
    atheris.Fuzz()


def _command(target: str) -> Path:
    """An executable that runs this target's child: libFuzzer starts it again to merge (and for -jobs)."""
    BUILD.mkdir(parents=True, exist_ok=True)
    path = BUILD / f"{target}.sh"
    root = BUILD.parents[1]
    path.write_text(
        f'#!/bin/sh\ncd "{root}" && exec "{sys.executable}" -m {__package__} --child {target} -- "$@"\n'
    )
    path.chmod(0o755)
    return path


def run(target: str, twin: str, runs: int | None, merge: bool, extra: list[str]) -> bool:
    """Fuzz (or merge) one target in a child process; prints one line of figures. Whether it passed."""
    found = BUILD / twin / target
    crashes = BUILD / "crashes"
    found.mkdir(parents=True, exist_ok=True)
    crashes.mkdir(parents=True, exist_ok=True)
    corpus = CORPUS / target
    if merge:
        # What either twin found, measured by this twin's coverage (the pure one sees the most).
        finds = [
            str(BUILD / each / target) for each in ("compiled", "pure") if (BUILD / each / target).is_dir()
        ]
        flags = ["-merge=1", *extra, str(corpus), *finds]
    else:
        limit = [] if runs is None else [f"-runs={runs}"]
        flags = [*limit, f"-timeout={TIMEOUT}", "-print_final_stats=1",
                 f"-artifact_prefix={crashes}/{twin}-{target}-", *extra, str(found), str(corpus)]  # fmt: skip
    log = BUILD / twin / f"{target}.log"
    started = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(
            [sys.executable, "-m", __package__, "--child", target, "--", *flags],
            stdout=out, stderr=subprocess.STDOUT, cwd=BUILD.parents[1],
        )  # fmt: skip
    seconds = time.monotonic() - started
    text = log.read_text(errors="replace")
    executed = re.search(r"stat::number_of_executed_units: (\d+)", text)
    coverage = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)", text)
    figures = []
    if merge:
        figures.append(f"corpus {sum(1 for _ in corpus.iterdir())} files")
    elif executed:
        count = int(executed[1])
        figures.append(f"{count:>8} inputs {seconds:6.1f} s {count / seconds:7.0f}/s")
    if coverage and not merge:
        figures.append("cov {} ft {} corpus {}".format(*coverage[-1]))
    print(f"{twin:8} {target:12}", *figures, flush=True)
    if done.returncode != 0:
        print(
            f"FAILED ({done.returncode}); the end of {log}:\n" + "\n".join(text.splitlines()[-40:]),
            flush=True,
        )
    return done.returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--target", action="append", choices=TARGETS, help="this target (repeatable); all by default"
    )
    parser.add_argument(
        "--runs", type=int, help=f"inputs per target ({DEFAULT_RUNS:,}; unbounded with -max_total_time)"
    )
    parser.add_argument(
        "--merge", action="store_true", help="add the found inputs with new coverage to the corpus"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("flags", nargs="*", help="libFuzzer's flags, after --")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.flags)
        return 1  # not reached: libFuzzer exits
    twin = importlib.import_module("clientmcp_fast.speedups").IMPLEMENTATION
    runs = args.runs
    if runs is None and not any(flag.startswith("-max_total_time") for flag in args.flags):
        runs = DEFAULT_RUNS
    results = [run(target, twin, runs, args.merge, args.flags) for target in args.target or TARGETS]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
