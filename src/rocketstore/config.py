"""Store configuration: RocketMQ's ``MessageStoreConfig`` names in snake_case.

Lowest layer: no I/O. Defaults are RocketMQ 4.9.8's. ``validate`` names the bad field.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass, field

from rocketstore.errors import ConfigError
from rocketstore.java_ints import JAVA_INT_MAX, JAVA_LONG_MAX
from rocketstore.paths import CommitLogDirs, dledger_data_dir, split_paths

CQ_UNIT_SIZE = 20
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
FLUSH_TYPES = ("ASYNC_FLUSH", "SYNC_FLUSH")

_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# The longest delay level: a store time plus it must fit the Java long a consume queue
# unit keeps the delivery time in (2**62 ms is some 146 million years).
MAX_DELAY_LEVEL_MS = 2**62
# A record keeps its topic's length in one byte.
MAX_TOPIC_BYTES = 127


# The settings an open store takes at once (MessageStore.update_config): its services
# read them at each use (a flush round, a retention round, a pull, a query). The others
# shape the files or the put path and take effect when the store is next opened.
LIVE_FIELDS = frozenset(
    {
        "flush_interval_commit_log",
        "flush_commit_log_least_pages",
        "flush_commit_log_thorough_interval",
        "flush_interval_consume_queue",
        "flush_consume_queue_least_pages",
        "flush_consume_queue_thorough_interval",
        "sync_flush_timeout",
        "max_transfer_bytes_on_message_in_memory",
        "max_transfer_count_on_message_in_memory",
        "max_transfer_bytes_on_message_in_disk",
        "max_transfer_count_on_message_in_disk",
        "access_message_in_memory_max_ratio",
        "default_query_max_num",
        "file_reserved_time",
        "delete_when",
        "disk_max_used_space_ratio",
        "disk_space_clean_forcibly_ratio",
        "disk_space_warning_level_ratio",
        "clean_resource_interval",
        "delete_file_batch_max",
        "delete_commit_log_files_interval",
        "delete_consume_queue_files_interval",
        "destroy_mapped_file_interval_forcibly",
        "clean_file_forcibly_enable",
    }
)
# Intervals, counts and percents for which a negative number means nothing.
NON_NEGATIVE_FIELDS = tuple(
    sorted(
        LIVE_FIELDS
        - {"delete_when", "clean_file_forcibly_enable", "sync_flush_timeout"}
        - {"clean_resource_interval", "delete_file_batch_max"}  # positive, checked above
        - {"default_query_max_num"}  # positive too: a query of none is refused
        | {"max_filter_message_count", "dispatch_interval_ms"}
    )
)
_STR_FIELDS = (
    "store_path_commit_log",
    "read_only_commit_log_store_paths",
    "dledger_self_id",
    "store_path_dledger_commit_log",
    "store_host",
    "max_delay_level_message",
    "message_delay_level",
    "flush_disk_type",
    "delete_when",
)
_BOOL_FIELDS = (
    "enable_dledger_commit_log",
    "enable_lmq",
    "enable_multi_dispatch",
    "message_index_enable",
    "check_crc_on_recover",
    "cut_damaged_commitlog",
    "clean_file_forcibly_enable",
    "timer_wheel_enable",
)
_JAVA_INT_FIELDS = tuple(
    sorted(
        {
            "mapped_file_size_commit_log",
            "mapped_file_size_consume_queue",
            "max_hash_slot_num",
            "max_index_num",
            "max_message_size",
            "clean_resource_interval",
            "delete_file_batch_max",
            "max_msgs_num_batch",
            "default_query_max_num",
            "max_filter_message_count",
            "dispatch_interval_ms",
            "max_dispatch_lag_ms",
            "timer_precision_ms",
            "mapped_file_size_timer_log",
            "timer_max_delay_sec",
            "timer_roll_window_slot",
            "timer_flush_interval_ms",
        }
        | set(NON_NEGATIVE_FIELDS)
    )
)


@dataclass
class StoreConfig:
    """Every knob of the store; field names are RocketMQ's MessageStoreConfig in snake_case."""

    # Geometry. When an existing store is opened, CommitLog and ConsumeQueue sizes are taken
    # from the files themselves; the index geometry from the file size (see paths/geometry).
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * CQ_UNIT_SIZE
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    # Where the CommitLog files are: "" is <store root>/commitlog; one path puts them
    # there; several separated by "," spread them over the paths (RocketMQ's
    # MultiPathMappedFileQueue: file n in the n % len-th of the sorted paths that are not
    # read-only and whose disk is not above disk_space_clean_forcibly_ratio), with the
    # read_only_commit_log_store_paths' files read but never added to. paths.CommitLogDirs.
    store_path_commit_log: str = ""
    read_only_commit_log_store_paths: str = ""
    # A DLedger CommitLog (enableDLegerCommitLog): the log is in dledger-<selfId>/data (or
    # store_path_dledger_commit_log), each record framed in a DLedger entry; read only.
    # Openers find such a directory by themselves (files.store_dir.with_dledger).
    enable_dledger_commit_log: bool = False
    dledger_self_id: str = ""
    store_path_dledger_commit_log: str = ""
    # The broker's own address written into STOREHOST and offsetMsgIds.
    store_host: str = "127.0.0.1:10911"
    # Limits.
    max_message_size: int = 4 * 1024 * 1024
    max_topic_length: int = 127
    max_delay_level_message: str = DEFAULT_DELAY_LEVELS
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    # LMQ multi-dispatch (format.multi_dispatch): INNER_MULTI_DISPATCH names more queues.
    enable_lmq: bool = False
    enable_multi_dispatch: bool = False
    # Index.
    message_index_enable: bool = True
    max_msgs_num_batch: int = 64
    default_query_max_num: int = 32
    # Flush.
    flush_disk_type: str = "ASYNC_FLUSH"
    flush_interval_commit_log: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000
    sync_flush_timeout: int = 5000
    # Page tables kept faulted in this far past the CommitLog's write position by a
    # background thread (services.prefaulter); 0 turns it off. Not a RocketMQ setting.
    commit_log_prefault_bytes: int = 32 * 1024 * 1024
    # Recovery.
    check_crc_on_recover: bool = True
    # A damaged record with whole, valid records after it: True cuts the CommitLog at the
    # damage, losing those records, as RocketMQ's recovery does; False refuses to open for
    # writing instead (CorruptDataError), leaving the files for `check` and `dump`. The
    # CLI's writers open with False. Not a RocketMQ setting.
    cut_damaged_commitlog: bool = True
    # Pull limits (getMessage).
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    max_filter_message_count: int = 16_000
    # Retention (services.retention; docs/operations.md). Hours, percents and ms.
    file_reserved_time: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    disk_space_clean_forcibly_ratio: int = 85
    disk_space_warning_level_ratio: int = 90
    clean_resource_interval: int = 10_000
    delete_file_batch_max: int = 10
    delete_commit_log_files_interval: int = 100
    delete_consume_queue_files_interval: int = 100
    destroy_mapped_file_interval_forcibly: int = 120_000
    clean_file_forcibly_enable: bool = True
    # Dispatcher polling when idle (ms); RocketMQ sleeps 1 ms between reput rounds.
    dispatch_interval_ms: int = 1
    # The longest the dispatcher may stay behind a writer that keeps the GIL before the
    # writer dispatches the backlog itself (ms after its first undispatched append); 0:
    # never, the dispatcher thread does it all. Not a RocketMQ setting (RocketMQ's reput
    # runs beside the writer on its own core). See services.dispatcher.after_append.
    max_dispatch_lag_ms: int = 0
    # RocketMQ 5's timer wheel (RIP-43; rocketstore.store.timer): on, a send with a
    # delivery time waits in rmq_sys_wheel_timer; off, the broker refuses it as a 5.x
    # broker does. Steps of timer_precision_ms (100, 200, 500 or 1000).
    timer_wheel_enable: bool = True
    timer_precision_ms: int = 1000
    mapped_file_size_timer_log: int = 100 * 1024 * 1024
    timer_max_delay_sec: int = 3 * 24 * 3600
    timer_roll_window_slot: int = 2 * 24 * 3600
    timer_flush_interval_ms: int = 1000
    extra: dict[str, str] = field(default_factory=dict)

    def validate(self) -> StoreConfig:
        """Raise ConfigError naming the first bad field; return self for chaining."""
        for name in _STR_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, str):
                raise ConfigError(f"{name} must be a str, got {type(value).__name__}")
        for name in _BOOL_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ConfigError(f"{name} must be True or False, got {value!r}")
        positive = (
            "mapped_file_size_commit_log",
            "mapped_file_size_consume_queue",
            "max_hash_slot_num",
            "max_index_num",
            "max_message_size",
            "sync_flush_timeout",
            "clean_resource_interval",
            "delete_file_batch_max",
            "max_topic_length",
            "max_msgs_num_batch",
            "default_query_max_num",
            "timer_precision_ms",
            "mapped_file_size_timer_log",
            "timer_max_delay_sec",
            "timer_roll_window_slot",
            "timer_flush_interval_ms",
        )
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        for name in ("commit_log_prefault_bytes", "max_dispatch_lag_ms", *NON_NEGATIVE_FIELDS):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
        # Java ints in RocketMQ's MessageStoreConfig (sync_flush_timeout is a long): a
        # larger value could not come from its broker.properties, overflows the C code's
        # ints (puts, pulls) or, as an interval, the longest wait a thread can take.
        for name in _JAVA_INT_FIELDS:
            value = getattr(self, name)
            if value > JAVA_INT_MAX:
                raise ConfigError(f"{name} must be at most {JAVA_INT_MAX}, got {value}")
        if self.sync_flush_timeout > JAVA_LONG_MAX:
            raise ConfigError(
                f"sync_flush_timeout must be at most {JAVA_LONG_MAX}, got {self.sync_flush_timeout}"
            )
        if self.max_topic_length > MAX_TOPIC_BYTES:
            # A record keeps its topic's length in one byte (docs/format.md).
            raise ConfigError(
                f"max_topic_length must be at most {MAX_TOPIC_BYTES} (a record's topic "
                f"length is one byte), got {self.max_topic_length}"
            )
        if self.mapped_file_size_commit_log < 64:
            raise ConfigError(
                f"mapped_file_size_commit_log must be at least 64 bytes, "
                f"got {self.mapped_file_size_commit_log}"
            )
        if self.flush_disk_type not in FLUSH_TYPES:
            raise ConfigError(
                f"flush_disk_type must be one of {FLUSH_TYPES}, got {self.flush_disk_type!r}"
            )
        if self.max_index_num < 2:
            raise ConfigError(f"max_index_num must be at least 2, got {self.max_index_num}")
        if self.index_file_size > JAVA_INT_MAX:
            # RocketMQ computes the size as a Java int and cannot make such a file.
            raise ConfigError(
                f"an index file of max_hash_slot_num (maxHashSlotNum) {self.max_hash_slot_num} "
                f"and max_index_num (maxIndexNum) {self.max_index_num} would be "
                f"{self.index_file_size} bytes "
                f"(40 + 4 * slots + 20 * entries), more than the {JAVA_INT_MAX} a Java int "
                "holds"
            )
        if not isinstance(self.extra, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.extra.items()
        ):
            raise ConfigError(f"extra must be a dict of str to str, got {self.extra!r}")
        self.commit_log_dirs("")  # a path list RocketMQ could not use is refused here
        parse_host(self.store_host, what="store_host")
        delay_levels_ms(self.message_delay_level)
        delete_hours(self.delete_when)
        if self.timer_precision_ms not in (100, 200, 500, 1000):
            raise ConfigError(
                f"timer_precision_ms must be 100, 200, 500 or 1000, got {self.timer_precision_ms}"
            )
        if self.mapped_file_size_timer_log < 4096:
            raise ConfigError(
                "mapped_file_size_timer_log must be at least 4096 bytes, "
                f"got {self.mapped_file_size_timer_log}"
            )
        return self

    def commit_log_dirs(self, root: str) -> CommitLogDirs:
        """The CommitLog directories of a store at ``root`` with these settings."""
        dirs = CommitLogDirs.of(
            root, self.store_path_commit_log, self.read_only_commit_log_store_paths
        )
        if not self.enable_dledger_commit_log:
            return dirs
        setting = self.store_path_dledger_commit_log.strip()
        if setting:
            data = split_paths(setting, key="storePathDLedgerCommitLog")
        elif self.dledger_self_id.strip():
            data = (dledger_data_dir(root, self.dledger_self_id.strip()),)
        else:
            raise ConfigError(
                "enableDLegerCommitLog needs dLegerSelfId (its log is in "
                "dledger-<selfId>/data) or storePathDLedgerCommitLog"
            )
        return dataclasses.replace(dirs, dledger=data)

    @property
    def consume_queue_file_size(self) -> int:
        """RocketMQ rounds the configured CQ size up to a whole number of 20-byte units."""
        size = self.mapped_file_size_consume_queue
        return -(-size // CQ_UNIT_SIZE) * CQ_UNIT_SIZE

    @property
    def index_geometry(self) -> tuple[int, int]:
        """(max_hash_slot_num, max_index_num): an index file's hash slots and entries."""
        return self.max_hash_slot_num, self.max_index_num

    @property
    def index_file_size(self) -> int:
        return 40 + self.max_hash_slot_num * 4 + self.max_index_num * CQ_UNIT_SIZE

    def replace(self, **changes: object) -> StoreConfig:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def _is_ascii_number(text: str) -> bool:
    """Digits 0-9 only (``str.isdigit`` also takes other scripts' digits, which Java's
    parsers of these settings refuse)."""
    return text.isascii() and text.isdigit()


def delay_levels_ms(spec: str) -> list[int]:
    """Parse ``"1s 5s 10s ... 2h"`` into milliseconds per level (level 1 first)."""
    if not isinstance(spec, str):
        raise ConfigError(f"message_delay_level must be a str, got {type(spec).__name__}")
    levels: list[int] = []
    for token in spec.split():
        unit = token[-1:]
        number = token[:-1]
        if unit not in _UNIT_MS or not _is_ascii_number(number):
            raise ConfigError(f"message_delay_level: bad level {token!r} in {spec!r}")
        level_ms = int(number) * _UNIT_MS[unit]
        if level_ms > MAX_DELAY_LEVEL_MS:
            raise ConfigError(
                f"message_delay_level: level {token!r} in {spec!r} is over {MAX_DELAY_LEVEL_MS} "
                "ms (a store time plus it must fit a Java long)"
            )
        levels.append(level_ms)
    if not levels:
        raise ConfigError("message_delay_level must name at least one level")
    return levels


def delete_hours(spec: str) -> set[int]:
    """Parse ``delete_when`` (``"04"``, ``"02;04;23"``) into hours of the day."""
    if not isinstance(spec, str):
        raise ConfigError(f"delete_when must be a str, got {type(spec).__name__}")
    hours: set[int] = set()
    for raw in spec.split(";"):
        token = raw.strip()
        if not token:
            continue
        if not _is_ascii_number(token) or not 0 <= int(token) <= 23:
            raise ConfigError(f"delete_when: bad hour {token!r} in {spec!r} (want 00-23)")
        hours.add(int(token))
    return hours


def parse_host(value: str, *, what: str = "host") -> tuple[str, int]:
    """Split ``ip:port`` or ``[v6]:port`` into (ip, port); ConfigError names ``what``."""
    if not isinstance(value, str):
        raise ConfigError(f"{what}: expected a str 'ip:port', got {type(value).__name__}")
    text = value.strip()
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or text[end + 1 : end + 2] != ":":
            raise ConfigError(f"{what}: expected '[ipv6]:port', got {value!r}")
        ip, port_text = text[1:end], text[end + 2 :]
    else:
        ip, sep, port_text = text.rpartition(":")
        if not sep:
            raise ConfigError(f"{what}: expected 'ip:port', got {value!r}")
        if ":" in ip:
            raise ConfigError(f"{what}: an IPv6 address needs brackets, '[ip]:port', got {value!r}")
    try:
        ipaddress.ip_address(ip)
    except ValueError as e:
        raise ConfigError(f"{what}: {ip!r} is not an IP address (in {value!r})") from e
    if not _is_ascii_number(port_text) or not 0 <= int(port_text) <= 0x7FFFFFFF:
        raise ConfigError(f"{what}: bad port {port_text!r} in {value!r}")
    return ip, int(port_text)
