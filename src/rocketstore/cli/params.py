"""Integer option types with Java's bounds: mqadmin reads these options with
Integer.parseInt / Long.parseLong, so a number past them is refused by name here
rather than overflowing somewhere inside (numpy, struct, the C decoder).

Layer: cli.
"""

from __future__ import annotations

import click

from rocketstore.java_ints import JAVA_INT_MAX, JAVA_INT_MIN, JAVA_LONG_MAX, JAVA_LONG_MIN


def java_int(min_value: int | None = None) -> click.IntRange:
    """An int option type: ``min_value`` (default Java's own minimum) up to 2^31-1."""
    return click.IntRange(JAVA_INT_MIN if min_value is None else min_value, JAVA_INT_MAX)


def java_long(min_value: int | None = None) -> click.IntRange:
    """A long option type: ``min_value`` (default Java's own minimum) up to 2^63-1."""
    return click.IntRange(JAVA_LONG_MIN if min_value is None else min_value, JAVA_LONG_MAX)


def non_empty_store(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A --store callback: an empty path would make the current directory the store
    (writers fill it with files); None (not given) passes."""
    if value is not None and not value:
        raise click.BadParameter("must name a directory, got an empty path")
    return value
