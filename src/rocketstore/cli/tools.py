"""Store tools: ``check`` (and ``check --repair``) and ``rebuild``.

Layer: cli. ``check`` reads files directly and never takes the writer lock; ``--repair``
and ``rebuild`` take it (and fail with one line while a writer or a broker runs).
"""

from __future__ import annotations

import contextlib
import os

import click

from rocketstore.cli.check_common import CheckResult
from rocketstore.cli.checker import check_store
from rocketstore.cli.context import CliContext, CliError
from rocketstore.cli.params import java_int
from rocketstore.cli.progress import enabled as progress_enabled
from rocketstore.cli.progress import progress
from rocketstore.cli.rebuild import (
    RebuildOutcome,
    cut_commitlog,
    dledger_problem,
    held_lock,
    missing_commitlog_problem,
    multi_dispatch_problem,
    rebuild,
)
from rocketstore.cli.rebuild_engines import (
    ENGINES,
    check_spark_conf,
    run_parallel,
    spark_conf_option,
)
from rocketstore.cli.scan import CommitLogScan, ScanIssue
from rocketstore.config import StoreConfig
from rocketstore.files.lock import DirectoryLock
from rocketstore.files.mapped_file_queue import offset_file_paths
from rocketstore.paths import CONSUME_QUEUE_DIR, INDEX_DIR


def store_bytes(root: str, config: StoreConfig) -> int:
    """Bytes of the CommitLog, queue and index files (the progress total of a check)."""
    # The CommitLog files the check reads (its directories may hold other things).
    paths = list(offset_file_paths(config.commit_log_dirs(root).all).values())
    for part in (CONSUME_QUEUE_DIR, INDEX_DIR):
        for directory, _dirs, files in os.walk(os.path.join(root, part)):
            paths += [os.path.join(directory, name) for name in files]
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):  # removed by a running writer meanwhile
            total += os.path.getsize(path)
    return total


def run_check(
    root: str, label: str, config: StoreConfig, *, lock_held: bool = False
) -> CheckResult:
    with progress(store_bytes(root, config), label) as bar:
        return check_store(root, on_bytes=bar.advance, lock_held=lock_held, config=config)


def print_check(ctx: CliContext, result: CheckResult, max_problems: int) -> None:
    shown = result.problems if max_problems == 0 else result.problems[:max_problems]
    for problem in shown:
        if ctx.as_json:
            ctx.emit(problem.to_json())
        else:
            click.echo(problem.line())
    hidden = len(result.problems) - len(shown)
    if hidden and not ctx.as_json:
        click.echo(f"... {hidden} more problems (--max-problems 0 shows all)")
    if result.missed and not ctx.as_json:
        click.echo(
            f"a consumer misses {len(result.missed)} message(s) whose records are damaged "
            "(pulls skip them):"
        )
    for missed in result.missed:
        if ctx.as_json:
            ctx.emit(missed.to_json())
        else:
            click.echo(f"missed: {missed.line()}")
    for note in result.notes:
        if ctx.as_json:
            ctx.emit({"type": "note", "text": note})
        else:
            click.echo(f"note: {note}")
    summary = {
        "type": "summary",
        "store": os.path.abspath(result.root),
        "records": result.records,
        "commitLogEnd": result.commit_log_end,
        "queueUnits": result.queue_units,
        "indexEntries": result.index_entries,
        "problems": len(result.problems),
        "missed": len(result.missed),
    }
    if result.dledger_units is not None:
        summary["dledgerIndexUnits"] = result.dledger_units
    if ctx.as_json:
        ctx.emit(summary)
        return
    verdict = "OK" if result.ok else f"{len(result.problems)} problem(s)"
    dledger = (
        f", {result.dledger_units} DLedger index units" if result.dledger_units is not None else ""
    )
    click.echo(
        f"checked {result.records} records (CommitLog data ends at {result.commit_log_end}), "
        f"{result.queue_units} queue units, {result.index_entries} index entries{dledger}: "
        f"{verdict}"
    )


def _cut_point(scan: CommitLogScan, force: bool) -> tuple[int | None, list[ScanIssue]]:
    """Where repair cuts the CommitLog (None: nowhere) and the CRC issues it keeps."""
    layout = [i for i in scan.issues if i.kind == "layout"]
    if layout:
        raise CliError(
            f"cannot repair the CommitLog's file layout ({layout[0].path}: {layout[0].reason}); "
            "fix or remove the file by hand"
        )
    crc = [i for i in scan.issues if i.kind == "crc"]
    structure = scan.first_structure_issue
    cut: int | None = None
    if structure is not None:
        if scan.records_after_structure_issue and not force:
            raise CliError(
                f"corrupt CommitLog data at offset {structure.offset} ({structure.reason}) is "
                "followed by readable records; repair would lose them. Salvage with "
                "`rocketstore dump`, or cut there anyway with `check --repair --force`"
            )
        cut = structure.cut_at
    # A bad CRC on the very last record is a torn write, as recovery takes it: cut there.
    torn = len(crc) == 1 and structure is None and crc[0].offset == scan.last_record_offset
    if (force or torn) and crc:
        first_crc = crc[0].cut_at
        if first_crc is not None:
            cut = first_crc if cut is None else min(cut, first_crc)
        crc = []
    return cut, crc


