"""MessageStore.refresh: a read-only store sees a writer's new queues at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreClosedError, StoreConfig
from rocketstore.errors import CorruptDataError


def test_refresh_lists_new_queues_at_once(tmp_path):
    with MessageStore.open(tmp_path) as writer:
        assert writer.put(Message(topic="A", body=b"1")).ok
        writer.flush()
        reader = MessageStore.open(tmp_path, read_only=True)
        try:
            assert reader.topics() == {"A": [0]}  # directories listed just now
            assert writer.put(Message(topic="B", body=b"2", queue_id=3)).ok
            writer.wait_dispatched()
            reader.refresh()
            assert reader.queues.get(("B", 3)) is not None
            assert reader.max_offset("B", 3) == 1
        finally:
            reader.close()
        writer.refresh()  # a writer sees everything already: nothing to do
    with pytest.raises(StoreClosedError):
        reader.refresh()


def test_a_next_file_made_ahead_is_not_data(tmp_path):
    """RocketMQ's AllocateMappedFileService makes the next CommitLog file before it is
    needed, so a live broker's store (or one it left in a crash) ends in an empty file: a
    reader's CommitLog ends where the data does, not at that file's start; once the
    writer reaches it, it counts."""
    size = 64 * 1024
    config = StoreConfig(mapped_file_size_commit_log=size)
    with MessageStore.open(tmp_path, config) as writer:
        results = [writer.put(Message("A", b"x" * 100)) for _ in range(10)]
    end = results[-1].commit_log_offset + results[-1].size
    (tmp_path / "commitlog" / f"{size:020d}").write_bytes(bytes(size))
    with MessageStore.open(tmp_path, read_only=True) as reader:
        assert len(reader.commitlog.files.files) == 2
        assert reader.max_commit_log_offset() == end
        got = reader.get_messages("g", "A", 0, 0, 32)
        assert len(got.messages) == 10
        assert got.max_offset == 10
    with MessageStore.open(tmp_path, config) as writer:  # takes the file when it rolls
        for _ in range(700):
            assert writer.put(Message("A", b"y" * 100)).ok
        writer_end = writer.max_commit_log_offset()
        assert writer_end > size
        writer.flush()
        with MessageStore.open(tmp_path, read_only=True) as reader:
            assert reader.max_commit_log_offset() == writer_end


def test_a_queue_whose_records_retention_deleted_keeps_its_offsets(tmp_path: Path) -> None:
    """Every record of queue A-1 is in a deleted CommitLog file: a reader sees the queue
    at min = max = 10, as the writer does, not at 0 (its units are expired, not torn)."""
    config = StoreConfig(mapped_file_size_commit_log=4096)
    with MessageStore.open(tmp_path / "s", config) as store:
        for _ in range(10):
            assert store.put(Message("A", b"old", queue_id=1)).ok
        for i in range(150):
            assert store.put(Message("A", b"x%d" % i, queue_id=0)).ok
        store.wait_dispatched()
        # A file a reader (the dispatcher, the flusher) still holds goes on a later round.
        deadline = time.monotonic() + 30
        while store.delete_expired_files(force=True).held_files:
            assert time.monotonic() < deadline, "retention never got the files it retired"
            time.sleep(0.01)
        written = [store.min_offset("A", q) for q in (0, 1)], store.max_offset("A", 1)
        assert written[1] == 10 and written[0][1] == 10 and written[0][0] > 0
    with MessageStore.open(tmp_path / "s", config, read_only=True) as reader:
        assert ([reader.min_offset("A", q) for q in (0, 1)], reader.max_offset("A", 1)) == written


def test_a_reader_checks_body_crcs_as_check_crc_on_recover_says(tmp_path: Path) -> None:
    """One flipped body byte ends what a CRC-checking reader sees there (RocketMQ's
    recovery would cut the CommitLog at it); with checkCRCOnRecover=false, as RocketMQ's
    recovery then does, the records after it are read."""
    with MessageStore.open(tmp_path) as writer:
        results = [writer.put(Message("A", b"body-%d" % i)) for i in range(5)]
    damaged = results[2]
    body_at = damaged.commit_log_offset + 88  # BODYLEN ends the 88-byte head (IPv4 hosts)
    log_file = tmp_path / "commitlog" / f"{0:020d}"
    with open(log_file, "r+b") as f:
        f.seek(body_at)
        byte = f.read(1)
        f.seek(body_at)
        f.write(bytes([byte[0] ^ 0xFF]))
    with MessageStore.open(tmp_path, read_only=True) as reader:
        assert reader.max_commit_log_offset() == damaged.commit_log_offset
        assert reader.look_message(results[4].commit_log_offset) is None
    lenient = StoreConfig(check_crc_on_recover=False)
    with MessageStore.open(tmp_path, lenient, read_only=True) as reader:
        assert reader.max_commit_log_offset() == results[4].commit_log_offset + results[4].size
        found = reader.look_message(results[4].commit_log_offset)
        assert found is not None and found.body == b"body-4"


def test_a_reader_leaves_out_a_queue_it_cannot_map(tmp_path: Path) -> None:
    """One consume-queue file of the wrong size: a reader still reads the rest of the store
    (and says which queue it left out, and why); a writer refuses to open, as RocketMQ's
    load fails, rather than write beside a queue it cannot read."""
    with MessageStore.open(tmp_path) as writer:
        assert writer.put(Message("A", b"a")).ok
        assert writer.put(Message("B", b"b")).ok
    bad = tmp_path / "consumequeue" / "A" / "0" / f"{0:020d}"
    bad.write_bytes(b"")
    with MessageStore.open(tmp_path, read_only=True) as reader:
        assert set(reader.unreadable_queues) == {("A", 0)}
        why = reader.unreadable_queues[("A", 0)]
        assert "empty file (0 bytes)" in why and str(bad) in why  # the file named
        assert reader.topics() == {"B": [0]}
        got = reader.get_messages("g", "B", 0, 0, 32)
        assert [m.body for m in got.messages] == [b"b"]
        assert reader.look_message(0) is not None  # the CommitLog needs no queue
        bad.write_bytes(bytes(reader.config.consume_queue_file_size))  # made anew, say
        reader.refresh()  # the next listing tries it again
        assert reader.unreadable_queues == {}
        assert reader.max_offset("A", 0) == 0
    bad.write_bytes(b"")
    with pytest.raises(CorruptDataError, match=r"empty file \(0 bytes\)"):
        MessageStore.open(tmp_path)


def test_a_read_of_one_queue_refreshes_that_queue_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only store with many queues: a read of one queue after a directory listing
    lists and refreshes that queue alone, and looks for that queue alone when it is new
    (every queue's directory, every 50 ms, cost 170 ms a listing at 2,000 queues); a
    queue read later catches up then, and a call about every queue sees them all."""
    from rocketstore.files.mapped_file_queue import MappedFileQueue
    from rocketstore.store import follower

    monkeypatch.setattr(follower, "LIST_INTERVAL_S", 0.0)  # every call lists
    with MessageStore.open(tmp_path) as writer:
        for number in range(300):
            assert writer.put(Message(f"T{number // 5}", b"x", queue_id=number % 5)).ok
        writer.wait_dispatched()
        reader = MessageStore.open(tmp_path, read_only=True)
        try:
            listed: list[str] = []
            real = MappedFileQueue.refresh

            def spy(self: MappedFileQueue) -> None:
                if "consumequeue" in self.directory:
                    listed.append(self.directory)
                real(self)

            monkeypatch.setattr(MappedFileQueue, "refresh", spy)
            for topic, queue_id in [("T3", 2), ("T40", 4), ("New", 0)]:
                assert writer.put(Message(topic, b"y", queue_id=queue_id)).ok
            writer.wait_dispatched()
            queue_dir = tmp_path / "consumequeue"
            assert reader.max_offset("T3", 2) == 2
            assert listed == [str(queue_dir / "T3" / "2")]
            assert reader.max_offset("New", 0) == 1  # found alone
            assert reader.get_messages("g", "New", 0, 0, 8).messages[0].body == b"y"
            assert reader.max_offset("T40", 4) == 2  # caught up when read
            # One listing a read, of the queue read.
            assert listed[1:] == [str(queue_dir / q) for q in ("New/0", "New/0", "T40/4")]
            topics = reader.topics()
            assert len(topics) == 61 and topics["New"] == [0]
            assert sum(len(queues) for queues in topics.values()) == 301
        finally:
            reader.close()


