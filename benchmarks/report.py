"""Results on disk: JSON, a Markdown table and a PNG chart per workload; the targets table
(each ratio measured in the same run, its target, pass or miss); the machine.

Layer: benchmark output. Reads rows, never measures. matplotlib is imported inside
``write_chart``; without it the charts are skipped, not the run.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata

from benchmarks.common import BATCH_SIZES, BODY_SIZES, OK, Row

log = logging.getLogger(__name__)

README_START = "<!-- results:start -->"
README_END = "<!-- results:end -->"


# --- the machine ------------------------------------------------------------------------


def machine_info(path: str) -> dict[str, str]:
    """nproc, RAM, CPU, the disk under ``path``, Python and package versions."""
    import sqlite3

    info: dict[str, str] = {
        "cpus (nproc)": str(os.cpu_count()),
        "cpu": _cpu_model(),
        "ram": f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB",
        "disk": _disk(path),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
    }
    for package in ("rocketstore", "lmdb", "diskcache", "persist-queue", "matplotlib"):
        try:
            info[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            info[package] = "not installed"
    return info


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _disk(path: str) -> str:
    """Device, filesystem and (for a block device) whether it is rotational."""
    path = os.path.realpath(path)
    best = ("", "?", "?")
    try:
        with open("/proc/mounts") as f:
            for line in f:
                device, mount, fstype = line.split()[:3]
                inside = path == mount or path.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best[0]):
                    best = (mount, device, fstype)
    except OSError:
        return "unknown"
    mount, device, fstype = best
    kind = ""
    name = os.path.basename(device)
    base = re.sub(r"(p?\d+)$", "", name) if not name.startswith("nvme") else name.split("p")[0]
    for candidate in (name, base):
        flag = f"/sys/block/{candidate}/queue/rotational"
        if os.path.exists(flag):
            with open(flag) as f:
                kind = "rotational" if f.read().strip() == "1" else "non-rotational"
            break
    stat = os.statvfs(path)
    size = stat.f_blocks * stat.f_frsize / 2**30
    return f"{device} ({fstype}, {kind or 'kind unknown'}, {size:.0f} GiB) mounted on {mount}"


# --- tables -----------------------------------------------------------------------------


def fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _cell(r: Row) -> str:
    assert r.stat is not None
    s = r.stat
    if len(s.values) == 1:
        return fmt(s.median)
    return f"{fmt(s.median)} ({fmt(s.min)}–{fmt(s.max)})"


def markdown_tables(rows: list[Row]) -> str:
    """One pivot table per metric: cases down, systems across, median (min–max)."""
    out: list[str] = []
    measured = [r for r in rows if r.status == OK]
    metrics = list(dict.fromkeys((r.metric, r.unit) for r in measured))
    for metric, unit in metrics:
        chosen = [r for r in measured if (r.metric, r.unit) == (metric, unit)]
        systems = list(dict.fromkeys(r.system for r in chosen))
        cases = list(dict.fromkeys(r.case for r in chosen))
        better = "higher" if chosen[0].higher_is_better else "lower"
        out.append(f"**{metric}** ({unit}, {better} is better; median (min–max))\n")
        out.append("| case | " + " | ".join(systems) + " |")
        out.append("|---" * (len(systems) + 1) + "|")
        cells = {(r.case, r.system): _cell(r) for r in chosen}
        for case in cases:
            line = [cells.get((case, system), "–") for system in systems]
            out.append(f"| {case} | " + " | ".join(line) + " |")
        out.append("")
    skips = sorted({(r.system, r.status) for r in rows if r.status != OK})
    for system, status in skips:
        out.append(f"- {system}: {status}")
    if skips:
        out.append("")
    return "\n".join(out)


# --- charts -----------------------------------------------------------------------------


def write_chart(path: str, title: str, rows: list[Row]) -> bool:
    """Grouped horizontal bars (median, min–max whiskers), one panel per metric."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib not installed: no chart %s", path)
        return False
    measured = [r for r in rows if r.status == OK and r.stat is not None]
    metrics = list(dict.fromkeys((r.metric, r.unit) for r in measured))
    if not metrics:
        return False
    heights = []
    for pair in metrics:
        case_count = len({r.case for r in measured if (r.metric, r.unit) == pair})
        system_count = len({r.system for r in measured if (r.metric, r.unit) == pair})
        heights.append(max(1.5, 0.16 * case_count * system_count + 0.25 * case_count))
    figure, axes = plt.subplots(
        len(metrics), 1, figsize=(10, sum(heights) + 1), squeeze=False, height_ratios=heights
    )
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for axis, (metric, unit) in zip(axes[:, 0], metrics, strict=True):
        chosen = [r for r in measured if (r.metric, r.unit) == (metric, unit)]
        cases = list(dict.fromkeys(r.case for r in chosen))
        systems = list(dict.fromkeys(r.system for r in chosen))
        width = 0.8 / len(systems)
        for k, system in enumerate(systems):
            ys, xs, lows, highs = [], [], [], []
            for i, case in enumerate(cases):
                for r in chosen:
                    if r.case == case and r.system == system:
                        assert r.stat is not None
                        ys.append(i + k * width)
                        xs.append(r.stat.median)
                        lows.append(r.stat.median - r.stat.min)
                        highs.append(r.stat.max - r.stat.median)
            axis.barh(
                ys,
                xs,
                height=width,
                xerr=[lows, highs],
                label=system,
                color=colours[k % len(colours)],
                capsize=2,
            )
        values = [r.stat.median for r in chosen if r.stat is not None and r.stat.median > 0]
        if values and max(values) / min(values) > 50:
            axis.set_xscale("log")
        axis.set_yticks([i + 0.4 - width / 2 for i in range(len(cases))], cases, fontsize=7)
        axis.invert_yaxis()
        axis.set_xlabel(f"{metric} ({unit})")
        axis.legend(fontsize=7, loc="best")
        axis.grid(axis="x", alpha=0.3)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return True


