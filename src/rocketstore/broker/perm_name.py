"""RocketMQ's ``PermName``: the bits of a topic's, a route's or a whole broker's ``perm``.

Layer: broker, lowest (constants and pure tests only).
"""

from __future__ import annotations

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
PERM_ALL = PERM_PRIORITY | PERM_READ | PERM_WRITE | PERM_INHERIT


def is_readable(perm: int) -> bool:
    return perm & PERM_READ == PERM_READ


def is_writeable(perm: int) -> bool:
    return perm & PERM_WRITE == PERM_WRITE
