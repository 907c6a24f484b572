"""The bench's scenarios: real processes on pinned cores, measured from outside.

The method is docs/benchmarks.md's (Method). In short: each server is pinned to one CPU, wrk,
the apps and this process to another; `wrk -t1 -c64` posts a `tools/call` of `echo` (the
headers of `bench/wrk/legacy.lua` or `modern.lua`), checked in a warm-up before every
measured run; the loads a ratio compares run one after the other, in the opposite order
every other round. CPU per call is the server process's user + system CPU over the
measured run / calls answered. Each round also reads /proc/stat before and after: the
share of its two cores that went to processes the bench did not start (`other_share`). A
round above `OTHER_LIMIT_PCT` is redone up to `RETRIES` times, then kept as `disturbed`.
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.machinery
import json
import os
import platform
import secrets
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from bench import instructions
from clientmcp_fast.core.tokens import mint

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
BUILD = BENCH / "_build"
WRK_DIR = BENCH / "wrk"
HOST = "127.0.0.1"
AGENTS = 64
CLIENT_ID = "bench"

CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}'
MODERN_CALL = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},'
    b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
)
INITIALIZE = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}'
)


class BenchError(Exception):
    """The bench cannot go on: the message says what failed."""


@dataclass(frozen=True)
class Plan:
    """How long and how big: the full run, or `--quick` for CI."""

    seconds: float  # each measured load run
    warmup: float  # the checked warm-up before each
    rounds: int
    clients: int  # idle clients, figures 3 and 4
    quiet_seconds: float
    ping_seconds: float


FULL = Plan(seconds=10, warmup=2, rounds=3, clients=10_000, quiet_seconds=10, ping_seconds=15)
QUICK = Plan(seconds=2, warmup=1, rounds=1, clients=1_000, quiet_seconds=1, ping_seconds=4)


class Progress:
    """One line per step on stderr, with the time since the start."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def __call__(self, text: str) -> None:
        print(f"[bench {time.monotonic() - self.start:6.1f}s] {text}", file=sys.stderr, flush=True)


# -- processes --------------------------------------------------------------------------


def cpu_plan() -> tuple[list[int], list[int]]:
    """(server CPUs, load CPUs): the first two CPUs this process may use, or no pinning."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return [], []
    return [allowed[0]], [allowed[1]]


def pinned(argv: list[str], cpus: list[int]) -> tuple[list[str], object]:
    """`argv` run on `cpus`: through taskset when present, else by setting the affinity after fork."""
    if not cpus:
        return argv, None
    if shutil.which("taskset"):
        return ["taskset", "-c", ",".join(map(str, cpus))] + argv, None
    return argv, lambda: os.sched_setaffinity(0, cpus)


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def build_dir() -> Path:
    """bench/_build, made on first use and kept out of git."""
    (BUILD / "logs").mkdir(parents=True, exist_ok=True)
    (BUILD / ".gitignore").write_text("*\n")
    return BUILD


# A round whose cores went more than this to other processes is redone, then marked.
OTHER_LIMIT_PCT = 10.0
RETRIES = 2


def proc_stat() -> dict[str, list[int]]:
    """/proc/stat's CPU lines: jiffies by field for "cpu" (all CPUs) and each "cpuN"."""
    lines = Path("/proc/stat").read_text().splitlines()
    return {
        fields[0]: [int(x) for x in fields[1:]] for fields in map(str.split, lines) if fields[0][:3] == "cpu"
    }


def other_share(
    before: dict[str, list[int]], after: dict[str, list[int]], ours_seconds: float, cpus: list[int], hz: int
) -> float:
    """The share (0-1) of `cpus` (every CPU if empty) that went to other processes between two `proc_stat()`s."""
    total = busy = 0
    for name in [f"cpu{cpu}" for cpu in cpus] or ["cpu"]:
        # user nice system idle iowait irq softirq steal; guest time is inside user already.
        # Steal counts as busy: the hypervisor gave our core to another machine.
        delta = [b - a for a, b in zip(before[name][:8], after[name][:8])]
        total += sum(delta)
        busy += sum(delta) - delta[3] - delta[4]
    if total <= 0:
        return 0.0
    return min(1.0, max(0.0, busy - ours_seconds * hz) / total)