# --- targets ----------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    ratio: str  # what is divided by what
    value: float | None
    goal: str  # e.g. ">= 1.5"
    verdict: str


class Lookup:
    def __init__(self, rows: Iterable[Row]):
        self.rows = {(r.workload, r.case, r.system, r.metric): r for r in rows if r.status == OK}

    def median(self, workload: str, case: str, system: str, metric: str) -> float | None:
        found = self.rows.get((workload, case, system, metric))
        return None if found is None or found.stat is None else found.stat.median

    def extra(self, workload: str, case: str, system: str, metric: str, key: str) -> float | None:
        found = self.rows.get((workload, case, system, metric))
        value = None if found is None else found.extra.get(key)
        return float(value) if isinstance(value, int | float) else None

    def first(self, workload: str, case_prefix: str, system: str, metric: str) -> float | None:
        for (w, case, s, m), found in self.rows.items():
            if (w, s, m) == (workload, system, metric) and case.startswith(case_prefix):
                return None if found.stat is None else found.stat.median
        return None


def _target(
    name: str, ratio: str, top: float | None, bottom: float | None, goal: float, at_least: bool
) -> Target:
    goal_text = f"{'>=' if at_least else '<='} {goal:.3g}"
    if top is None or bottom is None or bottom == 0:
        return Target(name, ratio, None, goal_text, "not measured")
    value = top / bottom
    met = value >= goal if at_least else value <= goal
    return Target(name, ratio, value, goal_text, "pass" if met else "miss")


