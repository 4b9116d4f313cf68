"""The message model: what a producer hands in (Message) and what a reader gets (MessageExt).

Pure data classes; encoding lives in :mod:`rocketstore.format.record`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rocketstore.format import native
from rocketstore.format import properties as props


class _WellKnownProperties:
    """Shortcuts to the properties every RocketMQ message may carry."""

    __slots__ = ()
    properties: dict[str, str]

    @property
    def tags(self) -> str | None:
        return self.properties.get(props.TAGS)

    @property
    def keys(self) -> str | None:
        """The KEYS property as stored: keys separated by a space."""
        return self.properties.get(props.KEYS)

    @property
    def key_list(self) -> list[str]:
        return props.split_keys(self.properties.get(props.KEYS))

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(props.UNIQ_KEY)


@dataclass(slots=True)
class Message(_WellKnownProperties):
    """A message to put. TAGS, KEYS and UNIQ_KEY live in ``properties``.

    ``born_timestamp=None`` means "now" at put time. Properties are written in the order of
    the mapping (RocketMQ 4.9.1+ form, no trailing separator).
    """

    topic: str
    body: bytes
    queue_id: int = 0
    flag: int = 0
    sys_flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    born_timestamp: int | None = None
    born_host: str = "127.0.0.1:50000"
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


BODY_TYPES = (bytes, bytearray, memoryview)
_INT_FIELDS = (
    "queue_id",
    "flag",
    "sys_flag",
    "born_timestamp",
    "reconsume_times",
    "prepared_transaction_offset",
)


def message_problem(message: Message) -> str | None:
    """What about the types of ``message``'s body, properties and born host a record
    could not keep as given, in words naming the field; None when nothing. The put path's
    own checks (``put_path.MessagePreparer.prepare``) take ranges and names from there.

    A body is bytes-like: ``bytes(5)`` would store five zero bytes and ``bytes([1, 2])``
    two, not what was meant. Property names and values are str (a value of None is left
    out, as Java leaves out a null): an int would come back as a str, and bytes as their
    repr ``"b'...'"``.
    """
    if not isinstance(message.body, BODY_TYPES):
        return f"body must be bytes, bytearray or memoryview, got {type(message.body).__name__}"
    properties = message.properties
    if not isinstance(properties, dict):
        return f"properties must be a dict of str to str, got {type(properties).__name__}"
    for name, value in properties.items():
        if not isinstance(name, str):
            return f"property name {name!r} must be a str, got {type(name).__name__}"
        if value is not None and not isinstance(value, str):
            return f"property {name!r} must be a str, got {type(value).__name__}"
    if not isinstance(message.born_host, str):
        return f"born_host must be a str 'ip:port', got {type(message.born_host).__name__}"
    for name in _INT_FIELDS:
        if isinstance(getattr(message, name), bool):  # (an int to Python: True is 1)
            return f"{name} must be an int, got bool"
    return None


@dataclass(frozen=True, slots=True)
class MessageExt(_WellKnownProperties):
    """A stored message with every field of its CommitLog record."""

    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    size: int
    body: bytes | None
    properties: dict[str, str]
    msg_id: str
    sys_flag: int
    flag: int
    body_crc: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int
    magic_code: int = 0

    def to_dict(self) -> dict[str, object]:
        """Plain fields for JSON output (body left as bytes; callers choose an encoding)."""
        return {
            "msgId": self.msg_id,
            "topic": self.topic,
            "queueId": self.queue_id,
            "queueOffset": self.queue_offset,
            "commitLogOffset": self.commit_log_offset,
            "size": self.size,
            "tags": self.tags,
            "keys": self.keys,
            "uniqKey": self.uniq_key,
            "sysFlag": self.sys_flag,
            "flag": self.flag,
            "bodyCRC": self.body_crc,
            "bornTimestamp": self.born_timestamp,
            "bornHost": self.born_host,
            "storeTimestamp": self.store_timestamp,
            "storeHost": self.store_host,
            "reconsumeTimes": self.reconsume_times,
            "preparedTransactionOffset": self.prepared_transaction_offset,
            "properties": dict(self.properties),
            "body": self.body,
        }


if native.LazyProperties is not None and native.LazyMsgId is not None:
    # With the C reads, a MessageExt's properties stay as the record's bytes until first
    # read (see LazyProperties in _native_c/decode.c): a consumer that wants only bodies skips a
    # dict and its strings per message. Construction, equality, repr and replace() all
    # go through the attribute, so they see the dict as before.
    setattr(  # noqa: B010 (a plain assignment would have mypy check it as the field)
        MessageExt,
        "properties",
        native.LazyProperties(vars(MessageExt)["properties"], props.decode_properties),
    )
    # Likewise the offsetMsgId: the slot keeps the record's store host bytes until the id
    # is first read, and a consumer that never asks for ids skips a str per message.
    setattr(  # noqa: B010
        MessageExt,
        "msg_id",
        native.LazyMsgId(vars(MessageExt)["msg_id"], vars(MessageExt)["commit_log_offset"]),
    )
