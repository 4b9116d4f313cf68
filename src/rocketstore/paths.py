"""Names and paths inside a store directory (lowest layer: string work only, no I/O).

On-disk names are RocketMQ's, verbatim.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from dataclasses import dataclass

from rocketstore.errors import ConfigError
from rocketstore.java_ints import JAVA_LONG_MAX

COMMITLOG_DIR = "commitlog"
CONSUME_QUEUE_DIR = "consumequeue"
CONSUME_QUEUE_EXT_DIR = "consumequeue_ext"
INDEX_DIR = "index"
CONFIG_DIR = "config"
CHECKPOINT_FILE = "checkpoint"
ABORT_FILE = "abort"
LOCK_FILE = "lock"
DLEDGER_PREFIX = "dledger-"  # DLedger's home: <root>/dledger-<selfId>/
DLEDGER_DATA_DIR = "data"  # its log: <root>/dledger-<selfId>/data/<20-digit offset>

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
LMQ_PREFIX = "%LMQ%"

_OFFSET_NAME = re.compile(r"^\d{20}$")
_INDEX_NAME = re.compile(r"^\d{17}$")
TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def offset_to_file_name(offset: int) -> str:
    """``UtilAll.offset2FileName``: the start offset as 20 zero-padded digits."""
    return f"{offset:020d}"


def is_offset_file_name(name: str) -> bool:
    """Twenty digits naming an offset a Java long can hold (RocketMQ's files; a larger
    number is no file of its, and would overflow every offset computed from it)."""
    return bool(_OFFSET_NAME.match(name)) and int(name) <= JAVA_LONG_MAX


def is_index_file_name(name: str) -> bool:
    return bool(_INDEX_NAME.match(name))


def index_file_name(epoch_ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` in the local time zone (``UtilAll.timeMillisToHumanString``)."""
    moment = _dt.datetime.fromtimestamp(epoch_ms / 1000)
    return moment.strftime("%Y%m%d%H%M%S") + f"{epoch_ms % 1000:03d}"


def index_file_ms(name: str) -> int | None:
    """The epoch ms an index file name stands for (``index_file_name``'s inverse, local
    time); None for a name that is not a valid time (RocketMQ only ever makes valid ones,
    but a directory may hold anything)."""
    if not is_index_file_name(name):
        return None
    try:
        moment = _dt.datetime.strptime(name[:14], "%Y%m%d%H%M%S")
        return int(moment.timestamp()) * 1000 + int(name[14:])
    except (ValueError, OverflowError, OSError):
        return None


def commitlog_dir(root: str) -> str:
    return os.path.join(root, COMMITLOG_DIR)


def dledger_home(root: str, self_id: str) -> str:
    """``DLedgerConfig.getDefaultPath``: the member's directory (data, index, checkpoint)."""
    return os.path.join(root, DLEDGER_PREFIX + self_id)


def dledger_data_dir(root: str, self_id: str) -> str:
    return os.path.join(dledger_home(root, self_id), DLEDGER_DATA_DIR)


# RocketMQ's MessageStoreConfig.MULTI_PATH_SPLITTER (the rocketmq.broker.multiPathSplitter
# system property can change it; nobody we know does).
MULTI_PATH_SPLITTER = ","


def split_paths(setting: str, *, key: str = "storePathCommitLog") -> tuple[str, ...]:
    """A ``storePathCommitLog``-style list as RocketMQ reads it (``trim().split(",")``,
    which drops trailing empty parts), each directory once (``a``, ``./a`` and ``a/`` are
    one: RocketMQ would load its files twice). ConfigError for an empty part before
    another (RocketMQ would take the empty path, and write files at the file-system
    root) and for a setting that names no directory at all; ``key`` names the setting."""
    parts = setting.strip().split(MULTI_PATH_SPLITTER)
    while parts and not parts[-1]:
        parts.pop()  # as Java's split drops them
    if "" in parts or (not parts and setting.strip()):
        raise ConfigError(
            f"{key}={setting!r} has an empty path; list directories separated by "
            f"{MULTI_PATH_SPLITTER!r}"
        )
    paths: list[str] = []
    seen: set[str] = set()
    for part in parts:
        same = os.path.normpath(part)
        if same not in seen:
            seen.add(same)
            paths.append(part)
    return tuple(paths)


