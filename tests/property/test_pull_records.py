"""``get_matching_records`` (a pull answered with the records' bytes, C when built) against
its definition, ``get_matching_messages`` and each message's record read again: the same
status, offsets, suggestion and body bytes, for random stores (tags, including two with
one Java hash; properties ASCII or not; sizes that reach across small CommitLog files) and
random pulls (subscriptions, offsets in and past the queue, counts, byte limits). CI runs
this module with the C extension and with ROCKETSTORE_PURE_PYTHON=1."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format.subscription import build_subscription

# "Aa" and "BB" share a Java hash code: the units pass both, the records' TAGS decide.
TAGS = ["A", "B", "Aa", "BB", "ü"]
EXPRESSIONS = ["*", "A", "A || B", "Aa", "BB || ü", " "]

_message = st.tuples(
    st.integers(0, 2),  # queue id
    st.integers(0, 3000),  # body bytes
    st.sampled_from([*TAGS, None]),
    st.booleans(),  # a non-ASCII property
)
_pull = st.tuples(
    st.integers(0, 2),  # queue id
    st.integers(0, 60),  # queue offset
    st.sampled_from([1, 2, 7, 32, 100]),
    st.sampled_from(EXPRESSIONS),
)


def _answer_before(store: MessageStore, pull: tuple[int, int, int, str]) -> tuple[Any, ...]:
    queue_id, offset, count, expression = pull
    sub = build_subscription(expression)
    result = store.get_matching_messages("G", "T", queue_id, offset, count, sub)
    raw = [store.read_commitlog(m.commit_log_offset, m.size) for m in result.messages]
    body = b"".join(r for r in raw if r is not None) if result.found else b""
    return (
        result.status,
        body,
        len(result.messages),
        result.next_begin_offset,
        result.min_offset,
        result.max_offset,
        result.suggest_pulling_from_slave,
    )


def _answer_now(store: MessageStore, pull: tuple[int, int, int, str]) -> tuple[Any, ...]:
    queue_id, offset, count, expression = pull
    got = store.get_matching_records(
        "G", "T", queue_id, offset, count, build_subscription(expression)
    )
    return (
        got.status,
        got.body if got.found else b"",
        got.count,
        got.next_begin_offset,
        got.min_offset,
        got.max_offset,
        got.suggest_pulling_from_slave,
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=st.lists(_message, min_size=0, max_size=80),
    pulls=st.lists(_pull, min_size=1, max_size=12),
    limit_bytes=st.sampled_from([256 * 1024, 5000]),
)
def test_records_are_the_messages_records(
    messages: list[tuple[int, int, str | None, bool]],
    pulls: list[tuple[int, int, int, str]],
    limit_bytes: int,
) -> None:
    config = StoreConfig(
        mapped_file_size_commit_log=32 * 1024,
        message_index_enable=False,
        max_transfer_bytes_on_message_in_memory=limit_bytes,
    )
    with (
        tempfile.TemporaryDirectory() as root,
        MessageStore.open(os.path.join(root, "s"), config) as store,
    ):
        for number, (queue_id, size, tag, non_ascii) in enumerate(messages):
            properties = {"KEYS": f"k{number}"}
            if tag is not None:
                properties["TAGS"] = tag
            if non_ascii:
                properties["note"] = "ünï"
            body = bytes([number % 256]) * size
            store.put(Message("T", body, queue_id, properties=properties))
        store.wait_dispatched()
        for pull in pulls:
            assert _answer_now(store, pull) == _answer_before(store, pull)
