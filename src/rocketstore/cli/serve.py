"""``serve``, ``namesrv`` and ``broker``: run RocketMQ's name server and broker over a store.

Layer: cli. Options and messages only; the servers live in :mod:`rocketstore.broker.app`.
Every command runs until Ctrl-C or SIGTERM and then shuts down cleanly (store closed, no
abort file, offsets persisted).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from rocketstore.broker.app import (
    BrokerApp,
    BrokerOptions,
    NamesrvApp,
    ServeApp,
    Service,
    run_until_signal,
)
from rocketstore.broker.children import ChildBroker, ChildBrokers, die_with_serve
from rocketstore.cli.console import require_console
from rocketstore.cli.context import CliContext, CliError
from rocketstore.cli.serve_options import (
    DEFAULT_EVENT_LOOP,
    EVENT_LOOPS,
    broker_options,
    checked_address,
    make_options,
    server_tls,
    tls_options,
)
from rocketstore.config import parse_host
from rocketstore.errors import ConfigError

# The commands, and the names serve has always offered (now defined in serve_options).
__all__ = [
    "CHILD_PORT_STEP",
    "DEFAULT_EVENT_LOOP",
    "EVENT_LOOPS",
    "broker",
    "namesrv",
    "register",
    "serve",
    "server_tls",
]


def _metrics_note(app: BrokerApp | None) -> str:
    if app is None or app.metrics is None:
        return ""
    return f", metrics at http://{app.metrics.address}/metrics"


def _console_service(app: Callable[[], BrokerApp | None], kwargs: dict[str, Any]) -> Service | None:
    """The --http-listen console over the broker ``app`` gives once started, or None."""
    listen = kwargs.get("http_listen")
    if not listen:
        if kwargs.get("console_actions"):
            raise CliError("--console-actions needs --http-listen")
        return None
    checked_address(listen, "--http-listen")
    require_console()
    from rocketstore.console import ConsoleServer, ConsoleService, LiveSource  # noqa: PLC0415

    def make() -> ConsoleServer:
        broker = app()
        assert broker is not None and broker.ctx is not None
        return ConsoleServer(
            LiveSource(broker.ctx), listen, actions=bool(kwargs.get("console_actions"))
        )

    return ConsoleService(make)


def _console_note(service: Service | None) -> str:
    server = getattr(service, "server", None)
    return "" if server is None else f", console at http://{server.address}/"


def _loop_factory(event_loop: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The loop ``--event-loop`` names (None: asyncio's own); CliError when uvloop is
    asked for and not installed."""
    if event_loop != "uvloop":
        return None
    try:  # (an optional extra: imported by name, so type checks need not have it)
        uvloop = importlib.import_module("uvloop")
    except ImportError as e:
        raise CliError("--event-loop uvloop needs uvloop: pip install uvloop") from e
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def _run(services: list[Service], ready: Callable[[], None], event_loop: str = "asyncio") -> None:
    factory = _loop_factory(event_loop)
    logging.getLogger("rocketstore").setLevel(logging.INFO)
    if not logging.getLogger().handlers:
        logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.setLevel(logging.NOTSET)
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(run_until_signal(services, ready))
    click.echo("rocketstore: stopped", err=True)