def tree_cpu_seconds(pid: int) -> float:
    """User + system seconds of a process and its descendants, ended ones included."""
    try:
        top = psutil.Process(pid)
        processes = [top, *top.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += sum(process.cpu_times()[:4])  # user, system and those of its ended children
    return total


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class Fleet:
    """Every process the bench starts, with stderr logged under bench/_build/logs; all stopped at the end."""

    def __init__(self) -> None:
        self.processes: dict[str, subprocess.Popen] = {}
        self.logs = build_dir() / "logs"

    def start(
        self, name: str, argv: list[str], cpus: list[int], env: dict[str, str], **kwargs
    ) -> subprocess.Popen:
        argv, preexec = pinned(argv, cpus)
        with open(self.logs / f"{name}.log", "wb") as log:
            process = subprocess.Popen(
                argv,
                env=env,
                cwd=ROOT,
                stderr=log,
                preexec_fn=preexec,  # noqa: PLW1509 (this process runs no thread)
                start_new_session=True,
                **kwargs,
            )
        self.processes[name] = process
        return process

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.logs / f"{name}.log"
        text = path.read_text(errors="replace").strip().splitlines()[-lines:] if path.exists() else []
        return "\n".join(f"    {line}" for line in text) or "    (empty log)"

    def stop(self, name: str) -> None:
        process = self.processes.pop(name, None)
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def cpu_seconds(self) -> float:
        """CPU seconds of every process started and still running, with their descendants, and of this one."""
        own = psutil.Process().cpu_times()  # not its ended children: wrk's time is counted from wait4
        return own.user + own.system + sum(tree_cpu_seconds(p.pid) for p in self.processes.values())

    def stop_all(self) -> None:
        for name in list(self.processes):
            self.stop(name)


def read_line(process: subprocess.Popen, timeout: float, what: str) -> str:
    """The next line `process` prints, within `timeout` seconds."""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise BenchError(f"{what}: nothing after {timeout:g} s")
    line = process.stdout.readline().decode().strip()
    if not line:
        raise BenchError(f"{what}: the process ended (exit status {process.wait()})")
    return line


def http_request(port: int, method: str, path: str, headers: dict[str, str], body: bytes | None = None):
    """(status, headers, body) of one request on a fresh connection."""
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def wait_healthy(fleet: Fleet, name: str, port: int, path: str, timeout: float = 60) -> None:
    """Poll `path` until it answers 200 (any status for the SDK's `/`)."""
    give_up = time.monotonic() + timeout
    process = fleet.processes[name]
    while time.monotonic() < give_up:
        if process.poll() is not None:
            raise BenchError(f"{name} exited with status {process.returncode}:\n{fleet.log_tail(name)}")
        try:
            status, _, _ = http_request(port, "GET", path, {})
            if path != "/healthz" or status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise BenchError(f"{name} did not answer on port {port} within {timeout:g} s:\n{fleet.log_tail(name)}")


# -- the app ----------------------------------------------------------------------------


def build_app(progress: Progress):
    """Start compiling bench/app.pyx into bench/_build (cached until the source changes).

    Returns a function that waits for the build and gives the directory to import from,
    so that the compiler runs while the servers start.
    """
    source = BENCH / "app.pyx"
    built = BUILD / f"bench_app{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    if built.exists() and built.stat().st_mtime >= source.stat().st_mtime:
        return lambda: BUILD
    progress("compiling bench/app.pyx with Cython (once)")
    build_dir()
    script = (
        "import sys\n"
        "from Cython.Build import cythonize\n"
        "from setuptools import Distribution, Extension\n"
        "source, out = sys.argv[1], sys.argv[2]\n"
        "modules = cythonize([Extension('bench_app', [source])], build_dir=out, quiet=True)\n"
        "command = Distribution({'ext_modules': modules}).get_command_obj('build_ext')\n"
        "command.build_lib, command.build_temp = out, out + '/tmp'\n"
        "command.ensure_finalized()\n"
        "command.run()\n"
    )
    compiler = subprocess.Popen(
        [sys.executable, "-c", script, str(source), str(BUILD)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def wait() -> Path:
        output, _ = compiler.communicate()
        if compiler.returncode != 0 or not built.exists():
            raise BenchError(
                "could not compile bench/app.pyx (is the bench extra installed? pip install -e '.[test,bench]'):\n"
                + output[-3000:]
            )
        return BUILD

    return wait


@dataclass
class Server:
    """A server under load: a bridge (with its app) or the SDK's server."""

    name: str
    port: int
    process: psutil.Process
    app: psutil.Process | None = None
    token: str = ""
    session: str = ""


def bridge_env(secret: str, pure: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLIENTMCP_")}
    env["CLIENTMCP_SECRET"] = secret
    if pure:
        env["CLIENTMCP_NO_EXTENSIONS"] = "1"
    return env


# The virtualenv's bridge; bench/frozen.py passes the frozen builds' command lines instead.
INSTALLED = (sys.executable, "-m", "clientmcp_fast")


def start_bridge(
    fleet: Fleet,
    name: str,
    secret: str,
    pure: bool,
    cpus: list[int],
    *flags: str,
    command: tuple[str, ...] = INSTALLED,
) -> Server:
    port = free_port()
    argv = [
        *command,
        "serve",
        "--host",
        HOST,
        "--port",
        str(port),
        "--log",
        "warn",
        # wrk's 64 connections share one agent token at tens of thousands of calls a second:
        # the per-token limits (docs/configuration.md, Agent limits) would refuse most of them.
        "--agent-rate",
        "0",
        "--agent-max-calls",
        "0",
    ]
    process = fleet.start(name, argv + list(flags), cpus, bridge_env(secret, pure))
    return Server(name, port, psutil.Process(process.pid))


def start_floor(fleet: Fleet, name: str, mode: str, cpus: list[int]) -> Server:
    """bench/floor.py in `mode` (--http or --pong), listening."""
    port = free_port()
    argv = [sys.executable, "-m", "bench.floor", mode, str(port)]
    process = fleet.start(name, argv, cpus, dict(os.environ), stdout=subprocess.PIPE)
    line = read_line(process, 60, name)
    if line != "up":
        raise BenchError(f"{name} said {line!r}:\n{fleet.log_tail(name)}")
    return Server(name, port, psutil.Process(process.pid))


def start_app(fleet: Fleet, server: Server, secret: str, build: Path, cpus: list[int]) -> None:
    """Connect the compiled app to `server` and wait until it is registered."""
    now = time.time()
    token = mint(secret.encode(), "client", CLIENT_ID, 3600, now)
    code = (
        f"import sys; sys.path.insert(0, {str(build)!r}); import bench_app; "
        "bench_app.run(sys.argv[1], int(sys.argv[2]), sys.argv[3])"
    )
    name = f"{server.name}-app"
    process = fleet.start(
        name,
        [sys.executable, "-c", code, HOST, str(server.port), token],
        cpus,
        dict(os.environ),
        stdout=subprocess.PIPE,
    )
    try:
        line = read_line(process, 60, name)
    except BenchError as error:
        raise BenchError(f"{error}\n{fleet.log_tail(name)}") from None
    if line != "ready":
        raise BenchError(f"{name} said {line!r}:\n{fleet.log_tail(name)}")
    server.app = psutil.Process(process.pid)
    server.token = mint(secret.encode(), "agent", CLIENT_ID, 3600, now)


def speedups_of(secret: str, pure: bool) -> str:
    """Which `_speedups` a bridge started with this environment runs."""
    code = "import clientmcp_fast.speedups as s; print(s.IMPLEMENTATION)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=bridge_env(secret, pure),
        check=False,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() or "unknown"


# -- checks and load --------------------------------------------------------------------


def agent_headers(server: Server, modern: bool) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {server.token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    if modern:
        headers.update({"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"})
    else:
        headers.update({"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": server.session})
    return headers


def check_calls(server: Server, modern_too: bool) -> None:
    """One initialize (for the legacy session) and one tools/call per era, answered as the app answers."""
    headers = agent_headers(server, False)
    del headers["Mcp-Session-Id"], headers["MCP-Protocol-Version"]
    status, reply_headers, body = http_request(server.port, "POST", "/mcp", headers, INITIALIZE)
    if status != 200:
        raise BenchError(f"{server.name}: initialize answered {status}: {body[:300]!r}")
    session = {k.lower(): v for k, v in reply_headers.items()}.get("mcp-session-id")
    # The SDK's stateless server issues no session; it ignores the header, as the bridge would.
    server.session = session or secrets.token_hex(16)
    for modern in (False, True) if modern_too else (False,):
        status, _, body = http_request(
            server.port, "POST", "/mcp", agent_headers(server, modern), MODERN_CALL if modern else CALL
        )
        try:
            result = json.loads(body)["result"]
            ok = status == 200 and result["content"][0]["text"] == "hi" and not result.get("isError")
        except (ValueError, KeyError, IndexError, TypeError):
            ok = False
        if not ok:
            era = "2026-07-28" if modern else "legacy"
            raise BenchError(f"{server.name}: the {era} tools/call check failed: {status} {body[:300]!r}")


def run_wrk(
    server: Server,
    script: str,
    seconds: float,
    check: bool,
    cpus: list[int],
    connections: int = AGENTS,
    delay_ms: int = 0,
) -> dict:
    """One wrk run against `server` with `connections` agents, each pausing `delay_ms` before a call: its figures."""
    if shutil.which("wrk") is None:
        raise BenchError(
            "wrk is not installed: apt-get install -y wrk (Debian/Ubuntu), or build it from source"
        )
    argv = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{seconds:g}s",
        "--timeout",
        "10s",
        "--latency",
        "-s",
        str(WRK_DIR / script),
    ]
    argv.append(f"http://{HOST}:{server.port}/mcp")
    env = dict(os.environ, BENCH_TOKEN=server.token, BENCH_SESSION=server.session, BENCH_WRK_DIR=str(WRK_DIR))
    env["BENCH_CHECK"] = "1" if check else "0"
    env["BENCH_DELAY_MS"] = str(delay_ms)
    argv, preexec = pinned(argv, cpus)
    process = subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=preexec,  # noqa: PLW1509 (this process runs no thread)
    )
    out = process.stdout.read().decode()
    err = process.stderr.read().decode()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    lines = [line for line in out.splitlines() if line.startswith("BENCH ")]
    if process.returncode != 0 or not lines:
        raise BenchError(f"wrk failed (exit {process.returncode}):\n{out[-2000:]}{err[-2000:]}")
    summary = json.loads(lines[-1][6:])
    summary["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    errors = {kind: count for kind, count in summary["errors"].items() if count}
    what = f"{server.name} ({script})"
    if errors:
        raise BenchError(f"{what}: wrk saw errors {errors} in {summary['requests']} calls")
    if check and (summary["bad"] or summary["checked"] == 0):
        raise BenchError(
            f"{what}: {summary['bad']} of {summary['checked']} answers were not a result; first: {summary['first_bad']}"
        )
    if summary["requests"] == 0:
        raise BenchError(f"{what}: no call was answered")
    return summary


def measured_run(
    fleet: Fleet, server: Server, script: str, plan: Plan, cpus: tuple[list[int], list[int]]
) -> dict:
    """A checked warm-up, then the measured run; the figures of that run."""
    server_cpus, load_cpus = cpus
    run_wrk(server, script, plan.warmup, True, load_cpus)
    ours_before = fleet.cpu_seconds()
    stat_before = proc_stat()
    # One reading for both figures: the whole and the kernel's part (system calls and the
    # network stack they run).
    server_before = server.process.cpu_times()
    app_before = cpu_seconds(server.app) if server.app else 0.0
    wall_before = time.monotonic()
    summary = run_wrk(server, script, plan.seconds, False, load_cpus)
    wall = time.monotonic() - wall_before
    server_after = server.process.cpu_times()
    app_cpu = (cpu_seconds(server.app) - app_before) if server.app else 0.0
    stat_after = proc_stat()
    ours = fleet.cpu_seconds() - ours_before + summary["cpu_seconds"]
    other = other_share(stat_before, stat_after, ours, server_cpus + load_cpus, os.sysconf("SC_CLK_TCK"))
    server_system = server_after.system - server_before.system
    server_cpu = server_after.user - server_before.user + server_system
    calls = summary["requests"]
    latency = summary["latency_us"]
    return {
        "calls": calls,
        "calls_per_s": calls / (summary["duration_us"] / 1e6),
        "cpu_us_per_call": server_cpu / calls * 1e6,
        # The kernel's part: on loopback mostly the sockets' work, which the floor pays too.
        "system_us_per_call": server_system / calls * 1e6,
        "p50_ms": latency["p50"] / 1000,
        "p99_ms": latency["p99"] / 1000,
        "p999_ms": latency["p999"] / 1000,
        # Busy share of each core: near 100 % on the load core means wrk + app set the pace.
        "server_core_pct": server_cpu / wall * 100,
        "load_core_pct": (summary["cpu_seconds"] + app_cpu) / wall * 100,
        "other_pct": other * 100,
        "wrk_us_per_call": summary["cpu_seconds"] / calls * 1e6,
        "app_us_per_call": app_cpu / calls * 1e6,
    }


def load_round(
    fleet: Fleet, server: Server, script: str, plan: Plan, cpus: tuple[list[int], list[int]]
) -> dict:
    """One round of a load, redone while other processes took too much of its cores; the least disturbed try."""
    tries = []
    while len(tries) <= RETRIES and (not tries or tries[-1]["other_pct"] > OTHER_LIMIT_PCT):
        tries.append(measured_run(fleet, server, script, plan, cpus))
    kept = min(tries, key=lambda figures: figures["other_pct"])
    return dict(kept, tries=len(tries), disturbed=kept["other_pct"] > OTHER_LIMIT_PCT)


def median_of(rounds: list[dict]) -> dict:
    """Each figure's median over the rounds; `disturbed`, the number of disturbed rounds."""
    median = {key: statistics.median(r[key] for r in rounds) for key in rounds[0] if key != "disturbed"}
    return dict(median, disturbed=sum(r["disturbed"] for r in rounds))


# -- idle clients -----------------------------------------------------------------------


def connect_idle(
    fleet: Fleet, server: Server, plan: Plan, secret: str, cpus: list[int]
) -> tuple[subprocess.Popen, float]:
    """`plan.clients` registered idle clients on `server`; (their process, seconds it took)."""
    argv = [sys.executable, "-m", "bench.idle", "--port", str(server.port), "--clients", str(plan.clients)]
    name = f"{server.name}-clients"
    started = time.monotonic()
    idle = fleet.start(
        name,
        argv,
        cpus,
        dict(os.environ, CLIENTMCP_SECRET=secret),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        line = read_line(idle, 60 + plan.clients / 50, name)
    except BenchError as error:
        raise BenchError(
            f"{error}\n{fleet.log_tail(name)}\n  {server.name}:\n{fleet.log_tail(server.name)}"
        ) from None
    if line != f"connected {plan.clients}":
        raise BenchError(f"{name} said {line!r}")
    return idle, time.monotonic() - started


def ping_window(server: Server, idle: subprocess.Popen, seconds: float) -> tuple[float, int]:
    """`server`'s CPU (% of one core) while the idle clients ping for `seconds`; and the pings sent."""
    before, wall = cpu_seconds(server.process), time.monotonic()
    idle.stdin.write(f"ping {seconds:g}\n".encode())
    idle.stdin.flush()
    reply = read_line(idle, seconds + 30, f"{server.name} clients pinging").split()
    wall = time.monotonic() - wall
    pct = (cpu_seconds(server.process) - before) / wall * 100
    if reply[0] != "pinged" or int(reply[2]) != int(reply[1]) or int(reply[1]) == 0:
        raise BenchError(f"{server.name}: {reply[1]} pings sent, {reply[2]} pongs received")
    return pct, int(reply[1])


def idle_figures(
    fleet: Fleet, plan: Plan, secret: str, cpus: tuple[list[int], list[int]], progress: Progress
) -> dict:
    server_cpus, load_cpus = cpus
    # No client may be dropped as idle while the bench works: the timeout is not a memory matter.
    bridge = start_bridge(fleet, "idle-bridge", secret, False, server_cpus, "--app-idle-timeout", "3600")
    wait_healthy(fleet, bridge.name, bridge.port, "/healthz")
    time.sleep(1.0)
    rss_before = bridge.process.memory_info().rss
    progress(
        f"idle bridge RSS with no client: {rss_before / 2**20:.1f} MB; connecting {plan.clients:,} idle clients"
    )
    idle, connect_seconds = connect_idle(fleet, bridge, plan, secret, load_cpus)
    time.sleep(2.0)
    rss_after = bridge.process.memory_info().rss
    per_client = (rss_after - rss_before) / plan.clients
    progress(
        f"{plan.clients:,} clients registered in {connect_seconds:.1f} s; {per_client / 1024:.2f} KB each"
    )

    before = cpu_seconds(bridge.process)
    time.sleep(plan.quiet_seconds)
    quiet_pct = (cpu_seconds(bridge.process) - before) / plan.quiet_seconds * 100
    ping_pct, pings = ping_window(bridge, idle, plan.ping_seconds)
    progress(
        f"bridge CPU: {quiet_pct:.2f} % quiet, {ping_pct:.2f} % with {pings} pings in {plan.ping_seconds:g} s"
    )
    idle.stdin.close()
    fleet.stop_all()

    floor = start_floor(fleet, "pong-floor", "--pong", server_cpus)
    time.sleep(1.0)
    floor_rss_before = floor.process.memory_info().rss
    idle, _ = connect_idle(fleet, floor, plan, secret, load_cpus)
    time.sleep(2.0)
    floor_per_client = (floor.process.memory_info().rss - floor_rss_before) / plan.clients
    progress(
        f"floor (bare uvloop pong server) RSS: {floor_rss_before / 2**20:.1f} MB idle, "
        f"{floor_per_client / 1024:.2f} KB per client"
    )
    floor_pct, floor_pings = ping_window(floor, idle, plan.ping_seconds)
    progress(f"floor (bare uvloop pong server) CPU: {floor_pct:.2f} % with {floor_pings} pings")
    idle.stdin.close()
    fleet.stop_all()
    return {
        "clients": plan.clients,
        "idle_rss_bytes": rss_before,
        "rss_with_clients_bytes": rss_after,
        "bytes_per_client": per_client,
        "connect_seconds": connect_seconds,
        "quiet_cpu_pct": quiet_pct,
        "ping_cpu_pct": ping_pct,
        "pings": pings,
        "pings_per_s": plan.clients / 25.0,
        "floor_ping_cpu_pct": floor_pct,
        "floor_idle_rss_bytes": floor_rss_before,
        "floor_bytes_per_client": floor_per_client,
    }


# -- the whole run ----------------------------------------------------------------------


def machine_info(secret: str) -> dict:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from importlib.metadata import version

    import mcp  # noqa: F401 (its version below)
    import uvloop

    wrk = subprocess.run(["wrk", "--version"], check=False, capture_output=True, text=True)
    return {
        "cpu_model": model,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "uvloop": uvloop.__version__,
        "mcp_sdk": version("mcp"),
        "wrk": (wrk.stdout + wrk.stderr).splitlines()[0].strip() if (wrk.stdout + wrk.stderr) else "unknown",
        "speedups": speedups_of(secret, False),
        "speedups_with_no_extensions": speedups_of(secret, True),
        "load_average_at_start": list(os.getloadavg()),
    }


def count_work(progress: Progress) -> dict | None:
    """Callgrind's count of the bridge's and the minimal bridge's own work per legacy call, or None without valgrind."""
    if shutil.which("valgrind") is None:
        progress("valgrind is not installed: no instruction count (apt-get install -y valgrind)")
        return None
    counts = {}
    for era in ("legacy", "minimal"):
        progress(f"counting the {era} round trip's instructions and simulated cache misses with callgrind")
        counts[era] = instructions.bridge_share(era, 1000, cache=True)
    return counts


def run_idle(plan: Plan, progress: Progress) -> dict:
    """Figures 3 and 4 alone (`python -m bench --idle`): the idle bridge and pong floor, pinned as in `run`."""
    server_cpus, load_cpus = cpu_plan()
    allowed = os.sched_getaffinity(0)
    if server_cpus:
        os.sched_setaffinity(0, load_cpus)
    fleet = Fleet()
    try:
        return idle_figures(fleet, plan, secrets.token_hex(32), (server_cpus, load_cpus), progress)
    finally:
        fleet.stop_all()
        os.sched_setaffinity(0, allowed)


def run(plan: Plan, progress: Progress, quick: bool, with_sdk: bool = True, count: bool = True) -> dict:
    """Every figure, measured in one run; the raw numbers for `report`.

    With `count`, the bridge's work per call is also counted with callgrind (after the
    timed loads, so it never shares the machine with them).
    """
    if shutil.which("wrk") is None:
        raise BenchError(
            "wrk is not installed: apt-get install -y wrk (Debian/Ubuntu), or build it from source"
        )
    server_cpus, load_cpus = cpu_plan()
    allowed = os.sched_getaffinity(0)
    if not server_cpus:
        progress("fewer than 2 CPUs available: nothing is pinned, figures are not comparable")
    else:
        os.sched_setaffinity(0, load_cpus)
    secret = secrets.token_hex(32)
    machine = machine_info(secret)
    if machine["speedups_with_no_extensions"] != "pure":
        raise BenchError("CLIENTMCP_NO_EXTENSIONS=1 did not select the pure twins")
    if machine["speedups"] != "compiled":
        progress(
            f"warning: the compiled _speedups are not importable ({machine['speedups']}): "
            "figure 6 compares pure with pure"
        )
    wait_for_build = build_app(progress)
    fleet = Fleet()
    try:
        progress(
            f"starting the bridges (compiled, pure) on CPU {server_cpus}, apps and wrk on CPU {load_cpus}"
        )
        compiled = start_bridge(fleet, "bridge", secret, False, server_cpus)
        pure = start_bridge(fleet, "bridge-pure", secret, True, server_cpus)
        sdk = None
        if with_sdk:
            port = free_port()
            argv = [sys.executable, "-m", "bench.sdk_server", "--port", str(port)]
            process = fleet.start("sdk", argv, server_cpus, dict(os.environ))
            sdk = Server("mcp-sdk", port, psutil.Process(process.pid))
        floor = start_floor(fleet, "http-floor", "--http", server_cpus)
        minimal = start_floor(fleet, "minimal-bridge", "--bridge", server_cpus)
        build = wait_for_build()
        for server in (compiled, pure):
            wait_healthy(fleet, server.name, server.port, "/healthz")
            start_app(fleet, server, secret, build, load_cpus)
            check_calls(server, modern_too=True)
        if sdk is not None:
            wait_healthy(fleet, "sdk", sdk.port, "/")
            check_calls(sdk, modern_too=False)
        check_calls(floor, modern_too=False)
        start_app(fleet, minimal, secret, build, load_cpus)
        check_calls(minimal, modern_too=False)
        progress("every server answered a checked tools/call")

        # The paired ratios (bridge / minimal bridge, pure / compiled) compare neighbours.
        scenarios = [
            ("floor_bridge", minimal, "legacy.lua"),
            ("legacy", compiled, "legacy.lua"),
            ("pure_legacy", pure, "legacy.lua"),
            ("modern", compiled, "modern.lua"),
            ("floor_http", floor, "legacy.lua"),
        ]
        if sdk is not None:
            scenarios.append(("sdk_legacy", sdk, "legacy.lua"))
        rounds: dict[str, list[dict]] = {key: [] for key, _, _ in scenarios}
        for number in range(1, plan.rounds + 1):
            for key, server, script in scenarios if number % 2 else scenarios[::-1]:
                result = load_round(fleet, server, script, plan, (server_cpus, load_cpus))
                rounds[key].append(result)
                progress(
                    f"round {number}/{plan.rounds} {key:<12} {result['calls_per_s']:>9,.0f} calls/s  "
                    f"{result['cpu_us_per_call']:7.1f} µs CPU/call  p50 {result['p50_ms']:.2f} ms  "
                    f"p99 {result['p99_ms']:.2f} ms  cores: server {result['server_core_pct']:.0f} %, "
                    f"load {result['load_core_pct']:.0f} %, other processes {result['other_pct']:.0f} % "
                    f"of both ({result['tries']} {'try' if result['tries'] == 1 else 'tries'})"
                    + (" DISTURBED" if result["disturbed"] else "")
                )
        fleet.stop_all()
        idle = idle_figures(fleet, plan, secret, (server_cpus, load_cpus), progress)
    finally:
        fleet.stop_all()
    os.sched_setaffinity(0, allowed)  # the counts' two runs side by side, on every core
    counts = count_work(progress) if count else None
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "quick": quick,
        "plan": asdict(plan),
        "machine": machine,
        "pinning": {"server_cpus": server_cpus, "load_cpus": load_cpus},
        "load": {key: {"median": median_of(results), "rounds": results} for key, results in rounds.items()},
        "idle": idle,
        "count": counts,
    }
