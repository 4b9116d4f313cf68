import pytest

pytest.importorskip("grpc")

from rocketstore.broker.grpc.queue_choice import RoundRobin, consistent_hash, group_queue


def test_consistent_hash_matches_guava():
    # Guava's HashingTest golden values for Hashing.consistentHash.
    golden100 = [0, 55, 62, 8, 45, 59, 86, 97, 82, 59, 73, 37, 17, 56, 86, 21, 90, 37, 38, 83]
    assert [consistent_hash(i, 100) for i in range(20)] == golden100
    assert consistent_hash(10863919174838991, 11) == 6
    assert consistent_hash(2016238256797177309, 11) == 3
    assert consistent_hash(1673758223894951030, 11) == 5


def test_negative_hash_codes_are_sign_extended():
    # String.hashCode() is often negative; Java widens it to a long before hashing.
    for value in (-1, -(2**31), -123456):
        assert 0 <= consistent_hash(value, 8) < 8
    assert consistent_hash(-1, 8) == consistent_hash(2**64 - 1, 8)


def test_a_group_always_lands_on_one_queue():
    queues = {group_queue("order-7", 4) for _ in range(10)}
    assert len(queues) == 1
    assert group_queue("order-7", 1) == 0


def test_round_robin_takes_queues_in_turn():
    turn = RoundRobin()
    assert [turn.pick(3) for _ in range(5)] == [0, 1, 2, 0, 1]


def test_no_bucket_is_refused():
    with pytest.raises(ValueError):
        consistent_hash(1, 0)
