"""The bench's output: one table beside the published Rust numbers, a JSON file and a PNG chart.

The Rust figures are those the Rust bridge's product page publishes under "Measured" (the
column "Rust (published)" of docs/benchmarks.md), on 2 shared vCPUs with the load generator
on the same machine; the targets are those of docs/benchmarks.md. Figures 5 and 6
are ratios measured in the same run, never against numbers from another run. The
"floor" rows (bench/floor.py) show what a server doing next to nothing costs on this
machine in the same run, so that a noisy or slow machine can be told from a slow bridge;
the "minimal bridge" rows do the same for the whole round trip through an app: they are
what the targets' own reference (9.3-9.6 µs per call on the machine they were set on) costs
on this one (docs/benchmarks.md, Method).
The "work per call" rows (full runs, with valgrind) compare the two bridges by callgrind's
count, which the machine's noise cannot move (`python -m bench.instructions`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
FULL_CLIENTS = 10_000
REFERENCE_COLORS = {"floor": "#718096", "minimal": "#4a5568"}


def _row(
    figure: int, label: str, value: float | None, text: str, rust: str = "—", target: str = "—", met=None
) -> dict:
    return {
        "figure": figure,
        "label": label,
        "value": value,
        "text": text,
        "rust": rust,
        "target": target,
        "met": met,
    }


def paired_ratio(results: dict, numerator: str, denominator: str, metric: str) -> float:
    """The median over rounds of numerator / denominator, each pair measured minutes apart at most."""
    pairs = zip(results["load"][numerator]["rounds"], results["load"][denominator]["rounds"])
    ratios = sorted(a[metric] / b[metric] for a, b in pairs)
    middle = len(ratios) // 2
    return ratios[middle] if len(ratios) % 2 else (ratios[middle - 1] + ratios[middle]) / 2


def figures(results: dict) -> list[dict]:
    """The table's rows, derived from `run.run()`'s raw numbers."""
    load = {key: entry["median"] for key, entry in results["load"].items()}
    legacy, modern, pure, floor = load["legacy"], load["modern"], load["pure_legacy"], load["floor_http"]
    idle = results["idle"]
    n = idle["clients"]
    kb = idle["bytes_per_client"] / 1024
    mb = idle["idle_rss_bytes"] / 2**20
    ping = idle["ping_cpu_pct"]
    rows = [
        _row(
            1,
            "bridge CPU per tools/call, legacy",
            legacy["cpu_us_per_call"],
            f"{legacy['cpu_us_per_call']:.1f} µs",
            "~11 µs",
            "≤ 11 µs",
            legacy["cpu_us_per_call"] <= 11,
        ),
        _row(
            1,
            "bridge CPU per tools/call, 2026-07-28",
            modern["cpu_us_per_call"],
            f"{modern['cpu_us_per_call']:.1f} µs",
            "~14 µs",
            "≤ 13 µs",
            modern["cpu_us_per_call"] <= 13,
        ),
        _row(
            1,
            "floor: bare uvloop + httptools, fixed answer, same load",
            floor["cpu_us_per_call"],
            f"{floor['cpu_us_per_call']:.1f} µs",
        ),
    ]
    minimal = load.get("floor_bridge")
    if minimal is not None:  # runs saved before the minimal bridge have no such rows
        over = paired_ratio(results, "legacy", "floor_bridge", "cpu_us_per_call")
        rows += [
            _row(
                1,
                "floor: minimal bridge (batched writes, no checks), same load",
                minimal["cpu_us_per_call"],
                f"{minimal['cpu_us_per_call']:.1f} µs",
            ),
            _row(1, "CPU per call, bridge / minimal bridge (median of rounds)", over, f"{over:.2f}"),
        ]
    rows += work_rows(results.get("count"))
    rows += [
        _row(
            2,
            "calls/s legacy, 64 agents → 1 app",
            legacy["calls_per_s"],
            f"{legacy['calls_per_s']:,.0f}",
            "86-93k",
            "≥ 90k",
            legacy["calls_per_s"] >= 90_000,
        ),
        _row(
            2,
            "latency legacy p50 / p99",
            legacy["p99_ms"],
            f"{legacy['p50_ms']:.2f} / {legacy['p99_ms']:.2f} ms",
            "p99 ≈ 1.9 ms",
            "p99 < 2 ms",
            legacy["p99_ms"] < 2,
        ),
        _row(
            2, "calls/s 2026-07-28, 64 agents → 1 app", modern["calls_per_s"], f"{modern['calls_per_s']:,.0f}"
        ),
        _row(
            2,
            "latency 2026-07-28 p50 / p99",
            modern["p99_ms"],
            f"{modern['p50_ms']:.2f} / {modern['p99_ms']:.2f} ms",
        ),
        _row(
            2, "floor: calls/s, bare uvloop + httptools", floor["calls_per_s"], f"{floor['calls_per_s']:,.0f}"
        ),
    ]
    if minimal is not None:
        rows.append(
            _row(
                2, "floor: calls/s, minimal bridge", minimal["calls_per_s"], f"{minimal['calls_per_s']:,.0f}"
            )
        )
    rows += [
        _row(
            3, f"memory per idle connected client (N={n:,})", kb, f"{kb:.2f} KB", "~11 KB", "≤ 3 KB", kb <= 3
        ),
        _row(3, "bridge RSS, idle, no client", mb, f"{mb:.1f} MB", "1.2 MB", "< 30 MB", mb < 30),
        _row(
            4,
            f"bridge CPU, {n:,} clients pinging every 25 s",
            ping,
            f"{ping:.2f} % of a core",
            "0",
            "≤ 1 % (N=10,000)",
            ping <= 1 if n == FULL_CLIENTS else None,
        ),
        _row(
            4,
            "floor: bare uvloop server answering the same pings",
            idle["floor_ping_cpu_pct"],
            f"{idle['floor_ping_cpu_pct']:.2f} % of a core",
        ),
        _row(
            4,
            f"bridge CPU, {n:,} clients quiet",
            idle["quiet_cpu_pct"],
            f"{idle['quiet_cpu_pct']:.2f} % of a core",
        ),
    ]
    sdk = load.get("sdk_legacy")
    if sdk is not None:
        speed = paired_ratio(results, "legacy", "sdk_legacy", "calls_per_s")
        cost = paired_ratio(results, "legacy", "sdk_legacy", "cpu_us_per_call")
        rows += [
            _row(5, "mcp SDK server, legacy: calls/s", sdk["calls_per_s"], f"{sdk['calls_per_s']:,.0f}"),
            _row(
                5,
                "mcp SDK server, legacy: CPU per call",
                sdk["cpu_us_per_call"],
                f"{sdk['cpu_us_per_call']:,.0f} µs",
            ),
            _row(5, "ours / mcp SDK: calls/s (median of rounds)", speed, f"{speed:.1f}×"),
            _row(5, "ours / mcp SDK: CPU per call (median of rounds)", cost, f"{cost:.3f}"),
        ]
    ratio = paired_ratio(results, "pure_legacy", "legacy", "cpu_us_per_call")
    rows += [
        _row(
            6,
            "pure-Python twins: CPU per call, legacy",
            pure["cpu_us_per_call"],
            f"{pure['cpu_us_per_call']:.1f} µs",
        ),
        _row(6, "CPU per call, pure / compiled (median of rounds)", ratio, f"{ratio:.2f}"),
    ]
    return rows


def work_rows(count: dict | None) -> list[dict]:
    """Figure 1's noise-free rows: callgrind's count of the work per legacy call, bridge and minimal bridge."""
    if not count:  # a quick run, no valgrind, or a run saved before counting
        return []
    bridge, minimal = count["legacy"], count["minimal"]
    work = bridge["Ir"] / minimal["Ir"]
    cycles = bridge["cycles"] / minimal["cycles"]
    return [
        _row(
            1,
            "work per call, bridge / minimal bridge: instructions (callgrind)",
            work,
            f"{bridge['Ir'] / 1000:.1f}k / {minimal['Ir'] / 1000:.1f}k = {work:.2f}",
        ),
        _row(
            1,
            "work per call, bridge / minimal bridge: cycles estimated from simulated cache misses",
            cycles,
            f"{bridge['cycles'] / 1000:.1f}k / {minimal['cycles'] / 1000:.1f}k = {cycles:.2f}",
        ),
    ]


def table(rows: list[dict]) -> str:
    """A Markdown table: figure, ours, Rust (published), target, met?"""
    header = ("#", "figure", "ours", "Rust (published)", "target", "met?")
    lines = [
        (
            str(r["figure"]),
            r["label"],
            r["text"],
            r["rust"],
            r["target"],
            {True: "yes", False: "NO", None: ""}[r["met"]],
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]

    def fmt(cells) -> str:
        return "| " + " | ".join(cell.ljust(width) for cell, width in zip(cells, widths)) + " |"

    return "\n".join([fmt(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(fmt, lines)])


def notes(results: dict) -> str:
    """What the table needs beside it: the machine, the cores, and which side set the pace."""
    machine = results["machine"]
    plan = results["plan"]
    kind = "quick" if results["quick"] else "full"
    pinning = results["pinning"]
    load_average = ", ".join(f"{x:.2f}" for x in machine["load_average_at_start"])
    lines = [
        (
            f"{kind} run {results['when']}: {plan['rounds']} round(s) of {plan['seconds']:g} s per load "
            "(median shown), "
            f"{plan['clients']:,} idle clients, ping window {plan['ping_seconds']:g} s"
        ),
        (
            f"machine: {machine['cpu_model']}, {machine['cpus']} CPUs, Python {machine['python']}, uvloop "
            f"{machine['uvloop']}, speedups {machine['speedups']}, mcp {machine['mcp_sdk']}, {machine['wrk']}"
        ),
        (
            f"pinning: servers on CPU {pinning['server_cpus']}, wrk + app on CPU {pinning['load_cpus']}; "
            f"load average at start {load_average}"
        ),
    ]
    for key, entry in results["load"].items():
        m = entry["median"]
        line = (
            f"{key}: server {m['cpu_us_per_call']:.1f} µs per call, {m['system_us_per_call']:.1f} µs of it in the "
            f"kernel; {m['server_core_pct']:.0f} % of its core (busy {m['server_core_total_pct']:.0f} % "
            f"in all), wrk + app {m['load_core_pct']:.0f} % of theirs (busy {m['load_core_total_pct']:.0f} % in all; "
            f"wrk {m['wrk_us_per_call']:.1f} µs + app {m['app_us_per_call']:.1f} µs per call)"
        )
        rounds = entry["rounds"]
        if len(rounds) > 1:
            # The machine is shared: how far the rounds spread says how far to trust the median.
            cpu = sorted(r["cpu_us_per_call"] for r in rounds)
            rate = sorted(r["calls_per_s"] for r in rounds)
            line += f"; rounds {cpu[0]:.1f}-{cpu[-1]:.1f} µs, {rate[0]:,.0f}-{rate[-1]:,.0f} calls/s"
        if m["load_core_pct"] >= 90:
            line += "; wrk + app saturated their core: calls/s is a lower bound for the server"
        foreign = max(
            m["server_core_total_pct"] - m["server_core_pct"], m["load_core_total_pct"] - m["load_core_pct"]
        )
        if foreign >= 15:
            line += f"; other processes took up to {foreign:.0f} % of a core: noisy"
        lines.append(line)
    return "\n".join(lines)


def chart(results: dict, rows: list[dict], path: Path) -> None:
    """Bars of ours beside Rust for the main figures, a dashed line at each target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    load = {key: entry["median"] for key, entry in results["load"].items()}
    idle = results["idle"]
    floor = load["floor_http"]
    minimal = load.get("floor_bridge")
    # The same load on this machine: the bare server, and the minimal bridge when measured.
    load_references = [("floor", floor["cpu_us_per_call"])]
    rate_references = [("floor", floor["calls_per_s"] / 1000)]
    if minimal is not None:
        load_references.append(("minimal", minimal["cpu_us_per_call"]))
        rate_references.append(("minimal", minimal["calls_per_s"] / 1000))
    # (title, ours, Rust, Rust's spread, target, the machine's references: (name, value) pairs)
    panels = [
        ("CPU per call, legacy (µs)", load["legacy"]["cpu_us_per_call"], 11, 0, 11, load_references),
        ("CPU per call, 2026-07-28 (µs)", load["modern"]["cpu_us_per_call"], 14, 0, 13, []),
        (
            "calls/s legacy (thousands)",
            load["legacy"]["calls_per_s"] / 1000,
            89.5,
            3.5,
            90,
            rate_references,
        ),
        ("p99 latency legacy (ms)", load["legacy"]["p99_ms"], 1.9, 0, 2, []),
        (f"KB per idle client (N={idle['clients']:,})", idle["bytes_per_client"] / 1024, 11, 0, 3, []),
        ("idle bridge RSS (MB)", idle["idle_rss_bytes"] / 2**20, 1.2, 0, 30, []),
        (
            f"CPU, {idle['clients']:,} pinging (% core)",
            idle["ping_cpu_pct"],
            0,
            0,
            1,
            [("floor", idle["floor_ping_cpu_pct"])],
        ),
    ]
    figure, axes = plt.subplots(2, 4, figsize=(16, 7.5))
    for ax, (title, ours, rust, spread, target, references) in zip(axes.flat, panels):
        names, values, errors = ["ours", "Rust"], [ours, rust], [0, spread]
        colors = ["#2b6cb0", "#a0aec0"]
        for name, value in references:
            names.append(name)
            values.append(value)
            errors.append(0)
            colors.append(REFERENCE_COLORS[name])
        bars = ax.bar(names, values, yerr=errors if any(errors) else None, color=colors, capsize=4)
        ax.axhline(target, color="#c53030", linestyle="--", linewidth=1, label=f"target {target:g}")
        ax.bar_label(bars, fmt="%.3g")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8, loc="upper right")
        ax.set_ylim(0, max(*values, target) * 1.3 or 1)
    last = axes.flat[7]
    shown = [
        (name, key, color)
        for name, key, color in (
            ("floor", "floor_http", REFERENCE_COLORS["floor"]),
            ("minimal", "floor_bridge", REFERENCE_COLORS["minimal"]),
            ("compiled", "legacy", "#2b6cb0"),
            ("pure", "pure_legacy", "#63b3ed"),
            ("mcp SDK", "sdk_legacy", "#ed8936"),
        )
        if key in load
    ]
    names = [name for name, _, _ in shown]
    values = [load[key]["calls_per_s"] for _, key, _ in shown]
    bars = last.bar(names, values, color=[color for _, _, color in shown])
    last.bar_label(bars, fmt="%.0f")
    last.set_yscale("log")
    last.set_ylim(top=max(values) * 4)
    last.set_title("calls/s, same legacy load, same run (log)", fontsize=10)
    kind = "quick" if results["quick"] else "full"
    figure.suptitle(f"clientmcp_fast bench ({kind}, {results['when']}) beside the published Rust numbers")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def save(results: dict, rows: list[dict]) -> list[Path]:
    """results/<timestamp>.json, results/latest.json and results/latest.png."""
    RESULTS.mkdir(exist_ok=True)
    document = dict(results, figures=rows)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    paths = [RESULTS / f"{stamp}.json", RESULTS / "latest.json", RESULTS / "latest.png"]
    paths[0].write_text(text)
    paths[1].write_text(text)
    chart(results, rows, paths[2])
    return paths
