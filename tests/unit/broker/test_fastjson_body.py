"""fastjson's JSON for the admin bodies: sorted properties, nulls left out, MessageQueue
map keys as unquoted objects (the examples are what RocketMQ 4.9.8's broker sent)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.fastjson_body import MessageQueueKey, dumps


def test_message_queue_keys_are_unquoted_objects() -> None:
    table = {
        MessageQueueKey("TopicA", "broker-a", 1): {"lastUpdateTimestamp": 5, "maxOffset": 2},
        MessageQueueKey("TopicA", "broker-a", 0): {"maxOffset": 3, "minOffset": 0},
    }
    assert dumps({"offsetTable": table}) == (
        '{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicA"}:'
        '{"maxOffset":3,"minOffset":0},'
        '{"brokerName":"broker-a","queueId":1,"topic":"TopicA"}:'
        '{"lastUpdateTimestamp":5,"maxOffset":2}}}'
    )


def test_beans_sorted_nulls_left_out_doubles_as_java() -> None:
    assert dumps({"b": 1, "a": None, "c": [True, "x"], "d": 0.0, "e": 0.17}) == (
        '{"b":1,"c":[true,"x"],"d":0.0,"e":0.17}'
    )
    assert dumps({"groupList": {"b", "a"}}) == '{"groupList":["a","b"]}'
    assert dumps({0: "x", 10: "y"}) == '{0:"x",10:"y"}'  # integer keys unquoted too
    assert dumps(math.nan) == "null"
    with pytest.raises(TypeError):
        dumps(object())


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)


def _without_nulls(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


@given(_JSON)
def test_plain_values_are_standard_json(value: object) -> None:
    """Without MessageQueue or integer keys the output is JSON any parser reads."""
    assert json.loads(dumps(value)) == _without_nulls(value)
