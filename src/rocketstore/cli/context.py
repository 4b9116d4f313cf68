"""Shared CLI state: the global options, opening the store, lookups every command needs,
the CLI's own error and JSON output.

Layer: cli (top). Read-only commands open the store with ``read_only=True`` and so never
take the writer lock; only ``sendMessage``, ``rebuild`` and ``check --repair`` write.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import json
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import click

from rocketstore.broker.broker_config import BrokerConfig, broker_config_from_settings
from rocketstore.config import StoreConfig, parse_host
from rocketstore.errors import ConfigError, StoreError
from rocketstore.files.regular_file import open_regular_file as files_open_regular_file
from rocketstore.files.store_dir import missing_commitlog, with_dledger
from rocketstore.format.dledger_entry import END_OF_DATA
from rocketstore.index_catalog import file_geometry, index_files, settled_geometries
from rocketstore.paths import ABORT_FILE, MULTI_PATH_SPLITTER, CommitLogDirs, index_dir
from rocketstore.settings_file import (
    COMMITLOG_PATH_KEYS,
    parse_java_properties,
    store_config_from_settings,
)
from rocketstore.store import MessageStore

# mqadmin prints a broker name in several tables; offline there is only this store.
BROKER_NAME = "localStore"
# The consumer group name the CLI pulls with (never committed anywhere).
CLI_GROUP = "rocketstore_cli"
# Messages per getMessage call when browsing. A broker caps pulls at 32 messages / 256 KiB
# to bound network transfers; the CLI reads local files, and every call of a read-only
# store re-validates what a concurrent writer appended, so fewer, larger pulls are faster.
PULL_BATCH = 1024
READER_LIMITS: dict[str, object] = {
    "max_transfer_count_on_message_in_memory": PULL_BATCH,
    "max_transfer_bytes_on_message_in_memory": 64 * 1024 * 1024,
    "max_transfer_count_on_message_in_disk": PULL_BATCH,
    "max_transfer_bytes_on_message_in_disk": 64 * 1024 * 1024,
    "max_filter_message_count": PULL_BATCH * 20 * 16,
}
READER_CONFIG = StoreConfig().replace(**READER_LIMITS)


class CliError(click.ClickException):
    """A failure the user can act on: printed as one ``rocketstore: error: ...`` line,
    exit status 1."""

    exit_code = 1

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"rocketstore: error: {self.format_message()}", err=True)


@contextlib.contextmanager
def through_namesrv(what: str, namesrv: str) -> Iterator[None]:
    """Turns a failed call to a running name server or broker (``-n``) into one CLI error
    line naming the command and the name server."""
    try:
        yield
    except (StoreError, OSError) as e:
        raise CliError(f"{what} through {namesrv}: {e}") from e


def open_regular_file(path: str, what: str) -> IO[bytes]:
    """``path`` opened for reading; CliError unless it is a regular file
    (files.regular_file: a FIFO or a device never hangs the command)."""
    try:
        return files_open_regular_file(path, what)
    except ConfigError as e:
        raise CliError(str(e)) from e
    except OSError as e:
        raise CliError(f"cannot read {what} {path}: {e.strerror or e}") from e


def read_settings_file(path: str) -> dict[str, str]:
    """The entries of a broker.conf; a CliError when it cannot be read or parsed."""
    try:
        with open_regular_file(path, "settings file") as f:
            raw = f.read()
    except OSError as e:
        raise CliError(f"cannot read settings file {path}: {e.strerror or e}") from e
    # java.util.Properties.load(InputStream), which RocketMQ's startup uses, reads
    # ISO-8859-1; anything else comes in through \uXXXX escapes.
    try:
        return parse_java_properties(raw.decode("iso-8859-1"))
    except ConfigError as e:
        raise CliError(f"settings file {path}: {e}") from e


def context_from_settings(
    path: str | None, store_dir: str, store_given: bool, *, as_json: bool, debug: bool
) -> CliContext:
    """The CLI's context: the store directory (``--store``, else the settings file's
    ``storePathRootDir``, else ./store) and the store settings of the file."""
    if path is None:
        return CliContext(store_dir=store_dir, as_json=as_json, debug=debug)
    settings = read_settings_file(path)
    root_setting = settings.get("storePathRootDir", "").strip()
    if not store_given and root_setting:
        store_dir = root_setting
    if store_given and os.path.realpath(store_dir) != os.path.realpath(root_setting or store_dir):
        # --store names another place than the file's root (a copy of the store, say).
        settings = _commitlog_paths_moved(settings, root_setting, store_dir)
    try:
        config = store_config_from_settings(settings, source=path)
    except ConfigError as e:
        raise CliError(str(e)) from e
    # The store host only matters to commands that write records; one the file names but
    # that cannot be had (a host name this machine cannot resolve) fails those alone.
    host_error = ""
    try:
        config = config.replace(store_host=store_host_of(settings, config.store_host))
    except (ConfigError, OSError) as e:
        host_error = f"{path}: brokerIP1/listenPort give no store host: {e}"
    return CliContext(
        store_dir=store_dir,
        as_json=as_json,
        debug=debug,
        config=config,
        settings=settings,
        settings_path=path,
        store_host_error=host_error,
    )


def _commitlog_paths_moved(
    settings: dict[str, str], old_root: str, new_root: str
) -> dict[str, str]:
    """The settings for a copy of the file's store at ``new_root``: CommitLog paths inside
    the file's root move with it (``<root>/commitlog/a`` -> ``<new>/commitlog/a``); those
    outside are not the copy's and are left out (a copy missing files then says so);
    with none inside, the copy's CommitLog is its own ``commitlog/``."""
    moved = {k: v for k, v in settings.items() if k not in COMMITLOG_PATH_KEYS}
    old = os.path.realpath(old_root)
    for key in COMMITLOG_PATH_KEYS:
        value = settings.get(key, "").strip()
        inside = [
            os.path.relpath(os.path.realpath(part), old)
            for part in value.split(MULTI_PATH_SPLITTER)
            if part
        ]
        kept = [
            os.path.join(new_root, rel)
            for rel in inside
            if rel != os.pardir and not rel.startswith(os.pardir + os.sep)
        ]
        if kept:
            # A trailing splitter keeps a multi-path list of one a multi-path list.
            multi = MULTI_PATH_SPLITTER in value
            moved[key] = MULTI_PATH_SPLITTER.join(kept) + (MULTI_PATH_SPLITTER if multi else "")
    return moved


