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
from dataclasses import replace
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
from rocketstore.broker.tls import ServerTls, TlsMode
from rocketstore.cli.console import require_console
from rocketstore.cli.context import CliContext, CliError, context_from_settings
from rocketstore.cli.params import java_int, non_empty_store
from rocketstore.config import FLUSH_TYPES, parse_host
from rocketstore.errors import ConfigError
from rocketstore.files.store_dir import with_dledger

FuncT = Callable[..., Any]


def _address(value: str, what: str) -> str:
    try:
        _host, port = parse_host(value, what=what)
    except ConfigError as e:
        raise CliError(str(e)) from e
    if port > 65535:
        raise CliError(f"{what}: port {port} is past 65535 (in {value!r})")
    return value


# --event-loop: asyncio's own loop, or uvloop's (a dependency where it has wheels: less
# broker CPU per request on every row of the broker benchmark, docs/broker.md).
EVENT_LOOPS = ("asyncio", "uvloop")
# The default: uvloop when it is installed, else asyncio's own.
DEFAULT_EVENT_LOOP = "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"

_TLS_OPTIONS = [
    click.option(
        "--tls-cert",
        "tls_cert",
        default=None,
        metavar="FILE",
        help="PEM certificate for TLS on the listeners (with --tls-key). "
        "Example: --tls-cert conf/server.pem",
    ),
    click.option(
        "--tls-key",
        "tls_key",
        default=None,
        metavar="FILE",
        help="PEM private key of --tls-cert. Example: --tls-key conf/server.key",
    ),
    click.option(
        "--tls-mode",
        "tls_mode",
        type=click.Choice([m.value for m in TlsMode]),
        default=None,
        help="RocketMQ's tls.server.mode: disabled, permissive (plain and TLS on one "
        "port; the default with --tls-cert) or enforcing (TLS only). "
        "Example: --tls-mode enforcing",
    ),
    click.option(
        "--tls-client-ca",
        "tls_client_ca",
        default=None,
        metavar="FILE",
        help="Require client certificates signed by this CA. Example: --tls-client-ca ca.pem",
    ),
]


