"""Timed waits that never swallow a cancellation (CPython 3.11's ``wait_for`` does when
the awaited result arrives together with the cancel)."""

from __future__ import annotations

import asyncio

import pytest

from rocketstore.broker.timeouts import wait_event, within


def test_wait_event_says_whether_the_event_came() -> None:
    async def main() -> tuple[bool, bool]:
        event = asyncio.Event()
        missed = await wait_event(event, 0.01)
        asyncio.get_running_loop().call_later(0.01, event.set)
        return missed, await wait_event(event, 5)

    assert asyncio.run(main()) == (False, True)


def test_within_returns_the_result_or_times_out() -> None:
    async def main() -> int:
        assert await within(asyncio.sleep(0, 7), 1) == 7
        await within(asyncio.sleep(5), 0.01)
        return 0

    with pytest.raises(TimeoutError):
        asyncio.run(main())


@pytest.mark.parametrize("steps_between", range(6))
def test_a_loop_around_wait_event_stops_when_cancelled_as_its_event_arrives(
    steps_between: int,
) -> None:
    """The event is set and the loop's task cancelled within a few loop steps of each
    other, at every interleaving: the task must end, not wait out its next timeout."""

    async def main() -> bool:
        event = asyncio.Event()

        async def loop() -> None:
            while True:
                event.clear()
                await wait_event(event, 30)

        task = asyncio.create_task(loop())
        for _ in range(3):
            await asyncio.sleep(0)
        event.set()
        for _ in range(steps_between):
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=2)
        return task in done and task.cancelled()

    assert asyncio.run(main())
