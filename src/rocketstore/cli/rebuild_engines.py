"""``rebuild --engine local|spark``: the parallel rebuild (:mod:`rocketstore.rebuild`) on
local processes or on Spark, with a progress bar and a report of skipped corrupt records.

Layer: cli. pyspark is imported (through :mod:`rocketstore.spark.rebuild`) only for
``--engine spark``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any, TypeVar

import click

from rocketstore.cli.context import CliContext, CliError
from rocketstore.cli.progress import progress
from rocketstore.errors import StoreError
from rocketstore.rebuild.driver import RebuildReport, rebuild_store
from rocketstore.rebuild.plan import commitlog_files
from rocketstore.rebuild.runners import ProcessRunner, TaskRunner

ENGINES = ("single", "local", "spark")

F = TypeVar("F", bound=Callable[..., Any])


def _parse_spark_conf(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> dict[str, str]:
    conf: dict[str, str] = {}
    for item in values:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise click.BadParameter(
                f"{item!r} is not KEY=VALUE (e.g. --conf spark.driver.memory=4g)",
                param_hint="--conf",
            )
        conf[key.strip()] = value
    return conf


def spark_conf_option(command: F) -> F:
    """``--conf KEY=VALUE`` (repeatable), as spark-submit takes it, for ``--engine spark``:
    the settings go to the session's builder before its JVM starts, so static ones such as
    ``spark.driver.memory`` work too, without a SPARK_CONF_DIR."""
    return click.option(
        "--conf",
        "spark_conf",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_parse_spark_conf,
        help="A Spark setting for --engine spark; repeat for more (later ones win). "
        "Example: --conf spark.driver.memory=4g --conf spark.executor.cores=2",
    )(command)


def check_spark_conf(conf: Mapping[str, str], engine: str) -> None:
    if conf and engine != "spark":
        raise click.BadParameter("--conf needs --engine spark", param_hint="--conf")


def spark_rebuild_module() -> ModuleType:
    """:mod:`rocketstore.spark.rebuild` for ``--engine spark`` (rebuild and export), or a
    CLI error saying how to install pyspark."""
    try:
        import rocketstore.spark.rebuild as spark_rebuild  # noqa: PLC0415
    except ImportError as e:
        raise CliError(
            f"--engine spark needs pyspark ({e}); pip install 'rocketstore[spark]'"
        ) from e
    return spark_rebuild


@contextmanager
def _runner(
    engine: str, master: str | None, conf: Mapping[str, str] | None = None
) -> Iterator[TaskRunner]:
    if engine == "local":
        with ProcessRunner() as runner:
            yield runner
        return
    spark_rebuild = spark_rebuild_module()
    with spark_rebuild.spark_session(master, "rocketstore rebuild", conf) as session:
        yield spark_rebuild.SparkRunner(session.sparkContext)


def run_parallel(
    ctx: CliContext,
    root: str,
    *,
    engine: str,
    master: str | None,
    queues: bool,
    index: bool,
    skip_corrupt: bool,
    spark_conf: Mapping[str, str] | None = None,
) -> RebuildReport:
    """Rebuild with the parallel engine; one line per skipped corrupt region, then the
    summary (the caller prints it)."""
    # Our bar for local processes; Spark draws its own stage progress on the terminal.
    files = commitlog_files(root, ctx.commitlog_dirs) if engine == "local" else []
    total = sum(length for _offset, length in files)
    with (
        _runner(engine, master, spark_conf) as runner,
        progress(total, f"rebuild ({engine})") as bar,
    ):

        def on_progress(phase: str, done: int, _total: int) -> None:
            if phase == "scan":
                bar.move_to(done)

        try:
            report = rebuild_store(
                root,
                runner,
                queues=queues,
                index=index,
                skip_corrupt=skip_corrupt,
                # Asked for, the index is rebuilt even where messageIndexEnable is off.
                config=ctx.config.replace(message_index_enable=True),
                on_progress=on_progress,
            )
        except StoreError as e:
            raise CliError(f"rebuild failed, queues and index left as they were: {e}") from e
    for region in report.corrupt:
        length = "to the end of the data" if region.length is None else f"{region.length} bytes"
        if ctx.as_json:
            ctx.emit(
                {
                    "type": "skipped",
                    "offset": region.offset,
                    "length": region.length,
                    "reason": region.reason,
                }
            )
        else:
            click.echo(f"skipped corrupt CommitLog data at {region.offset} ({length}): "
                       f"{region.reason}")  # fmt: skip
    for region in report.torn_tail:
        text = (f"note: the CommitLog ends with unreadable bytes at {region.offset} "
                f"({region.reason}): a torn write, not dispatched (the store's recovery cuts "
                "it, as the single engine does)")  # fmt: skip
        if ctx.as_json:
            ctx.emit({"type": "note", "offset": region.offset, "text": text})
        else:
            click.echo(text, err=True)
    return report