def store_host_of(settings: dict[str, str], default: str) -> str:
    """The address a broker run with these settings writes into its records:
    ``brokerIP1`` (resolved if a host name, as Java's InetSocketAddress does) and
    ``listenPort``, each defaulting to ``default``'s part."""
    name, port = settings.get("brokerIP1"), settings.get("listenPort")
    if name is None and port is None:
        return default
    host, default_port = parse_host(default)
    port_text = str(default_port) if port is None else port
    if not port_text.isdigit() or not 0 < int(port_text) <= 65535:
        raise ConfigError(f"listenPort must be a port number, got {port_text!r}")
    address = host if name is None else name
    try:
        ipaddress.ip_address(address)
    except ValueError:
        infos = socket.getaddrinfo(address, None, type=socket.SOCK_STREAM)
        # IPv4 first, as Java's default preference (java.net.preferIPv6Addresses=false).
        infos.sort(key=lambda info: info[0] != socket.AF_INET)
        address = str(infos[0][4][0])
    return f"[{address}]:{port_text}" if ":" in address else f"{address}:{port_text}"


@dataclass
class CliContext:
    store_dir: str
    as_json: bool
    debug: bool
    # The store settings every command opens with: RocketMQ's defaults, or those of the
    # broker.conf given with -c (index geometry, file sizes, flush type...).
    config: StoreConfig = field(default_factory=StoreConfig)
    # The whole broker.conf (empty without -c), for the broker's own settings.
    settings: dict[str, str] = field(default_factory=dict)
    settings_path: str = ""
    # Why the file's brokerIP1/listenPort give no store host ("": they do, or are absent).
    store_host_error: str = ""

    def __post_init__(self) -> None:
        # A DLedger broker's store is read without its broker.conf (dledger-<id>/data).
        try:
            self.config = with_dledger(self.store_dir, self.config)
        except ConfigError as e:
            raise CliError(str(e)) from e

    def broker_config(self) -> BrokerConfig:
        """The broker settings of the -c file (defaults without one); a CliError names a
        bad value."""
        try:
            return broker_config_from_settings(self.settings, source=self.settings_path)
        except ConfigError as e:
            raise CliError(str(e)) from e

    @property
    def broker_name(self) -> str:
        """The brokerName printed where mqadmin prints one: the -c file's, else
        BROKER_NAME (a store does not record the name of the broker that wrote it)."""
        return self.settings.get("brokerName", "").strip() or BROKER_NAME

    # --- opening ------------------------------------------------------------------------

    def require_store_dir(self) -> str:
        """The store root, or a CliError saying why it is not a store."""
        root = self.store_dir
        if not os.path.exists(root):
            raise CliError(f"store directory {root} does not exist (use --store DIR)")
        if not os.path.isdir(root):
            raise CliError(f"{root} is not a directory")
        lacks = missing_commitlog(root, self.commitlog_dirs)
        if lacks is not None:
            raise CliError(f"{root} is not a store directory ({lacks})")
        return root

    @property
    def commitlog_dirs(self) -> CommitLogDirs:
        """Where the store's CommitLog files are (``<store>/commitlog`` unless the settings
        file's ``storePathCommitLog`` names other directories)."""
        return self.config.commit_log_dirs(self.store_dir)

    def open_read_only(self, *, broker_limits: bool = False) -> MessageStore:
        """Open without the writer lock: works while a writer (or a broker) runs.

        ``broker_limits``: getMessage keeps the broker's limits (32 messages or 256 KiB a
        pull, a tag filter scanning 800 units...) instead of the CLI's larger ones, for
        the commands whose output shows each pull, as mqadmin's do."""
        config = self.config if broker_limits else self.config.replace(**READER_LIMITS)
        store = MessageStore.open(self.require_store_dir(), config, read_only=True)
        missing = store.missing_commitlog_files()
        if missing is not None:
            # Reading on is right (a salvage, say), but not without saying what is gone.
            click.echo(
                f"rocketstore: warning: {missing} Messages in the missing files cannot be read.",
                err=True,
            )
        damage = damage_warning(store)
        if damage is not None:
            click.echo(f"rocketstore: warning: {damage}", err=True)
        for (topic, queue_id), reason in sorted(store.unreadable_queues.items()):
            click.echo(
                f"rocketstore: warning: consume queue {topic}-{queue_id} cannot be read "
                f"({reason}): the commands that go through queues do not see it. "
                "`rocketstore rebuild --queues` builds it anew from the CommitLog.",
                err=True,
            )
        for reason in unread_index_files(store):
            click.echo(
                f"rocketstore: warning: {reason}; key and unique-key queries do not search "
                "it, so they may miss messages.",
                err=True,
            )
        # Behind a running (or crashed) writer the queues trail the CommitLog by moments
        # (or recovery builds them); after a clean stop they should cover all of it.
        if not os.path.exists(os.path.join(store.root, ABORT_FILE)):
            tail = store.undispatched_record()
            if tail is not None:
                click.echo(
                    f"rocketstore: warning: the consume queues end before the CommitLog: "
                    f"{tail.commitlog_end - tail.offset} bytes of records from offset "
                    f"{tail.offset} (the first of {tail.topic}-{tail.queue_id}) are in no "
                    "queue, so the commands that go through queues do not see them (their "
                    "queues were removed, or are kept elsewhere, as RocketMQ 5 does in "
                    "RocksDB). `rocketstore rebuild --queues` builds them from the CommitLog.",
                    err=True,
                )
        return store

    def open_writer(self) -> MessageStore:
        """Open as the writer (takes the lock). A missing directory is created; an existing
        directory that holds other files but no CommitLog is refused."""
        root = self.store_dir
        if os.path.isdir(root) and os.listdir(root):
            self.require_store_dir()
        if self.store_host_error:
            raise CliError(self.store_host_error)
        return MessageStore.open(root, self.writer_config)

    @property
    def writer_config(self) -> StoreConfig:
        """The config a command opens the store for writing with: recovery refuses to cut
        readable records after damage (`check --repair --force` does that on purpose)."""
        return self.config.replace(cut_damaged_commitlog=False)

    # --- output -------------------------------------------------------------------------

    def emit(self, obj: dict[str, Any]) -> None:
        """One JSON object on one line (bytes become base64)."""
        click.echo(json_line(obj))


