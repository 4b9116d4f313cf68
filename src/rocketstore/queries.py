"""Key lookups through the index: by KEYS token and by UNIQ_KEY.

Layer: engine paths. Unlike RocketMQ's store, a candidate is returned only after its record
was read and its topic and key compared (RocketMQ #3613), and the time window applies to
the record's real store timestamp, never to the index's second-precision hint (#5174).
"""

from __future__ import annotations

from rocketstore.commitlog import CommitLog
from rocketstore.config import StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.format import native
from rocketstore.format import properties as props
from rocketstore.format import record as rec
from rocketstore.format.message import MessageExt
from rocketstore.index import IndexService
from rocketstore.java_ints import JAVA_INT_MAX, JAVA_LONG_MAX, JAVA_LONG_MIN, int_argument


def _commit_log_offset(message: MessageExt) -> int:
    return message.commit_log_offset


def _checked_arguments(
    topic: object, key: object, max_count: object, begin_ms: object, end_ms: object
) -> tuple[int, int, int]:
    """A lookup's count and time bounds as ints in range, after ConfigError for arguments
    of the wrong type, an empty topic or key, or a count of none."""
    for name, text in (("topic", topic), ("key", key)):
        if not isinstance(text, str) or not text:
            raise ConfigError(f"{name} must be a non-empty str, got {text!r}")
    count = int_argument("max_count", max_count)
    if count <= 0:
        raise ConfigError(f"max_count must be positive, got {count}")
    # Store times are Java longs and RocketMQ's maxNum an int: values beyond change no
    # answer, and the C lookup takes these types.
    return (
        min(count, JAVA_INT_MAX),
        min(max(int_argument("begin_ms", begin_ms), JAVA_LONG_MIN), JAVA_LONG_MAX),
        min(max(int_argument("end_ms", end_ms), JAVA_LONG_MIN), JAVA_LONG_MAX),
    )


class KeyQuery:
    def __init__(self, commitlog: CommitLog, index: IndexService, config: StoreConfig):
        self.commitlog = commitlog
        self.index = index
        self.config = config

    def _matches(
        self, topic: str, key: str, max_count: int, begin_ms: int, end_ms: int, unique: bool
    ) -> list[MessageExt]:
        """The matches, newest first: in one C call when it can (``rec.fast_key_lookup``),
        else candidate by candidate."""
        # One test for the usual arguments: the full checks (_checked_arguments) cost a hot
        # lookup a third of its time.
        if not (
            type(topic) is str
            and topic
            and type(key) is str
            and key
            and type(max_count) is int
            and 0 < max_count <= JAVA_INT_MAX
            and type(begin_ms) is int
            and JAVA_LONG_MIN <= begin_ms <= JAVA_LONG_MAX
            and type(end_ms) is int
            and JAVA_LONG_MIN <= end_ms <= JAVA_LONG_MAX
        ):
            max_count, begin_ms, end_ms = _checked_arguments(
                topic, key, max_count, begin_ms, end_ms
            )
        lookup = rec.fast_key_lookup
        if native.key_lookup is not None and lookup is not None:
            cl = self.commitlog
            quick = lookup(
                self.index.files,
                cl.files.files,
                cl.file_size,
                topic,
                key,
                unique,
                begin_ms,
                end_ms,
                max_count,
            )
            if quick is not None:
                return quick
        return self._python_matches(topic, key, max_count, begin_ms, end_ms, unique)

    def _python_matches(
        self, topic: str, key: str, max_count: int, begin_ms: int, end_ms: int, unique: bool
    ) -> list[MessageExt]:
        found: list[MessageExt] = []
        offsets = self.index.candidates(f"{topic}#{key}")
        if len(offsets) > 1:  # the same offset twice (an index rebuilt over itself): once
            offsets = list(dict.fromkeys(offsets))
        read = self.commitlog.read_message
        for offset in offsets:
            message = read(offset)
            if message is None:
                continue  # removed by retention, or an index entry past a recovered end
            if message.topic != topic or not begin_ms <= message.store_timestamp <= end_ms:
                continue
            if unique:
                if message.properties.get(props.UNIQ_KEY) != key:
                    continue
            else:  # a KEYS token (key is not empty, so empty tokens never match)
                keys = message.properties.get(props.KEYS)
                if keys is None or key not in keys.split(props.KEY_SEPARATOR):
                    continue
            found.append(message)
            if len(found) >= max_count:
                break
        return found

    def by_key(
        self, topic: str, key: str, max_count: int, begin_ms: int, end_ms: int
    ) -> list[MessageExt]:
        """The newest ``max_count`` matches, returned oldest first (by CommitLog offset)."""
        found = self._matches(topic, key, max_count, begin_ms, end_ms, False)
        if len(found) > 1:  # (one, the usual answer, needs no sort)
            found.sort(key=_commit_log_offset)
        return found

    def by_unique_key(
        self, topic: str, uniq_key: str, max_count: int | None = None
    ) -> list[MessageExt]:
        limit = self.config.default_query_max_num if max_count is None else max_count
        found = self._matches(topic, uniq_key, limit, 0, JAVA_LONG_MAX, True)
        return sorted(found, key=lambda m: (m.store_timestamp, m.commit_log_offset))
