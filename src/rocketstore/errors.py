"""The one error hierarchy of rocketstore (lowest layer: imports nothing of ours).

Exceptions are for misuse, corruption and I/O faults. Outcomes a caller branches on
(not found, offset too small, no new message) are status enums in :mod:`rocketstore.status`.
"""

from __future__ import annotations


class StoreError(Exception):
    """Root of every error rocketstore raises on purpose."""


class ConfigError(StoreError, ValueError):
    """A configuration value or an argument is invalid; the message names it."""


class CorruptDataError(StoreError):
    """Bytes on disk (or handed to a decoder) are not a valid structure.

    ``path`` and ``position`` say where, when known.
    """

    def __init__(self, message: str, *, path: str | None = None, position: int | None = None):
        where = []
        if path is not None:
            where.append(path)
        if position is not None:
            where.append(f"position {position}")
        full = f"{message} ({', '.join(where)})" if where else message
        super().__init__(full)
        self.reason = message
        self.path = path
        self.position = position


class IncompleteDataError(StoreError):
    """A decoder needs more bytes than it was given (not corruption by itself)."""

    def __init__(self, needed: int, available: int, what: str = "record"):
        super().__init__(f"incomplete {what}: need {needed} bytes, have {available}")
        self.needed = needed
        self.available = available


class FileRemovedError(StoreError):
    """A mapped file was closed or deleted (by retention) while being read; the read path
    reports the data as removed (``MESSAGE_WAS_REMOVING`` / not found)."""


class StoreLockedError(StoreError):
    """Another writer holds the store directory's lock."""


class StoreClosedError(StoreError):
    """The store was closed and cannot serve the call."""


class ReadOnlyStoreError(StoreError):
    """A write was attempted on a store opened read-only or made read-only by a fault."""


class MessageTooLargeError(StoreError):
    """A message (or batch) exceeds the configured size limits."""


class NotAStoreError(StoreError):
    """A directory does not look like a RocketMQ/rocketstore store directory."""


class DataLossError(StoreError):
    """Messages a reader still needed were removed (by retention) or its queue went back;
    the message names the topic, queue and offsets (Spark's ``failOnDataLoss``)."""


class SelectorError(ConfigError):
    """A SQL92 message selector (a subscription's ``expressionType`` SQL92) that RocketMQ
    would refuse: a lexical or syntax error, or an operand its parser rejects. The message
    names what is wrong and where (``position`` counts characters from 0)."""

    def __init__(self, message: str, *, position: int | None = None):
        super().__init__(message if position is None else f"{message} (at character {position})")
        self.reason = message
        self.position = position