def targets(rows: list[Row]) -> list[Target]:
    """The issue's targets, each a ratio of two figures from this run."""
    find = Lookup(rows)
    out: list[Target] = []
    put = "put rate"
    for batch in BATCH_SIZES:
        case = f"100 B, ASYNC_FLUSH, batch {batch}"
        ours = find.median("put", case, "rocketstore", put)
        for other, goal in (("lmdb", 1.5), ("sqlite3", 3.0)):
            out.append(
                _target(
                    f"batch put, {case}",
                    f"rocketstore / {other} (msg/s)",
                    ours,
                    find.median("put", case, other, put),
                    goal,
                    True,
                )
            )
    mmap_bw = find.first("machine", "", "mmap write+flush", "bandwidth")
    for batch in BATCH_SIZES:
        case = f"1024 B, ASYNC_FLUSH, batch {batch}"
        out.append(
            _target(
                f"batch put, {case}",
                "rocketstore CommitLog MiB/s / raw mmap write+flush MiB/s",
                find.extra("put", case, "rocketstore", put, "MiB/s"),
                mmap_bw,
                0.5,
                True,
            )
        )
    for body in BODY_SIZES:
        case = f"{body} B, ASYNC_FLUSH, single"
        out.append(
            _target(
                f"single-message put, {body} B, ASYNC_FLUSH",
                "rocketstore / sqlite3 with 1,000-row transactions (msg/s)",
                find.median("put", case, "rocketstore", put),
                find.median("put", case, "sqlite3", put),
                1.0,
                True,
            )
        )
    for body in BODY_SIZES:
        for batch in BATCH_SIZES:
            case = f"{body} B, SYNC_FLUSH, batch {batch}"
            out.append(
                _target(
                    f"SYNC_FLUSH batch put, {body} B, batch {batch}",
                    "rocketstore / raw write+fdatasync per call (msg/s)",
                    find.median("put", case, "rocketstore", put),
                    find.median("put", case, "raw-file", put),
                    1 / 1.5,
                    True,
                )
            )
    for body in BODY_SIZES:
        best_put = None
        for batch in BATCH_SIZES:
            rate = find.median("put", f"{body} B, ASYNC_FLUSH, batch {batch}", "rocketstore", put)
            if rate is not None:
                best_put = rate if best_put is None else max(best_put, rate)
        out.append(
            _target(
                f"dispatch, {body} B",
                "dispatch build rate / best ASYNC batch put rate (msg/s)",
                find.median("dispatch", f"{body} B, build", "rocketstore", "dispatch rate"),
                best_put,
                2.0,
                True,
            )
        )
    for body in BODY_SIZES:
        for temperature in ("hot", "cold"):
            case = f"{body} B, key, {temperature}"
            out.append(
                _target(
                    f"query by key p50, {body} B, {temperature}",
                    "rocketstore query_messages / lmdb get, incl. reading + checking (p50)",
                    find.median("query", case, "rocketstore", "p50 latency"),
                    find.median("query", case, "lmdb", "p50 latency"),
                    2.0,
                    False,
                )
            )
    for body in BODY_SIZES:
        out.append(
            _target(
                f"sequential consume, {body} B",
                "rocketstore get_messages / sqlite3 sequential read (msg/s)",
                find.first("consume", f"{body} B", "rocketstore", "read rate"),
                find.first("consume", f"{body} B", "sqlite3", "read rate"),
                1.0,
                True,
            )
        )
    spark_case = "batch read, 100 B"
    out.append(
        _target(
            "Spark batch read (queue mode), 100 B",
            "rocketstore read rate / spark.read.parquet of the same rows (rows/s)",
            find.first("spark", spark_case, "rocketstore (queue mode)", "read rate"),
            find.first("spark", spark_case, "parquet", "read rate"),
            0.5,
            True,
        )
    )
    for name, case, system in (
        ("Spark batch read, 64 interleaved queues", "64 queues: batch read",
         "rocketstore (queue mode)"),
        ("Spark aggregate of topic, hash(value), columns=topic,value", "aggregate of topic",
         "rocketstore (columns=topic,value)"),
    ):  # fmt: skip
        out.append(
            _target(
                name,
                "rocketstore read rate / spark.read.parquet of the same rows (rows/s)",
                find.first("spark", case, system, "read rate"),
                find.first("spark", case, "parquet", "read rate"),
                0.5,
                True,
            )
        )
    network = "network mode, 100 B"
    net_read = "read rate (batch read, PULL_MESSAGE)"
    net_lookup = "key lookup (option keys, QUERY_MESSAGE)"
    out.append(
        _target(
            "Spark network mode (namesrv) batch read, 100 B",
            "read through rocketstore serve / file-mode read of its store (rows/s)",
            find.first("spark_network", network, "rocketstore serve", net_read),
            find.first("spark_network", network, "file mode, the broker's store", net_read),
            0.5,
            True,
        )
    )
    out.append(
        _target(
            "Spark network mode key lookup (option keys), 100 B",
            "lookup seconds / 1 s",
            find.first("spark_network", network, "rocketstore serve", net_lookup),
            1.0,
            1.0,
            False,
        )
    )
    out.append(
        _target(
            "recovery after SIGKILL",
            "reopen time / read+CRC of the same bytes (s/GiB)",
            find.first("recovery", "", "rocketstore", "reopen time per GiB"),
            find.first("recovery", "", "read+CRC (zlib)", "read+CRC time per GiB"),
            2.0,
            False,
        )
    )
    out.append(
        _target(
            "replication over loopback, default haTransferBatchSize",
            "slave's copy rate / raw TCP copy of the same bytes (MiB/s)",
            find.median(
                "replication",
                "CommitLog copy over loopback",
                "replication, haTransferBatchSize 32 KiB",
                "copy rate",
            ),
            find.median(
                "replication",
                "CommitLog copy over loopback",
                "raw TCP copy (1 MiB sends, written to a file)",
                "copy rate",
            ),
            0.5,
            True,
        )
    )
    # The job on a running Spark, as a pipeline runs on a cluster that is up; the figure
    # with the session's start (about 6 s of JVM and workers) is in rebuild.md, recorded.
    engine = "spark local[2], job"
    out.append(
        _target(
            f"rebuild of a 2 GiB CommitLog, {engine}",
            "single-process dispatcher time / parallel rebuild time (s)",
            find.first("rebuild", "2048 MiB", "rocketstore (single)", "rebuild time"),
            find.first("rebuild", "2048 MiB", f"rocketstore ({engine})", "rebuild time"),
            1.6,
            True,
        )
    )
    out += broker_targets(rows)
    return out


BROKER_JAVA = "RocketMQ 4.9.8 (Java)"  # the broker workload's name for the Java broker
BROKER_OURS = "rocketstore serve"  # (and "rocketstore serve --brokers N")


