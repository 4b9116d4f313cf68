"""``console``: the web console over a store directory, opened read-only.

Layer: cli. Options and messages only; the pages live in :mod:`rocketstore.console`
(which ``serve --http-listen`` serves live over a running broker).
"""

from __future__ import annotations

import signal
import threading

import click

from rocketstore.cli.context import READER_LIMITS, CliContext, CliError

CONSOLE_EXTRA_HINT = (
    "the web console needs the console extra: pip install 'rocketstore[console]' (Jinja2)"
)


def require_console() -> None:
    """CliError naming the extra when Jinja2 is not installed."""
    try:
        import jinja2  # noqa: F401, PLC0415
    except ImportError as e:
        raise CliError(CONSOLE_EXTRA_HINT) from e


@click.command("console", short_help="Web pages over the store (read-only): topics, lag, search.")
@click.option(
    "--listen",
    default="127.0.0.1:8080",
    show_default=True,
    metavar="HOST:PORT",
    help="Address the pages are served at (loopback unless told otherwise; port 0 picks "
    "one). Example: --listen 127.0.0.1:8080",
)
@click.pass_obj
def console(ctx: CliContext, listen: str) -> None:
    """Serve the web console over the store directory: topics and queues, consumer groups
    and their lag, message search (key, unique key, message id, time range, queue
    offset), a message's body and consume track, DLQ messages, rate charts and the
    store's health. The store is opened read-only (no lock: it works beside a running
    broker) and nothing is ever changed; `serve --http-listen` serves the same pages live,
    with actions when asked (docs/operations.md, Console).

    \b
    Example:
      rocketstore --store ./store console --listen 127.0.0.1:8080
    """
    require_console()
    from rocketstore.console import ConsoleServer, OfflineSource  # noqa: PLC0415

    source = OfflineSource(
        ctx.require_store_dir(),
        ctx.config.replace(**READER_LIMITS),
        broker_name=ctx.broker_name,
        cluster=ctx.broker_config().broker_cluster_name,
    )
    server = ConsoleServer(source, listen)
    # SIGINT and SIGTERM stop it, as they stop `serve`, with handlers of its own: one
    # started in the background by a shell inherits SIGINT ignored, and Python then
    # raises no KeyboardInterrupt (CI's runs ignored Ctrl-C for 90 s).
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        server.start()
        click.echo(
            f"rocketstore: console at http://{server.address}/ over {source.root} "
            "(read-only; Ctrl-C stops)",
            err=True,
        )
        # Woken twice a second: the kernel may hand a signal to any of the process's
        # threads, and a wait without a timeout on the main thread is then never
        # interrupted (a Python handler runs only once the main thread runs).
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
        source.close()


def register(cli: click.Group) -> None:
    cli.add_command(console)