def damage_warning(store: MessageStore) -> str | None:
    """Why a read-only store reads less than the CommitLog holds, or None.

    A reader stops at the first record that is not valid, as recovery does, and at zeros
    where a record would start (the end of the data), so records after damage or a lost
    page are in no answer: queryMsgById says "not found", the queues end there. After a
    clean stop a stop on damage is news, and so is an end of data that consume queues
    point past; behind a crashed or running writer the last record may be torn (or still
    being written), so there only damage with a readable record after it is."""
    report = store.recovery_report
    end = report.stop_offset
    if end is None:
        return None
    stopped_cleanly = not os.path.exists(os.path.join(store.root, ABORT_FILE))
    if report.stop_reason in ("", END_OF_DATA):
        if not stopped_cleanly or _queue_unit_past(store, end) is None:
            return None
        why = "zeros where the data should go on"
    else:
        why = report.stop_reason
    later = store.readable_record_after(end)
    if later is None and not stopped_cleanly:
        return None
    follows = (
        f"; a readable record follows at offset {later} (`rocketstore dump --from {later}` "
        "reads it)"
        if later is not None
        else ""
    )
    return (
        f"the CommitLog is damaged at offset {end} ({why}): the records from there on are "
        f"not read, so these answers miss them{follows}. `rocketstore check` lists the damage."
    )


