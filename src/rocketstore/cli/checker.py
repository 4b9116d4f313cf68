"""``check`` and ``check --repair``: the presentation of :func:`rocketstore.check.check_store`.

Layer: cli. The judging (what is a problem, the messages a consumer misses, repair) is the
library's (rocketstore.check); this prints its result, one line per finding or one JSON
object with ``--json``, and turns the verdict into the exit status (0 OK or repaired, 1
problems; a refused repair is one error line, exit 1).
"""

from __future__ import annotations

import os

import click

from rocketstore.check import (
    CheckResult,
    CheckStatus,
    CutOutcome,
    RebuildOutcome,
    RepairAction,
    RepairError,
    check_store,
)
from rocketstore.cli.context import CliContext, CliError
from rocketstore.cli.params import java_int
from rocketstore.cli.progress import progress


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


def say(ctx: CliContext, text: str, kind: str = "repair", **fields: object) -> None:
    if ctx.as_json:
        ctx.emit({"type": kind, "text": text, **fields})
    else:
        click.echo(text)


def say_rebuilt(ctx: CliContext, outcome: RebuildOutcome, kind: str) -> None:
    parts: list[str] = []
    fields: dict[str, object] = {}
    if outcome.rebuilt_queues:
        parts.append(f"{outcome.queues} consume queues ({outcome.queue_units} units)")
        fields.update(queues=outcome.queues, queueUnits=outcome.queue_units)
    if outcome.rebuilt_index:
        parts.append(f"{outcome.index_files} index files ({outcome.index_entries} entries)")
        fields.update(indexFiles=outcome.index_files, indexEntries=outcome.index_entries)
    say(
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


def _say_repair(ctx: CliContext, action: RepairAction) -> None:
    if isinstance(action, CutOutcome):
        removed = f", removed {', '.join(action.removed_files)}" if action.removed_files else ""
        say(
            ctx,
            f"cut the CommitLog at offset {action.offset}: "
            f"cleared {action.cleared_bytes} bytes of data{removed}",
            cutAt=action.offset,
            clearedBytes=action.cleared_bytes,
            removedFiles=action.removed_files,
        )
    else:
        say_rebuilt(ctx, action, "repair")


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
        result = check_store(root, ctx.config, progress=progress)
        print_check(ctx, result, max_problems)
        if result.status is not CheckStatus.OK:
            raise click.exceptions.Exit(1)
        return
    try:
        result = check_store(root, ctx.config, repair=True, force=force, progress=progress)
    except RepairError as e:
        if e.check is not None:
            print_check(ctx, e.check, max_problems)
        for action in e.repairs:
            _say_repair(ctx, action)
        if e.__cause__ is not None:  # a step failed: its own error, as before the library
            raise e.__cause__ from None
        raise CliError(str(e)) from e
    _print_repair(ctx, result, max_problems)
    if result.status is CheckStatus.PROBLEMS:
        raise click.exceptions.Exit(1)


def _print_repair(ctx: CliContext, result: CheckResult, max_problems: int) -> None:
    """The check before the repair, what it changed, and the re-check."""
    before = result.before or result
    print_check(ctx, before, max_problems)
    if before.ok:
        say(ctx, "nothing to repair")
        return
    for action in result.repairs:
        _say_repair(ctx, action)
    if result.before is not None:
        say(ctx, "after repair:")
        print_check(ctx, result, max_problems)
        if result.records_cut_off > 0:
            say(
                ctx,
                f"{result.records_cut_off} record(s) were cut off with the CommitLog",
                droppedRecords=result.records_cut_off,
            )
    for warning in result.warnings:
        say(ctx, warning)
