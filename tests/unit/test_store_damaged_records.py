"""get_messages over a CommitLog with one damaged record in the middle (issue #33 item 2).

RocketMQ's pull rolls to the next CommitLog file when a unit's record cannot be read,
which is right for a file retention deleted but, for one damaged record, passes over every
intact record after it in its file. rocketstore steps over the damaged unit alone, logs it
and counts it; a file that is gone still rolls."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from rocketstore import GetStatus, Message, MessageStore, StoreConfig

FILE_BYTES = 64 * 1024
COUNT = 3000
QUEUES = 4
CONFIG = StoreConfig(mapped_file_size_commit_log=FILE_BYTES)


def _build(root: Path) -> None:
    with MessageStore.open(root, CONFIG) as store:
        for i in range(COUNT):
            tag = "even" if i % 2 == 0 else "odd"
            message = Message("T", b"m%05d" % i * 8, queue_id=i % QUEUES, properties={"TAGS": tag})
            assert store.put(message).status.ok
        store.wait_dispatched()


def _damage(root: Path, offset: int, position: int, value: bytes) -> None:
    """Overwrite bytes of the record at ``offset``, ``position`` bytes into it."""
    path = root / "commitlog" / f"{offset - offset % FILE_BYTES:020d}"
    with open(path, "r+b") as f:
        f.seek(offset % FILE_BYTES + position)
        f.write(value)


def _pull_all(store: MessageStore, queue_id: int, tags: str | None = None) -> list[int]:
    """The queue offsets a consumer gets pulling the queue from its start to its end."""
    got: list[int] = []
    offset = 0
    while True:
        result = store.get_messages("G", "T", queue_id, offset, 32, tags=tags)
        if result.status not in (
            GetStatus.FOUND,
            GetStatus.NO_MATCHED_MESSAGE,
            GetStatus.MESSAGE_WAS_REMOVING,
        ):
            assert result.status is GetStatus.OFFSET_OVERFLOW_ONE
            return got
        assert result.next_begin_offset > offset
        got += [m.queue_offset for m in result.messages]
        offset = result.next_begin_offset


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("damaged") / "store"
    _build(root)
    return root


@pytest.fixture
def victim(template: Path, tmp_path: Path) -> tuple[Path, int, int]:
    """A copy of the store and the (CommitLog offset, queue offset) of a record of queue 1
    in a file in the middle: not one of the last three, which recovery scans."""
    root = tmp_path / "store"
    shutil.copytree(template, root)
    with MessageStore.open(root, CONFIG, read_only=True) as store:
        message = store.get_messages("G", "T", 1, 300, 1).messages[0]
    assert message.commit_log_offset < store.commitlog.max_offset() - 4 * FILE_BYTES
    return root, message.commit_log_offset, message.queue_offset


@pytest.mark.parametrize(
    ("position", "value", "why"),
    [
        (4, b"\xde\xad\xbe\xef", "illegal magic code"),
        (0, b"\x00\x00\x01\x00", "its TOTALSIZE is 256, the unit says"),
        (28, b"\x00\x00\x00\x00\x00\x00\x00\x07", "PHYSICALOFFSET 7"),
    ],
)
@pytest.mark.parametrize("read_only", [False, True])
def test_a_pull_skips_only_the_damaged_record(
    victim: tuple[Path, int, int],
    caplog: pytest.LogCaptureFixture,
    position: int,
    value: bytes,
    why: str,
    read_only: bool,
) -> None:
    root, offset, queue_offset = victim
    _damage(root, offset, position, value)
    caplog.set_level(logging.ERROR, logger="rocketstore.read_path")
    with MessageStore.open(root, CONFIG, read_only=read_only) as store:
        intact = [q for q in range(COUNT // QUEUES) if q != queue_offset]
        assert _pull_all(store, 1) == intact
        # The tag filter's path (unit by unit) too: every intact "odd" one of queue 1.
        assert _pull_all(store, 1, "odd") == [q for q in intact if (q * QUEUES + 1) % 2]
        # Each damaged record is counted (and logged) once, however often pulls meet it.
        assert store.reader.damaged_records_skipped == 1
        logged = [r.getMessage() for r in caplog.records if r.name == "rocketstore.read_path"]
        assert len(logged) == 1
        assert (
            f"T-1 queue offset {queue_offset}: the record at CommitLog offset {offset}"
            in (logged[0])
        )
        assert why in logged[0]
        # The other queues of the file are untouched.
        assert _pull_all(store, 2) == list(range(COUNT // QUEUES))


def test_a_pull_that_meets_only_the_damaged_record_moves_past_it(
    victim: tuple[Path, int, int],
) -> None:
    root, offset, queue_offset = victim
    _damage(root, offset, 4, b"\xde\xad\xbe\xef")
    with MessageStore.open(root, CONFIG) as store:
        result = store.get_messages("G", "T", 1, queue_offset, 1)
        assert result.found and result.messages[0].queue_offset == queue_offset + 1
        assert result.next_begin_offset == queue_offset + 2


def test_a_removed_file_still_rolls_to_the_next(victim: tuple[Path, int, int]) -> None:
    """RocketMQ's roll stays for what it is meant for: a file that is gone (here a gap
    left by a file removed by hand) is passed over whole, without a damage count."""
    root, offset, _queue_offset = victim
    with MessageStore.open(root, CONFIG, read_only=True) as store:
        start = offset - offset % FILE_BYTES
        in_file = [
            q
            for q in range(COUNT // QUEUES)
            if start
            <= store.get_messages("G", "T", 1, q, 1).messages[0].commit_log_offset
            < start + FILE_BYTES
        ]
    os.remove(root / "commitlog" / f"{start:020d}")
    with MessageStore.open(root, CONFIG, read_only=True) as store:
        got = _pull_all(store, 1)
        assert not set(in_file) & set(got)
        assert set(got) == set(range(COUNT // QUEUES)) - set(in_file)
        assert store.reader.damaged_records_skipped == 0
