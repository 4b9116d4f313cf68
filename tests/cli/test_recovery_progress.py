"""The recovery's phase lines on a terminal: shown as "rocketstore: recovery: ...", never
with --json or when stderr is not a terminal."""

from __future__ import annotations

import io
import logging

import pytest

from rocketstore.cli import progress


@pytest.fixture
def logger():
    target = logging.getLogger(progress.RECOVERY_PROGRESS_LOGGER)
    saved = (list(target.handlers), target.level, target.propagate)
    target.handlers.clear()
    yield target
    target.handlers[:] = saved[0]
    target.setLevel(saved[1])
    target.propagate = saved[2]


def test_a_terminal_sees_the_phase_lines(logger, monkeypatch) -> None:
    monkeypatch.setattr(progress, "enabled", lambda **_: True)
    progress.show_recovery_progress(as_json=False)
    [handler] = logger.handlers
    assert isinstance(handler, logging.StreamHandler)
    handler.stream = out = io.StringIO()
    logger.info("recovery: %s", "3 CommitLog files loaded in 1.2 s")
    assert out.getvalue() == "rocketstore: recovery: 3 CommitLog files loaded in 1.2 s\n"
    progress.show_recovery_progress(as_json=False)  # once only
    assert len(logger.handlers) == 1


def test_json_and_pipes_see_none(logger, monkeypatch) -> None:
    monkeypatch.setattr(progress, "enabled", lambda **_: True)
    progress.show_recovery_progress(as_json=True)
    assert not logger.handlers
    monkeypatch.setattr(progress, "enabled", lambda **_: False)
    progress.show_recovery_progress(as_json=False)
    assert not logger.handlers
