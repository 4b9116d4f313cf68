"""message_problem: the field types a record could not keep as they were given."""

from __future__ import annotations

import pytest

from rocketstore import Message
from rocketstore.format.message import message_problem


@pytest.mark.parametrize("body", [b"x", bytearray(b"x"), memoryview(b"x"), b""])
def test_bytes_like_bodies_are_fine(body: bytes) -> None:
    assert message_problem(Message("T", body, properties={"a": "b", "n": None})) is None  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"body": "text"}, "body must be bytes, bytearray or memoryview, got str"),
        ({"body": 5}, "got int"),  # bytes(5): five zero bytes
        ({"body": [1, 2]}, "got list"),
        ({"body": None}, "got NoneType"),
        ({"properties": None}, "properties must be a dict of str to str, got NoneType"),
        ({"properties": [("a", "b")]}, "got list"),
        ({"properties": {"a": 1}}, "property 'a' must be a str, got int"),
        ({"properties": {"a": b"b"}}, "property 'a' must be a str, got bytes"),  # "b'b'"
        ({"properties": {1: "a"}}, "property name 1 must be a str, got int"),
        ({"born_host": None}, "born_host must be a str 'ip:port', got NoneType"),
        ({"queue_id": True}, "queue_id must be an int, got bool"),
        ({"flag": False}, "flag must be an int, got bool"),
    ],
)
def test_a_field_a_record_cannot_keep_is_named(changes: dict[str, object], problem: str) -> None:
    values: dict[str, object] = {"topic": "T", "body": b"x"}
    values.update(changes)
    found = message_problem(Message(**values))  # type: ignore[arg-type]
    assert found is not None and problem in found
