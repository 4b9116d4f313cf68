"""deleteExpiredCommitLog: retention on demand, mqadmin's name for the broker's manual
delete (``executeDeleteFilesManually``), run offline on the store; and cleanExpiredCQ,
which deletes the consume queues whose messages retention has all deleted.

Layer: cli. RocketMQ deletes expired CommitLog files at the hours of ``deleteWhen`` or when
the disk fills; asked by an operator, it deletes those past ``fileReservedTime`` now, then
the queue and index files that only point below the new minimum. This runs the store's
own manual retention (:meth:`MessageStore.delete_expired_files`), with the store settings
of ``-c broker.conf`` (``fileReservedTime``...) when given. Deleting takes the writer lock;
``--dry-run`` only reads.
"""

from __future__ import annotations

import os

import click

from rocketstore.broker import admin_client
from rocketstore.cli.context import CliContext, through_namesrv
from rocketstore.cli.credentials import credential_options
from rocketstore.remoting.acl_signing import SessionCredentials


@click.command("deleteExpiredCommitLog", short_help="Delete expired CommitLog files now.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say what would be deleted and why; delete nothing. Example: --dry-run",
)
@click.option(
    "--force",
    is_flag=True,
    help="Also delete CommitLog files not expired yet (all but the newest), as a full "
    "disk would. Example: --force",
)
@click.pass_obj
def delete_expired_commit_log(ctx: CliContext, dry_run: bool, force: bool) -> None:
    """Delete the CommitLog files older than fileReservedTime (72 h unless -c says
    otherwise) whatever the hour, then the queue and index files below the new minimum.

    \b
    Example:
      rocketstore --store ./store deleteExpiredCommitLog --dry-run
      rocketstore -c conf/broker.conf deleteExpiredCommitLog
    """
    opener = ctx.open_read_only if dry_run else ctx.open_writer
    with opener() as store:
        report = store.delete_expired_files(force=force, dry_run=dry_run)
        root = store.root
    for deletion in report.deletions():
        path = os.path.relpath(deletion.path, root)
        if ctx.as_json:
            ctx.emit({"type": "deletion", "path": path, "reason": deletion.reason})
        else:
            click.echo(f"{path}: {deletion.reason}")
    if ctx.as_json:
        ctx.emit(
            {
                "type": "summary",
                "dryRun": dry_run,
                "commitLogFiles": len(report.commitlog_files),
                "queueFiles": len(report.queue_files),
                "indexFiles": len(report.index_files),
                "minCommitLogOffset": report.min_commit_log_offset,
            }
        )
    else:
        click.echo(report.summary())


@click.command("cleanExpiredCQ", short_help="Delete consume queues whose messages are all gone.")
@click.option(
    "-b",
    "--brokerAddr",
    "broker",
    default=None,
    help="Ask the running broker at this address instead of the store. Example: -b 127.0.0.1:10911",
)
@click.option(
    "-c",
    "--cluster",
    default=None,
    help="Accepted for mqadmin compatibility, ignored (offline there is one store). "
    "Example: -c DefaultCluster",
)
@credential_options
@click.pass_obj
def clean_expired_cq(
    ctx: CliContext,
    broker: str | None,
    cluster: str | None,
    credentials: SessionCredentials | None,
) -> None:
    """Delete the consume queues whose every message is gone from the CommitLog (the end of
    their last unit below its min offset), as RocketMQ's cleanExpiredConsumerQueue does;
    the schedule topic's queues stay. A deleted queue starts again at offset 0 with its
    next message. Takes the writer lock; prints mqadmin's "success" and, on stderr (or
    as --json), each queue deleted.

    \b
    Example:
      rocketstore --store ./store cleanExpiredCQ
      rocketstore cleanExpiredCQ -b 127.0.0.1:10911
    """
    if broker:
        with through_namesrv("cleanExpiredCQ", broker):
            admin_client.clean_expired_consume_queue(broker, credentials=credentials)
        removed: list[tuple[str, int]] = []  # (the broker logs them)
    else:
        with ctx.open_writer() as store:
            removed = store.clean_expired_queues()
    if ctx.as_json:
        ctx.emit({"success": True, "deleted": [{"topic": t, "queueId": q} for t, q in removed]})
        return
    for topic, queue_id in removed:
        click.echo(f"deleted consume queue {topic}-{queue_id}", err=True)
    click.echo("success")


def register(group: click.Group) -> None:
    group.add_command(delete_expired_commit_log)
    group.add_command(clean_expired_cq)
