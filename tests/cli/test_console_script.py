"""Smoke tests of the real console script as a subprocess, each also run in this process:
the CLI tests run commands in-process (cli_helpers.run_cli), so the two must print the
same stdout and stderr and end with the same exit code. ``serve`` started and stopped by
SIGTERM: tests/cli/test_odd_files.py; the installed script: tests/cli/test_errors_help.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.cli_helpers import run_cli, run_cli_process


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("--help",), id="help"),
        pytest.param(("--json", "topicStatus", "-t", "Payments"), id="read"),
        pytest.param(("queryMsgByKey", "-t", "Payments"), id="usage-error"),
        pytest.param(("queryMsgByOffset", "-t", "Nope", "-i", "0", "-o", "0"), id="error"),
    ],
)
def test_in_process_and_subprocess_runs_agree(args: tuple[str, ...], store: Path) -> None:
    done = run_cli_process("--store", store, *args)
    assert done.code in (0, 1, 2) and (done.out or done.err)
    assert run_cli("--store", store, *args) == done


def test_a_store_that_is_not_there(tmp_path: Path) -> None:
    done = run_cli_process("--store", tmp_path / "nope", "topicList")
    assert (done.code, done.out) == (1, "")
    assert done.err.startswith("rocketstore: error: ") and done.err.count("\n") == 1
    assert run_cli("--store", tmp_path / "nope", "topicList") == done