@dataclass(frozen=True, slots=True)
class CommitLogDirs:
    """Where a store's CommitLog files are: one directory (``<root>/commitlog`` unless
    ``storePathCommitLog`` names another), or, when the setting lists several (RocketMQ's
    MultiPathMappedFileQueue), files spread over them, plus ``readOnlyCommitLogStorePaths``
    whose files are read but never added to.

    ``writable`` and ``read_only`` are as configured; ``all`` is every directory files are
    read from; ``multi_path`` says new files are placed (the setting held a ``,``).

    ``dledger``: the data directories of a DLedger CommitLog (enableDLegerCommitLog), whose
    files frame each record in a DLedger entry (format.dledger_entry). They come after the
    plain directories, whose files (a broker's log from before it turned DLedger on) end
    where the DLedger log begins. rocketstore reads them, never writes them."""

    writable: tuple[str, ...]
    read_only: tuple[str, ...] = ()
    multi_path: bool = False
    dledger: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, root: str, store_path_commit_log: str = "", read_only_paths: str = ""
    ) -> CommitLogDirs:
        """The directories of the settings (``""``: ``<root>/commitlog``). As in RocketMQ,
        read-only paths count only with a multi-path setting (one with a ``,``).
        ConfigError for a list RocketMQ could not use (split_paths)."""
        setting = store_path_commit_log.strip()
        if not setting:
            return cls((commitlog_dir(root),))
        if MULTI_PATH_SPLITTER not in setting:
            return cls((setting,))
        writable = split_paths(setting)
        given = split_paths(read_only_paths, key="readOnlyCommitLogStorePaths")
        # A directory is one however it is spelled: a writable one named read-only (as
        # "a/" for "a") is read-only under its writable spelling.
        named = {os.path.normpath(p) for p in given}
        known = {os.path.normpath(p) for p in writable}
        read_only = tuple(p for p in writable if os.path.normpath(p) in named)
        read_only += tuple(p for p in given if os.path.normpath(p) not in known)
        return cls(writable, read_only, multi_path=True)

    @property
    def all(self) -> tuple[str, ...]:
        plain = self.writable + tuple(p for p in self.read_only if p not in self.writable)
        return plain + tuple(p for p in self.dledger if p not in plain)

    def holds_entries(self, path: str) -> bool:
        """Whether the CommitLog file ``path`` is in a DLedger data directory."""
        if not self.dledger:
            return False
        parent = os.path.normpath(os.path.dirname(path))
        return any(os.path.normpath(d) == parent for d in self.dledger)

    def placement(self, full: frozenset[str] = frozenset()) -> tuple[str, ...]:
        """The directories a new file may go to, sorted as Java sorts strings: the
        writable ones that are not read-only, without those whose disk is ``full`` unless
        that leaves none (RocketMQ's tryCreateMappedFile)."""
        available = [p for p in self.writable if p not in self.read_only]
        roomy = [p for p in available if p not in full]
        return tuple(sorted(roomy or available, key=_java_string_order))

    def directory_for(
        self, start_offset: int, file_size: int, full: frozenset[str] = frozenset()
    ) -> str:
        """The directory of the file starting at ``start_offset``: file number ``n`` goes
        to ``placement()[n % len]``. ConfigError when every path is read-only (RocketMQ
        fails with an ArithmeticException then)."""
        self.require_writable()
        paths = self.placement(full)
        return paths[(start_offset // file_size) % len(paths)]

    def require_writable(self) -> None:
        """ConfigError when no path takes new files (every one is read-only, or the log is
        a DLedger one)."""
        if self.dledger:
            raise ConfigError(
                f"the CommitLog is a DLedger log ({', '.join(self.dledger)}): rocketstore "
                "reads it but does not write it (open it with read-only commands, or run "
                "the DLedger broker)"
            )
        if self.multi_path and not self.placement():
            raise ConfigError(
                "every storePathCommitLog path is also in readOnlyCommitLogStorePaths: "
                f"no directory to write a CommitLog file in ({', '.join(self.writable)})"
            )


def no_commitlog(dirs: CommitLogDirs, entries: list[str] | None = None) -> str:
    """What a store missing its CommitLog lacks, for an error message: ``no commitlog/``,
    or the configured directories. ``entries`` (the root's names, when known) tell a
    DLedger broker's store whose data directory is not where the settings say."""
    if len(dirs.all) == 1 and os.path.basename(dirs.all[0]) == COMMITLOG_DIR:
        text = f"no {COMMITLOG_DIR}/"
    else:
        text = "no CommitLog directory: " + ", ".join(dirs.all)
    dledger = sorted(name for name in entries or () if name.startswith(DLEDGER_PREFIX))
    if dledger:
        text += (
            f"; {dledger[0]}/ may be a DLedger CommitLog (enableDLegerCommitLog) without "
            f"its {DLEDGER_DATA_DIR}/ directory"
        )
    return text


def _java_string_order(text: str) -> bytes:
    """Java's String.compareTo order: by UTF-16 code units (a character past U+FFFF sorts
    as its surrogates, before U+E000..U+FFFF, unlike Python's code-point order)."""
    return text.encode("utf-16-be", "surrogatepass")


# The longest file name the usual file systems take, in bytes.
MAX_DIR_NAME_BYTES = 255


def is_queue_dir_name(topic: str) -> bool:
    """Whether a topic read from a record (or a queue a multi-dispatch message names) can
    name a consume-queue directory. Every topic RocketMQ accepts can; a damaged record's
    topic may not: a '/', a NUL, '.' or '..' would put its queue outside consumequeue/ or
    fail to make it, and a name past 255 bytes fails to make it."""
    return (
        bool(topic)
        and topic not in (".", "..")
        and "/" not in topic
        and "\0" not in topic
        and len(topic.encode("utf-8", errors="surrogatepass")) <= MAX_DIR_NAME_BYTES
    )


def consume_queue_dir(root: str, topic: str, queue_id: int) -> str:
    return os.path.join(root, CONSUME_QUEUE_DIR, topic, str(queue_id))


def consume_queue_ext_dir(root: str, topic: str, queue_id: int) -> str:
    return os.path.join(root, CONSUME_QUEUE_EXT_DIR, topic, str(queue_id))


def index_dir(root: str) -> str:
    return os.path.join(root, INDEX_DIR)


# TopicValidator (4.9.8): the system topics' names, SYSTEM_TOPIC_SET.
AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
BENCHMARK_TOPIC = "BenchmarkTest"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT_TOPIC = "OFFSET_MOVED_EVENT"
# Where half messages checked too often go (one queue, read and write).
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
SYSTEM_TOPIC_NAMES = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        SCHEDULE_TOPIC,
        BENCHMARK_TOPIC,
        TRANS_HALF_TOPIC,
        TRACE_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT_TOPIC,
    }
)
# Topics a client may never send to (TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET): a broker
# refuses them, and so do rocketstore's sending tools.
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT_TOPIC,
    }
)


def is_system_topic(topic: str) -> bool:
    """TopicValidator.isSystemTopic: the set, and the ``rmq_sys_`` prefix (and its
    upper-case spelling, which the set's RMQ_SYS_ names share)."""
    return topic in SYSTEM_TOPIC_NAMES or topic.startswith(("rmq_sys_", "RMQ_SYS_"))