def test_a_queue_made_between_listings_is_read_and_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read of one queue the reader's table lacks looks for it at once, not at the next
    listing (a Spark task reading a queue the writer made just after the last listing
    found no rows), and a call about every queue after a listing a one-queue read took
    looks through every topic's directory (its queues were not all loaded then)."""
    from rocketstore.store import follower

    monkeypatch.setattr(follower, "LIST_INTERVAL_S", 3600.0)  # no listing by the clock
    with MessageStore.open(tmp_path) as writer:
        assert writer.put(Message(topic="A", body=b"1")).ok
        writer.wait_dispatched()
        reader = MessageStore.open(tmp_path, read_only=True)
        try:
            assert reader.topics() == {"A": [0]}
            assert writer.put(Message(topic="B", body=b"2", queue_id=3)).ok
            assert writer.put(Message(topic="C", body=b"3", queue_id=1)).ok
            writer.wait_dispatched()
            assert reader.max_offset("B", 3) == 1  # between listings
            found = reader.get_messages("g", "B", 3, 0, 8)
            assert [m.body for m in found.messages] == [b"2"]
            reader._follower.list_now()  # the next call lists
            assert reader.max_offset("A", 0) == 1  # the listing a one-queue read took
            assert reader.topics() == {"A": [0], "B": [3], "C": [1]}
        finally:
            reader.close()