def unread_index_files(store: MessageStore) -> list[str]:
    """Why each whole index file the reader passed over cannot be read (its size fits no
    geometry its entries agree with: damage, or another broker's settings). Files cut
    short at creation hold nothing and are not listed."""
    loaded = {f.path for f in store.index_files()}
    paths, _cut_short = index_files(index_dir(store.root))
    configured = (store.config.max_hash_slot_num, store.config.max_index_num)
    siblings = settled_geometries(paths, configured)
    reasons = []
    for path in paths:
        if path in loaded:
            continue
        try:
            file_geometry(path, configured, siblings=siblings)
        except ValueError as e:
            reasons.append(str(e))
        except OSError:  # a writer's retention deleted it since the listing
            continue
    return reasons


def _queue_unit_past(store: MessageStore, end: int) -> int | None:
    """The CommitLog offset of a consume-queue unit on disk, just past what the reader
    took of its queue, that points at or after ``end`` (a record the queue was built
    from, so there was data there), or None. One unit per queue."""
    for queue in store.queue_views().values():
        unit = queue.unit_on_disk(queue.max_offset())
        if unit is None:
            continue
        if unit.is_valid and not unit.is_blank_fill and unit.commit_log_offset >= end:
            return unit.commit_log_offset
    return None


def json_line(obj: dict[str, Any]) -> str:
    """``obj`` as one line of JSON; bytes become base64 text."""
    return json.dumps(obj, ensure_ascii=False, default=_json_default)


def _json_default(value: object) -> object:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def queue_bounds(store: MessageStore, topic: str, queue_id: int) -> tuple[int, int]:
    """(min, max) queue offsets. Reads the loaded queue directly: the facade's
    ``min_offset``/``max_offset`` re-validate the whole store on each call when read-only,
    which adds up over the thousands of queues of a broker's store."""
    queue = store.queue_view(topic, queue_id)
    return (queue.min_offset(), queue.max_offset()) if queue is not None else (0, 0)


def unit_store_time(store: MessageStore, topic: str, queue_id: int, queue_offset: int) -> int:
    """Store time of the message at a queue offset (-1 if none), like the facade's
    ``message_store_time`` without its per-call refresh."""
    queue = store.queue_view(topic, queue_id)
    unit = queue.unit(queue_offset) if queue is not None else None
    if unit is None or not unit.is_valid:
        return -1
    return store.commitlog_store_time(unit.commit_log_offset, unit.size)


def require_topic(store: MessageStore, topic: str) -> list[int]:
    """The queue ids of ``topic``; a CliError naming the known topics if there is none."""
    topics = store.topics()
    if topic not in topics:
        known = ", ".join(sorted(topics)[:20]) or "none"
        more = " ..." if len(topics) > 20 else ""
        raise CliError(f"topic {topic!r} not found in {store.root} (topics: {known}{more})")
    return topics[topic]


def require_queue(store: MessageStore, topic: str, queue_id: int) -> None:
    queue_ids = require_topic(store, topic)
    if queue_id not in queue_ids:
        listed = ", ".join(str(q) for q in queue_ids)
        raise CliError(f"topic {topic!r} has no queue {queue_id} (queues: {listed})")


def hidden_alias(command: click.Command, name: str) -> click.Command:
    """``command`` under another name (mqadmin's own spelling or alias), left out of the
    help so that it is not listed twice."""
    return click.Command(
        name, callback=command.callback, params=command.params, help=command.help, hidden=True
    )