def _broker_options(func: FuncT) -> FuncT:
    """The options ``serve`` and ``broker`` share."""
    options = [
        click.option(
            "--store",
            "store_override",
            default=None,
            callback=non_empty_store,
            metavar="DIR",
            help="Store directory (overrides the global --store). Example: --store ./store",
        ),
        click.option(
            "--listen",
            default=None,
            metavar="HOST:PORT",
            help="Broker address to listen on (loopback unless told otherwise) "
            "[default: 127.0.0.1:10911, or 127.0.0.1:listenPort of -c FILE]. "
            "Example: --listen 0.0.0.0:10911",
        ),
        click.option(
            "--advertise",
            default=None,
            metavar="IP",
            help="IP clients reach the broker at, when listening on 0.0.0.0 (also written "
            "into every stored message as its store host). Example: --advertise 192.168.1.20",
        ),
        click.option(
            "--broker-name",
            default=None,
            help="brokerName, unique per broker behind a name server "
            "[default: broker-a, or brokerName of -c FILE]. Example: --broker-name broker-b",
        ),
        click.option(
            "--cluster",
            default=None,
            help="brokerClusterName [default: DefaultCluster, or brokerClusterName of -c FILE]. "
            "Example: --cluster ProdCluster",
        ),
        click.option(
            "--event-loop",
            type=click.Choice(EVENT_LOOPS),
            default=DEFAULT_EVENT_LOOP,
            show_default=True,
            help="The event loop the broker runs on: uvloop (installed with rocketstore "
            "where it has wheels) spends less CPU per request and is the default when "
            "installed; asyncio is the standard library's own (docs/broker.md, More "
            "cores). Example: --event-loop asyncio",
        ),
        click.option(
            "--flush",
            type=click.Choice(FLUSH_TYPES),
            default=None,
            help="SYNC_FLUSH answers a send only once the message is on disk "
            "[default: ASYNC_FLUSH, or flushDiskType of -c FILE]. Example: --flush SYNC_FLUSH",
        ),
        click.option(
            "--role",
            type=click.Choice(("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")),
            default=None,
            help="brokerRole: SYNC_MASTER answers a send once a slave has it, SLAVE follows "
            "a master (docs/broker.md, Replication) [default: ASYNC_MASTER, or brokerRole "
            "of -c FILE]. Example: --role SLAVE",
        ),
        click.option(
            "--broker-id",
            type=java_int(0),
            default=None,
            help="brokerId: 0 for a master, > 0 for a slave [default: 0; 1 with --role "
            "SLAVE; or brokerId of -c FILE]. Example: --broker-id 2",
        ),
        click.option(
            "--ha-port",
            type=click.IntRange(0, 65535),
            default=None,
            help="haListenPort, where a master listens for its slaves [default: the "
            "--listen port + 1, or haListenPort of -c FILE]. Example: --ha-port 10912",
        ),
        click.option(
            "--ha-master",
            default=None,
            metavar="HOST:PORT",
            help="haMasterAddress, a slave's master (its HA port) [default: learned from the "
            "name server, or haMasterAddress of -c FILE]. Example: --ha-master "
            "10.0.0.5:10912",
        ),
        click.option(
            "--no-auto-create",
            is_flag=True,
            help="Refuse sends to unknown topics (autoCreateTopicEnable=false). "
            "Example: --no-auto-create",
        ),
        click.option(
            "--enable-property-filter",
            is_flag=True,
            help="Serve consumers that subscribe with a SQL92 selector "
            "(enablePropertyFilter=true; off by default, as in RocketMQ). "
            "Example: --enable-property-filter",
        ),
        click.option(
            "--offset-persist-ms",
            type=java_int(100),
            default=None,
            help="How often committed consumer offsets are written to "
            "config/consumerOffset.json [default: 5000, or flushConsumerOffsetInterval of "
            "-c FILE]. Example: --offset-persist-ms 1000",
        ),
        click.option(
            "--metrics-listen",
            default=None,
            metavar="HOST:PORT",
            help="Serve Prometheus metrics at http://HOST:PORT/metrics (RocketMQ 5's names; "
            "docs/operations.md, Metrics). Off by default. Example: --metrics-listen "
            "127.0.0.1:5557",
        ),
        click.option(
            "--http-listen",
            default=None,
            metavar="HOST:PORT",
            help="Serve the web console live at http://HOST:PORT/ (the pages of "
            "`rocketstore console`, over this broker; needs the console extra; "
            "docs/operations.md, Console). Off by default. Example: --http-listen "
            "127.0.0.1:8080",
        ),
        click.option(
            "--console-actions",
            is_flag=True,
            help="Let the --http-listen console resend DLQ messages, reset offsets and create "
            "topics (as an ACL account allowed to, with --acl). Example: --console-actions",
        ),
        click.option(
            "--grpc-listen",
            default=None,
            metavar="HOST:PORT",
            help="Also serve RocketMQ 5.x clients (gRPC MessagingService, as a 5.x proxy) "
            "at this address; needs the grpc extra (docs/broker.md, 5.x clients). "
            "Example: --grpc-listen 127.0.0.1:8081",
        ),
        click.option(
            "--grpc-tls-mode",
            type=click.Choice([m.value for m in TlsMode]),
            default=None,
            help="TLS on the --grpc-listen port, as the 5.x proxy's tls.server.mode: "
            "permissive (plain and TLS on one port, through a relay), enforcing (TLS only) "
            "or disabled (plain only). Default: --tls-mode with the --tls-cert certificate; "
            "without --tls-cert permissive with a self-signed certificate (the proxy's "
            "tlsTestModeEnable). Example: --grpc-tls-mode disabled",
        ),
        click.option(
            "--acl",
            "acl_file",
            default=None,
            metavar="FILE",
            help="plain_acl.yml (RocketMQ 4.9's plain ACL): every request is authenticated "
            "and authorized by it; reloaded when it changes. Example: --acl conf/plain_acl.yml",
        ),
        *_TLS_OPTIONS,
    ]
    for option in reversed(options):
        func = option(func)
    return func


def server_tls(kwargs: dict[str, Any]) -> ServerTls | None:
    """--tls-cert / --tls-key / --tls-mode / --tls-client-ca as the listeners' TLS."""
    cert, key, mode = kwargs.get("tls_cert"), kwargs.get("tls_key"), kwargs.get("tls_mode")
    if cert is None and key is None:
        if mode not in (None, TlsMode.DISABLED.value) or kwargs.get("tls_client_ca"):
            raise CliError("--tls-mode and --tls-client-ca need --tls-cert and --tls-key")
        return None
    if cert is None or key is None:
        raise CliError("--tls-cert and --tls-key go together")
    tls = ServerTls(
        cert, key, TlsMode(mode or TlsMode.PERMISSIVE.value), kwargs.get("tls_client_ca")
    )
    try:
        tls.server_context()  # a bad certificate or key is named before anything listens
    except ConfigError as e:
        raise CliError(str(e)) from e
    return tls


