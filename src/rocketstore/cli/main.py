"""Entry point of the ``rocketstore`` console script: global options and error handling.

Errors print one line ``rocketstore: error: ...`` and exit 1 (usage errors exit 2);
``--debug`` shows the traceback.
"""

from __future__ import annotations

import logging
import sys

import click

from rocketstore.cli.context import CliContext
from rocketstore.cli.demo import demo
from rocketstore.cli.messages import register as register_message_commands
from rocketstore.errors import StoreError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--store",
    "store_dir",
    default="./store",
    show_default=True,
    help="Store directory (a rocketstore or a RocketMQ broker's store root).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line.")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logging.")
@click.pass_context
def cli(ctx: click.Context, store_dir: str, as_json: bool, debug: bool) -> None:
    """rocketstore: RocketMQ's message store in Python, and offline tools for its files.

    Example: rocketstore --store ./store queryMsgByKey -t TopicTest -k order-42
    """
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.ERROR,
        format="%(levelname)s %(name)s: %(message)s",
    )
    ctx.obj = CliContext(store_dir=store_dir, as_json=as_json, debug=debug)


cli.add_command(demo)
register_message_commands(cli)


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        cli.main(args=argv, prog_name="rocketstore", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("rocketstore: aborted", err=True)
        return 1
    except click.exceptions.ClickException as e:
        e.show()
        return 2 if isinstance(e, click.UsageError) else 1
    except (StoreError, OSError) as e:
        if debug:
            raise
        click.echo(f"rocketstore: error: {e}", err=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
