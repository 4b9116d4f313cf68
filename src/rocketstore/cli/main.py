"""Entry point of the ``rocketstore`` console script: global options and error handling.

Errors print one line ``rocketstore: error: ...`` and exit 1 (usage errors exit 2);
``--debug`` shows the traceback.

A command's module is imported when the command runs (or shows its help), not at start:
``rocketstore --help`` lists the commands from the table below, so it needs none of them.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import traceback
from typing import NamedTuple

import click

from rocketstore.cli.params import non_empty_store
from rocketstore.errors import StoreError


class Entry(NamedTuple):
    """A command as ``rocketstore --help`` lists it, and where it lives."""

    name: str
    # Under rocketstore.cli: its register(group) adds the command (demo's module, its `demo`).
    module: str
    # The command's own short help, as --help shows it (tests/cli/test_help_output.py
    # holds the two the same); None for an alias left out of the help.
    summary: str | None


# How ``rocketstore --help`` groups the commands, in order; UNLISTED ones go under "Other".
SECTIONS: dict[str, tuple[Entry, ...]] = {
    "Messages (mqadmin's names)": (
        Entry(
            "queryMsgByKey", "messages", "Messages of a topic by a KEYS token (through the index)."
        ),
        Entry("queryMsgById", "messages", "Messages by offsetMsgId (a comma-separated list)."),
        Entry(
            "queryMsgByUniqueKey",
            "messages",
            "Messages of a topic by UNIQ_KEY (the client's msgId).",
        ),
        Entry("queryMsgByOffset", "messages", "The message at a queue offset."),
        Entry("printMsg", "browse", "Every message of a topic, queue by queue."),
        Entry("printMsgByQueue", "browse", "One queue: its messages and per-tag counts."),
        Entry("consumeMessage", "consume_message", "Pull and print up to N messages of a topic."),
        Entry("queryMsgTraceById", "trace", "The trace of a message (producer, consumers)."),
        Entry("decodeMessageId", "messages", "Decode an id as a UNIQ_KEY and as an offsetMsgId."),
        Entry("sendMessage", "send", "Append one message (takes the writer lock)."),
    ),
    "Topics and queues": (
        Entry("topicList", "queues", "The topics in the store."),
        Entry("topicStatus", "queues", "Min and max offset and last update of each queue."),
        Entry("queryCq", "queues", "Raw consume-queue units and the records they point to."),
        Entry("updateTopic", "topic_admin", "Create a topic or change its queues and perm."),
        Entry("deleteTopic", "topic_admin", "Remove a topic from the store's topic config."),
        Entry("topicRoute", "topic_admin", "The route a name server gives for a topic."),
        Entry(
            "exportMetadata", "metadata_export", "Topic and group configs as mqadmin exports them."
        ),
    ),
    "Consumer groups": (
        Entry("consumerProgress", "consumer_admin", "How far each consumer group is behind."),
        Entry(
            "resetOffsetByTime",
            "consumer_admin",
            "Move a group's offsets to a time (stopped store).",
        ),
        Entry("skipAccumulatedMessage", "consumer_admin", "Move a group to the end of a topic."),
        Entry("cloneGroupOffset", "consumer_admin", "Give a group another group's offsets."),
    ),
    "Store tools": (
        Entry("check", "tools", "Verify records, queues and index (--repair fixes)."),
        Entry("rebuild", "tools", "Rebuild consume queues and index from the CommitLog."),
        Entry("stats", "stats", "Files, sizes, message counts, time span, lag, disk."),
        Entry("console", "console", "Web pages over the store (read-only): topics, lag, search."),
        Entry("compare", "compare", "Is one store's CommitLog a prefix of another's (a slave's)."),
        Entry("dump", "export", "CommitLog records as JSON lines (bodies base64)."),
        Entry("export", "export", "Write records to a jsonl or parquet file."),
        Entry("dumpCompactionLog", "compaction_log", "Every record of a compaction log file."),
        Entry("deleteExpiredCommitLog", "retention", "Delete expired CommitLog files now."),
        Entry("cleanExpiredCQ", "retention", "Delete consume queues whose messages are all gone."),
    ),
    "ACL of running brokers (mqadmin's names)": (
        Entry("updateAclConfig", "acl_admin", "Create or change an ACL account on brokers."),
        Entry("deleteAclConfig", "acl_admin", "Delete an ACL account from brokers."),
        Entry("updateGlobalWhiteAddr", "acl_admin", "Set the ACL file's global IP white list."),
        Entry("clusterAclConfigVersion", "acl_admin", "The version of the brokers' ACL files."),
    ),
    "Broker (RocketMQ's remoting protocol)": (
        Entry("serve", "serve", "Run a name server and a broker over the store, in one process."),
        Entry(
            "namesrv",
            "serve",
            "Run a name server alone; brokers register with it (rocketstore broker --namesrv).",
        ),
        Entry(
            "broker",
            "serve",
            "Run a broker over the store, registered with name servers started apart.",
        ),
    ),
}
UNLISTED = (
    Entry(
        "demo",
        "demo",
        "Write a workload (3 topics x 4 queues, tags, keys, UNIQ_KEYs) into --store, then "
        "query it by key, unique key, time...",
    ),
    # mqadmin's own spellings.
    Entry("DecodeMessageId", "messages", None),
    Entry("QueryMsgTraceById", "trace", None),
    Entry("getAclConfig", "acl_admin", None),
)
ENTRIES = {entry.name: entry for entries in SECTIONS.values() for entry in entries} | {
    entry.name: entry for entry in UNLISTED
}

# mqadmin's -n (every command) and -c cluster (the message queries, topicStatus): scripts
# written for mqadmin pass them; offline they name nothing to reach, so they are taken and
# ignored, as -b is. Commands whose own -n or -c means something keep it.
_MQADMIN_ONLY = {
    "-n": ("--namesrvAddr", set(ENTRIES) - {"serve", "broker", "namesrv"}),
    "-c": (
        "--cluster",
        {"queryMsgByKey", "queryMsgById", "queryMsgByUniqueKey", "topicStatus"},
    ),
}


def _take_mqadmin_options(name: str, command: click.Command) -> None:
    for flag, (long, names) in _MQADMIN_ONLY.items():
        if name not in names or any(flag in p.opts or long in p.opts for p in command.params):
            continue
        command.params.append(
            click.Option(
                [flag, long],
                hidden=True,
                expose_value=False,
                metavar="IGNORED",
                help="Accepted for mqadmin compatibility, ignored offline. "
                f"Example: {flag} {'127.0.0.1:9876' if flag == '-n' else 'DefaultCluster'}",
            )
        )


class SectionedGroup(click.Group):
    """Lists commands by section, in the order above, instead of alphabetically, and
    imports a command's module only when the command is looked up."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        ordered = [entry.name for entries in SECTIONS.values() for entry in entries]
        return ordered + sorted(set(ENTRIES) - set(ordered))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = ENTRIES.get(cmd_name)
        if cmd_name not in self.commands and entry is not None:
            self._load(entry.module)
        return self.commands.get(cmd_name)

    def all_commands(self) -> dict[str, click.Command]:
        """Every command, loaded (their modules imported): for tests and tools."""
        for entry in ENTRIES.values():
            if entry.name not in self.commands:
                self._load(entry.module)
        return dict(self.commands)

    def _load(self, module_name: str) -> None:
        module = importlib.import_module(f"rocketstore.cli.{module_name}")
        before = set(self.commands)
        register = getattr(module, "register", None)
        if register is None:
            self.add_command(getattr(module, module_name))
        else:
            register(self)
        for name in sorted(set(self.commands) - before):
            _take_mqadmin_options(name, self.commands[name])

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        unlisted = tuple(sorted(UNLISTED, key=lambda entry: entry.name))
        for title, entries in (*SECTIONS.items(), ("Other", unlisted)):
            rows = [(entry.name, entry.summary) for entry in entries if entry.summary is not None]
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
    # Imported here: ``--help`` never gets this far, and needs none of the store.
    from rocketstore.cli.context import context_from_settings  # noqa: PLC0415
    from rocketstore.cli.progress import set_quiet, show_recovery_progress  # noqa: PLC0415

    logging.basicConfig(
        level=logging.DEBUG if debug else logging.ERROR,
        format="%(levelname)s %(name)s: %(message)s",
    )
    set_quiet(as_json)
    show_recovery_progress(as_json=as_json)
    store_given = ctx.get_parameter_source("store_dir") is not click.core.ParameterSource.DEFAULT
    ctx.obj = context_from_settings(
        settings_file, store_dir, store_given, as_json=as_json, debug=debug
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
