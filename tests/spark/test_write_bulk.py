"""The sink's commit through ``put_columns`` against the per-message path it replaced (a
Message per staged row, ``put_batch`` in chunks, ``put`` for a delayed one), kept here
as the reference: the same CommitLog, consume queue and index bytes, file rolls
included, from the first row or from a resume point."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from rocketstore import Message, MessageStore, PutStatus, StoreConfig, StoreError
from rocketstore.put_path import Refusal, delay_level
from rocketstore.spark import commit as commit_mod
from rocketstore.spark.sink_uniq_keys import KeyScope
from rocketstore.spark.staging import new_job_id, stage
from rocketstore.spark.write_options import check_columns, parse_write_options

MAP = pa.map_(pa.string(), pa.string())
NOW_MS = 1_700_000_000_000
OLD_CHUNK_MESSAGES = 1024
OLD_CHUNK_BODY_BYTES = 1024 * 1024


def _config(file_size: int) -> StoreConfig:
    return StoreConfig(
        mapped_file_size_commit_log=file_size,
        mapped_file_size_consume_queue=20 * 300,
        max_hash_slot_num=64,
        max_index_num=2000,
    )


def _batch(rows: int, first: int, max_body: int) -> pa.RecordBatch:
    """Rows of three topics in runs, some with a queue id, keys, user properties (one
    with KEYS of its own, one with its own UNIQ_KEY, one delayed), bodies of many sizes."""
    topics, values, queues, keys, tags, properties = [], [], [], [], [], []
    for i in range(first, first + rows):
        topics.append(("A", "B", "C")[(i // 7) % 3] if i % 50 < 40 else "A")
        size = (0, 1, 100, 900, 3000, 40_000)[i % 6] if i % 97 else 150_000
        values.append(bytes([i % 251]) * min(size, max_body))
        queues.append(i % 3 if i % 11 == 0 else None)
        keys.append(f"k{i % 13}" if i % 4 == 0 else None)
        tags.append("TagA" if i % 5 else None)
        own: list[tuple[str, str]] = []
        if i % 9 == 0:
            own.append(("seq", str(i)))
        if i % 45 == 0:
            own.append(("KEYS", f"own{i}"))
        if i % 63 == 0:
            own.append(("UNIQ_KEY", f"{i:032X}"))
        if i % 131 == 0:
            own.append(("DELAY", "2"))
        properties.append(own)
    return pa.RecordBatch.from_pydict(
        {
            "value": pa.array(values, pa.binary()),
            "topic": topics,
            "queueId": pa.array(queues, pa.int32()),
            "key": keys,
            "tags": tags,
            "properties": pa.array(properties, MAP),
        }
    )


def _stage_files(
    path: Path, max_body: int, parts: list[list[pa.RecordBatch]] | None = None
) -> list[str]:
    options = parse_write_options({"path": str(path)}, streaming=False)
    kinds = {"value": "binary", "topic": "string", "queueId": "int", "key": "string"}
    fields = [(n, kinds.get(n, "map<string,string>" if n == "properties" else "string"))
              for n in ("value", "topic", "queueId", "key", "tags", "properties")]  # fmt: skip
    columns = check_columns(fields, options)
    job = new_job_id()
    files = []
    if parts is None:
        parts = [
            [
                _batch(rows // 2, first, max_body),
                _batch(rows - rows // 2, first + rows // 2, max_body),
            ]
            for rows, first in [(700, 0), (1500, 700), (30, 2200)]
        ]
    for part, batches in enumerate(parts):
        scope = KeyScope(job, part, 12345)
        staged, _ = stage(iter(batches), columns, options, job, scope)
        assert staged is not None
        files.append(staged)
    return files


def _old_chunks(store: MessageStore, messages: Iterator[Message]) -> Iterator[list[Message]]:
    """The per-message path's put_batch runs (commit.py's _chunks before put_columns)."""
    file_size = store.config.mapped_file_size_commit_log
    chunk: list[Message] = []
    record_bytes = body_bytes = 0
    for message in messages:
        prepared = store.preparer.prepare(message, None)
        assert not isinstance(prepared, Refusal)
        length = prepared.length
        alone = bool(delay_level(message.properties))
        if chunk and (
            alone
            or len(chunk) >= OLD_CHUNK_MESSAGES
            or body_bytes + len(message.body) > OLD_CHUNK_BODY_BYTES
            or record_bytes + length + 8 > file_size // 2
        ):
            yield chunk
            chunk, record_bytes, body_bytes = [], 0, 0
        chunk.append(message)
        record_bytes += length
        body_bytes += len(message.body)
        if alone:
            yield chunk
            chunk, record_bytes, body_bytes = [], 0, 0
    if chunk:
        yield chunk


def _old_append(store: MessageStore, files: list[str], skip: int) -> int:
    messages = commit_mod.staged_messages(files, commit_mod._chooser(store, 4))
    for _ in range(skip):
        next(messages)
    appended = 0
    for chunk in _old_chunks(store, messages):
        if len(chunk) == 1 and delay_level(chunk[0].properties):
            results = [store.put(chunk[0])]
        else:
            results = store.put_batch(chunk)
        assert all(r.ok for r in results)
        appended += len(chunk)
    return appended


# An append under test: (store, staged files, rows to skip) -> rows appended.
Appender = Callable[[MessageStore, list[str], int], int]


def _new_append(store: MessageStore, files: list[str], skip: int) -> int:
    checked = commit_mod._check_all(store, files, 4)
    return commit_mod._append(store, files, 4, checked, skip)


def _store_files(root: Path) -> dict[str, bytes]:
    """The store's data files by path; index files (named by their creation time) by
    their place in name order."""
    found = {}
    for sub in ("commitlog", "consumequeue", "index"):
        paths = sorted(p for p in (root / sub).rglob("*") if p.is_file())
        for n, p in enumerate(paths):
            name = f"index/{n}" if sub == "index" else str(p.relative_to(root))
            found[name] = p.read_bytes()
    return found


def _write(root: Path, file_size: int, files: list[str], skip: int, append: Appender) -> int:
    with MessageStore.open(root, _config(file_size)) as store:
        store.put(Message(topic="A", body=b"seed" * 30))  # (not at offset 0)
        for n in range(skip):  # what an interrupted attempt appended
            store.put(Message(topic="Z", body=bytes(n % 200)))
        store.flush()  # (dispatched: the queue choice counts the topic's messages)
        appended = append(store, files, skip)
        store.flush()
    return appended


@pytest.mark.parametrize("file_size", [8 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024])
@pytest.mark.parametrize("skip", [0, 333, 1801])
def test_bulk_commit_writes_the_bytes_of_the_per_message_path(
    tmp_path, monkeypatch, file_size, skip
):
    for module in ("rocketstore.commitlog", "rocketstore.put_path"):
        monkeypatch.setattr(f"{module}.now_ms", lambda: NOW_MS)
    files = _stage_files(tmp_path / "staging", file_size // 4)
    old = _write(tmp_path / "old", file_size, files, skip, _old_append)
    new = _write(tmp_path / "new", file_size, files, skip, _new_append)
    assert old == new == 2230 - skip
    before, after = _store_files(tmp_path / "old"), _store_files(tmp_path / "new")
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name), after.get(name)
        if a is None or b is None:  # (a file the prefaulter made ahead: zeros)
            assert not (a or b or b"").strip(b"\0"), name
        else:
            assert a == b, name


def test_a_delayed_message_that_starts_a_file_is_put_as_before(tmp_path, monkeypatch):
    for module in ("rocketstore.commitlog", "rocketstore.put_path"):
        monkeypatch.setattr(f"{module}.now_ms", lambda: NOW_MS)
    batch = (
        _batch(12, 1, 2000)
        .set_column(0, "value", pa.array([b"v" * 2000] * 12, pa.binary()))
        .set_column(
            5, "properties", pa.array([[("DELAY", "3")] if i == 3 else [] for i in range(12)], MAP)
        )
    )
    files = _stage_files(tmp_path / "staging", 2000, [[batch]])
    old = _write(tmp_path / "old", 8 * 1024, files, 0, _old_append)
    new = _write(tmp_path / "new", 8 * 1024, files, 0, _new_append)
    assert old == new == 12
    before, after = _store_files(tmp_path / "old"), _store_files(tmp_path / "new")
    assert before == after
    with MessageStore.open(tmp_path / "new", read_only=True) as store:
        delayed = store.look_message(8 * 1024)  # (the first record of the second file)
        assert delayed is not None and delayed.topic == "SCHEDULE_TOPIC_XXXX"


def test_a_refusal_names_how_many_messages_were_appended(tmp_path, monkeypatch):
    store = tmp_path / "store"
    files = _stage_files(store, 150_000)
    real = MessageStore.put_columns
    calls = {"n": 0}

    def busy_after_two(self, topic, bodies, **columns):
        calls["n"] += 1
        if calls["n"] < 3:
            return real(self, topic, bodies, **columns)
        first = {k: v for k, v in columns.items() if k != "property_columns"}
        first = {k: None if v is None else v[:2] for k, v in first.items()}
        cut = {k: v[:2] for k, v in columns["property_columns"].items()}
        result = real(self, topic, bodies[:2], property_columns=cut, **first)
        return dataclasses.replace(result, status=PutStatus.SERVICE_NOT_AVAILABLE, reason="busy")

    monkeypatch.setattr(MessageStore, "put_columns", busy_after_two)
    with pytest.raises(
        StoreError, match=r"refused a write after (\d+) of 2230 .*SERVICE_NOT_AVAILABLE busy"
    ) as e:
        commit_mod.commit_staged(str(store), files, 4)
    appended = int(e.value.args[0].split("after ")[1].split(" ")[0])
    with MessageStore.open(store, read_only=True) as s:
        assert s.max_commit_log_offset() > 0
        in_queues = sum(s.max_offset(t, q) for t, qids in s.topics().items() for q in qids)
    assert in_queues == appended
    assert os.path.isdir(store)
