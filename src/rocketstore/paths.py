"""Names and paths inside a store directory (lowest layer: string work only, no I/O).

On-disk names are RocketMQ's, verbatim.
"""

from __future__ import annotations

import datetime as _dt
import os
import re

from rocketstore.java_ints import JAVA_LONG_MAX

COMMITLOG_DIR = "commitlog"
CONSUME_QUEUE_DIR = "consumequeue"
INDEX_DIR = "index"
CONFIG_DIR = "config"
CHECKPOINT_FILE = "checkpoint"
ABORT_FILE = "abort"
LOCK_FILE = "lock"

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


def index_dir(root: str) -> str:
    return os.path.join(root, INDEX_DIR)


def is_system_topic(topic: str) -> bool:
    return topic in (SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC) or topic.startswith(
        ("rmq_sys_", "RMQ_SYS_")
    )
