"""Torn writes, simulated on copies of a cleanly closed store (spec 1.2, 1.3, 5, 6, 15.1).

One store is written once per module: three topics of two queues, 240 messages with KEYS
and UNIQ_KEY over six 16 KiB CommitLog files, several ConsumeQueue and index files each.
Every test copies it, damages the copy the way a crash or a bad disk would, reopens it
(normal recovery, or abnormal with an ``abort`` file) and checks against a model of what
was written:

* recovery says what it did (``recovery_report``);
* every message before the damage point is served by queue offset, key, unique key and
  msg id, with the bytes that were written; nothing after it is served;
* queues and index agree with the CommitLog;
* writes continue at the freed queue offsets, and a second reopen finds everything.

Files keep their full size, so "cut at X" means "zeros from X to the file end".
"""

from __future__ import annotations

import os
import random
import shutil
import struct
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from rocketstore import (
    CorruptDataError,
    GetStatus,
    Message,
    MessageExt,
    MessageStore,
    PutResult,
    StoreConfig,
)
from rocketstore.paths import is_offset_file_name
from rocketstore.recovery.recover import RecoveryReport

FILE_SIZE = 16 * 1024
TOPICS = ("TornA", "TornB", "TornC")
QUEUES = 2
COUNT = 240  # about 40 records per CommitLog file: six files
NEW_FIRST = 1000  # numbers of the messages written after recovery
NEW_COUNT = 72  # rolls into a new file; 12 per queue, more than any test drops from one
SHARED = 5  # every message also carries the key shared<number % SHARED>
GROUP = "GROUP_TORN"
BASE_MS = 1_700_000_000_000
ENTRIES_PER_MESSAGE = 3  # UNIQ_KEY + key<n> + shared<k> index entries
MESSAGE_MAGIC_V1 = -626843481  # 0xDAA320A7
BLANK_MAGIC = -875286124  # 0xCBD43194

# Field positions inside a record with IPv4 hosts (spec 1.2).
POS_TOTALSIZE = 0
POS_MAGIC = 4
POS_BODYCRC = 8
POS_PHYSICALOFFSET = 28
POS_BODY = 88


def _config(**changes: object) -> StoreConfig:
    return StoreConfig(
        mapped_file_size_commit_log=FILE_SIZE,
        mapped_file_size_consume_queue=20 * 20,
        max_hash_slot_num=16,
        max_index_num=64,
    ).replace(**changes)


def _uniq(number: int) -> str:
    return f"7F000001{number:024X}"