@click.command("serve")
@broker_options
@click.option(
    "--namesrv-listen",
    default="127.0.0.1:9876",
    show_default=True,
    help="Name server address to listen on. Example: --namesrv-listen 0.0.0.0:9876",
)
@click.option(
    "--brokers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Brokers to run behind the name server, each a process of its own (one core "
    "each): the first over the store, broker K over STORE-K as BROKER_NAME-K, listening "
    "10 ports further per broker (docs/broker.md, More cores). Example: --brokers 2",
)
@click.pass_obj
def serve(obj: CliContext, /, namesrv_listen: str, brokers: int, **kwargs: Any) -> None:
    """Run a name server and a broker over the store, in one process.

    Point any RocketMQ 4.x client at the name server address (docs/broker.md).

    \b
    Example:
      rocketstore serve --store ./store
      rocketstore serve --listen 127.0.0.1:10911 --namesrv-listen 127.0.0.1:9876
      rocketstore serve --store ./store --brokers 2     # + broker-a-2 over ./store-2
    """
    options = make_options(obj, kwargs)
    app = ServeApp(options, checked_address(namesrv_listen, "--namesrv-listen"))
    services: list[Service] = [app]
    console = _console_service(lambda: app.broker, kwargs)
    if console is not None:
        services.append(console)
    if brokers > 1:
        if any(kwargs.get(name) is not None for name in ("role", "broker_id", "ha_master")):
            raise CliError(
                "--role, --broker-id and --ha-master are for one broker: run each master "
                "and slave with its own `rocketstore broker` (docs/broker.md, Replication)"
            )
        if parse_host(options.listen, what="--listen")[1] == 0:
            raise CliError("--brokers needs a fixed --listen port (its brokers listen 10 apart)")

        def children() -> list[ChildBroker]:
            return _child_brokers(obj, options, app.namesrv.address, brokers, kwargs)

        services.append(ChildBrokers(children))

    def ready() -> None:
        extra = f" and {brokers - 1} more broker(s)" if brokers > 1 else ""
        grpc = ""
        if app.broker is not None and app.broker.grpc_server is not None:
            grpc = f", gRPC {app.broker.grpc_server.address}"
        click.echo(
            f"rocketstore: name server {app.namesrv.address}, broker "
            f"{app.broker.address if app.broker else '?'}{grpc} over {options.store_dir}{extra}"
            f"{_metrics_note(app.broker)}{_console_note(console)} (Ctrl-C stops)",
            err=True,
        )

    _run(services, ready, kwargs["event_loop"])


# Port distance between the brokers of serve --brokers (each also takes its port + 1 for
# replication).
CHILD_PORT_STEP = 10


def _child_endpoints(kwargs: dict[str, Any], k: int) -> list[str]:
    """Broker ``k``'s --metrics-listen and --http-listen: serve's own port + k - 1 (each
    broker its endpoint, side by side), or port 0 (any) when serve's is 0."""
    passed: list[str] = []
    for name in ("metrics_listen", "http_listen"):
        address = kwargs.get(name)
        if not address:
            continue
        host, port = parse_host(address, what="--" + name.replace("_", "-"))
        port = port + k - 1 if port else 0
        passed += [
            "--" + name.replace("_", "-"),
            f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
        ]
    return passed


def _child_brokers(
    obj: CliContext,
    options: BrokerOptions,
    namesrv_address: str,
    brokers: int,
    kwargs: dict[str, Any],
) -> list[ChildBroker]:
    """``rocketstore broker`` command lines for brokers 2..N: serve's own options, each
    with its store, name and address, registering with ``namesrv_address`` (the bound
    name server)."""
    host, port = parse_host(options.listen, what="--listen")
    ns_host, ns_port = parse_host(namesrv_address, what="name server address")
    if ns_host in ("0.0.0.0", "::"):
        ns_host = "127.0.0.1"
    passed: list[str] = []
    names = ("advertise", "cluster", "flush", "offset_persist_ms", "acl_file")
    for name in (*names, "tls_cert", "tls_key", "tls_mode", "tls_client_ca"):
        if kwargs.get(name) is not None:
            flag = "--acl" if name == "acl_file" else "--" + name.replace("_", "-")
            passed += [flag, str(kwargs[name])]
    for name in ("no_auto_create", "enable_property_filter", "console_actions"):
        if kwargs.get(name):
            passed.append("--" + name.replace("_", "-"))
    # (always named: a child's default could differ from what this serve runs on)
    passed += ["--event-loop", kwargs.get("event_loop", DEFAULT_EVENT_LOOP)]
    prefix = [sys.executable, "-m", "rocketstore.cli.main"]
    if obj.settings_path:
        prefix += ["-c", obj.settings_path]
    children = []
    for k in range(2, brokers + 1):
        listen = f"{host}:{port + CHILD_PORT_STEP * (k - 1)}"
        if ":" in host:
            listen = f"[{host}]:{port + CHILD_PORT_STEP * (k - 1)}"
        argv = [
            *prefix,
            "broker",
            "--namesrv",
            f"{ns_host}:{ns_port}",
            "--store",
            f"{options.store_dir.rstrip(os.sep)}-{k}",
            "--broker-name",
            f"{options.broker.broker_name}-{k}",
            "--listen",
            listen,
            *passed,
            *_child_endpoints(kwargs, k),
        ]
        children.append(ChildBroker(argv, listen))
    return children


