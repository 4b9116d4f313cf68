"""Progress lines: share, amount, rate and time left within a phase, redrawn in place on a
terminal; nothing with --json or on a pipe. And the recovery's line within a long
re-dispatch."""

from __future__ import annotations

import io
import logging
import sys
import time
from pathlib import Path

import pytest

from rocketstore.cli import progress
from rocketstore.store import opening
from tests.cli.cli_helpers import run_cli

MIB = 1 << 20


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_line_gives_share_amount_rate_and_time_left():
    clock = Clock()
    bar = progress.Progress(None, 400 * MIB, "scanning CommitLog", clock=clock)
    clock.now += 2
    bar.advance(100 * MIB)
    assert bar.line() == (
        "scanning CommitLog:  25.0 %  100.0 MiB / 400.0 MiB  50.0 MiB/s  ETA 0:06"
    )
    clock.now += 6
    bar.move_to(400 * MIB)
    assert bar.line().endswith("100.0 %  400.0 MiB / 400.0 MiB  50.0 MiB/s  in 0:08")


def test_counts_and_long_waits():
    clock = Clock()
    bar = progress.Progress(None, 1_000_000, "printMsg", unit="messages", clock=clock)
    assert bar.line().endswith("ETA --:--")
    clock.now += 10
    bar.advance(2_500)
    assert bar.line() == ("printMsg:   0.2 %  2,500 / 1,000,000  250 messages/s  ETA 1:06:30")


def test_a_terminal_sees_the_line_redrawn_then_kept(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(progress, "enabled", lambda **_: True)
    monkeypatch.setattr(sys, "stderr", out)
    with progress.progress(3 * MIB, "check") as bar:
        bar.advance(MIB)
        bar.advance(2 * MIB)
    text = out.getvalue()
    assert text.startswith("\rcheck:  33.3 %  1.0 MiB / 3.0 MiB") and text.endswith("\n")
    assert "\rcheck: 100.0 %  3.0 MiB / 3.0 MiB" in text


def test_json_and_pipes_are_quiet(monkeypatch):
    monkeypatch.setattr(progress, "_is_terminal", lambda stream: True)
    try:
        progress.set_quiet(True)
        assert not progress.enabled()
        progress.set_quiet(False)
        assert progress.enabled() and not progress.enabled(streams_stdout=True)
    finally:
        progress.set_quiet(False)
    monkeypatch.setattr(progress, "_is_terminal", lambda stream: False)
    assert not progress.enabled()


@pytest.fixture
def recovery_logger():
    """The recovery lines' logger as it was: a run that thinks stderr is a terminal adds
    its handler (show_recovery_progress)."""
    target = logging.getLogger(progress.RECOVERY_PROGRESS_LOGGER)
    saved = (list(target.handlers), target.level, target.propagate)
    yield target
    target.handlers[:] = saved[0]
    target.setLevel(saved[1])
    target.propagate = saved[2]


@pytest.mark.parametrize(("args", "label"), [(("check",), "check"), (("dump",), "dump")])
def test_commands_draw_on_a_terminal_but_not_with_json(
    store: Path, monkeypatch, recovery_logger, args, label
):
    # stderr a terminal, stdout not (dump prints as it goes: it draws only when redirected)
    monkeypatch.setattr(progress, "_is_terminal", lambda stream: stream is sys.stderr)
    shown = run_cli("--store", store, *args)
    assert shown.code == 0
    assert f"\r{label}" in shown.err and " %  " in shown.err and "/s  " in shown.err
    quiet = run_cli("--store", store, "--json", *args)
    assert quiet.code == 0 and quiet.err == ""


def test_the_redispatch_line():
    ticker = opening._Ticker(1000, 1000 + 300 * MIB, lambda: 0)
    assert ticker.line(1000 + 100 * MIB, 2.0) == (
        "re-dispatching: 33 % (100 of 300 MiB), 50 MiB/s, 4 s left"
    )
    assert ticker.line(0, 1.0) == "re-dispatching: 0 % (0 of 300 MiB), 0 MiB/s"


def test_a_long_redispatch_logs_lines_while_it_runs(monkeypatch, caplog):
    monkeypatch.setattr(opening, "TICK_S", 0.01)
    position = [0]
    with (
        caplog.at_level(logging.INFO, logger=opening.progress_log.name),
        opening._Ticker(0, 10 * MIB, lambda: position[0]),
    ):
        position[0] = 5 * MIB
        deadline = time.monotonic() + 30
        while not caplog.records and time.monotonic() < deadline:
            time.sleep(0.01)
    assert caplog.records
    assert caplog.records[-1].getMessage().startswith("recovery: re-dispatching: 50 % (5 of 10")


def test_no_thread_without_a_position():
    ticker = opening._Ticker(0, MIB, None)
    with ticker:
        assert ticker._thread is None