@click.command("check", short_help="Verify records, queues and index (--repair fixes).")
@click.option(
    "--repair",
    is_flag=True,
    help="Fix what can be fixed: cut a corrupt CommitLog tail, rebuild consume queues and "
    "index (takes the writer lock). Example: check --repair",
)
@click.option(
    "--force",
    is_flag=True,
    help="With --repair: cut the CommitLog at the first bad record even when readable "
    "records follow (what RocketMQ's recovery does). Example: check --repair --force",
)
@click.option(
    "--max-problems",
    type=java_int(0),
    default=200,
    show_default=True,
    help="Print at most N problem lines (all are counted; 0 prints all). Example: --max-problems 0",
)
@click.pass_obj
def check(ctx: CliContext, repair: bool, force: bool, max_problems: int) -> None:
    """Verify every file: each record's size, magic and body CRC, consume queue <->
    CommitLog, index <-> CommitLog. One line per problem (path, where, why); exit status 1
    if there is any.

    \b
    Example:
      rocketstore --store ./store check
      rocketstore --store ./store --json check | jq 'select(.type == "problem")'
      rocketstore --store ./store check --repair
    """
    if force and not repair:
        raise click.UsageError("--force only applies with --repair")
    root = ctx.require_store_dir()
    if not repair:
        result = run_check(root, "check", ctx.config)
        print_check(ctx, result, max_problems)
        if not result.ok:
            raise click.exceptions.Exit(1)
        return
    _repair(ctx, root, force, max_problems)


def _say(ctx: CliContext, text: str, kind: str = "repair", **fields: object) -> None:
    if ctx.as_json:
        ctx.emit({"type": kind, "text": text, **fields})
    else:
        click.echo(text)


def _repair(ctx: CliContext, root: str, force: bool, max_problems: int) -> None:
    problem = dledger_problem(ctx.commitlog_dirs, None) or missing_commitlog_problem(
        root, ctx.commitlog_dirs
    )
    if problem is not None:
        raise CliError(problem)
    lock: DirectoryLock | None = held_lock(root)
    rebuilt: RebuildOutcome | None = None
    try:
        before = run_check(root, "check", ctx.config, lock_held=True)
        print_check(ctx, before, max_problems)
        if before.ok:
            _say(ctx, "nothing to repair")
            return
        assert before.scan is not None
        cut, kept_crc = _cut_point(before.scan, force)
        # Bad body CRCs alone are not fixed by a rebuild: only rebuild for anything else.
        rebuilds = cut is not None or any(p.kind != "crc" for p in before.problems)
        if rebuilds:
            # Checked before anything is cut: the rebuild would drop LMQ queues.
            problem = multi_dispatch_problem(root, ctx.config)
            if problem is not None:
                raise CliError(problem)
        if cut is not None:
            outcome = cut_commitlog(ctx.commitlog_dirs, cut)
            removed = (
                f", removed {', '.join(outcome.removed_files)}" if outcome.removed_files else ""
            )
            _say(
                ctx,
                f"cut the CommitLog at offset {cut}: "
                f"cleared {outcome.cleared_bytes} bytes of data{removed}",
                cutAt=cut,
                clearedBytes=outcome.cleared_bytes,
                removedFiles=outcome.removed_files,
            )
        if rebuilds:
            assert lock is not None
            held, lock = lock, None
            rebuilt = rebuild(root, queues=True, index=True, lock=held, config=ctx.config)
    finally:
        if lock is not None:
            lock.release()
    if rebuilt is not None:
        _say_rebuilt(ctx, rebuilt, "repair")
        after = run_check(root, "re-check", ctx.config)
        _say(ctx, "after repair:")
        print_check(ctx, after, max_problems)
        dropped = before.records - after.records
        if dropped > 0:
            _say(
                ctx, f"{dropped} record(s) were cut off with the CommitLog", droppedRecords=dropped
            )
    else:
        after = before
    if kept_crc:
        _say(
            ctx,
            f"{len(kept_crc)} record(s) with a bad body CRC were kept (the first at offset "
            f"{kept_crc[0].offset}); `check --repair --force` cuts the CommitLog there",
        )
    if not after.ok:
        raise click.exceptions.Exit(1)


