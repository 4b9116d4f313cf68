"""CommitLog.append, after RocketMQ's AppendCallbackTest and the rules of spec 1.3 and 1.7:
batches, queue offsets, the END_OF_FILE blank and the 8-byte tail rule, transactions."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from rocketstore.commitlog import CommitLog, EncodedBatch, PreparedMessage
from rocketstore.config import StoreConfig
from rocketstore.format import record as rec
from rocketstore.format import sysflag
from rocketstore.format.message import Message
from rocketstore.format.native import native
from rocketstore.format.properties import decode_properties
from rocketstore.put_path import MessagePreparer, Refusal
from rocketstore.status import AppendStatus, PutStatus

TOPIC = "test-topic"
BORN_TIMESTAMP = 1_600_000_000_000
STORE_TIMESTAMP = 1_700_000_000_123
BLANK_MAGIC_BYTES = bytes.fromhex("CBD43194")


def _commitlog(tmp_path, file_size: int) -> CommitLog:
    return CommitLog(str(tmp_path), file_size, writable=True)


def _preparer(file_size: int) -> MessagePreparer:
    return MessagePreparer(StoreConfig(mapped_file_size_commit_log=file_size).validate())


def _prepare(
    preparer: MessagePreparer,
    *,
    topic: str = TOPIC,
    body: bytes = b"body",
    properties: dict[str, str] | None = None,
    born_host: str = "127.0.0.1:123",
    store_host: str = "127.0.0.1:124",
    sys_flag: int = 0,
    queue_id: int = 0,
    in_batch: bool = False,
) -> PreparedMessage:
    message = Message(
        topic=topic,
        body=body,
        queue_id=queue_id,
        sys_flag=sys_flag,
        properties={"TAGS": "abc"} if properties is None else properties,
        born_timestamp=BORN_TIMESTAMP,
        born_host=born_host,
    )
    prepared = preparer.prepare(message, store_host, in_batch=in_batch)
    assert isinstance(prepared, PreparedMessage), prepared
    return prepared


def _batch(preparer: MessagePreparer, *, v6: bool = False) -> list[PreparedMessage]:
    born, stored = ("[::1]:123", "[::1]:124") if v6 else ("127.0.0.1:123", "127.0.0.1:124")
    return [_prepare(preparer, born_host=born, store_host=stored, in_batch=True) for _ in range(10)]


def _filler(preparer: MessagePreparer, length: int) -> PreparedMessage:
    """A message on another topic whose record is exactly ``length`` bytes."""
    overhead = 91 + len("filler")
    message = _prepare(preparer, topic="filler", body=b"f" * (length - overhead), properties={})
    assert message.length == length
    return message


def _expected_length(*, v6: bool) -> int:
    # 91 fixed (IPv4/IPv4) + 12 per IPv6 host + body + topic + properties "TAGS\x01abc".
    return 91 + (24 if v6 else 0) + len(b"body") + len(TOPIC) + len("TAGS\x01abc")


# --- AppendCallbackTest: a batch in a file with room ---------------------------------------


@pytest.mark.parametrize(("v6", "id_length"), [(False, 32), (True, 56)])
def test_append_batch_with_room(tmp_path, v6, id_length):
    file_size = 8 * 1024
    commitlog = _commitlog(tmp_path, file_size)
    batch = _batch(_preparer(file_size), v6=v6)

    results = commitlog.append(batch, STORE_TIMESTAMP)

    size = _expected_length(v6=v6)
    assert [r.status for r in results] == [AppendStatus.PUT_OK] * 10
    assert [r.queue_offset for r in results] == list(range(10))
    assert [r.commit_log_offset for r in results] == [i * size for i in range(10)]
    assert [r.size for r in results] == [size] * 10
    assert {r.store_timestamp for r in results} == {STORE_TIMESTAMP}
    ids = [r.msg_id for r in results]
    assert len(set(ids)) == 10
    assert all(len(i) == id_length and i == i.upper() for i in ids)
    assert commitlog.max_offset() == 10 * size
    assert commitlog.topic_queue_table == {f"{TOPIC}-0": 10}

    data = commitlog.read(0, 10 * size)
    assert data is not None
    position = 0
    for i in range(10):
        message = rec.decode_message(data, position, check_crc=True)
        assert message.topic == TOPIC
        assert message.body == b"body"
        assert message.tags == "abc"
        assert message.born_host == ("[::1]:123" if v6 else "127.0.0.1:123")
        assert message.store_host == ("[::1]:124" if v6 else "127.0.0.1:124")
        assert message.born_timestamp == BORN_TIMESTAMP
        assert message.store_timestamp == STORE_TIMESTAMP
        assert message.queue_offset == i
        assert message.commit_log_offset == position
        assert message.msg_id == ids[i]
        v6_bits = sysflag.BORNHOST_V6_FLAG | sysflag.STOREHOSTADDRESS_V6_FLAG
        assert message.sys_flag & v6_bits == (v6_bits if v6 else 0)
        position += message.size
    commitlog.close()


def test_a_second_batch_continues_queue_offsets(tmp_path):
    commitlog = _commitlog(tmp_path, 8 * 1024)
    preparer = _preparer(8 * 1024)
    commitlog.append(_batch(preparer), STORE_TIMESTAMP)
    results = commitlog.append(_batch(preparer), STORE_TIMESTAMP + 1)
    assert [r.queue_offset for r in results] == list(range(10, 20))
    other = commitlog.append([_prepare(preparer, queue_id=3)], STORE_TIMESTAMP + 2)
    assert other[0].queue_offset == 0  # each topic-queueId has its own counter
    commitlog.close()


def test_store_timestamp_defaults_to_now(tmp_path):
    commitlog = _commitlog(tmp_path, 8 * 1024)
    result = commitlog.append([_prepare(_preparer(8 * 1024))], None)[0]
    assert result.store_timestamp > STORE_TIMESTAMP
    commitlog.close()


# --- END_OF_FILE ------------------------------------------------------------------------------


@pytest.mark.parametrize("v6", [False, True])
def test_batch_that_does_not_fit_goes_to_the_next_file(tmp_path, v6):
    file_size = 8 * 1024
    commitlog = _commitlog(tmp_path, file_size)
    preparer = _preparer(file_size)
    # Leave exactly 1000 bytes free in the first file (RocketMQ's maxBlank 1000).
    commitlog.append([_filler(preparer, file_size - 1000)], STORE_TIMESTAMP)
    first = commitlog.files.files[0]
    assert first.free_bytes == 1000
    before = first.read(file_size - 1000, 1000)

    results = commitlog.append(_batch(preparer, v6=v6), STORE_TIMESTAMP)

    # An 8-byte blank at the old position: int remaining, int 0xCBD43194.
    blank = first.read(file_size - 1000, 8)
    assert blank == struct.pack(">i", 1000) + BLANK_MAGIC_BYTES
    # The rest of the blank area is not written.
    assert first.read(file_size - 992, 992) == before[8:]
    assert first.is_full
    # The batch sits at the start of the next file with the queue offsets it had.
    size = _expected_length(v6=v6)
    assert len(commitlog.files.files) == 2
    assert [r.commit_log_offset for r in results] == [file_size + i * size for i in range(10)]
    assert [r.queue_offset for r in results] == list(range(10))
    assert commitlog.topic_queue_table[f"{TOPIC}-0"] == 10
    assert commitlog.max_offset() == file_size + 10 * size
    decoded = rec.read_record(first.read(0, file_size), file_size - 1000)
    assert decoded == rec.Blank(file_size - 1000, 1000)
    commitlog.close()


def test_a_message_leaving_exactly_eight_bytes_fits(tmp_path):
    file_size = 1024
    commitlog = _commitlog(tmp_path, file_size)
    preparer = _preparer(file_size)
    commitlog.append([_filler(preparer, 500)], STORE_TIMESTAMP)

    result = commitlog.append([_filler(preparer, file_size - 500 - 8)], STORE_TIMESTAMP)[0]

    assert result.commit_log_offset == 500
    assert len(commitlog.files.files) == 1
    assert commitlog.files.files[0].free_bytes == 8
    # The next put closes the file with an 8-byte blank.
    after = commitlog.append([_filler(preparer, 200)], STORE_TIMESTAMP)[0]
    assert after.commit_log_offset == file_size
    blank = commitlog.files.files[0].read(file_size - 8, 8)
    assert blank == struct.pack(">i", 8) + BLANK_MAGIC_BYTES
    commitlog.close()


def test_a_message_one_byte_longer_goes_to_the_next_file(tmp_path):
    file_size = 1024
    commitlog = _commitlog(tmp_path, file_size)
    preparer = _preparer(file_size)
    commitlog.append([_filler(preparer, 500)], STORE_TIMESTAMP)

    result = commitlog.append([_filler(preparer, file_size - 500 - 7)], STORE_TIMESTAMP)[0]

    assert result.commit_log_offset == file_size
    assert result.queue_offset == 1  # the blank took no queue offset
    blank = commitlog.files.files[0].read(500, 8)
    assert blank == struct.pack(">i", file_size - 500) + BLANK_MAGIC_BYTES
    commitlog.close()


def test_a_message_of_file_size_minus_eight_fills_a_file_alone(tmp_path):
    file_size = 1024
    commitlog = _commitlog(tmp_path, file_size)
    preparer = _preparer(file_size)

    results = [
        commitlog.append([_filler(preparer, file_size - 8)], STORE_TIMESTAMP)[0] for _ in range(3)
    ]

    assert [r.commit_log_offset for r in results] == [0, file_size, 2 * file_size]
    assert [r.queue_offset for r in results] == [0, 1, 2]
    assert len(commitlog.files.files) == 3
    commitlog.close()


def test_preparer_rejects_a_message_that_can_never_fit(tmp_path):
    file_size = 1024
    preparer = _preparer(file_size)
    overhead = 91 + len("filler")
    fits = Message("filler", b"f" * (file_size - 8 - overhead))
    too_big = Message("filler", b"f" * (file_size - 8 - overhead + 1))
    assert isinstance(preparer.prepare(fits, None), PreparedMessage)
    refused = preparer.prepare(too_big, None)
    assert isinstance(refused, Refusal)
    assert refused.status is PutStatus.MESSAGE_ILLEGAL
    assert refused.reason == (
        f"record of {file_size - 8 + 1} bytes could never fit in a CommitLog file of "
        f"{file_size} bytes"
    )


# --- transactions -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag", [sysflag.TRANSACTION_PREPARED_TYPE, sysflag.TRANSACTION_ROLLBACK_TYPE]
)
def test_prepared_and_rollback_records_take_queue_offset_zero(tmp_path, flag):
    commitlog = _commitlog(tmp_path, 8 * 1024)
    preparer = _preparer(8 * 1024)
    first = commitlog.append([_prepare(preparer)], STORE_TIMESTAMP)[0]
    second = commitlog.append([_prepare(preparer)], STORE_TIMESTAMP)[0]
    assert (first.queue_offset, second.queue_offset) == (0, 1)

    special = commitlog.append([_prepare(preparer, sys_flag=flag)], STORE_TIMESTAMP)[0]

    assert special.queue_offset == 0
    assert commitlog.topic_queue_table[f"{TOPIC}-0"] == 2
    data = commitlog.read(special.commit_log_offset, special.size)
    assert data is not None
    view = rec.read_record(data)
    assert isinstance(view, rec.RecordView)
    assert view.queue_offset == 0
    assert sysflag.transaction_type(view.sys_flag) == flag
    after = commitlog.append([_prepare(preparer)], STORE_TIMESTAMP)[0]
    assert after.queue_offset == 2
    commitlog.close()


def test_commit_records_advance_queue_offsets(tmp_path):
    commitlog = _commitlog(tmp_path, 8 * 1024)
    preparer = _preparer(8 * 1024)
    commit = sysflag.TRANSACTION_COMMIT_TYPE
    results = [
        commitlog.append([_prepare(preparer, sys_flag=commit)], STORE_TIMESTAMP)[0]
        for _ in range(3)
    ]
    assert [r.queue_offset for r in results] == [0, 1, 2]
    commitlog.close()


# --- reads ------------------------------------------------------------------------------------


def test_read_record_and_store_time(tmp_path):
    commitlog = _commitlog(tmp_path, 8 * 1024)
    preparer = _preparer(8 * 1024)
    first = commitlog.append([_prepare(preparer)], STORE_TIMESTAMP)[0]
    second = commitlog.append([_prepare(preparer, born_host="[::1]:1")], STORE_TIMESTAMP + 5)[0]

    found = commitlog.read_record(second.commit_log_offset, check_crc=True)
    assert found is not None
    assert found[1].physical_offset == second.commit_log_offset
    assert found[1].store_timestamp == STORE_TIMESTAMP + 5
    assert commitlog.store_time_at(first.commit_log_offset, first.size) == STORE_TIMESTAMP
    # Nothing at the end, nor in the middle of a record.
    assert commitlog.read_record(commitlog.max_offset()) is None
    assert commitlog.read_record(3) is None
    assert commitlog.store_time_at(commitlog.max_offset(), 100) == -1
    assert commitlog.roll_next_file(10) == 8 * 1024
    commitlog.close()


def test_store_time_of_a_record_with_an_ipv6_born_host(tmp_path):
    # STORETIMESTAMP sits at 68..76 here; reading only 72 bytes once cut it in half.
    commitlog = _commitlog(tmp_path, 8 * 1024)
    preparer = _preparer(8 * 1024)
    result = commitlog.append([_prepare(preparer, born_host="[::1]:1")], STORE_TIMESTAMP)[0]
    try:
        assert commitlog.store_time_at(result.commit_log_offset, result.size) == STORE_TIMESTAMP
    finally:
        commitlog.close()


class _KilledError(Exception):
    """Stands in for SIGKILL arriving part way through an append."""


def test_a_torn_append_never_leaves_a_record_that_looks_whole(tmp_path, monkeypatch):
    """The body CRC does not cover the properties after the body, so a copy cut short
    could leave a record with a valid size, magic, offset and CRC and its properties zeroed
    (the crash test found exactly that). Sizes go in last: cut the append after every
    prefix of its writes and no record of the batch may be readable."""
    from rocketstore.files.mapped_file import MappedFile

    preparer = _preparer(64 * 1024)
    batch = [
        _prepare(preparer, body=b"x" * n, properties={"N": str(n), "KEYS": f"k{n}"})
        for n in (10, 200, 3000)
    ]
    real_write_at = MappedFile.write_at
    writes_per_batch = 1 + len(batch)  # the records without sizes, then one size each
    for allowed in range(writes_per_batch):
        root = tmp_path / f"cut{allowed}"
        log = _commitlog(root, 64 * 1024)
        done = 0

        def cut_write(self: MappedFile, position: int, data: bytes, allowed: int = allowed) -> None:
            nonlocal done
            if done == allowed:
                # A torn copy: the first half of the cut write's bytes get in.
                real_write_at(self, position, data[: len(data) // 2])
                raise _KilledError
            real_write_at(self, position, data)
            done += 1

        monkeypatch.setattr(MappedFile, "write_at", cut_write)
        with pytest.raises(_KilledError):
            log.append(batch, STORE_TIMESTAMP)
        monkeypatch.setattr(MappedFile, "write_at", real_write_at)
        mapped = log.files.last
        assert mapped is not None
        assert mapped.wrote_position == 0, "readers never see a half-made batch"
        data = mapped.read(0, 64 * 1024)
        position = 0
        whole = 0
        while True:
            size = int.from_bytes(data[position : position + 4], "big")
            if size == 0:
                break
            view = rec.read_record(data, position, check_crc=True)
            assert isinstance(view, rec.RecordView)
            at = view.properties_position
            properties = decode_properties(data[at : at + view.properties_length])
            assert properties["N"] == str(view.body_length)
            whole += 1
            position += size
        # Records become visible one by one, in order, each complete.
        assert whole == max(0, allowed - 1)
        log.close()


# --- write-through (SYNC_FLUSH): pwrite instead of stores into the mapping ------------------


def _learned_encode(preparer: MessagePreparer, messages: list[Message]) -> EncodedBatch:
    """The C encoding of ``messages`` (the preparer learns a topic and host from a first
    Python preparation)."""
    for _ in range(2):
        encoded = preparer.encode(messages, "127.0.0.1:124", in_batch=True)
        if encoded is not None:
            return encoded
        for message in messages:
            preparer.prepare(message, "127.0.0.1:124", in_batch=True)
    raise AssertionError("the C extension declined a plain batch")


def _messages(count: int, queue_id: int = 0) -> list[Message]:
    return [
        Message(
            topic=TOPIC,
            body=b"b" * (10 + i),
            queue_id=queue_id,
            properties={"KEYS": f"k{i}"},
            born_timestamp=BORN_TIMESTAMP,
            born_host="127.0.0.1:123",
        )
        for i in range(count)
    ]


def _file_bytes(commitlog: CommitLog) -> list[bytes]:
    return [f.read(0, f.file_size) for f in commitlog.files.files]


@pytest.mark.parametrize("path", ["python", "encoded"])
def test_write_through_writes_the_same_bytes(tmp_path, path):
    if path == "encoded" and native is None:
        pytest.skip("the C extension is not built")
    size = 8 * 1024
    logs = [_commitlog(tmp_path / "mapped", size), _commitlog(tmp_path / "through", size)]
    logs[1].write_through = True
    preparer = _preparer(size)
    outcomes: list[list[tuple[int, int]]] = [[], []]
    for round_no in range(12):  # about 1.5 KiB a round: the files roll
        messages = _messages(8, queue_id=round_no % 2)
        for log, seen in zip(logs, outcomes, strict=True):
            stamp = STORE_TIMESTAMP + round_no
            if path == "python":
                prepared = [preparer.prepare(m, "127.0.0.1:124", in_batch=True) for m in messages]
                appended = log.append(prepared, stamp)  # type: ignore[arg-type]
                seen.extend((a.commit_log_offset, a.queue_offset) for a in appended)
            else:
                batch = log.append_encoded(_learned_encode(preparer, messages), stamp)
                assert batch is not None
                offsets = memoryview(batch.queue_offsets).cast("q").tolist()
                seen.append((batch.commit_log_offset, offsets[0]))
    assert outcomes[0] == outcomes[1]
    assert len(logs[0].files.files) > 1
    assert _file_bytes(logs[0]) == _file_bytes(logs[1])
    for log in logs:
        log.close()


def _written_through(tmp_path, monkeypatch, write: Callable[..., None]) -> CommitLog:
    """A write-through CommitLog whose pwrites go through ``write``: MappedFile.write_batch
    takes its Python path (the C one does the same writes in the same order, without a
    place to cut them)."""
    from rocketstore.files import native_io
    from rocketstore.files.mapped_file import MappedFile

    log = _commitlog(tmp_path, 64 * 1024)
    log.write_through = True
    monkeypatch.setattr(MappedFile, "write_through", write)
    monkeypatch.setattr(native_io, "write_batch", None)
    return log


@pytest.mark.parametrize("cut", [0, 1, 4, 100, 0.5, -1, None])
def test_a_torn_write_through_never_leaves_a_record_that_looks_whole(tmp_path, monkeypatch, cut):
    """pwrite cut short (a fatal signal) leaves a prefix of the batch; with its first size
    written last, no record of the batch is readable until the batch is whole."""
    from rocketstore.files.mapped_file import MappedFile

    preparer = _preparer(64 * 1024)
    batch = [
        _prepare(preparer, body=b"x" * n, properties={"N": str(n)}, in_batch=True)
        for n in (10, 200, 3000)
    ]
    total = sum(m.length for m in batch)
    keep = {None: total, 0.5: total // 2, -1: total - 1}.get(cut, cut)
    real = MappedFile.write_through

    def killed(self: MappedFile, position: int, data: bytes) -> None:
        real(self, position, bytes(data)[:keep])
        raise _KilledError

    log = _written_through(tmp_path, monkeypatch, killed)
    with pytest.raises(_KilledError):
        log.append(batch, STORE_TIMESTAMP)
    mapped = log.files.last
    assert mapped is not None
    assert mapped.wrote_position == 0
    assert mapped.read(0, 4) == bytes(4), "the batch starts with a zero size until it is whole"
    log.close()


@pytest.mark.skipif(native is None, reason="the C extension is not built")
def test_a_failed_write_through_gives_the_queue_offsets_back(tmp_path, monkeypatch):
    from rocketstore.files.mapped_file import MappedFile

    log = _commitlog(tmp_path, 64 * 1024)
    log.write_through = True
    preparer = _preparer(64 * 1024)
    first = log.append_encoded(_learned_encode(preparer, _messages(3)), STORE_TIMESTAMP)
    assert first is not None
    table = dict(log.topic_queue_table)

    def broken(self: MappedFile, position: int, data: bytes) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(MappedFile, "write_batch", broken)
    mixed = _messages(4) + _messages(2, queue_id=1)
    with pytest.raises(OSError):
        log.append_encoded(_learned_encode(preparer, mixed), STORE_TIMESTAMP + 1)
    assert log.topic_queue_table == {**table, f"{TOPIC}-1": 0}
    monkeypatch.undo()
    again = log.append_encoded(_learned_encode(preparer, mixed), STORE_TIMESTAMP + 2)
    assert again is not None
    assert memoryview(again.queue_offsets).cast("q").tolist() == [3, 4, 5, 6, 0, 1]
    assert again.commit_log_offset == first.end_offset  # the failed batch took no room
    log.close()


def test_zero_ahead_zeroes_only_past_the_written_bytes(tmp_path):
    log = _commitlog(tmp_path, 64 * 1024)
    preparer = _preparer(64 * 1024)
    log.append(_batch(preparer), STORE_TIMESTAMP)
    mapped = log.files.last
    assert mapped is not None
    written = mapped.read(0, mapped.wrote_position)
    assert log.zero_ahead(mapped, 0, 20_000) == 20_000
    assert mapped.read(0, len(written)) == written  # data before the write position kept
    assert mapped.read(len(written), 20_000) == bytes(20_000)
    assert log.zero_ahead(mapped, 20_000, 64 * 1024) == 64 * 1024  # to the file end
    mapped.wrote_position = mapped.file_size
    assert log.zero_ahead(mapped, 0, 1000) == 0  # a full file: nothing to do
    log.close()


def test_a_failed_write_through_is_zeroed_again(tmp_path, monkeypatch):
    """The batch went in but its first size did not (EIO): the batch is wiped, so that no
    record of it can resurface after a shorter batch overwrites its start."""
    from rocketstore.files.mapped_file import MappedFile

    preparer = _preparer(64 * 1024)
    batch = [_prepare(preparer, body=b"x" * n, in_batch=True) for n in (10, 20, 30)]
    real = MappedFile.write_through

    def size_fails(self: MappedFile, position: int, data: bytes) -> None:
        if len(data) == 4:
            raise OSError(5, "Input/output error")
        real(self, position, data)

    log = _written_through(tmp_path, monkeypatch, size_fails)
    with pytest.raises(OSError):
        log.append(batch, STORE_TIMESTAMP)
    mapped = log.files.last
    assert mapped is not None and mapped.wrote_position == 0
    assert mapped.read(0, 1024) == bytes(1024)
    assert log.topic_queue_table == {}
    log.close()
