"""rocketstore: Apache RocketMQ's message store in Python, byte-compatible with its files.

Public API: MessageStore, StoreConfig, Message, MessageExt, PutStatus, GetStatus, PutResult,
GetResult, the error hierarchy, and SQL92 message selectors (compile_selector, Selector).
"""

from rocketstore.config import StoreConfig
from rocketstore.errors import (
    ConfigError,
    CorruptDataError,
    IncompleteDataError,
    MessageTooLargeError,
    NotAStoreError,
    ReadOnlyStoreError,
    SelectorError,
    StoreClosedError,
    StoreError,
    StoreLockedError,
)
from rocketstore.format.message import Message, MessageExt
from rocketstore.format.selector import Selector, compile_selector
from rocketstore.put_path import PutResult
from rocketstore.read_path import GetResult
from rocketstore.status import Boundary, GetStatus, PutStatus
from rocketstore.store import MessageStore

__all__ = [
    "Boundary",
    "ConfigError",
    "CorruptDataError",
    "GetResult",
    "GetStatus",
    "IncompleteDataError",
    "Message",
    "MessageExt",
    "MessageStore",
    "MessageTooLargeError",
    "NotAStoreError",
    "PutResult",
    "PutStatus",
    "ReadOnlyStoreError",
    "Selector",
    "SelectorError",
    "StoreClosedError",
    "StoreConfig",
    "StoreError",
    "StoreLockedError",
    "compile_selector",
]
__version__ = "0.1.0"