def _message(number: int) -> Message:
    return Message(
        topic=TOPICS[number % len(TOPICS)],
        queue_id=(number // len(TOPICS)) % QUEUES,
        body=f"torn-{number}:".encode() + bytes([65 + number % 26]) * (180 + number % 60),
        properties={
            "TAGS": f"tag{number % 4}",
            "KEYS": f"key{number} shared{number % SHARED}",
            "UNIQ_KEY": _uniq(number),
        },
        born_timestamp=BASE_MS,
    )


def _store_time(number: int) -> int:
    return BASE_MS + number * 1000


@dataclass(frozen=True)
class Entry:
    """One written message as the store must serve it."""

    number: int
    topic: str
    queue_id: int
    queue_offset: int
    offset: int
    size: int
    msg_id: str
    body: bytes
    tags: str
    keys: tuple[str, ...]  # KEYS tokens a key query must find this message by
    uniq_key: str | None  # the UNIQ_KEY a unique-key query must find it by

    @property
    def end(self) -> int:
        return self.offset + self.size


def _entry(number: int, result: PutResult) -> Entry:
    message = _message(number)
    assert result.ok, result.status
    return Entry(
        number=number,
        topic=message.topic,
        queue_id=message.queue_id,
        queue_offset=result.queue_offset,
        offset=result.commit_log_offset,
        size=result.size,
        msg_id=result.msg_id,
        body=message.body,
        tags=message.properties["TAGS"],
        keys=(f"key{number}", f"shared{number % SHARED}"),
        uniq_key=_uniq(number),
    )


@dataclass(frozen=True)
class Base:
    root: Path
    entries: tuple[Entry, ...]

    @property
    def end(self) -> int:
        return self.entries[-1].end

    @property
    def last_file_start(self) -> int:
        return self.end - self.end % FILE_SIZE

    def first_from(self, offset: int) -> Entry:
        return next(e for e in self.entries if e.offset >= offset)

    def victim(self, where: str) -> Entry:
        if where == "last":
            return self.entries[-1]
        if where == "middle_of_last_file":
            return self.first_from(self.last_file_start + (self.end % FILE_SIZE) // 2)
        if where == "middle_of_previous_file":
            return self.first_from(self.last_file_start - FILE_SIZE // 2)
        raise ValueError(where)

    def split(self, damage_offset: int) -> tuple[list[Entry], list[Entry]]:
        """(messages wholly before the damage point, messages at or after it)."""
        kept = [e for e in self.entries if e.offset < damage_offset]
        gone = [e for e in self.entries if e.offset >= damage_offset]
        return kept, gone


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    root = tmp_path_factory.mktemp("torn") / "base"
    with MessageStore.open(root, _config()) as store:
        entries = tuple(_entry(n, store.put(_message(n), _store_time(n))) for n in range(COUNT))
        store.wait_dispatched()
    assert len(os.listdir(root / "commitlog")) == 6
    assert len(os.listdir(root / "index")) > 3
    assert not (root / "abort").exists()
    return Base(root, entries)


@pytest.fixture
def root(base: Base, tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(base.root, copy)
    return copy


# --- damage ---------------------------------------------------------------------------


def _commitlog_file(root: Path, offset: int) -> Path:
    return root / "commitlog" / f"{offset - offset % FILE_SIZE:020d}"


def _read(root: Path, offset: int, size: int) -> bytes:
    with open(_commitlog_file(root, offset), "rb") as f:
        f.seek(offset % FILE_SIZE)
        return f.read(size)


def _write(root: Path, offset: int, data: bytes) -> None:
    assert offset % FILE_SIZE + len(data) <= FILE_SIZE, "damage must stay inside one file"
    with open(_commitlog_file(root, offset), "r+b") as f:
        f.seek(offset % FILE_SIZE)
        f.write(data)


def _xor(root: Path, offset: int, mask: int = 0xFF) -> None:
    _write(root, offset, bytes([_read(root, offset, 1)[0] ^ mask]))


def _zero_from(root: Path, offset: int) -> None:
    """A torn tail: zeros from ``offset`` to the end of its file, and every later file."""
    _write(root, offset, bytes(FILE_SIZE - offset % FILE_SIZE))
    for path in sorted((root / "commitlog").iterdir()):
        if int(path.name) > offset:
            path.write_bytes(bytes(FILE_SIZE))


def _property_value_offset(root: Path, entry: Entry, name: str) -> int:
    record = _read(root, entry.offset, entry.size)
    return entry.offset + record.index(name.encode() + b"\x01") + len(name) + 1


# --- checks ---------------------------------------------------------------------------


def _pull_all(
    store: MessageStore, topic: str, queue_id: int, tags: str | None = None
) -> list[MessageExt]:
    """Every message of a queue through get_messages, from offset 0 to the max offset."""
    pulled: list[MessageExt] = []
    offset = 0
    max_offset = store.max_offset(topic, queue_id)
    while offset < max_offset:
        result = store.get_messages(GROUP, topic, queue_id, offset, 32, tags)
        assert result.status in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE), result.status
        assert result.next_begin_offset > offset
        pulled.extend(result.messages)
        offset = result.next_begin_offset
    after = store.get_messages(GROUP, topic, queue_id, max_offset, 32, tags)
    expected = GetStatus.OFFSET_OVERFLOW_ONE if max_offset else GetStatus.NO_MESSAGE_IN_QUEUE
    assert after.status is expected
    return pulled


def _offsets(messages: list[MessageExt]) -> list[int]:
    return [m.commit_log_offset for m in messages]


def _assert_serves_exactly(store: MessageStore, model: list[Entry]) -> None:
    """Every queue, key, unique key and msg id serves exactly the model, byte for byte."""
    by_queue: dict[tuple[str, int], list[Entry]] = defaultdict(list)
    for e in model:
        by_queue[(e.topic, e.queue_id)].append(e)
    for topic in TOPICS:
        for queue_id in range(QUEUES):
            expected = sorted(by_queue[(topic, queue_id)], key=lambda e: e.queue_offset)
            assert [e.queue_offset for e in expected] == list(range(len(expected)))
            assert store.min_offset(topic, queue_id) == 0
            assert store.max_offset(topic, queue_id) == len(expected)
            pulled = _pull_all(store, topic, queue_id)
            assert [(m.queue_offset, m.commit_log_offset, m.body) for m in pulled] == [
                (e.queue_offset, e.offset, e.body) for e in expected
            ]
    for e in model:
        key = f"key{e.number}"
        by_key = store.query_messages(e.topic, key)
        assert _offsets(by_key) == ([e.offset] if key in e.keys else [])
        by_uniq = store.query_by_unique_key(e.topic, _uniq(e.number))
        assert _offsets(by_uniq) == ([e.offset] if e.uniq_key == _uniq(e.number) else [])
        viewed = store.view_message(e.msg_id)
        assert viewed is not None
        assert (viewed.topic, viewed.commit_log_offset, viewed.body) == (e.topic, e.offset, e.body)
    for topic in TOPICS:
        for k in range(SHARED):
            shared = f"shared{k}"
            found = store.query_messages(topic, shared, max_count=10_000)
            expected_offsets = sorted(
                e.offset for e in model if e.topic == topic and shared in e.keys
            )
            assert _offsets(found) == expected_offsets


def _assert_not_served(store: MessageStore, gone: list[Entry]) -> None:
    for e in gone:
        assert store.look_message(e.offset) is None
        assert store.view_message(e.msg_id) is None
        assert store.query_messages(e.topic, f"key{e.number}") == []
        assert store.query_by_unique_key(e.topic, _uniq(e.number)) == []


def _continue_writing(store: MessageStore, model: list[Entry]) -> list[Entry]:
    """Put NEW_COUNT messages: they take the next free queue offsets and continue the
    CommitLog at its recovered end (or at the next file, after a blank)."""
    end = store.max_commit_log_offset()
    next_offsets = Counter((e.topic, e.queue_id) for e in model)
    new = []
    for number in range(NEW_FIRST, NEW_FIRST + NEW_COUNT):
        message = _message(number)
        result = store.put(message, _store_time(number))
        assert result.ok, result.status
        assert result.queue_offset == next_offsets[(message.topic, message.queue_id)]
        next_offsets[(message.topic, message.queue_id)] += 1
        new.append(_entry(number, result))
    assert new[0].offset in (end, end + FILE_SIZE - end % FILE_SIZE)
    store.wait_dispatched()
    return new


def _recover(
    root: Path,
    model: list[Entry],
    gone: list[Entry],
    *,
    abnormal: bool,
    config: StoreConfig | None = None,
    after_open: Callable[[MessageStore], None] | None = None,
) -> RecoveryReport:
    """Reopen the damaged copy, check it, write on, reopen and check again."""
    config = config or _config()
    if abnormal:
        (root / "abort").touch()
    with MessageStore.open(root, config) as store:
        report = store.recovery_report
        assert report.abnormal is abnormal
        assert store.max_commit_log_offset() == report.commit_log_end
        # No CommitLog file lies wholly beyond the recovered end (truncateDirtyFiles),
        # but for the spare the prefaulter may have made since: the next one, all zeros.
        beyond = [
            p
            for p in (root / "commitlog").iterdir()
            if is_offset_file_name(p.name) and int(p.name) > report.commit_log_end
        ]
        next_file = report.commit_log_end - report.commit_log_end % FILE_SIZE + FILE_SIZE
        assert [int(p.name) for p in beyond] in ([], [next_file])
        assert not any(any(p.read_bytes()) for p in beyond)
        if after_open is not None:
            after_open(store)
        _assert_not_served(store, gone)
        _assert_serves_exactly(store, model)
        new = _continue_writing(store, model)
        _assert_serves_exactly(store, model + new)
    assert not (root / "abort").exists()
    with MessageStore.open(root, config) as store:
        again = store.recovery_report
        assert not again.abnormal
        assert again.stop_reason == "end of data"
        assert again.truncated_bytes == 0
        assert again.queues_truncated == []
        assert again.redispatch_from is None
        _assert_serves_exactly(store, model + new)
    return report


def _assert_cut_at(report: RecoveryReport, offset: int, gone: list[Entry]) -> None:
    """Recovery ended the CommitLog at ``offset`` and dropped exactly ``gone``."""
    assert report.commit_log_end == offset
    assert report.stop_offset == offset
    assert report.queue_units_dropped == len(gone)
    assert report.index_entries_dropped == ENTRIES_PER_MESSAGE * len(gone)
    assert set(report.queues_truncated) == {f"{e.topic}-{e.queue_id}" for e in gone}
    assert report.redispatch_from is None


# --- torn and damaged tails -----------------------------------------------------------

CUT_POSITIONS = {
    "magic": lambda e: POS_MAGIC + 2,
    "header": lambda e: 40,
    "body": lambda e: POS_BODY + len(e.body) // 2,
    "topic": lambda e: POS_BODY + len(e.body) + 2,
}


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
@pytest.mark.parametrize("where", ["last", "middle_of_last_file"])
@pytest.mark.parametrize("cut", sorted(CUT_POSITIONS))
def test_tail_cut_mid_record_is_dropped(base, root, cut, where, abnormal):
    victim = base.victim(where)
    cut_at = victim.offset + CUT_POSITIONS[cut](victim)
    _zero_from(root, cut_at)
    kept, gone = base.split(victim.offset)

    report = _recover(root, kept, gone, abnormal=abnormal)

    _assert_cut_at(report, victim.offset, gone)
    assert report.stop_reason not in ("", "end of data")
    original = _read(base.root, victim.offset, cut_at - victim.offset)  # the undamaged bytes
    assert report.truncated_bytes == len(original.rstrip(b"\0"))


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
def test_shortened_last_file_refuses_to_open_until_padded(base, root, abnormal):
    """Spec 1.1: every CommitLog file must have the configured size, else load fails.
    Padded back to full size with zeros, it is an ordinary torn tail."""
    victim = base.victim("middle_of_last_file")
    path = _commitlog_file(root, victim.offset)
    os.truncate(path, victim.offset % FILE_SIZE + 50)
    if abnormal:
        (root / "abort").touch()
    listing = sorted((p.name, p.stat().st_size) for p in (root / "commitlog").iterdir())

    with pytest.raises(CorruptDataError, match="different sizes"):
        MessageStore.open(root, _config())
    assert sorted((p.name, p.stat().st_size) for p in (root / "commitlog").iterdir()) == listing

    os.truncate(path, FILE_SIZE)
    (root / "abort").unlink(missing_ok=True)
    kept, gone = base.split(victim.offset)
    report = _recover(root, kept, gone, abnormal=abnormal)
    _assert_cut_at(report, victim.offset, gone)


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
@pytest.mark.parametrize("where", ["last", "middle_of_last_file", "middle_of_previous_file"])
def test_zeroed_tail_at_a_record_boundary(base, root, where, abnormal):
    """Records that never reached the disk read as zeros: a clean end of data."""
    victim = base.victim(where)
    _zero_from(root, victim.offset)
    kept, gone = base.split(victim.offset)

    report = _recover(root, kept, gone, abnormal=abnormal)

    _assert_cut_at(report, victim.offset, gone)
    assert report.stop_reason == "end of data"
    assert report.truncated_bytes == 0


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
def test_zeroed_last_file_after_a_blank_is_reused(base, root, abnormal):
    """The previous file ends with its END_OF_FILE blank, the last one holds only zeros
    (spec 15.1: an all-zero next file after a crash): the scan steps through the blank and
    ends at the start of the zero file, which is kept and written next."""
    start = base.last_file_start
    _zero_from(root, start)
    kept, gone = base.split(start)

    def zero_file_kept(store: MessageStore) -> None:
        assert _commitlog_file(root, start).exists()
        assert store.max_commit_log_offset() == start

    report = _recover(root, kept, gone, abnormal=abnormal, after_open=zero_file_kept)

    _assert_cut_at(report, start, gone)
    assert report.stop_reason == "end of data"
    # The first message written after recovery went to the start of the reused file.
    head = _read(root, start, POS_PHYSICALOFFSET + 8)
    assert struct.unpack_from(">i", head, POS_MAGIC)[0] == MESSAGE_MAGIC_V1
    assert struct.unpack_from(">q", head, POS_PHYSICALOFFSET)[0] == start


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
@pytest.mark.parametrize("kind", ["random", "fake_header"])
@pytest.mark.parametrize("length", [300, None], ids=["300_bytes", "to_file_end"])
def test_garbage_after_the_last_record_is_dropped(base, root, kind, length, abnormal):
    end = base.end
    size = length or FILE_SIZE - end % FILE_SIZE
    garbage = bytearray(random.Random(f"{kind}{size}").randbytes(size))
    garbage[-1] |= 1
    if kind == "fake_header":  # looks like a record start: a size and the message magic
        garbage[:8] = struct.pack(">ii", 400, MESSAGE_MAGIC_V1)
    _write(root, end, bytes(garbage))

    report = _recover(root, list(base.entries), [], abnormal=abnormal)

    _assert_cut_at(report, end, [])
    assert report.stop_reason not in ("", "end of data")
    assert report.truncated_bytes == len(garbage)
    assert report.queues_truncated == []


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
def test_stale_record_beyond_the_end_is_rejected(base, root, abnormal):
    """An old, intact record copied after the last one (left over from an earlier life of
    the file): its PHYSICALOFFSET is not its position, so it ends the data (#10017)."""
    old = base.entries[100]
    end = base.end
    _write(root, end, _read(root, old.offset, old.size))

    def nothing_at_the_end(store: MessageStore) -> None:
        assert store.look_message(end) is None

    report = _recover(
        root, list(base.entries), [], abnormal=abnormal, after_open=nothing_at_the_end
    )

    _assert_cut_at(report, end, [])
    assert report.stop_reason.startswith("stale record")
    assert report.truncated_bytes == len(_read(base.root, old.offset, old.size).rstrip(b"\0"))


# --- single flipped bytes -------------------------------------------------------------


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
def test_flipped_body_byte_fails_the_crc_check(base, root, abnormal):
    victim = base.victim("middle_of_previous_file")
    _xor(root, victim.offset + POS_BODY + 3)
    kept, gone = base.split(victim.offset)

    report = _recover(root, kept, gone, abnormal=abnormal)

    _assert_cut_at(report, victim.offset, gone)
    assert "CRC" in report.stop_reason
    assert report.truncated_bytes > 0


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
def test_flipped_body_byte_is_kept_without_crc_check(base, root, abnormal):
    """check_crc_on_recover=False: recovery cannot see a changed body; the record stays and
    is served as stored."""
    victim = base.victim("middle_of_previous_file")
    _xor(root, victim.offset + POS_BODY + 3)
    damaged = bytearray(victim.body)
    damaged[3] ^= 0xFF
    model = [replace(e, body=bytes(damaged)) if e is victim else e for e in base.entries]

    report = _recover(
        root, model, [], abnormal=abnormal, config=_config(check_crc_on_recover=False)
    )

    _assert_cut_at(report, base.end, [])
    assert report.stop_reason == "end of data"


def _proplen_position(entry: Entry) -> int:
    return POS_BODY + len(entry.body) + 1 + len(entry.topic.encode())


HEADER_FLIPS: dict[str, tuple[Callable[[Entry], int], int, str]] = {
    # field: (byte position in the record, xor mask, what recovery reports)
    "TOTALSIZE_low_byte": (lambda e: POS_TOTALSIZE + 3, 0x01, "does not match"),
    "TOTALSIZE_high_byte": (lambda e: POS_TOTALSIZE + 1, 0x01, "incomplete"),
    "MAGIC": (lambda e: POS_MAGIC + 1, 0x10, "illegal magic"),
    "PHYSICALOFFSET": (lambda e: POS_PHYSICALOFFSET + 6, 0x01, "stale record"),
    "PROPLEN": (lambda e: _proplen_position(e) + 1, 0x04, "does not match"),
}


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
@pytest.mark.parametrize("field", sorted(HEADER_FLIPS))
def test_flipped_header_byte_cuts_there(base, root, field, abnormal):
    """TOTALSIZE, MAGIC, PHYSICALOFFSET and PROPLEN are checked (size against the fields,
    magic, position): one flipped byte ends the data at that record."""
    victim = base.victim("middle_of_previous_file")
    position, mask, reason = HEADER_FLIPS[field]
    _xor(root, victim.offset + position(victim), mask)
    kept, gone = base.split(victim.offset)

    report = _recover(root, kept, gone, abnormal=abnormal)

    _assert_cut_at(report, victim.offset, gone)
    assert reason in report.stop_reason
    assert report.truncated_bytes > 0


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
def test_damaged_end_of_file_blank_cuts_there(base, root, abnormal):
    """A blank whose length is not the rest of its file ends the data there: every record
    of the files after it is dropped (as RocketMQ does)."""
    previous_file = [e for e in base.entries if e.offset < base.last_file_start]
    blank_at = previous_file[-1].end
    assert struct.unpack(">ii", _read(root, blank_at, 8)) == (
        FILE_SIZE - blank_at % FILE_SIZE,
        BLANK_MAGIC,
    )
    _xor(root, blank_at + 3, 0x01)
    kept, gone = base.split(blank_at)

    report = _recover(root, kept, gone, abnormal=abnormal)

    _assert_cut_at(report, blank_at, gone)
    assert "blank" in report.stop_reason


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
@pytest.mark.parametrize("prop", ["TAGS", "KEYS", "UNIQ_KEY"])
def test_flipped_property_byte_survives_recovery(base, root, prop, abnormal):
    """The body CRC does not cover the properties (RocketMQ #7437; 4.9 has no property
    CRC), so the record survives with the changed value. The store stays consistent: the
    queue still serves it, and the key checks of the read path never return it for the
    key it no longer carries."""
    victim = base.victim("middle_of_previous_file")
    letter = 1 if prop == "UNIQ_KEY" else 0  # the first letter of the value
    _xor(root, _property_value_offset(root, victim, prop) + letter, 0x20)  # 't' -> 'T' etc.
    changed = {
        "TAGS": replace(victim, tags="T" + victim.tags[1:]),
        "KEYS": replace(victim, keys=victim.keys[1:]),
        "UNIQ_KEY": replace(victim, uniq_key=None),
    }[prop]
    model = [changed if e is victim else e for e in base.entries]

    def changed_value_is_served(store: MessageStore) -> None:
        message = store.look_message(victim.offset)
        assert message is not None
        assert message.body == victim.body
        if prop == "TAGS":
            assert message.tags == "T" + victim.tags[1:]
            # The queue unit keeps the old tags code; the tag double-check filters it out.
            pulled = _pull_all(store, victim.topic, victim.queue_id, tags=victim.tags)
            assert victim.offset not in _offsets(pulled)
            assert all(m.tags == victim.tags for m in pulled)
        elif prop == "KEYS":
            assert message.key_list == ["Key" + victim.keys[0][3:], victim.keys[1]]
        else:
            assert victim.uniq_key is not None
            assert message.uniq_key == "7f" + victim.uniq_key[2:]

    report = _recover(root, model, [], abnormal=abnormal, after_open=changed_value_is_served)

    _assert_cut_at(report, base.end, [])
    assert report.stop_reason == "end of data"


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
def test_torn_properties_tail_of_the_last_record_survives(base, root, abnormal):
    """A tail torn inside the last record's properties keeps TOTALSIZE, the body and its
    CRC intact, so the record passes recovery with a damaged UNIQ_KEY (#7437)."""
    victim = base.entries[-1]
    _zero_from(root, victim.end - 6)
    model = [replace(e, uniq_key=None) if e is victim else e for e in base.entries]

    def torn_key_is_served(store: MessageStore) -> None:
        message = store.look_message(victim.offset)
        assert message is not None
        assert victim.uniq_key is not None
        assert message.uniq_key == victim.uniq_key[:-6] + "\0" * 6

    report = _recover(root, model, [], abnormal=abnormal, after_open=torn_key_is_served)

    _assert_cut_at(report, base.end, [])


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
def test_zero_crc_field_on_an_intact_record_is_accepted(base, root, abnormal):
    """A stored body CRC of 0 means "not computed" (RocketMQ #9121)."""
    victim = base.victim("middle_of_previous_file")
    _write(root, victim.offset + POS_BODYCRC, bytes(4))

    def crc_is_zero(store: MessageStore) -> None:
        message = store.look_message(victim.offset)
        assert message is not None
        assert message.body_crc == 0

    report = _recover(root, list(base.entries), [], abnormal=abnormal, after_open=crc_is_zero)

    _assert_cut_at(report, base.end, [])
    assert report.stop_reason == "end of data"


# --- checkpoint, pre-allocated and half-created files --------------------------------


@pytest.mark.parametrize("abnormal", [True, False], ids=["abnormal", "normal"])
@pytest.mark.parametrize("damage", ["missing", "truncated_10_bytes"])
def test_damaged_checkpoint_scans_from_the_first_file(base, root, damage, abnormal):
    """Without a usable checkpoint, abnormal recovery cannot trust any file: it scans from
    the first one and still finds everything."""
    checkpoint = root / "checkpoint"
    if damage == "missing":
        checkpoint.unlink()
    else:
        checkpoint.write_bytes(checkpoint.read_bytes()[:10])

    report = _recover(root, list(base.entries), [], abnormal=abnormal)

    _assert_cut_at(report, base.end, [])
    assert report.stop_reason == "end of data"
    if abnormal:
        assert Path(report.start_file).name == f"{0:020d}"
        assert report.records_scanned == COUNT
    assert checkpoint.stat().st_size == 4096


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
@pytest.mark.parametrize("count", [1, 2])
def test_empty_preallocated_commitlog_files_are_accepted(base, root, count, abnormal):
    """All-zero, full-size files after the last one (pre-created before a crash, spec
    15.1): no data is lost and each is either removed or reused."""
    names = [f"{base.last_file_start + i * FILE_SIZE:020d}" for i in range(1, count + 1)]
    for name in names:
        (root / "commitlog" / name).write_bytes(bytes(FILE_SIZE))

    def removed_or_empty(store: MessageStore) -> None:
        for name in names:
            path = root / "commitlog" / name
            assert not path.exists() or path.stat().st_size == FILE_SIZE
        assert store.max_commit_log_offset() == base.end

    report = _recover(root, list(base.entries), [], abnormal=abnormal, after_open=removed_or_empty)

    _assert_cut_at(report, base.end, [])
    assert report.stop_reason == "end of data"
    assert report.truncated_bytes == 0


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
def test_half_created_files_are_removed(base, root, abnormal):
    """A crash while creating a file leaves ``<name>.creating`` (files are sized under a
    temporary name, then renamed): removed on open, in every directory."""
    newest_index = sorted(p.name for p in (root / "index").iterdir())[-1]
    leftovers = [
        # Two files on: the next one's name is the open store's own spare in the making.
        root / "commitlog" / f"{base.last_file_start + 2 * FILE_SIZE:020d}.creating",
        root / "index" / f"{int(newest_index) + 1}.creating",
        root / "consumequeue" / TOPICS[0] / "0" / f"{10_000:020d}.creating",
    ]
    for path in leftovers:
        path.write_bytes(b"\0" * 1000)

    def leftovers_removed(store: MessageStore) -> None:
        assert [p for p in leftovers if p.exists()] == []

    report = _recover(root, list(base.entries), [], abnormal=abnormal, after_open=leftovers_removed)

    _assert_cut_at(report, base.end, [])


# --- lost queue and index files: rebuilt from the CommitLog ---------------------------

# Re-dispatch after recovery covers only records its scan saw: the scan starts at the
# third-last CommitLog file (or the checkpoint's file), so older records stay unqueued or
# unindexed (recover_store, on_record/missing_from).
ALL_QUEUES_PARTIAL = (
    "with no consume queue left, RocketMQ re-dispatches from the CommitLog min offset "
    "(spec 6.6); rocketstore only from the third-last file, so every queue loses its head"
)


def _delete_one_topic_queues(root: Path) -> None:
    shutil.rmtree(root / "consumequeue" / TOPICS[0])


def _delete_all_queues(root: Path) -> None:
    shutil.rmtree(root / "consumequeue")


def _delete_index_dir(root: Path) -> None:
    shutil.rmtree(root / "index")


def _delete_newest_index_file(root: Path) -> None:
    newest = sorted((root / "index").iterdir())[-1]
    newest.unlink()


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
@pytest.mark.parametrize(
    "delete",
    [
        pytest.param(_delete_one_topic_queues, id="one_topic_queues"),
        pytest.param(_delete_all_queues, id="consumequeue_dir"),
        pytest.param(_delete_index_dir, id="index_dir"),
        pytest.param(_delete_newest_index_file, id="newest_index_file"),
    ],
)
def test_lost_queue_and_index_files_are_rebuilt(base, root, delete, abnormal):
    delete(root)

    report = _recover(root, list(base.entries), [], abnormal=abnormal)

    assert report.commit_log_end == base.end
    assert report.truncated_bytes == 0
    assert report.redispatch_from is not None
    assert report.redispatched_records > 0


# --- what a truncation leaves behind --------------------------------------------------


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
def test_dropped_queue_units_do_not_come_back_after_a_restart(base, root, abnormal):
    """Recovery drops the units of lost records; if fewer new messages reach a queue than
    it lost while the CommitLog grows past the old end, a restart must not resurrect the
    dropped units (they now point into the middle of other records)."""
    victim = base.victim("middle_of_previous_file")
    _zero_from(root, victim.offset)
    kept, gone = base.split(victim.offset)
    if abnormal:
        (root / "abort").touch()
    with MessageStore.open(root, _config()) as store:
        assert store.recovery_report.queue_units_dropped == len(gone)
        # Only the first queue gets new messages (numbers = 0 mod 6 land in TornA-0).
        new = []
        number = NEW_FIRST + 2
        while store.max_commit_log_offset() < base.end + FILE_SIZE // 2:
            assert _message(number).topic == TOPICS[0] and _message(number).queue_id == 0
            new.append(_entry(number, store.put(_message(number), _store_time(number))))
            number += 6
        store.wait_dispatched()
        _assert_serves_exactly(store, kept + new)

    with MessageStore.open(root, _config()) as store:
        _assert_serves_exactly(store, kept + new)
