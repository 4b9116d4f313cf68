"""dumpCompactionLog: print every record of one file in CommitLog record format, as
mqadmin's dumpCompactionLog does for the compaction logs of RocketMQ 5.x's compacted
topics (``compaction/compactionLog/<topic>/<queueId>/<offset>``).

Layer: cli. Works on the file alone, offline, with no store: one
``MessageExt.toString()`` line per record (decoded without its body, so ``body=null``),
in file order, until the first place that holds no record (zeros, an END_OF_FILE blank or
damage), where mqadmin's dump stops too.
"""

from __future__ import annotations

import mmap
import os
from typing import cast

import click

from rocketstore.cli.context import CliContext, CliError, open_regular_file
from rocketstore.cli.render import message_json, message_to_string
from rocketstore.errors import CorruptDataError, IncompleteDataError
from rocketstore.format import record as rec


@click.command("dumpCompactionLog", short_help="Every record of a compaction log file.")
@click.option(
    "-f",
    "--file",
    "path",
    required=True,
    help="The file to dump. Example: -f store/compaction/compactionLog/T/0/00000000000000000000",
)
@click.pass_obj
def dump_compaction_log(ctx: CliContext, path: str) -> None:
    """Print each record of FILE (CommitLog record format) as mqadmin's
    dumpCompactionLog does: one MessageExt.toString() line per record, bodies not read.
    --store is not used.

    \b
    Example:
      rocketstore dumpCompactionLog -f store/compaction/compactionLog/T/0/00000000000000000000
    """
    if not os.path.exists(path):
        raise CliError(f"file {path} not exist.")
    if os.path.isdir(path):  # mqadmin's two messages, word for word
        raise CliError(f"file {path} is a directory.")
    try:
        with open_regular_file(path, "file") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                # The codecs take any buffer; an mmap is one (typeshed says otherwise).
                _print_records(ctx, cast(bytes, buf), size)
    except BrokenPipeError:
        raise  # the reader of our output went away (| head): main stops quietly
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror or e}") from e


def _print_records(ctx: CliContext, buf: bytes, size: int) -> None:
    position = 0
    while position < size:
        try:
            found = rec.read_record(buf, position)
        except (CorruptDataError, IncompleteDataError):
            return
        if isinstance(found, rec.Blank):
            return
        message = rec.to_message_ext(buf, found, read_body=False)
        if ctx.as_json:
            ctx.emit(message_json(message, with_body=False))
        else:
            # Decoded straight from the file: no broker name (mqadmin prints null).
            click.echo(message_to_string(message, with_body=False, broker_name="null"))
        position += found.size


def register(group: click.Group) -> None:
    group.add_command(dump_compaction_log)
