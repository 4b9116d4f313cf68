"""Store tools: ``rebuild`` (and ``check``, which cli.checker presents).

Layer: cli. ``rebuild`` takes the writer lock (and fails with one line while a writer or
a broker runs); ``check`` reads files directly, ``check --repair`` takes the lock too.
"""

from __future__ import annotations

import click

from rocketstore.check.scan import CommitLogScan
from rocketstore.check.store_rebuild import (
    RebuildOutcome,
    dledger_problem,
    held_lock,
    missing_commitlog_problem,
    multi_dispatch_problem,
    rebuild,
)
from rocketstore.cli.checker import check, say_rebuilt
from rocketstore.cli.context import CliContext, CliError
from rocketstore.cli.progress import enabled as progress_enabled
from rocketstore.cli.progress import progress
from rocketstore.cli.rebuild_engines import (
    ENGINES,
    check_spark_conf,
    run_parallel,
    spark_conf_option,
)
from rocketstore.files.lock import DirectoryLock


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
        say_rebuilt(ctx, outcome, "rebuild")
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
    say_rebuilt(ctx, outcome, "rebuild")


def register(group: click.Group) -> None:
    group.add_command(check)
    group.add_command(rebuild_command)
