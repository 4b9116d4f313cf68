"""The options of ``serve`` and ``broker`` (and the TLS options ``namesrv`` shares): their
declarations, and how they and a ``-c`` file become a broker's :class:`BrokerOptions`.

Layer: cli. Declarations and checks only; the commands are in :mod:`rocketstore.cli.serve`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import click

from rocketstore.broker.app import BrokerOptions
from rocketstore.broker.tls import ServerTls, TlsMode
from rocketstore.cli.context import CliContext, CliError, context_from_settings
from rocketstore.cli.params import java_int, non_empty_store
from rocketstore.config import FLUSH_TYPES, parse_host
from rocketstore.errors import ConfigError
from rocketstore.files.store_dir import with_dledger

FuncT = Callable[..., Any]


def checked_address(value: str, what: str) -> str:
    """``value`` if it is ``host:port`` with a port RocketMQ can listen on, else a CliError
    naming ``what``."""
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

TLS_OPTIONS = [
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


def broker_options(func: FuncT) -> FuncT:
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
        *TLS_OPTIONS,
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


def tls_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(TLS_OPTIONS):
        func = option(func)
    return func


def make_options(obj: CliContext, kwargs: dict[str, Any]) -> BrokerOptions:
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
        given["ha_master_address"] = checked_address(kwargs["ha_master"], "--ha-master")
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
        listen=checked_address(listen, "--listen" if kwargs["listen"] else "listenPort"),
        broker=broker,
        store_config=store_config,
        advertise_host=kwargs["advertise"],
        acl_file=kwargs["acl_file"],
        # (.get: callers that build the options by hand may leave the TLS options out)
        tls=server_tls(kwargs),
        settings_path=obj.settings_path or None,
        # (.get: callers that build the options by hand may leave it out)
        metrics_listen=(
            checked_address(kwargs["metrics_listen"], "--metrics-listen")
            if kwargs.get("metrics_listen")
            else None
        ),
        grpc_listen=(
            checked_address(kwargs["grpc_listen"], "--grpc-listen")
            if kwargs.get("grpc_listen")
            else None
        ),
        grpc_tls_mode=TlsMode(kwargs["grpc_tls_mode"]) if kwargs.get("grpc_tls_mode") else None,
    )