def _say_rebuilt(ctx: CliContext, outcome: RebuildOutcome, kind: str) -> None:
    parts: list[str] = []
    fields: dict[str, object] = {}
    if outcome.rebuilt_queues:
        parts.append(f"{outcome.queues} consume queues ({outcome.queue_units} units)")
        fields.update(queues=outcome.queues, queueUnits=outcome.queue_units)
    if outcome.rebuilt_index:
        parts.append(f"{outcome.index_files} index files ({outcome.index_entries} entries)")
        fields.update(indexFiles=outcome.index_files, indexEntries=outcome.index_entries)
    _say(
        ctx,
        f"rebuilt {' and '.join(parts)} from CommitLog offsets "
        f"{outcome.commit_log_min}..{outcome.commit_log_end}: "
        f"{outcome.redispatched_records} records dispatched in {outcome.seconds:.2f}s",
        kind,
        **fields,
        records=outcome.redispatched_records,
        commitLogMin=outcome.commit_log_min,
        commitLogEnd=outcome.commit_log_end,
        seconds=round(outcome.seconds, 3),
    )


@click.command("rebuild", short_help="Rebuild consume queues and index from the CommitLog.")
@click.option("--queues", is_flag=True, help="Rebuild the consume queues. Example: --queues")
@click.option("--index", is_flag=True, help="Rebuild the index files. Example: --index")
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default="single",
    show_default=True,
    help="single: the store's own dispatcher in this process; local: the parallel rebuild "
    "on one process per core; spark: the parallel rebuild on Spark. Example: --engine local",
)
@click.option(
    "--master",
    default=None,
    help="Spark master for --engine spark (default local[*]). Example: --master local[2]",
)
@click.option(
    "--skip-corrupt",
    is_flag=True,
    help="With --engine local or spark: skip records that fail validation, list each "
    "(offset, length, reason) and rebuild everything around them. Example: --skip-corrupt",
)
@spark_conf_option
@click.pass_obj
def rebuild_command(
    ctx: CliContext,
    queues: bool,
    index: bool,
    engine: str,
    master: str | None,
    skip_corrupt: bool,
    spark_conf: dict[str, str],
) -> None:
    """Rebuild consume queues and/or index from the CommitLog (both when neither flag is
    given). Takes the writer lock; the old files are kept until the rebuild succeeded and
    put back (or never touched) if it fails.

    The default engine is the store's own recovery, which refuses when the CommitLog has
    corrupt data followed by readable records (it would cut them): run `check` first, or
    use a parallel engine with --skip-corrupt. The parallel engines (docs/spark.md) write
    the same bytes as the dispatcher, from CommitLog ranges read in parallel.

    \b
    Example:
      rocketstore --store ./store rebuild
      rocketstore --store ./store rebuild --index
      rocketstore --store ./store rebuild --engine local --skip-corrupt
      rocketstore --store ./store rebuild --engine spark --master local[2]
      rocketstore --store ./store rebuild --engine spark --conf spark.driver.memory=4g
    """
    if not queues and not index:
        queues = index = True
    if master is not None and engine != "spark":
        raise click.BadParameter("--master needs --engine spark", param_hint="--master")
    check_spark_conf(spark_conf, engine)
    if skip_corrupt and engine == "single":
        raise click.BadParameter(
            "--skip-corrupt needs --engine local or spark", param_hint="--skip-corrupt"
        )
    root = ctx.require_store_dir()
    problem = (
        dledger_problem(ctx.commitlog_dirs, engine)
        or missing_commitlog_problem(root, ctx.commitlog_dirs)
        or (multi_dispatch_problem(root, ctx.config) if queues else None)
    )
    if problem is not None:
        raise CliError(problem)
    if engine != "single":
        report = run_parallel(
            ctx,
            root,
            engine=engine,
            master=master,
            queues=queues,
            index=index,
            skip_corrupt=skip_corrupt,
            spark_conf=spark_conf,
        )
        outcome = RebuildOutcome(
            rebuilt_queues=queues,
            rebuilt_index=index,
            queues=report.queues,
            queue_units=report.queue_units,
            index_files=report.index_files,
            index_entries=report.index_entries,
            redispatched_records=report.records,
            commit_log_min=report.commit_log_min,
            commit_log_end=report.commit_log_end,
            seconds=report.seconds,
        )
        _say_rebuilt(ctx, outcome, "rebuild")
        return
    lock: DirectoryLock | None = held_lock(root)
    try:
        scan = CommitLogScan(root, check_crc=False, dirs=ctx.commitlog_dirs)
        with progress(scan.total_bytes, "scanning CommitLog") as bar:
            scan.on_bytes = bar.advance
            for _ in scan.records():
                pass
        issue = scan.first_structure_issue
        if issue is not None and scan.records_after_structure_issue:
            raise CliError(
                f"corrupt CommitLog data at offset {issue.offset} ({issue.reason}) is followed "
                "by readable records; a rebuild would cut them. Run `rocketstore check`"
            )
        if progress_enabled():
            click.echo("rebuilding (re-dispatching every record)...", err=True)
        assert lock is not None
        held, lock = lock, None
        outcome = rebuild(root, queues=queues, index=index, lock=held, config=ctx.config)
    finally:
        if lock is not None:
            lock.release()
    _say_rebuilt(ctx, outcome, "rebuild")


def register(group: click.Group) -> None:
    group.add_command(check)
    group.add_command(rebuild_command)
