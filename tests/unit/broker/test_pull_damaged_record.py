"""A broker pull over a CommitLog with one damaged record in the middle (issue #33 item
2): the consumer gets every intact message of the queue, only the damaged one is skipped,
and GET_BROKER_RUNTIME_INFO (``brokerStatus``) counts it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import BrokerContext
from tests.unit.broker.broker_helpers import call, decode_records, make_context, pull, send_v2

FILE_BYTES = 64 * 1024
COUNT = 3000


@pytest.fixture
def small_files(tmp_path: Path) -> Iterator[BrokerContext]:
    context = make_context(tmp_path / "store", mapped_file_size_commit_log=FILE_BYTES)
    yield context
    context.store.close()


def test_a_pull_returns_every_intact_message_and_counts_the_damaged_one(
    small_files: BrokerContext,
) -> None:
    ctx = small_files
    store = ctx.store
    for i in range(COUNT):
        ext = send_v2("T", queue_id=i % 4)
        sent = call(ctx, RequestCode.SEND_MESSAGE_V2, ext, b"m%05d" % i * 8)
        assert sent.code == ResponseCode.SUCCESS
    store.wait_dispatched()
    victim = store.get_messages("G", "T", 1, 300, 1).messages[0]
    offset = victim.commit_log_offset
    # A flipped magic code in a file in the middle, written beside the broker's mapping.
    path = Path(store.root) / "commitlog" / f"{offset - offset % FILE_BYTES:020d}"
    with open(path, "r+b") as f:
        f.seek(offset % FILE_BYTES + 4)
        f.write(b"\xde\xad\xbe\xef")

    got: list[int] = []
    queue_offset = 0
    while True:
        answer = pull(ctx, "T", 1, queue_offset)
        if answer.code != ResponseCode.SUCCESS:
            assert answer.code == ResponseCode.PULL_NOT_FOUND
            break
        got += [m.queue_offset for m in decode_records(answer.body)]
        queue_offset = int(answer.ext_fields["nextBeginOffset"])
    assert got == [q for q in range(COUNT // 4) if q != 300]

    table = json.loads(call(ctx, RequestCode.GET_BROKER_RUNTIME_INFO).body)["table"]
    assert table["pullSkippedDamagedMsgs"] == "1"
