"""The broker tests import their shared helpers (broker_helpers.py) as a top-level module
from this directory, and share the ``ctx`` fixture: a broker context over a fresh store."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from broker_helpers import make_context

from rocketstore.broker.context import BrokerContext


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[BrokerContext]:
    context = make_context(tmp_path / "store")
    yield context
    context.store.close()
