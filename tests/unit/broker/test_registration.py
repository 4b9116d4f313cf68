"""The registrar's lifetime: a registration woken just before a stop never holds the
stop for a whole interval."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rocketstore.broker.registration import Registrar
from tests.unit.broker.broker_helpers import make_context


@pytest.mark.parametrize("steps_between", range(6))
def test_stop_right_after_a_trigger_returns_at_once(tmp_path: Path, steps_between: int) -> None:
    ctx = make_context(tmp_path / "s")

    async def main() -> float:
        registrar = Registrar(ctx, [], interval_ms=60_000)
        registrar.start()
        for _ in range(3):
            await asyncio.sleep(0)
        registrar.trigger()  # as a topic created by a put does
        for _ in range(steps_between):
            await asyncio.sleep(0)
        started = time.monotonic()
        await asyncio.wait_for(registrar.stop(), 10)
        return time.monotonic() - started

    try:
        assert asyncio.run(main()) < 5
    finally:
        ctx.store.close()
