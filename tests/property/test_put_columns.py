"""``put_columns`` against ``put_batch`` of the equivalent Messages, byte for byte: the
same CommitLog bytes, the same offsets, the same refusals. CI runs this module with the C
extension and with ROCKETSTORE_PURE_PYTHON=1, so both encoders meet the same definition.

The equivalent Message of a row is built here from put_columns' documented rule (the
row's own properties, then KEYS, TAGS and the property columns, a name already there
keeping its place; a None value left out), not with the store's own helper."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, PutStatus, StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.format.properties import VerbatimProperties
from rocketstore.format.record import record_length

STORE_MS = 1_700_000_000_123
BORN_MS = 1_700_000_000_000
# Names that overlap the columns (KEYS, TAGS, UNIQ_KEY), DELAY (a batch refuses it) and
# one that is not ASCII.
NAMES = ["KEYS", "TAGS", "UNIQ_KEY", "DELAY", "a", "ключ"]
# Mostly plain text; sometimes what a record cannot keep (empty, a separator, a lone
# surrogate), which both paths must refuse alike.
_text = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), min_size=1, max_size=8),
    st.sampled_from(["", "a\x01b", "x\x02", "\ud800"]),
)
_value = st.one_of(st.none(), _text)


@contextmanager
def _store(**changes: Any) -> Iterator[MessageStore]:
    with tempfile.TemporaryDirectory() as root:
        settings: dict[str, Any] = {
            "mapped_file_size_commit_log": 1024 * 1024,
            "mapped_file_size_consume_queue": 6000,
            "max_hash_slot_num": 100,
            "max_index_num": 400,
        }
        config = StoreConfig(**(settings | changes))
        store = MessageStore.open(os.path.join(root, "s"), config)
        try:
            yield store
        finally:
            store.close()


def _written(store: MessageStore) -> bytes:
    """Every CommitLog file the records reach, whole: what lies past them (zeros) counts
    too. (Not the next file, which the prefaulter may have made by then.)"""
    end = store.max_commit_log_offset()
    if end == 0:  # (no file yet)
        return b""
    store.commitlog.files.flush_all()
    files = []
    for mapped in store.commitlog.files.files:
        if mapped.file_from_offset < end:
            with open(mapped.path, "rb") as f:
                files.append(f.read())
    return b"".join(files)


@st.composite
def _columns(draw: st.DrawFn) -> dict[str, Any]:
    rows = draw(st.integers(0, 6))

    def column(values: st.SearchStrategy[Any], scalar: st.SearchStrategy[Any]) -> Any:
        return draw(st.one_of(scalar, st.lists(values, min_size=rows, max_size=rows)))

    own = st.one_of(st.none(), st.dictionaries(st.sampled_from(NAMES), _text, max_size=3))
    return {
        "topic": draw(st.sampled_from(["TopicA", "T%RETRY", "bad topic"])),
        "bodies": draw(
            st.lists(
                st.one_of(st.binary(max_size=40), st.just(bytearray(b"ba"))),
                min_size=rows,
                max_size=rows,
            )
        ),
        "queue_ids": column(st.integers(-1, 3), st.integers(0, 3)),
        "keys": column(_value, st.one_of(st.none(), _text)),
        "tags": column(_value, st.one_of(st.none(), _text)),
        "properties": draw(st.one_of(st.none(), st.lists(own, min_size=rows, max_size=rows))),
        "property_columns": draw(
            st.dictionaries(
                st.sampled_from(["UNIQ_KEY", "KEYS", "DELAY", "b"]),
                st.one_of(_text, st.lists(_value, min_size=rows, max_size=rows)),
                max_size=2,
            )
        ),
    }


def _messages(c: dict[str, Any]) -> list[Message]:
    """The rows as Messages, by put_columns' rule."""

    def at(column: Any, row: int) -> Any:
        return column if column is None or isinstance(column, (str, int)) else column[row]

    messages = []
    for row, body in enumerate(c["bodies"]):
        own = None if c["properties"] is None else c["properties"][row]
        properties = dict(own or {})
        named = [("KEYS", c["keys"]), ("TAGS", c["tags"]), *c["property_columns"].items()]
        for name, column in named:
            value = at(column, row)
            if value is not None:
                properties[name] = value
        messages.append(
            Message(
                c["topic"],
                body,
                queue_id=at(c["queue_ids"], row),
                properties=properties,
                born_timestamp=BORN_MS,
            )
        )
    return messages


