"""Read commands on a CommitLog damaged in the middle: a reader stops at the damage (as
recovery does), so they must say that the records after it are not read instead of
answering "not found" or printing shorter queues as if that were all."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.cli.cli_helpers import Run, commitlog_file, flip_byte

Cli = Callable[..., Run]


def _record_in_the_middle(store: Path, cli: Cli) -> tuple[dict[str, object], dict[str, object]]:
    """A record in the last files recovery scans, and the one after it."""
    scanned = cli("--store", store, "--json", "dump").json_lines()
    return scanned[len(scanned) - 40], scanned[len(scanned) - 39]


def test_reads_past_a_damaged_record_warn(store: Path, cli: Cli) -> None:
    victim, following = _record_in_the_middle(store, cli)
    offset = int(str(victim["commitLogOffset"]))
    flip_byte(commitlog_file(store, offset), offset % (64 * 1024) + 5)  # the magic
    run = cli("--store", store, "queryMsgById", "-i", str(following["msgId"]))
    assert run.code == 1  # not readable through the store ...
    assert (
        f"rocketstore: warning: the CommitLog is damaged at offset {offset} (" in run.err
    )  # ... but not silently
    assert f"a readable record follows at offset {following['commitLogOffset']}" in run.err
    status = cli("--store", store, "topicStatus", "-t", str(following["topic"]))
    assert status.code == 0 and "warning: the CommitLog is damaged" in status.err


def test_reads_past_a_lost_page_warn(store: Path, cli: Cli) -> None:
    """Zeros where records were (a page that never reached the disk) read as the end of
    the data; the queues built from the records after it show they were there."""
    victim, following = _record_in_the_middle(store, cli)
    offset = int(str(victim["commitLogOffset"]))
    path = commitlog_file(store, offset)
    data = bytearray(path.read_bytes())
    at = offset % (64 * 1024)
    data[at : at + 600] = bytes(600)
    path.write_bytes(bytes(data))
    run = cli("--store", store, "topicStatus", "-t", str(following["topic"]))
    assert run.code == 0
    assert (
        f"warning: the CommitLog is damaged at offset {offset} "
        "(zeros where the data should go on)" in run.err
    )


def test_a_torn_last_record_after_a_crash_is_no_news(store: Path, cli: Cli) -> None:
    """Behind a crashed (or running) writer the last record may be torn: no warning."""
    last = cli("--store", store, "--json", "dump").json_lines()[-1]
    offset = int(str(last["commitLogOffset"]))
    flip_byte(commitlog_file(store, offset), offset % (64 * 1024) + 5)
    (store / "abort").write_bytes(b"")
    run = cli("--store", store, "topicList")
    assert run.code == 0 and "warning" not in run.err


def test_an_index_file_the_reader_passes_over_is_named(store: Path, cli: Cli) -> None:
    """A reader skips an index file it cannot make sense of; a key query that then finds
    nothing must not look like an answer."""
    newest = sorted((store / "index").iterdir())[-1]
    with open(newest, "r+b") as f:
        f.truncate(5000)
    run = cli("--store", store, "queryMsgByKey", "-t", "Payments", "-k", "order-897")
    assert run.code == 1
    assert f"rocketstore: warning: index file {newest} holds entries" in run.err
    assert "key and unique-key queries do not search it" in run.err
    healthy = cli("--store", store, "queryMsgByKey", "-t", "Payments", "-k", "order-0")
    assert healthy.code == 0


def test_check_reads_past_damage_and_lists_the_message_a_consumer_misses(
    store: Path, cli: Cli
) -> None:
    """The check reads on after a damaged record, as a pull does: the units and index
    entries of the (whole) records after it are checked as any others, and the message
    whose record is damaged is listed as one its queue's consumers miss."""
    victim, following = _record_in_the_middle(store, cli)
    offset = int(str(victim["commitLogOffset"]))
    flip_byte(commitlog_file(store, offset), offset % (64 * 1024) + 5)  # the magic
    run = cli("--store", store, "check", "--max-problems", "0")
    assert run.code == 1
    assert "past the end of the CommitLog" not in run.out
    assert f"points to offset {following['commitLogOffset']}" not in run.out
    queue = f"{victim['topic']}-{victim['queueId']}"
    assert (
        f"points to offset {offset}, inside the damaged data from {offset} to "
        f"{following['commitLogOffset']}, and the bytes there are no record (illegal magic "
        f"code 0xda5c20a7): a consumer of {queue} misses this message" in run.out
    )
    assert "a consumer misses 1 message(s) whose records are damaged" in run.out
    assert (
        f"missed: {queue} queue offset {victim['queueOffset']} (CommitLog offset {offset}): "
        "illegal magic code 0xda5c20a7" in run.out
    )
    assert "checked 899 records" in run.out  # all but the damaged one
    as_json = cli("--store", store, "--json", "check").json_lines()
    assert [r for r in as_json if r["type"] == "missed"] == [
        {
            "type": "missed",
            "topic": victim["topic"],
            "queueId": victim["queueId"],
            "queueOffset": victim["queueOffset"],
            "offset": offset,
            "reason": "illegal magic code 0xda5c20a7",
        }
    ]
    assert as_json[-1]["missed"] == 1


def test_a_queue_file_of_the_wrong_size_leaves_out_that_queue_only(store: Path, cli: Cli) -> None:
    """RocketMQ's load fails on it; an offline reader reads everything else and says so."""
    rows = cli("--store", store, "--json", "dump").json_lines()
    bad_topic = str(rows[0]["topic"])
    bad_queue = int(str(rows[0]["queueId"]))
    other = next(r for r in rows if r["topic"] != bad_topic)
    queue_dir = store / "consumequeue" / bad_topic / str(bad_queue)
    first = sorted(queue_dir.iterdir())[0]
    first.write_bytes(first.read_bytes()[:100])
    run = cli("--store", store, "topicStatus", "-t", str(other["topic"]))
    assert run.code == 0 and "#Max Offset" in run.out
    assert (
        f"rocketstore: warning: consume queue {bad_topic}-{bad_queue} cannot be read "
        "(file is 100 bytes, expected" in run.err
    )
    by_id = cli("--store", store, "queryMsgById", "-i", str(rows[0]["msgId"]))
    assert by_id.code == 0 and f"Topic:               {bad_topic}" in by_id.out
