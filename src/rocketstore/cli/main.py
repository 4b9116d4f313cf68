"""Entry point of the ``rocketstore`` console script: global options and error handling.

Errors print one line ``rocketstore: error: ...`` and exit 1 (usage errors exit 2);
``--debug`` shows the traceback.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback

import click

from rocketstore.cli import (
    browse,
    compaction_log,
    consume_message,
    consumer_admin,
    export,
    messages,
    metadata_export,
    queues,
    retention,
    send,
    stats,
    tools,
    trace,
)
from rocketstore.cli.context import context_from_settings
from rocketstore.cli.demo import demo
from rocketstore.cli.params import non_empty_store
from rocketstore.cli.serve import register as register_serve
from rocketstore.cli.topic_admin import register as register_topic_admin
from rocketstore.errors import StoreError

# How ``rocketstore --help`` groups the commands (anything unlisted goes under "Other").
SECTIONS = (
    (
        "Messages (mqadmin's names)",
        (
            "queryMsgByKey",
            "queryMsgById",
            "queryMsgByUniqueKey",
            "queryMsgByOffset",
            "printMsg",
            "printMsgByQueue",
            "consumeMessage",
            "queryMsgTraceById",
            "decodeMessageId",
            "sendMessage",
        ),
    ),
    (
        "Topics and queues",
        (
            "topicList",
            "topicStatus",
            "queryCq",
            "updateTopic",
            "deleteTopic",
            "topicRoute",
            "exportMetadata",
        ),
    ),
    (
        "Consumer groups",
        ("consumerProgress", "resetOffsetByTime", "skipAccumulatedMessage", "cloneGroupOffset"),
    ),
    (
        "Store tools",
        (
            "check",
            "rebuild",
            "stats",
            "dump",
            "export",
            "dumpCompactionLog",
            "deleteExpiredCommitLog",
            "cleanExpiredCQ",
        ),
    ),
    ("Broker (RocketMQ's remoting protocol)", ("serve", "namesrv", "broker")),
)


class SectionedGroup(click.Group):
    """Lists commands by section, in the order above, instead of alphabetically."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        ordered = [name for _, names in SECTIONS for name in names if name in self.commands]
        return ordered + sorted(set(self.commands) - set(ordered))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        listed: set[str] = set()
        limit = 120  # write_dl wraps; do not cut the summaries short
        for title, names in (*SECTIONS, ("Other", tuple(sorted(self.commands)))):
            rows = []
            for name in names:
                command = self.commands.get(name)
                if command is None or name in listed or command.hidden:
                    continue
                listed.add(name)
                rows.append((name, command.get_short_help_str(limit)))
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


@click.group(cls=SectionedGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--store",
    "store_dir",
    default="./store",
    show_default=True,
    callback=non_empty_store,
    help="Store directory (a rocketstore or a RocketMQ broker's store root). "
    "Example: --store /var/rocketmq/store",
)
@click.option(
    "-c",
    "--config",
    "settings_file",
    default=None,
    metavar="FILE",
    help="A broker.conf (Java properties, as mqbroker -c takes): its store settings apply "
    "(maxHashSlotNum, maxIndexNum, mappedFileSizeCommitLog, flushDiskType, fileReservedTime, "
    "brokerIP1/listenPort...), its storePathRootDir is the store unless --store is given, "
    "and serve/broker take brokerName, brokerClusterName and listenPort from it. "
    "Example: -c /opt/rocketmq/conf/broker.conf",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object per line instead of tables. Example: rocketstore --json topicList",
)
@click.option(
    "--debug",
    is_flag=True,
    help="Show tracebacks and debug logging. Example: rocketstore --debug check",
)
@click.pass_context
def cli(
    ctx: click.Context, store_dir: str, settings_file: str | None, as_json: bool, debug: bool
) -> None:
    """rocketstore: RocketMQ's message store in Python, and offline tools for its files.

    Commands keep mqadmin's names and short flags and work on the files directly; read-only
    commands never take the writer lock, so they run beside a writer or a broker. Times
    are epoch ms, 'now' or yyyy-MM-dd#HH:mm:ss:SSS (local time). File sizes are taken from
    the files, so a copy of any broker's store directory works as it is.

    \b
    Example:
      rocketstore --store ./store queryMsgByKey -t TopicTest -k order-42
      rocketstore --store ./store --json topicStatus -t TopicTest
      rocketstore --store ./store check
    """
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.ERROR,
        format="%(levelname)s %(name)s: %(message)s",
    )
    store_given = ctx.get_parameter_source("store_dir") is not click.core.ParameterSource.DEFAULT
    ctx.obj = context_from_settings(
        settings_file, store_dir, store_given, as_json=as_json, debug=debug
    )


cli.add_command(demo)
for module in (
    messages,
    browse,
    consume_message,
    consumer_admin,
    queues,
    send,
    tools,
    stats,
    export,
    compaction_log,
    trace,
    retention,
    metadata_export,
):
    module.register(cli)
register_topic_admin(cli)
register_serve(cli)

# mqadmin's -n (every command) and -c cluster (the message queries, topicStatus): scripts
# written for mqadmin pass them; offline they name nothing to reach, so they are taken and
# ignored, as -b is. Commands whose own -n or -c means something keep it.
_MQADMIN_ONLY = {
    "-n": ("--namesrvAddr", set(cli.commands) - {"serve", "broker", "namesrv"}),
    "-c": (
        "--cluster",
        {"queryMsgByKey", "queryMsgById", "queryMsgByUniqueKey", "topicStatus"},
    ),
}
for _flag, (_long, _names) in _MQADMIN_ONLY.items():
    for _name in sorted(_names):
        _command = cli.commands[_name]
        if any(_flag in p.opts or _long in p.opts for p in _command.params):
            continue
        _command.params.append(
            click.Option(
                [_flag, _long],
                hidden=True,
                expose_value=False,
                metavar="IGNORED",
                help="Accepted for mqadmin compatibility, ignored offline. "
                f"Example: {_flag} {'127.0.0.1:9876' if _flag == '-n' else 'DefaultCluster'}",
            )
        )


def _error(message: str) -> int:
    click.echo(f"rocketstore: error: {message}", err=True)
    return 1


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    debug = "--debug" in args
    try:
        code = cli.main(args=args, prog_name="rocketstore", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("rocketstore: aborted", err=True)
        return 1
    except click.exceptions.ClickException as e:
        if debug and not isinstance(e, click.UsageError):
            traceback.print_exc()
        e.show()
        return 2 if isinstance(e, click.UsageError) else e.exit_code
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        click.echo("rocketstore: interrupted", err=True)
        return 130
    except (StoreError, OSError) as e:
        if debug:
            raise
        return _error(str(e) or type(e).__name__)
    except Exception as e:
        if debug:
            raise
        return _error(f"internal error: {type(e).__name__}: {e} (--debug shows the traceback)")
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
