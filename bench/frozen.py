"""`python -m bench.frozen`: the frozen builds beside the virtualenv install, measured in one run.

Four builds of the same bridge: the virtualenv's (`python -m clientmcp_fast`), the same in a
virtualenv on the frozen builds' own Python (the image's build stage, with chroot), the image's
folder executable (run from the image's own filesystem with chroot, as uid 65532), and the
single static file `dist/clientmcp`. For each, in the same run and on the same pinned cores
as `python -m bench` (bench/run.py):
- CPU per call under the legacy load (wrk, 64 agents, the compiled app), rounds interleaved
  in alternating order so that a slow spell of the machine falls on every build; the ratio
  to the virtualenv's is per round, then the median;
- time from exec to listening (the first accepted TCP connection), the median of several
  starts; idle RSS with no client, of the whole process tree (the single file runs three
  processes: two bootloaders and the bridge);
- the image's size (the files of its filesystem, and a gzip of their tar as a registry
  would store it) and the single file's.
Needs `make image binary` first, wrk, and root for chroot. Results go to
bench/results/frozen-<time>.json and frozen-latest.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import io
import json
import os
import secrets
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import psutil

from bench import report
from bench.run import (
    HOST,
    INSTALLED,
    QUICK,
    BenchError,
    Fleet,
    Progress,
    Server,
    build_app,
    check_calls,
    cpu_plan,
    free_port,
    load_round,
    start_app,
    start_bridge,
    wait_healthy,
)

ROOT = Path(__file__).resolve().parent.parent
PODMAN = shlex.split(os.environ.get("PODMAN", "podman --storage-driver vfs"))
IMAGE = os.environ.get("CLIENTMCP_IMAGE", "clientmcp")
BUILD_STAGE = f"{IMAGE}-build"  # the image's build stage, tagged by packaging/build.sh
BINARY = ROOT / "dist" / "clientmcp"
STARTS = 7
CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"  # in /usr/sbin, which a login's PATH may lack


def image_root(image: str) -> Path:
    """An image's filesystem, mounted from the image store."""
    found = subprocess.run([*PODMAN, "image", "exists", image], check=False)
    if found.returncode != 0:
        raise BenchError(f"no image {image!r}: build it first (make image)")
    mounted = subprocess.run([*PODMAN, "image", "mount", image], check=True, capture_output=True, text=True)
    return Path(mounted.stdout.strip())


def unmount(image: str) -> None:
    subprocess.run([*PODMAN, "image", "unmount", image], check=False, capture_output=True)


def commands(image: Path, build_stage: Path) -> dict[str, tuple[str, ...]]:
    """Each build's command line, ahead of its arguments."""
    if not BINARY.is_file():
        raise BenchError(f"no {BINARY}: build it first (make binary)")
    as_user = (CHROOT, "--userspec=65532:65532")
    return {
        "venv": INSTALLED,
        # The same bridge in a virtualenv on the Python the frozen builds carry (Debian's):
        # the frozen builds' ratio to it is the packaging's alone.
        "stage": (*as_user, str(build_stage), "/venv/bin/python", "-m", "clientmcp_fast"),
        "image": (*as_user, str(image), "/clientmcp/clientmcp"),
        "single": (str(BINARY),),
    }


def bridge_process(top: psutil.Process) -> psutil.Process:
    """The process that runs the bridge: the top one, or the last of the bootloaders' children."""
    children = top.children(recursive=True)
    return children[-1] if children else top


def tree_rss(top: psutil.Process) -> int:
    return sum(process.memory_info().rss for process in [top, *top.children(recursive=True)])


def time_to_listen(command: tuple[str, ...], secret: str) -> float:
    """Seconds from exec to the first accepted connection on the bridge's port."""
    port = free_port()
    env = {
        "CLIENTMCP_SECRET": secret,
        "CLIENTMCP_HOST": HOST,
        "CLIENTMCP_PORT": str(port),
        "CLIENTMCP_LOG": "warn",
    }
    started = time.monotonic()
    process = subprocess.Popen([*command, "serve"], env=env, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                with socket.create_connection((HOST, port), timeout=1):
                    return time.monotonic() - started
            except OSError:
                if process.poll() is not None:
                    raise BenchError(
                        f"{command[-1]} exited with {process.returncode} before listening"
                    ) from None
                if time.monotonic() - started > 30:
                    raise BenchError(f"{command[-1]} did not listen within 30 s") from None
                time.sleep(0.002)
    finally:
        process.terminate()
        process.wait(10)


def image_size(root: Path) -> dict:
    """The image filesystem's bytes, as files and as a gzip of their tar."""
    files = [path for path in root.rglob("*") if path.is_file() and not path.is_symlink()]
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=6) as packed:
        with tarfile.open(fileobj=packed, mode="w") as tar:
            tar.add(root, arcname=".")
    return {
        "bytes": sum(path.stat().st_size for path in files),
        "gzip_bytes": buffer.tell(),
        "files": len(files),
    }


