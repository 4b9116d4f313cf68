"""The broker's settings and the JSON files it keeps under ``<store>/config/``.

Layer: broker (above the store). Plain synchronous code: the state managers
(:mod:`.topic_config`, :mod:`.consumer_offsets`, :mod:`.schedule`) read and write their
files through :func:`load_config_file` and :func:`persist_config_file`, which follow
RocketMQ's ``ConfigManager``:

* writing goes to ``NAME.tmp`` (fsync), the previous file is copied to ``NAME.bak``, and
  the tmp file is renamed over ``NAME`` (``MixAll.string2File``), so a crash at any point
  leaves a complete ``NAME`` or ``NAME.bak``;
* loading falls back to ``NAME.bak`` when ``NAME`` is missing, empty or unreadable.

Unlike RocketMQ, an unreadable ``NAME`` with no usable ``.bak`` is an error
(:class:`~rocketstore.errors.CorruptDataError` naming the file), not an empty table:
silently starting from nothing would reset every consumer to its first offset.

RocketMQ writes these files with fastjson, which puts integer map keys unquoted
(``{0:12}``), a form no standard JSON parser accepts; :func:`parse_fastjson` reads it.
rocketstore writes standard JSON in fastjson's pretty layout (tabs, no space after ``:``),
which fastjson reads back.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from rocketstore.broker.perm_name import PERM_ALL, PERM_READ, PERM_WRITE
from rocketstore.broker.remoting import replace_lone_surrogates
from rocketstore.errors import ConfigError, CorruptDataError
from rocketstore.files.atomic import write_atomic
from rocketstore.files.regular_file import read_store_file
from rocketstore.format.ha import MAX_TRANSFER_BODY
from rocketstore.java_ints import JAVA_INT_MAX
from rocketstore.paths import CONFIG_DIR
from rocketstore.remoting.acl_signing import SessionCredentials, sign_request
from rocketstore.remoting.codec import RemotingCommand
from rocketstore.settings_file import apply_settings, camel_keys

log = logging.getLogger(__name__)

T = TypeVar("T")

TOPICS_FILE = "topics.json"
CONSUMER_OFFSET_FILE = "consumerOffset.json"
DELAY_OFFSET_FILE = "delayOffset.json"
BACKUP_SUFFIX = ".bak"

# The most queues one topic or one group's retry topic may have. RocketMQ sets no bound (a
# Java int), but per-queue work over 2^31 queues never ends; a broker's maxQueueNums is at
# most this, and the offline tools refuse a topics.json that names more.
MAX_QUEUE_NUMS = 65535


@dataclass
class BrokerConfig:
    """The few ``BrokerConfig`` settings the state components need (RocketMQ's names in
    snake_case; defaults are RocketMQ 4.9.8's unless noted)."""

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    auto_create_topic_enable: bool = True
    # RocketMQ defaults to 8; rocketstore to 4, the clients' own default queue count
    # (``defaultTopicQueueNums`` of DefaultMQProducer), so small deployments stay small.
    default_topic_queue_nums: int = 4
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    flush_consumer_offset_interval_ms: int = 5000
    flush_delay_offset_interval_ms: int = 10_000
    # Consumers may subscribe with SQL92 selectors (MessageSelector.bySql); off, as in
    # RocketMQ: such a consumer is refused (CHECK_CLIENT_CONFIG, PULL_MESSAGE).
    enable_property_filter: bool = False
    # Retry messages are filtered by the selector the group subscribed their original
    # topic with (RocketMQ's ExpressionForRetryMessageFilter); off, as in RocketMQ.
    filter_support_retry: bool = False
    # A consumer group nobody configured is created with the defaults on first use.
    auto_create_subscription_group: bool = True
    # Transactional messages (TRAN_MSG=true) are refused with NO_PERMISSION.
    reject_transaction_message: bool = False
    # A 5.x client's RecallMessage of a timer message is served (recallMessageEnable; off
    # in RocketMQ 5.3.3, which answers "recall failed, operation is forbidden").
    recall_message_enable: bool = False
    # A half message younger than this is not checked (transactionTimeOut).
    transaction_timeout_ms: int = 6_000
    # Checks of one half message before it moves to TRANS_CHECK_MAX_TIME_TOPIC.
    transaction_check_max: int = 15
    # The pause between two passes of the transaction check (transactionCheckInterval).
    transaction_check_interval_ms: int = 60_000
    # PermName bits of the whole broker (4 read, 2 write): without both, every topic is
    # registered with the name servers with this perm instead of its own, pulls are refused
    # without read, and sends to order topics without write (RocketMQ's brokerPermission;
    # changed live with updateBrokerConfig to drain a broker).
    broker_permission: int = PERM_READ | PERM_WRITE
    # Settings updateBrokerConfig may not change, ";"-separated (configBlackList).
    config_black_list: str = "configBlackList;brokerConfigPath"

    # What one client may cost the broker (docs/broker.md, "Protocol handling and safety").
    # A connection that neither sent a byte nor took an answer this long is closed
    # (NettyServerConfig's serverChannelMaxIdleTimeSeconds); 0: never.
    server_channel_max_idle_time_seconds: int = 120
    # A connection's requests are not read while more of its answers than the high mark
    # wait to be sent, and read again below the low one (NettyServerConfig's; RocketMQ's 0
    # means Netty's defaults, these).
    write_buffer_high_water_mark: int = 64 * 1024
    write_buffer_low_water_mark: int = 32 * 1024
    # A connection with more unsent answers than this is dropped: its client does not read
    # them (rocketstore's; Netty buffers without bound).
    server_channel_max_unsent_bytes: int = 64 * 1024 * 1024
    # The bytes of frames still arriving, across all connections; the connection whose
    # frame would pass it is closed (rocketstore's).
    server_partial_frames_max_bytes: int = 256 * 1024 * 1024
    # The most read or write queues UPDATE_AND_CREATE_TOPIC, and retry queues
    # UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, may ask for (rocketstore's; RocketMQ takes any int).
    max_queue_nums: int = 1024
    # HEART_BEAT bodies larger than this are refused (rocketstore's); a Java client's is about
    # 150 bytes per subscription.
    heartbeat_max_body_bytes: int = 1024 * 1024

    # Replication (docs/broker.md, "Replication"; MessageStoreConfig's names).
    # ASYNC_MASTER, SYNC_MASTER (a send is answered once a slave has its bytes) or SLAVE.
    broker_role: str = "ASYNC_MASTER"
    # 0 for a master (a master's is always 0, as BrokerStartup sets it); > 0 for a slave.
    broker_id: int = 0
    # Where a master listens for slaves; 0: the broker's listen port + 1 (RocketMQ's 10912).
    ha_listen_port: int = 0
    # A slave's master (host:haListenPort); "" learns it from the name servers'
    # registration answer (the master's haServerAddr).
    ha_master_address: str = ""
    # A slave whose master ends below the slave's first CommitLog offset (an empty or new
    # master disk) may cut its whole CommitLog to follow it (rocketstore's; the cut bytes
    # are kept under the store). Off: it refuses, logs, and keeps serving reads.
    ha_allow_full_truncate: bool = False
    # A slave also checks each replicated record's body CRC before appending it
    # (rocketstore's; off as a Java 4.9.8 slave, which appends the bytes unchecked and
    # dispatches them with checkCRC=false). Sizes, magic codes, fields and physical
    # offsets are always checked.
    ha_check_body_crc: bool = False
    # The account a slave signs its requests to its master with (the metadata sync, the
    # master's CommitLog end), for a master with ACL on: RocketMQ 5's
    # innerClientAuthenticationCredentials, JSON {"accessKey": .., "secretKey": ..}. ""
    # sends them unsigned, as a 4.9.8 slave does (its master must then white-list it).
    inner_client_authentication_credentials: str = ""
    # A slave reports its offset, and a master sends a heartbeat, this often when idle.
    ha_send_heartbeat_interval_ms: int = 5_000
    # A connection silent this long is closed (and a slave connects again).
    ha_housekeeping_interval_ms: int = 20_000
    # The most CommitLog bytes of one transfer.
    ha_transfer_batch_size: int = 32 * 1024
    # SYNC_MASTER: no slave connected, or the best one behind by this many bytes or more,
    # answers SLAVE_NOT_AVAILABLE at once.
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    # SYNC_MASTER: how long a send waits for a slave's acknowledgement before it is
    # answered FLUSH_SLAVE_TIMEOUT (RocketMQ 4.9's slaveTimeout, not syncFlushTimeout).
    slave_timeout_ms: int = 3_000
    # A pull whose last message is far behind the CommitLog end (the store's in-memory
    # verdict) is told to go to the group's whichBrokerWhenConsumeSlowly; off: always 0.
    slave_read_enable: bool = False

    @property
    def is_slave(self) -> bool:
        return self.broker_role == "SLAVE"

    def inner_client_credentials(self) -> SessionCredentials | None:
        """``inner_client_authentication_credentials`` parsed (None when empty);
        ConfigError, without the secret, when it is not such JSON."""
        text = self.inner_client_authentication_credentials
        if not isinstance(text, str):
            raise ConfigError("inner_client_authentication_credentials must be a JSON string")
        if not text.strip():
            return None
        what = "inner_client_authentication_credentials (innerClientAuthenticationCredentials)"
        try:
            value = json.loads(text)
        except ValueError as e:
            raise ConfigError(f"{what} must be JSON: {e.__class__.__name__}") from None
        if not isinstance(value, dict):
            raise ConfigError(f'{what} must be {{"accessKey": .., "secretKey": ..}}')
        access, secret = value.get("accessKey"), value.get("secretKey")
        token = value.get("securityToken")
        if not (isinstance(access, str) and access and isinstance(secret, str) and secret):
            raise ConfigError(f"{what} needs a non-empty accessKey and secretKey")
        if token is not None and not isinstance(token, str):
            raise ConfigError(f"{what}: securityToken must be a string")
        return SessionCredentials(access, secret, token or None)

    def validate(self) -> BrokerConfig:
        for name in ("broker_cluster_name", "broker_name", "msg_trace_topic_name"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{name} must be a non-empty string, got {value!r}")
        for name in (
            "flush_consumer_offset_interval_ms",
            "flush_delay_offset_interval_ms",
            "transaction_check_interval_ms",
        ):
            value = getattr(self, name)
            # A period RocketMQ's scheduleAtFixedRate refuses (the broker would not start);
            # the setting is a Java int.
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not 0 < value <= JAVA_INT_MAX
            ):
                raise ConfigError(f"{name} must be 1..{JAVA_INT_MAX} (ms), got {value!r}")
        for name in ("transaction_timeout_ms", "transaction_check_max"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
        perm = self.broker_permission
        if isinstance(perm, bool) or not isinstance(perm, int) or not 0 <= perm <= PERM_ALL:
            raise ConfigError(
                f"broker_permission (brokerPermission) must be PermName bits 0..{PERM_ALL} "
                f"(4 read, 2 write, 6 both), got {perm!r}"
            )
        positive = (
            ("write_buffer_high_water_mark", 1),
            ("write_buffer_low_water_mark", 1),
            ("server_channel_max_unsent_bytes", 1),
            ("server_partial_frames_max_bytes", 1),
            ("heartbeat_max_body_bytes", 1),
            ("server_channel_max_idle_time_seconds", 0),
        )
        for name, least in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigError(f"{name} must be an integer >= {least}, got {value!r}")
        if self.broker_role not in BROKER_ROLES:
            raise ConfigError(
                f"broker_role (brokerRole) must be one of {', '.join(BROKER_ROLES)}, "
                f"got {self.broker_role!r}"
            )
        if self.is_slave and (isinstance(self.broker_id, bool) or self.broker_id <= 0):
            raise ConfigError(f"a SLAVE's broker_id (brokerId) must be > 0, got {self.broker_id!r}")
        if not self.is_slave:
            self.broker_id = 0  # BrokerStartup: a master's id is MixAll.MASTER_ID
        if not 0 <= self.ha_listen_port <= 65535:
            raise ConfigError(f"ha_listen_port must be 0..65535, got {self.ha_listen_port!r}")
        if not isinstance(self.ha_master_address, str):
            raise ConfigError(
                f"ha_master_address must be host:port, got {self.ha_master_address!r}"
            )
        for name in (
            "ha_send_heartbeat_interval_ms",
            "ha_housekeeping_interval_ms",
            "ha_transfer_batch_size",
            "ha_slave_fallbehind_max",
            "slave_timeout_ms",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        self.inner_client_credentials()
        if self.ha_transfer_batch_size > MAX_TRANSFER_BODY:
            raise ConfigError(
                f"ha_transfer_batch_size must be at most {MAX_TRANSFER_BODY} (a Java slave's "
                f"read buffer), got {self.ha_transfer_batch_size}"
            )
        if self.write_buffer_low_water_mark > self.write_buffer_high_water_mark:
            raise ConfigError(
                f"write_buffer_low_water_mark ({self.write_buffer_low_water_mark}) must not be "
                f"above write_buffer_high_water_mark ({self.write_buffer_high_water_mark})"
            )
        nums = self.max_queue_nums
        if isinstance(nums, bool) or not isinstance(nums, int) or not 1 <= nums <= MAX_QUEUE_NUMS:
            raise ConfigError(f"max_queue_nums must be 1..{MAX_QUEUE_NUMS}, got {nums!r}")
        if not isinstance(self.default_topic_queue_nums, int) or not (
            1 <= self.default_topic_queue_nums <= 1024
        ):
            raise ConfigError(
                f"default_topic_queue_nums must be 1..1024, got {self.default_topic_queue_nums!r}"
            )
        return self


def signed(cmd: RemotingCommand, config: BrokerConfig) -> RemotingCommand:
    """``cmd`` signed with the broker's innerClientAuthenticationCredentials, as RocketMQ
    5's BrokerOuterAPI signs a slave's requests (an AclClientRPCHook); unsigned without
    them, as a 4.9.8 slave sends them."""
    credentials = config.inner_client_credentials()
    return cmd if credentials is None else sign_request(cmd, credentials)


# Settings a running broker cannot take (updateBrokerConfig refuses them): its identity,
# and the system topics it makes at start. Set in broker.conf; they apply at the next start.
RESTART_ONLY_FIELDS = frozenset(
    {
        "broker_cluster_name",
        "broker_name",
        "cluster_topic_enable",
        "broker_topic_enable",
        "trace_topic_enable",
        "msg_trace_topic_name",
        "config_black_list",
        "broker_role",
        "broker_id",
        "ha_listen_port",
    }
)

BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")

# broker.conf keys whose spelling is not the camelCase of BrokerConfig's field name.
BROKER_ALIASES = {
    "flushConsumerOffsetInterval": "flush_consumer_offset_interval_ms",
    "flushDelayOffsetInterval": "flush_delay_offset_interval_ms",
    "transactionTimeOut": "transaction_timeout_ms",
    "transactionCheckInterval": "transaction_check_interval_ms",
    "haSendHeartbeatInterval": "ha_send_heartbeat_interval_ms",
    "haHousekeepingInterval": "ha_housekeeping_interval_ms",
    "slaveTimeout": "slave_timeout_ms",
}


def broker_config_from_settings(
    settings: Mapping[str, str], *, source: str = "settings"
) -> BrokerConfig:
    """RocketMQ's defaults with the broker settings of a broker.conf (every BrokerConfig
    field by its camelCase key, plus ``BROKER_ALIASES``), validated; ConfigError names
    ``source`` and the key."""
    defaults = BrokerConfig()
    keys = camel_keys(defaults, BROKER_ALIASES)
    broker, _used = apply_settings(defaults, settings, keys, source=source)
    return broker.validate()


def config_dir(store_root: str | os.PathLike[str]) -> str:
    return os.path.join(os.fspath(store_root), CONFIG_DIR)


def config_file_path(store_root: str | os.PathLike[str], name: str) -> str:
    return os.path.join(config_dir(store_root), name)


# --- fastjson-tolerant parsing --------------------------------------------------------

# A JSON string literal, or an unquoted integer key after '{' or ','. Strings are matched
# first so that text inside them is never rewritten.
_BARE_INT_KEY = re.compile(r'("(?:[^"\\]|\\.)*")|([{,]\s*)(-?\d+)(\s*:)', re.DOTALL)


def _quote_int_keys(match: re.Match[str]) -> str:
    if match.group(1) is not None:
        return match.group(1)
    return f'{match.group(2)}"{match.group(3)}"{match.group(4)}'


def offset_table_of(obj: Any, shape: str) -> Mapping[Any, Any]:
    """The ``offsetTable`` object of a parsed consumerOffset.json or delayOffset.json (both
    files wrap their table the same way); ValueError says what is wrong."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    raw = obj.get("offsetTable", {})
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"offsetTable must be an object{shape}")
    return raw


def parse_fastjson(text: str, object_hook: Callable[[dict[str, Any]], Any] | None = None) -> Any:
    """Parse JSON as fastjson writes it (unquoted integer map keys allowed).

    Raises ``ValueError`` on anything else that is not JSON, and on nesting deeper than
    Python's recursion limit (which no RocketMQ file or request body has). An escaped lone
    surrogate reads as ``?``, as a Java broker would write it back
    (:func:`~rocketstore.broker.remoting.replace_lone_surrogates`). ``object_hook`` is
    json.loads's.
    """
    text = replace_lone_surrogates(text)
    try:
        try:
            # Standard JSON first: the key rewrite leaves it as it is, and its Python call
            # per string literal made a 7 MiB heartbeat take 1.8 s instead of 0.2.
            return json.loads(text, object_hook=object_hook)
        except ValueError:
            return json.loads(_BARE_INT_KEY.sub(_quote_int_keys, text), object_hook=object_hook)
    except RecursionError as e:
        raise ValueError("JSON nested too deeply") from e


def dump_pretty(obj: Any) -> str:
    """Standard JSON in fastjson's pretty layout: tab indent, ``"key":value``."""
    return json.dumps(obj, indent="\t", separators=(",", ":"), ensure_ascii=False)


# --- loading and persisting -----------------------------------------------------------

# One lock per file path, so two managers of one file (or a persist racing a shutdown
# persist) never interleave their tmp/bak/rename steps.
_PATH_LOCKS: dict[str, threading.Lock] = {}
_PATH_LOCKS_GUARD = threading.Lock()


def _path_lock(path: str) -> threading.Lock:
    key = os.path.realpath(path)
    with _PATH_LOCKS_GUARD:
        lock = _PATH_LOCKS.get(key)
        if lock is None:
            lock = _PATH_LOCKS[key] = threading.Lock()
        return lock


def _read_text(path: str) -> str | None:
    """The file's text; None when it is missing or blank (RocketMQ treats both alike)."""
    try:
        data = read_store_file(path)  # (a FIFO so named is refused, not waited on)
    except FileNotFoundError:
        return None
    text = data.decode("utf-8")
    return text if text.strip() else None


def _decode_file(path: str, decode: Callable[[Any], T]) -> T | None:
    """Parse and decode one file: None if missing or blank; ValueError saying what is
    wrong otherwise."""
    try:
        text = _read_text(path)
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 text: {e}") from e
    if text is None:
        return None
    try:
        parsed = parse_fastjson(text)
    except ValueError as e:
        raise ValueError(f"not valid JSON: {e}") from e
    try:
        return decode(parsed)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise ValueError(f"unexpected content: {e}") from e


# Config files (absolute paths) this process loaded from their ``.bak`` because the file
# itself was bad, and has not written since.
_restored_from_backup: set[str] = set()


def load_config_file(path: str, what: str, decode: Callable[[Any], T]) -> T | None:
    """``decode`` applied to the parsed ``path``, or to ``path.bak`` when ``path`` is
    missing, blank or bad; None when neither file exists (a fresh store).

    ``decode`` raises ValueError (or TypeError/KeyError) on content it does not accept.
    ``what`` names the table in messages ("topic config"). A bad ``path`` without a good
    backup raises CorruptDataError naming both files.
    """
    backup = path + BACKUP_SUFFIX
    try:
        loaded = _decode_file(path, decode)
    except (ValueError, OSError) as e:
        problem: str | None = str(e)
        log.warning("%s: %s; trying %s", path, problem, backup)
    else:
        if loaded is not None:
            return loaded
        problem = None
    try:
        from_backup = _decode_file(backup, decode)
    except (ValueError, OSError) as e:
        backup_problem = str(e)
        from_backup = None
    else:
        backup_problem = "missing"
    if from_backup is not None:
        if problem is None:  # missing or blank: a first write cut short
            log.warning("%s: %s loaded from the backup %s", path, what, backup)
        else:
            # Said where an operator's tools show it (the CLI prints errors only): the
            # table is as it was at the backup's write, and the bad file stays as it is
            # until the next write, which keeps the backup (persist_config_file).
            log.error("%s: %s; %s loaded from the backup %s", path, problem, what, backup)
            _restored_from_backup.add(os.path.abspath(path))
        return from_backup
    if problem is None and backup_problem == "missing":
        return None
    raise CorruptDataError(
        f"{what} file is unusable ({problem or 'missing'}) and so is its backup {backup} "
        f"({backup_problem}); repair or remove them to start from an empty table",
        path=path,
    )


def persist_config_file(path: str, obj: Any) -> None:
    """Write ``obj`` atomically, keeping the previous file as ``.bak``: unless this process
    loaded the table from the backup because the file was bad. RocketMQ copies the bad
    file over the good backup then; here the backup stays until a good file replaces it."""
    data = dump_pretty(obj).encode("utf-8")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    key = os.path.abspath(path)
    with _path_lock(path):
        write_atomic(path, data, keep_backup=key not in _restored_from_backup)
        _restored_from_backup.discard(key)
