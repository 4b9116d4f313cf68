"""Every reader that decides where a CommitLog's valid data ends agrees with the CommitLog
walker (format.commitlog_walk) on fuzzed files: the same records, the same stop position
and the same reason.

Files are random record sequences (topics, bodies, IPv4/IPv6 hosts, right, zero and wrong
body CRCs), plain or framed in DLedger entries, ending in a blank or in zeros, then
damaged: torn tails, zeroed holes, flipped bytes. The readers: recovery's scan (which a
read-only store's refresh also runs), the rebuild's range scans, the dispatcher fed the
file in chunks of random sizes (as a writer's readable end moves; it names no reason, it
skips), ``check``'s scan, and Spark's ``mode=commitlog`` partitions (the file as one
partition, which fails at damage; and cut into partitions up to where recovery says the
data ends, as the planner cuts it).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.check.scan import CommitLogScan
from rocketstore.commitlog import CommitLog
from rocketstore.errors import CorruptDataError
from rocketstore.format import dledger_entry as dl
from rocketstore.format import record as rec
from rocketstore.format.commitlog_walk import FileWalk, Verdict, scan_entry_file, scan_range
from rocketstore.format.crc import masked_crc32
from rocketstore.format.record_scan import RangeCorruptError, Stop, TopicTable
from rocketstore.paths import CommitLogDirs, offset_to_file_name
from rocketstore.recovery.recover import RecoveryReport, scan_valid_end
from rocketstore.services.dispatcher import Dispatcher, DispatchRun
from rocketstore.spark.commitlog_runs import partition_runs

FILE = 4096
BASE = 2 * FILE
STAMP = 1_700_000_000_000

_SHAPE = st.tuples(
    st.sampled_from([b"T", b"Topic-b", b"T\xc3\xa9"]),
    st.integers(0, 300),  # body bytes
    st.booleans(),  # IPv6 born host
    st.sampled_from(["right", "zero", "wrong"]),  # the stored body CRC
)
_DAMAGE = st.one_of(
    st.tuples(st.just("torn"), st.floats(0, 1), st.just(0)),  # zeros from here on
    st.tuples(st.just("hole"), st.floats(0, 1), st.integers(1, 700)),  # zeros for a while
    st.tuples(st.just("flip"), st.floats(0, 1), st.integers(1, 255)),  # one byte xor'ed
)


@dataclass
class Case:
    data: bytes
    framed: bool


def _record(shape: tuple[bytes, int, bool, str], offset: int, number: int) -> bytes:
    topic, body_length, v6, crc = shape
    body = bytes((number * 31 + i) % 251 for i in range(body_length))
    stored = {"right": masked_crc32(body), "zero": 0, "wrong": masked_crc32(body) ^ 1}[crc]
    return rec.encode_record(
        topic=topic,
        body=body,
        properties=f"TAGS\x01t{number % 3}\x02KEYS\x01k{number}".encode(),
        queue_id=number % 2,
        flag=0,
        queue_offset=number // 2,
        physical_offset=offset,
        sys_flag=0,
        born_timestamp=STAMP,
        born_host=bytes(20) if v6 else bytes(8),
        store_timestamp=STAMP + number,
        store_host=bytes(8),
        reconsume_times=0,
        prepared_transaction_offset=0,
        body_crc=stored,
    )


@st.composite
def _cases(draw: Any) -> Case:
    framed = draw(st.booleans())
    data = bytearray()
    for number, shape in enumerate(draw(st.lists(_SHAPE, max_size=25))):
        if framed:
            body = _record(shape, BASE + len(data) + dl.BODY_OFFSET, number)
            piece = dl.encode_entry(number, 1, BASE + len(data), body)
        else:
            piece = _record(shape, BASE + len(data), number)
        room = FILE - len(data) - len(piece)
        if room < 0 or 0 < room < 8:
            break
        data += piece
    if draw(st.booleans()) and FILE - len(data) >= 8:  # a blank ends the file's data
        remaining = FILE - len(data)
        data += dl.encode_blank(remaining) if framed else rec.encode_blank(remaining)
    data += bytes(FILE - len(data))
    written = max(8, len(data.rstrip(b"\0")) + 8)
    for kind, where, amount in draw(st.lists(_DAMAGE, max_size=3)):
        at = min(FILE - 1, int(where * written))
        if kind == "torn":
            data[at:] = bytes(FILE - at)
        elif kind == "hole":
            end = min(FILE, at + amount)
            data[at:end] = bytes(end - at)
        else:
            data[at] ^= amount
    return Case(bytes(data), framed)


def _walk(case: Case, *, check_crc: bool) -> tuple[list[int], Verdict]:
    walk = FileWalk(
        memoryview(case.data),
        BASE,
        0,
        FILE,
        topics=TopicTable(),
        framed=case.framed,
        check_crc=check_crc,
    )
    records, verdict = walk.run()
    return records.position.tolist(), verdict


def _end(verdict: Verdict) -> int:
    """The CommitLog offset where a scan over this one file says valid data ends."""
    return BASE + FILE if verdict.file_finished else BASE + verdict.position


def _dirs(directory: str, framed: bool) -> CommitLogDirs:
    return CommitLogDirs((directory,), dledger=(directory,) if framed else ())


def _recovery(root: str, case: Case, *, check_crc: bool) -> tuple[list[int], int, str]:
    commitlog = CommitLog(root, FILE, writable=False, dirs=_dirs(_directory(root), case.framed))
    commitlog.files.load()
    try:
        positions: list[int] = []
        report = RecoveryReport()

        def collect(buf: memoryview, base: int, records: Any, topics: TopicTable) -> None:
            positions.extend((base - BASE + records.position).tolist())

        end = scan_valid_end(commitlog, 0, check_crc=check_crc, report=report, on_records=collect)
        return positions, end, report.stop_reason
    finally:
        commitlog.close()


def _rebuild(case: Case) -> tuple[list[int], int, str, str]:
    """The rebuild's scan of the whole file as one range: records, stop position, stop,
    reason."""
    view = memoryview(case.data)
    if case.framed:
        found = scan_entry_file(view, BASE, FILE, TopicTable())
    else:
        try:
            found = scan_range(view, BASE, 0, FILE, FILE, skip_corrupt=False, topics=TopicTable())
        except RangeCorruptError as e:
            kept = scan_range(view, BASE, 0, FILE, FILE, skip_corrupt=True, topics=TopicTable())
            first_bad = kept.corrupt[0].offset - BASE if kept.corrupt else kept.stop_position
            before = [p for p in kept.records.position.tolist() if p < first_bad]
            assert e.position is not None
            return before, e.position - BASE, Stop.CORRUPT, e.reason
    return found.records.position.tolist(), found.stop_position, found.stop, found.stop_reason


class _FakeCommitLog:
    file_size = FILE

    def roll_next_file(self, offset: int) -> int:
        return offset - offset % FILE + FILE


def _dispatch(case: Case, cuts: list[int]) -> tuple[list[int], str]:
    """The dispatcher over the file as its readable end moves through ``cuts`` to the
    file's end: the records it dispatched, and how it left the file: "skipped" damage,
    "rolled" past a blank, or reached its "end"."""
    positions: list[int] = []

    def handle(run: DispatchRun) -> None:
        positions.extend((run.base - BASE + run.records.position).tolist())

    dispatcher = Dispatcher(_FakeCommitLog(), handle, BASE)  # type: ignore[arg-type]
    for readable in [*sorted(cuts), FILE]:
        while dispatcher.dispatched_offset < BASE + readable:
            at = dispatcher.dispatched_offset - BASE
            dispatcher._dispatch_chunk(memoryview(case.data)[at:readable])
            if dispatcher.corrupt_skipped_bytes:
                return positions, "skipped"
            if dispatcher.dispatched_offset - BASE == at:
                break  # a record in progress: wait for more readable bytes
    assert dispatcher.dispatched_offset == BASE + FILE
    return positions, "end" if _run_end(case, positions) == FILE else "rolled"


def _run_end(case: Case, positions: list[int]) -> int:
    """Where the last of ``positions`` (plain records from position 0) ends."""
    if not positions:
        return 0
    last = positions[-1]
    return last + int.from_bytes(case.data[last : last + 4], "big")


def _spark(case: Case, start: int, end: int) -> tuple[list[int], CorruptDataError | None]:
    """The records Spark's commitlog mode reads in the partition [start, end) of the file
    (walked in runs of at most 512 bytes), and the error it fails with, if any."""
    positions: list[int] = []
    runs = partition_runs(
        memoryview(case.data), "f", BASE, start, end, framed=case.framed, chunk_bytes=512
    )
    try:
        for records in runs:
            positions.extend(records.position.tolist())
    except CorruptDataError as e:
        return positions, e
    return positions, None


def _directory(root: str) -> str:
    return os.path.join(root, "commitlog")


def _write(root: str, case: Case) -> None:
    os.makedirs(_directory(root))
    with open(os.path.join(_directory(root), offset_to_file_name(BASE)), "wb") as f:
        f.write(case.data)


@settings(max_examples=300)
@given(_cases(), st.lists(st.integers(1, FILE - 1), max_size=4))
def test_every_reader_stops_where_the_walker_does(case: Case, cuts: list[int]) -> None:
    """(``cuts``: where the dispatcher's readable end stops, and where Spark's partitions
    of a plain file are cut.)"""
    positions, verdict = _walk(case, check_crc=False)
    crc_positions, crc_verdict = _walk(case, check_crc=True)
    with tempfile.TemporaryDirectory() as root:
        _write(root, case)
        # Recovery (and a read-only store's refresh), with and without CRC checks.
        for check_crc, want_positions, want in (
            (False, positions, verdict),
            (True, crc_positions, crc_verdict),
        ):
            got_positions, end, reason = _recovery(root, case, check_crc=check_crc)
            assert got_positions == want_positions
            assert end == _end(want)
            assert reason == ("" if want.file_finished else want.reason)
        # The rebuild's range scan.
        got_positions, at, stop, reason = _rebuild(case)
        assert (got_positions, at, stop, reason) == (
            positions,
            verdict.position,
            verdict.stop,
            verdict.reason if verdict.stop == Stop.CORRUPT else "",
        )
        # check's scan: the same records, its first structural issue where the walker
        # found damage and for its reason (bytes after zeros are damage too, for check,
        # cut at the zeros).
        scan = CommitLogScan(root, check_crc=False, dirs=_dirs(_directory(root), case.framed))
        offsets = [r.offset for r in scan.records()]
        assert offsets == [BASE + p for p in positions]
        issue = scan.first_structure_issue
        if verdict.stop == Stop.CORRUPT:
            assert issue is not None
            assert (issue.cut_at, issue.reason) == (BASE + verdict.position, verdict.reason)
        elif verdict.stop in (Stop.BLANK, Stop.BOUNDARY):
            assert issue is None
        else:
            assert issue is None or issue.cut_at == BASE + verdict.position
    # Spark's commitlog mode: the file as one partition keeps the walker's records and
    # fails at its damage, naming the position and the reason.
    got_positions, error = _spark(case, 0, FILE)
    assert got_positions == positions
    if verdict.stop == Stop.CORRUPT:
        assert error is not None
        assert (error.path, error.position, error.reason) == ("f", verdict.position, verdict.reason)
    else:
        assert error is None
    # Cut as the planner cuts the data recovery keeps: each partition finds its first
    # record by itself, and together they read the walker's records, once each.
    valid_end = _end(verdict) - BASE
    inside = sorted({c for c in cuts if c < valid_end}) if not case.framed else []
    bounds = [0, *inside, valid_end]
    read: list[int] = []
    for start, end in itertools.pairwise(bounds):
        got_positions, error = _spark(case, start, end)
        assert error is None
        read += got_positions
    assert read == positions
    if not case.framed:
        got_positions, how = _dispatch(case, cuts)
        assert got_positions == positions
        assert _run_end(case, positions) == verdict.position
        want_how = {
            Stop.BLANK: "rolled",
            Stop.BOUNDARY: "end",
            Stop.CORRUPT: "skipped",
            Stop.END_OF_DATA: "skipped",
        }[verdict.stop]
        assert how == want_how