def run(seconds: float, rounds: int, progress: Progress) -> dict:
    if os.geteuid() != 0:
        raise BenchError("the image is run with chroot, which needs root")
    server_cpus, load_cpus = cpu_plan()
    if server_cpus:
        os.sched_setaffinity(0, load_cpus)
    secret = secrets.token_hex(32)
    results: dict = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "builds": {}}
    fleet = Fleet()
    try:
        builds = commands(image_root(IMAGE), image_root(BUILD_STAGE))
        for name, command in builds.items():
            starts = [time_to_listen(command, secret) for _ in range(STARTS)]
            results["builds"][name] = {"listen_seconds": statistics.median(starts), "listen_all": starts}
            progress(
                f"{name:<7} exec to listening: median {statistics.median(starts) * 1000:.0f} ms of {STARTS}"
            )

        wait_for_build = build_app(progress)
        servers: dict[str, Server] = {}
        for name, command in builds.items():
            servers[name] = start_bridge(fleet, name, secret, False, server_cpus, command=command)
        build = wait_for_build()
        for name, server in servers.items():
            wait_healthy(fleet, server.name, server.port, "/healthz")
            time.sleep(1.0)
            results["builds"][name]["idle_rss_bytes"] = tree_rss(server.process)
            results["builds"][name]["processes"] = 1 + len(server.process.children(recursive=True))
            server.process = bridge_process(server.process)
            start_app(fleet, server, secret, build, load_cpus)
            check_calls(server, modern_too=True)
        per_round: dict[str, list[dict]] = {name: [] for name in servers}
        order = list(servers)
        plan = dataclasses.replace(QUICK, seconds=seconds)
        for number in range(1, rounds + 1):
            for name in order if number % 2 else order[::-1]:
                figures = load_round(fleet, servers[name], "legacy.lua", plan, (server_cpus, load_cpus))
                per_round[name].append(figures)
                progress(
                    f"round {number}/{rounds} {name:<7} {figures['calls_per_s']:>9,.0f} calls/s  "
                    f"{figures['cpu_us_per_call']:6.2f} µs CPU/call  (other processes: "
                    f"{figures['other_pct']:.0f} % of the cores{', DISTURBED' if figures['disturbed'] else ''})"
                )
        results["image"] = image_size(image_root(IMAGE))
    finally:
        fleet.stop_all()
        unmount(IMAGE)
        unmount(BUILD_STAGE)
    for name, figures in per_round.items():
        cpu = [round_["cpu_us_per_call"] for round_ in figures]
        results["builds"][name].update(
            cpu_us_per_call=statistics.median(cpu),
            calls_per_s=statistics.median(round_["calls_per_s"] for round_ in figures),
            rounds=figures,
        )
        for base in ("venv", "stage"):
            ratios = [ours / theirs["cpu_us_per_call"] for ours, theirs in zip(cpu, per_round[base])]
            results["builds"][name][f"cpu_ratio_to_{base}"] = statistics.median(ratios)
    results["single_bytes"] = BINARY.stat().st_size
    return results


def table(results: dict) -> str:
    """The figures as a plain table, beside the issue's targets."""
    builds = results["builds"]
    lines = [
        "venv: make's virtualenv; stage: a virtualenv on the frozen builds' own Python (the image's build stage)",
        f"{'build':<8}{'CPU/call':>11}{'/venv':>8}{'/stage':>8}{'calls/s':>10}{'listen':>9}{'idle RSS':>10}"
        f"{'procs':>7}",
    ]
    for name, build in builds.items():
        lines.append(
            f"{name:<8}{build['cpu_us_per_call']:>9.2f}µs{build['cpu_ratio_to_venv']:>8.3f}"
            f"{build['cpu_ratio_to_stage']:>8.3f}{build['calls_per_s']:>10,.0f}"
            f"{build['listen_seconds'] * 1000:>7.0f}ms{build['idle_rss_bytes'] / 2**20:>8.1f}MB{build['processes']:>7}"
        )
    image = results["image"]
    lines.append("")
    lines.append(
        f"image: {image['bytes'] / 1e6:.1f} MB in {image['files']} files ({image['gzip_bytes'] / 1e6:.1f} MB "
        f"gzipped); dist/clientmcp: {results['single_bytes'] / 1e6:.1f} MB"
    )
    for name in ("image", "single"):
        ratio = builds[name]["idle_rss_bytes"] / builds["venv"]["idle_rss_bytes"]
        lines.append(f"{name}: idle RSS {ratio:.2f}x the virtualenv's (target at most 1.15)")
    lines.append(
        "targets: CPU per call at most 1.05x; image at most 30 MB; listening within 0.2 s (folder), 1 s (file)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.frozen", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke run: one round of 2 s")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each measured load run")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per build (the median is reported)")
    flags = parser.parse_args(argv)
    seconds, rounds = (2.0, 1) if flags.quick else (flags.seconds, flags.rounds)
    progress = Progress()
    try:
        results = run(seconds, rounds, progress)
    except BenchError as error:
        print(f"bench.frozen: FAILED: {error}", file=sys.stderr)
        return 1
    results["quick"] = flags.quick
    report.RESULTS.mkdir(exist_ok=True)
    stamp = results["when"].replace("-", "").replace(":", "")
    for path in (report.RESULTS / f"frozen-{stamp}.json", report.RESULTS / "frozen-latest.json"):
        path.write_text(json.dumps(results, indent=1) + "\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
