"""MessageStore.refresh: a read-only store sees a writer's new queues at once."""

from __future__ import annotations

import pytest

from rocketstore import Message, MessageStore, StoreClosedError


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
