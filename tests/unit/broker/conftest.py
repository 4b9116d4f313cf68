"""The broker tests' shared ``ctx`` fixture: a broker context over a fresh store (their
helpers are in broker_helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketstore.broker.context import BrokerContext
from tests.unit.broker.broker_helpers import make_context


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[BrokerContext]:
    context = make_context(tmp_path / "store")
    yield context
    context.store.close()
