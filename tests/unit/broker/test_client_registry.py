"""Consumer/producer group membership and orderly-consumer queue locks."""

from __future__ import annotations

from typing import Any

from rocketstore.broker.client_registry import MESSAGE_MODELS, ClientRegistry, enum_name
from rocketstore.broker.queue_locks import QueueLocks

SUB: dict[str, Any] = {
    "subscriptionDataSet": [{"topic": "T", "subString": "a || b"}],
    "messageModel": 1,
}


def test_membership_changes_are_reported() -> None:
    registry = ClientRegistry(client_timeout_ms=100)
    c1, c2 = object(), object()
    assert registry.register_consumer("G", "id1", c1, SUB, now_ms=0)
    assert not registry.register_consumer("G", "id1", c1, SUB, now_ms=10)  # a refresh
    assert registry.register_consumer("G", "id2", c2, SUB, now_ms=50)
    assert registry.consumer_ids("G") == ["id1", "id2"]
    assert registry.subscription("G", "T") == SUB["subscriptionDataSet"][0]
    assert registry.consumers["G"].message_model == "CLUSTERING"
    assert registry.connection_closed(c2) == ["G"]
    assert registry.consumer_ids("G") == ["id1"]
    assert registry.expire(now_ms=200) == ["G"]
    assert registry.consumer_ids("G") == []


def test_unregister_and_producers() -> None:
    registry = ClientRegistry()
    conn = object()
    registry.register_producer("P", "id1", conn)
    registry.register_consumer("G", "id1", conn, {})
    assert registry.unregister("id1", consumer_group="G", producer_group="P")
    assert not registry.unregister("id1", consumer_group="G")
    assert registry.producers["P"] == {}


def test_enum_names_or_ordinals() -> None:
    assert enum_name(0, MESSAGE_MODELS, "X") == "BROADCASTING"
    assert enum_name("1", MESSAGE_MODELS, "X") == "CLUSTERING"
    assert enum_name("CLUSTERING", MESSAGE_MODELS, "X") == "CLUSTERING"
    assert enum_name(None, MESSAGE_MODELS, "X") == "X"


def test_queue_locks_are_exclusive_until_expiry() -> None:
    locks = QueueLocks(max_live_ms=1000)
    q1, q2 = ("T", "broker-a", 0), ("T", "broker-a", 1)
    assert locks.try_lock("G", [q1, q2], "c1", now_ms=0) == [q1, q2]
    assert locks.try_lock("G", [q1], "c2", now_ms=500) == []
    assert locks.try_lock("G", [q1], "c1", now_ms=900) == [q1]  # renewal
    locks.unlock("G", [q2], "c2")  # not the holder: no effect
    assert locks.holder("G", q2, now_ms=900) == "c1"
    locks.unlock("G", [q2], "c1")
    assert locks.try_lock("G", [q2], "c2", now_ms=950) == [q2]
    assert locks.try_lock("G", [q1], "c2", now_ms=2000) == [q1]  # c1's lock expired
