"""``python -m benchmarks run [--quick] [--only NAME[,NAME]] [--out DIR]``.

Runs each workload against rocketstore and, in the same run, against sqlite3, lmdb,
diskcache and persist-queue and the machine's raw limits; writes JSON, Markdown and PNG per
workload, ``summary.md`` and ``targets.json`` to the output directory, and (after a full,
unfiltered run into the default directory) the results section of benchmarks/README.md.
Never asserts a time; exits 1 only if a workload crashed.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import time
from collections.abc import Callable

from benchmarks import machine, report
from benchmarks.common import FULL, QUICK, Row, Scratch, Sizes
from benchmarks.systems import durability_notes
from benchmarks.workloads import (
    broker,
    bulk_put,
    consume,
    dispatch,
    grpc_clients,
    put,
    query,
    rebuild,
    recovery,
    replication,
    scale,
    spark_network,
    spark_read,
)

log = logging.getLogger("benchmarks")

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "results")

Workload = Callable[[Sizes, Scratch], list[Row]]
WORKLOADS: dict[str, Workload] = {
    "machine": machine.run,
    "put": put.run,
    "bulk_put": bulk_put.run,
    "dispatch": dispatch.run,
    "consume": consume.run,
    "query": query.run,
    "recovery": recovery.run,
    "scale": scale.run,
    "broker": broker.run,
    "rebuild": rebuild.run,
    "spark": spark_read.run,
    "spark_network": spark_network.run,
    "replication": replication.run,
    "grpc": grpc_clients.run,
}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the workloads and write the results")
    run.add_argument("--quick", action="store_true", help="small sizes, one repetition (CI)")
    run.add_argument(
        "--only",
        metavar="NAME",
        help=f"comma-separated workloads to run, of: {', '.join(WORKLOADS)}",
    )
    run.add_argument(
        "--out",
        metavar="DIR",
        help="results directory (default benchmarks/results, or results/quick with --quick)",
    )
    run.add_argument(
        "--scale-counts",
        metavar="N[,N]",
        help="message counts for the scale workload (default 100000,1000000,10000000; "
        "1000000 and up run once, for rocketstore, sqlite3 and lmdb only)",
    )
    run.add_argument(
        "--scale-all-systems",
        action="store_true",
        help="run the scale workload's large counts for every system (diskcache and "
        "persist-queue take about a minute each per 10^6 messages)",
    )
    run.add_argument(
        "--rebuild-mib",
        metavar="N[,N]",
        help="CommitLog sizes in MiB for the rebuild workload (default 2048)",
    )
    commands.add_parser("list", help="list the workloads")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.command == "list":
        sys.stdout.write("\n".join(WORKLOADS) + "\n")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    selected = list(WORKLOADS)
    if args.only:
        selected = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = [name for name in selected if name not in WORKLOADS]
        if unknown:
            sys.stderr.write(f"unknown workload(s) {', '.join(unknown)}; see 'list'\n")
            return 2
    sizes = QUICK if args.quick else FULL
    if args.scale_counts:
        counts = tuple(int(n.replace("_", "")) for n in args.scale_counts.split(","))
        sizes = dataclasses.replace(sizes, scale_counts=counts)
    if args.scale_all_systems:
        sizes = dataclasses.replace(sizes, scale_all_systems=True)
    if args.rebuild_mib:
        mib = tuple(int(n) * 1024 * 1024 for n in args.rebuild_mib.split(","))
        sizes = dataclasses.replace(sizes, rebuild_bytes=mib)
    default_out = os.path.join(DEFAULT_OUT, "quick") if args.quick else DEFAULT_OUT
    out_dir = os.path.abspath(args.out or default_out)
    os.makedirs(out_dir, exist_ok=True)
    scratch = Scratch(out_dir)
    started = time.time()
    header: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started)),
        "quick": sizes.quick,
        "sizes": sizes.__dict__,
    }
    machine_info = report.machine_info(out_dir)
    header["machine"] = machine_info
    all_rows: list[Row] = []
    sections: dict[str, str] = {}
    failed = []
    try:
        for name in selected:
            log.info("=== %s", name)
            began = time.perf_counter()
            try:
                rows = WORKLOADS[name](sizes, scratch)
            except Exception:
                log.exception("workload %s failed", name)
                failed.append(name)
                continue
            seconds = time.perf_counter() - began
            log.info("=== %s done in %.0f s", name, seconds)
            all_rows.extend(rows)
            sections[name] = report.write_workload(
                out_dir, name, rows, {**header, "seconds": round(seconds, 1)}
            )
    finally:
        scratch.cleanup()
    header["seconds"] = time.time() - started
    found = report.targets(all_rows)
    summary = report.write_summary(
        out_dir, header, machine_info, durability_notes(), sections, found, sizes.quick
    )
    full_default = not sizes.quick and not args.only and out_dir == DEFAULT_OUT
    if full_default and not failed:
        report.update_readme(os.path.join(HERE, "README.md"), summary, "results")
    log.info("results in %s (%.0f s)", out_dir, header["seconds"])
    if failed:
        log.error("failed workloads: %s", ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