def broker_targets(rows: list[Row]) -> list[Target]:
    """Issue #37's targets, for each broker case the Java broker was measured in (none
    without it): rocketstore's msg/s at least half of Java's (as much, for consuming) and
    its broker CPU per message within twice Java's."""
    find = Lookup(rows)
    measured = [
        (r.case, r.system)
        for r in rows
        if r.workload == "broker" and r.metric == "rate" and r.status == OK
    ]
    java_cases = [case for case, system in measured if system == BROKER_JAVA]
    out: list[Target] = []
    for case in dict.fromkeys(java_cases):
        for ours in dict.fromkeys(
            s for c, s in measured if c == case and s.startswith(BROKER_OURS)
        ):
            out += _broker_case_targets(find, case, ours)
    return out


def _broker_case_targets(find: Lookup, case: str, ours: str) -> list[Target]:
    """broker_targets' two for one case and one rocketstore (serve's options named)."""
    cpu = "broker CPU per message"
    return [
        _target(
            f"broker, {case}",
            f"{ours} / Java 4.9.8 broker (msg/s)",
            find.median("broker", case, ours, "rate"),
            find.median("broker", case, BROKER_JAVA, "rate"),
            1.0 if "consume" in case and "mixed" not in case else 0.5,
            True,
        ),
        _target(
            f"broker CPU per message, {case}",
            f"{ours} / Java 4.9.8 broker (us/msg)",
            find.median("broker", case, ours, cpu),
            find.median("broker", case, BROKER_JAVA, cpu),
            2.0,
            False,
        ),
    ]


def targets_markdown(found: list[Target], quick: bool) -> str:
    lines = []
    if quick:
        lines.append("_Quick run: sizes too small for the ratios to mean anything; no verdicts._\n")
    lines.append("| target | ratio | measured | goal | verdict |")
    lines.append("|---|---|---|---|---|")
    for t in found:
        value = "–" if t.value is None else f"{t.value:.2f}"
        verdict = "n/a (quick)" if quick and t.value is not None else t.verdict
        if verdict == "miss":
            verdict = "**miss**"
        lines.append(f"| {t.name} | {t.ratio} | {value} | {t.goal} | {verdict} |")
    return "\n".join(lines) + "\n"


# --- files ------------------------------------------------------------------------------


def write_workload(out_dir: str, name: str, rows: list[Row], header: dict[str, object]) -> str:
    """``<name>.json``, ``<name>.md`` and ``<name>.png``; return the Markdown."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump({**header, "workload": name, "rows": [r.to_json() for r in rows]}, f, indent=1)
    chart = write_chart(os.path.join(out_dir, f"{name}.png"), name, rows)
    text = f"## {name}\n\n" + markdown_tables(rows)
    if chart:
        text += f"\n![{name}]({name}.png)\n"
    with open(os.path.join(out_dir, f"{name}.md"), "w") as f:
        f.write(text)
    return text


def write_summary(
    out_dir: str,
    header: dict[str, object],
    machine: dict[str, str],
    durability: dict[str, dict[str, str]],
    sections: dict[str, str],
    found: list[Target],
    quick: bool,
) -> str:
    """``summary.md`` and ``targets.json``; return the summary's Markdown."""
    with open(os.path.join(out_dir, "targets.json"), "w") as f:
        json.dump([t.__dict__ for t in found], f, indent=1)
    parts = [f"# Benchmark results ({'quick' if quick else 'full'} run, {header['date']})\n"]
    parts.append("## Machine\n")
    parts.extend(f"- {key}: {value}" for key, value in machine.items())
    parts.append(f"- run time: {header['seconds']:.0f} s\n")
    parts.append("## Durability settings (same for every system per mode)\n")
    parts.append("| system | ASYNC_FLUSH | SYNC_FLUSH |")
    parts.append("|---|---|---|")
    for system, modes in durability.items():
        parts.append(f"| {system} | {modes['ASYNC_FLUSH']} | {modes['SYNC_FLUSH']} |")
    parts.append("\n## Targets\n")
    parts.append(targets_markdown(found, quick))
    for text in sections.values():
        parts.append(text)
    summary = "\n".join(parts)
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(summary)
    return summary


def update_readme(readme: str, summary: str, results_link: str) -> None:
    """Replace the README's results section with this run's summary."""
    with open(readme) as f:
        text = f.read()
    if README_START not in text or README_END not in text:
        log.warning("%s has no results markers; not updated", readme)
        return
    # Images and headings of the summary are relative to the results directory.
    body = re.sub(r"\]\((\w+\.png)\)", rf"]({results_link}/\1)", summary)
    body = re.sub(r"^(#+) ", r"#\1 ", body, flags=re.MULTILINE)
    head, rest = text.split(README_START, 1)
    _old, tail = rest.split(README_END, 1)
    with open(readme, "w") as f:
        f.write(f"{head}{README_START}\n{body}\n{README_END}{tail}")