@settings(deadline=None, max_examples=150)
@given(_columns())
def test_put_columns_writes_what_put_batch_of_the_same_messages_writes(c: dict[str, Any]) -> None:
    with _store() as ours, _store() as theirs:
        result = ours.put_columns(**c, born_timestamp=BORN_MS, store_timestamp=STORE_MS)
        batch = theirs.put_batch(_messages(c), store_timestamp=STORE_MS)
        assert _written(ours) == _written(theirs)
        if not batch:
            assert result.ok and result.stored == 0
            return
        assert result.status is batch[0].status
        if not result.ok:
            assert result.stored == 0 and result.refused_row is not None
            # put_batch names the message; put_columns the row (and the argument).
            assert batch[0].reason.startswith(f"message {result.refused_row} of the batch: ")
            assert result.reason.startswith(f"row {result.refused_row}")
            assert result.reason.endswith(batch[0].reason.split(": ", 1)[1])
            return
        assert [result.result(i) for i in range(result.stored)] == batch


@settings(deadline=None, max_examples=20)
@given(
    st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=40),
    st.sampled_from(["ASYNC_FLUSH", "SYNC_FLUSH"]),
    st.sampled_from([1024 * 1024, 2048]),
)
def test_batches_cut_by_max_message_size_are_put_batches_of_their_rows(
    bodies: list[bytes], flush: str, file_size: int
) -> None:
    """Rows past one batch's limits go in as several, each what put_batch writes: here
    bodies of at most 600 bytes a batch, cut before the row that would pass them (and,
    in files of 2 KiB, at half a file of records), a batch that does not fit the rest of
    a file going to the next one. With ASYNC_FLUSH the C encoder writes into the mapped
    file; SYNC_FLUSH writes with pwrite, from its buffer."""
    changes: dict[str, Any] = {
        "max_message_size": 600,
        "flush_disk_type": flush,
        "mapped_file_size_commit_log": file_size,
    }
    with _store(**changes) as ours, _store(**changes) as theirs:
        result = ours.put_columns(
            "T",
            bodies,
            queue_ids=[i % 3 for i in range(len(bodies))],
            keys="k",
            born_timestamp=BORN_MS,
            store_timestamp=STORE_MS,
        )
        assert result.ok, result.reason
        chunk: list[Message] = []
        records = 0
        for i, body in enumerate(bodies):
            message = Message(
                "T", body, queue_id=i % 3, properties={"KEYS": "k"}, born_timestamp=BORN_MS
            )
            length = record_length(len(body), len("T"), len("KEYS\x01k"))
            if chunk and (
                sum(len(m.body) for m in chunk) + len(body) > 600
                or records + length + 8 > file_size // 2
            ):
                assert all(r.ok for r in theirs.put_batch(chunk, store_timestamp=STORE_MS))
                chunk, records = [], 0
            chunk.append(message)
            records += length
        assert all(r.ok for r in theirs.put_batch(chunk, store_timestamp=STORE_MS))
        assert _written(ours) == _written(theirs)
        assert result.status is PutStatus.PUT_OK and result.stored == len(bodies)
        # The queues as put_batch left them: the next put lands alike.
        assert ours.commitlog.topic_queue_table == theirs.commitlog.topic_queue_table


# A batch entry's stored properties string as a client may send it: names, values and
# separators in any order (a trailing separator, a repeated name, DELAY), now and then
# a lone surrogate or one long enough to be refused.
_property_text = st.one_of(
    st.lists(
        st.one_of(
            st.sampled_from(["KEYS\x01k", "TAGS\x01a", "DELAY\x013", "DELAY\x010", "\x02"]),
            st.text(st.characters(codec="utf-8"), max_size=6),
        ),
        max_size=4,
    ).map("".join),
    st.sampled_from(["\ud800", "x" * 32768, "é" * 16384]),
)
_int32 = st.integers(-(2**31), 2**31 - 1)


