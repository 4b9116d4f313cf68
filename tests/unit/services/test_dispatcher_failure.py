"""A dispatch that fails for good (an index directory whose newest file is named for the
last millisecond of the year 9999, so no new file can follow it): the message stays
acknowledged in the CommitLog, the store says why it stopped and refuses further puts,
and close leaves the abort file so the next open re-dispatches."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import StoreError
from rocketstore.paths import ABORT_FILE, index_dir
from rocketstore.status import PutStatus

SMALL_INDEX = StoreConfig(
    mapped_file_size_commit_log=1 << 20, max_hash_slot_num=4, max_index_num=4
)  # three entries a file
LAST_NAME = "99991231235959999"


def _store_with_a_full_index_named_last(root: Path) -> None:
    with MessageStore.open(root, SMALL_INDEX) as store:
        for n in range(3):
            assert store.put(Message("T", b"m", properties={"KEYS": f"k{n}"})).ok
    directory = index_dir(str(root))
    (name,) = os.listdir(directory)
    os.rename(os.path.join(directory, name), os.path.join(directory, LAST_NAME))


def test_a_dispatch_that_cannot_go_on_is_reported_and_stops_writes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _store_with_a_full_index_named_last(tmp_path)
    store = MessageStore.open(tmp_path, SMALL_INDEX)
    try:
        store.dispatcher.shutdown(catch_up=False)  # this thread dispatches, to see it fail
        assert store.dispatch_error is None
        sent = store.put(Message("T", b"fourth", properties={"KEYS": "k3"}))
        assert sent.status is PutStatus.PUT_OK
        with caplog.at_level(logging.ERROR), pytest.raises(StoreError, match=LAST_NAME):
            store.wait_dispatched()
        assert isinstance(store.dispatch_error, StoreError)
        assert "named for no time a new file can follow" in str(store.dispatch_error)
        refused = store.put(Message("T", b"fifth"))
        assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert refused.reason == "writing an index file failed"
        # The acknowledged message is readable from the CommitLog by its offset.
        looked = store.look_message(sent.commit_log_offset)
        assert looked is not None and looked.body == b"fourth"
    finally:
        store.close()  # must not raise: the failure is already the store's to report
    assert os.path.exists(os.path.join(tmp_path, ABORT_FILE))
    with pytest.raises(StoreError, match="move it away"):
        MessageStore.open(tmp_path, SMALL_INDEX)  # recovery re-dispatches, and says why not
    os.remove(os.path.join(index_dir(str(tmp_path)), LAST_NAME))
    with MessageStore.open(tmp_path, SMALL_INDEX) as reopened:  # the way out works
        assert reopened.max_offset("T", 0) == 4
        assert [m.body for m in reopened.query_messages("T", "k3")] == [b"fourth"]