def _tls_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_TLS_OPTIONS):
        func = option(func)
    return func


def _make_options(obj: CliContext, kwargs: dict[str, Any]) -> BrokerOptions:
    """The broker's options: each command-line option given, else the -c file's setting,
    else the default."""
    store_dir = kwargs["store_override"] or obj.store_dir
    broker = obj.broker_config()
    given = {
        "broker_cluster_name": kwargs["cluster"],
        "broker_name": kwargs["broker_name"],
        "flush_consumer_offset_interval_ms": kwargs["offset_persist_ms"],
    }
    if kwargs["no_auto_create"]:
        given["auto_create_topic_enable"] = False
    if kwargs["enable_property_filter"]:
        given["enable_property_filter"] = True
    # (.get: callers that build the options by hand may leave the role options out)
    role, broker_id = kwargs.get("role"), kwargs.get("broker_id")
    if role is not None:
        given["broker_role"] = role
        if role == "SLAVE" and broker_id is None and broker.broker_id <= 0:
            broker_id = 1  # a slave needs an id > 0; the first slave's is 1
    given["broker_id"] = broker_id
    given["ha_listen_port"] = kwargs.get("ha_port")
    if kwargs.get("ha_master"):
        given["ha_master_address"] = _address(kwargs["ha_master"], "--ha-master")
    try:
        broker = replace(broker, **{k: v for k, v in given.items() if v is not None})
        broker.validate()  # a bad role or id named before anything starts
    except ConfigError as e:
        raise CliError(str(e)) from e
    store_config = obj.writer_config
    if obj.settings_path and os.path.realpath(store_dir) != os.path.realpath(obj.store_dir):
        # Another store than the context's: the file's CommitLog paths as the global
        # --store would take them (context_from_settings).
        moved = context_from_settings(
            obj.settings_path, store_dir, True, as_json=obj.as_json, debug=obj.debug
        )
        store_config = moved.writer_config
    if kwargs["flush"] is not None:
        store_config = store_config.replace(flush_disk_type=kwargs["flush"])
    try:
        # A store no broker of ours can write (a DLedger log, every path read-only) is
        # refused before any server listens.
        with_dledger(store_dir, store_config).commit_log_dirs(store_dir).require_writable()
    except ConfigError as e:
        raise CliError(str(e)) from e
    listen = kwargs["listen"]
    if listen is None:
        port = obj.settings.get("listenPort", "").strip() or "10911"
        listen = f"127.0.0.1:{port}"
    return BrokerOptions(
        store_dir=store_dir,
        listen=_address(listen, "--listen" if kwargs["listen"] else "listenPort"),
        broker=broker,
        store_config=store_config,
        advertise_host=kwargs["advertise"],
        acl_file=kwargs["acl_file"],
        # (.get: callers that build the options by hand may leave the TLS options out)
        tls=server_tls(kwargs),
        settings_path=obj.settings_path or None,
        # (.get: callers that build the options by hand may leave it out)
        metrics_listen=(
            _address(kwargs["metrics_listen"], "--metrics-listen")
            if kwargs.get("metrics_listen")
            else None
        ),
        grpc_listen=(
            _address(kwargs["grpc_listen"], "--grpc-listen") if kwargs.get("grpc_listen") else None
        ),
        grpc_tls_mode=TlsMode(kwargs["grpc_tls_mode"]) if kwargs.get("grpc_tls_mode") else None,
    )


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
    _address(listen, "--http-listen")
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
@_broker_options
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
    options = _make_options(obj, kwargs)
    app = ServeApp(options, _address(namesrv_listen, "--namesrv-listen"))
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
@_tls_options
def namesrv(listen: str, kv_config: str, acl_file: str | None, **tls: Any) -> None:
    """Run a name server alone; brokers register with it (rocketstore broker --namesrv).

    \b
    Example:
      rocketstore namesrv --listen 127.0.0.1:9876
    """
    try:
        app = NamesrvApp(
            _address(listen, "--listen"),
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
@_broker_options
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
    options = _make_options(obj, kwargs)
    addrs = [a.strip() for a in namesrv_addrs.split(";") if a.strip()]
    options.namesrv_addrs = [_address(a, "--namesrv") for a in addrs]
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