@st.composite
def _batch_columns(draw: st.DrawFn) -> dict[str, Any]:
    rows = draw(st.integers(0, 5))
    flags = draw(st.one_of(_int32, st.lists(_int32, min_size=rows, max_size=rows)))
    return {
        "bodies": draw(st.lists(st.binary(max_size=40), min_size=rows, max_size=rows)),
        "flags": flags,
        "property_texts": draw(st.lists(_property_text, min_size=rows, max_size=rows)),
        # A transaction type (0x4, 0x8), which a batch refuses, and the host flags.
        "sys_flag": draw(st.sampled_from([0, 0x1, 0x4, 0x8, 0x30, 2**31 - 1, -(2**31)])),
        "reconsume_times": draw(st.one_of(st.just(0), _int32)),
        "queue_ids": draw(st.integers(0, 3)),
    }


@settings(deadline=None, max_examples=150)
@given(_batch_columns())
def test_batch_fields_and_property_texts_write_what_put_batch_writes(c: dict[str, Any]) -> None:
    """A broker's batch send as columns (each row's flag, the batch's sys flag and
    reconsume times, each row's properties string stored as it is) writes what
    put_batch of the same Messages with VerbatimProperties writes, refusals alike."""
    flags = c["flags"]
    messages = [
        Message(
            "TopicB",
            body,
            queue_id=c["queue_ids"],
            flag=flags if isinstance(flags, int) else flags[row],
            sys_flag=c["sys_flag"],
            properties=VerbatimProperties(text),
            born_timestamp=BORN_MS,
            born_host="10.1.2.3:4567",
            reconsume_times=c["reconsume_times"],
        )
        for row, (body, text) in enumerate(zip(c["bodies"], c["property_texts"], strict=True))
    ]
    with _store() as ours, _store() as theirs:
        result = ours.put_columns(
            "TopicB",
            **c,
            born_timestamp=BORN_MS,
            born_host="10.1.2.3:4567",
            store_timestamp=STORE_MS,
        )
        batch = theirs.put_batch(messages, store_timestamp=STORE_MS)
        assert _written(ours) == _written(theirs)
        if not batch:
            assert result.ok and result.stored == 0
            return
        assert result.status is batch[0].status
        if not result.ok:
            assert result.stored == 0 and result.refused_row is not None
            assert result.reason.endswith(batch[0].reason.split(": ", 1)[1])
            return
        assert [result.result(i) for i in range(result.stored)] == batch


def test_property_texts_stand_alone() -> None:
    with _store() as store, pytest.raises(ConfigError, match="property_texts"):
        store.put_columns("T", [b"x"], keys="k", property_texts=["a\x01b"])
    with _store() as store, pytest.raises(ConfigError, match="flags has 2 rows"):
        store.put_columns("T", [b"x"], flags=[1, 2])


def test_a_plain_batch_send_is_encoded_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """The common batch (int32 flags, plain texts) is the C encoder's, in place."""
    from rocketstore.format import native

    if native.encode_columns is None:
        pytest.skip("the C extension is not built (or ROCKETSTORE_PURE_PYTHON)")
    real = native.encode_columns
    answers: list[object] = []

    def spy(*args: Any) -> Any:
        answers.append(real(*args))
        return answers[-1]

    monkeypatch.setattr(native, "encode_columns", spy)
    with _store() as store:
        texts = ["KEYS\x01k\x02CLUSTER\x01C", "UNIQ_KEY\x01ü\x02\x02CLUSTER\x01C"]
        result = store.put_columns(
            "T", [b"a", b"b"], flags=[0, 7], reconsume_times=2, property_texts=texts
        )
        assert result.ok and result.stored == 2
    assert len(answers) == 1 and isinstance(answers[0], tuple)