@click.command("namesrv")
@click.option(
    "--listen",
    default="127.0.0.1:9876",
    show_default=True,
    help="Address to listen on (loopback unless told otherwise). Example: --listen 0.0.0.0:9876",
)
@click.option(
    "--kv-config",
    "kv_config",
    default=os.path.join("~", "namesrv", "kvConfig.json"),
    show_default=True,
    help="Where the KV config table (updateKvConfig, updateOrderConf) is kept, as "
    "RocketMQ's kvConfigPath. Example: --kv-config /var/rocketmq/namesrv/kvConfig.json",
)
@click.option(
    "--acl",
    "acl_file",
    default=None,
    metavar="FILE",
    help="plain_acl.yml: broker registrations and setting changes must then be signed by "
    "an admin account (a broker started with the same file signs with its first) or come "
    "from a white-listed address. Example: --acl conf/plain_acl.yml",
)
@tls_options
def namesrv(listen: str, kv_config: str, acl_file: str | None, **tls: Any) -> None:
    """Run a name server alone; brokers register with it (rocketstore broker --namesrv).

    \b
    Example:
      rocketstore namesrv --listen 127.0.0.1:9876
    """
    try:
        app = NamesrvApp(
            checked_address(listen, "--listen"),
            kv_config_path=os.path.expanduser(kv_config),
            acl_file=acl_file,
            tls=server_tls(tls),
        )
    except ConfigError as e:
        raise CliError(str(e)) from e

    def ready() -> None:
        click.echo(f"rocketstore: name server {app.address} (Ctrl-C stops)", err=True)

    _run([app], ready)


@click.command("broker")
@click.option(
    "--namesrv",
    "namesrv_addrs",
    required=True,
    metavar="HOST:PORT[;HOST:PORT]",
    help="Name server(s) to register with. Example: --namesrv 10.0.0.5:9876;10.0.0.6:9876",
)
@broker_options
@click.pass_obj
def broker(obj: CliContext, /, namesrv_addrs: str, **kwargs: Any) -> None:
    """Run a broker over the store, registered with name servers started apart.

    Several brokers (distinct --broker-name and store) registering with one name server
    share a topic's queues between them.

    \b
    Example:
      rocketstore --store ./store-a broker --namesrv 127.0.0.1:9876 --broker-name broker-a
      rocketstore --store ./store-b broker --namesrv 127.0.0.1:9876 --broker-name broker-b \\
          --listen 127.0.0.1:10921
    """
    die_with_serve()  # (a child of serve --brokers: stops when serve does, even SIGKILLed)
    options = make_options(obj, kwargs)
    addrs = [a.strip() for a in namesrv_addrs.split(";") if a.strip()]
    options.namesrv_addrs = [checked_address(a, "--namesrv") for a in addrs]
    app = BrokerApp(options)
    console = _console_service(lambda: app, kwargs)

    def ready() -> None:
        click.echo(
            f"rocketstore: broker {options.broker.broker_name} at {app.address} over "
            f"{options.store_dir}, registered with {', '.join(addrs)}{_metrics_note(app)}"
            f"{_console_note(console)} (Ctrl-C stops)",
            err=True,
        )

    _run([app] if console is None else [app, console], ready, kwargs["event_loop"])


def register(cli: click.Group) -> None:
    for command in (serve, namesrv, broker):
        cli.add_command(command)
