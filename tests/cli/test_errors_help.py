"""One-line errors with the right exit status, --debug tracebacks, help texts, the
installed console script and the demo command."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import click
import pytest

from rocketstore.cli.main import cli as root_group
from tests.cli.cli_helpers import Run

Cli = Callable[..., Run]

READ_ONLY_COMMANDS = [
    ("topicList",),
    ("topicStatus", "-t", "T"),
    ("queryMsgByKey", "-t", "T", "-k", "k"),
    ("printMsg", "-t", "T"),
    ("check",),
    ("stats",),
    ("dump",),
]


@pytest.mark.parametrize("args", READ_ONLY_COMMANDS, ids=lambda a: a[0])
def test_missing_directory_and_not_a_store(cli: Cli, tmp_path: Path, args: tuple[str, ...]) -> None:
    missing = cli("--store", tmp_path / "nope", *args)
    assert (missing.code, missing.out) == (1, "")
    nope = tmp_path / "nope"
    assert (
        missing.err
        == f"rocketstore: error: store directory {nope} does not exist (use --store DIR)\n"
    )
    other = tmp_path / "other"
    other.mkdir()
    not_store = cli("--store", other, *args)
    assert not_store.code == 1
    assert (
        not_store.err == f"rocketstore: error: {other} is not a store directory (no commitlog/)\n"
    )


def test_missing_topic_has_its_own_message(store: Path, cli: Cli) -> None:
    for args in (
        ("topicStatus", "-t", "Nope"),
        ("printMsg", "-t", "Nope"),
        ("queryMsgByKey", "-t", "Nope", "-k", "k"),
        ("queryCq", "-t", "Nope", "-q", "0"),
    ):
        run = cli("--store", store, *args)
        assert run.code == 1
        topics = "topics: OrderEvents, Payments"
        assert run.err == f"rocketstore: error: topic 'Nope' not found in {store} ({topics})\n"


def test_usage_errors_exit_2(store: Path, cli: Cli) -> None:
    for args in (
        ("bogus",),
        ("topicStatus",),
        ("printMsg", "-t", "Payments", "-b", "yesterday"),
        ("queryMsgByKey", "-t", "T", "-k", "k", "-m", "0"),
        ("check", "--force"),
        ("export", "--format", "csv", "x"),
    ):
        run = cli("--store", store, *args)
        assert run.code == 2, args
        assert "Traceback" not in run.err
    bad_time = cli("--store", store, "printMsg", "-t", "Payments", "-b", "2024-13-01#00:00:00:000")
    assert "is not epoch ms" in bad_time.err or "month must be in 1..12" in bad_time.err


def test_debug_shows_the_traceback(store: Path, cli: Cli) -> None:
    quiet = cli("--store", store, "queryMsgById", "-i", "XYZ")
    assert "Traceback" not in quiet.err
    loud = cli("--store", store, "--debug", "queryMsgById", "-i", "XYZ")
    assert loud.code == 1
    assert "Traceback (most recent call last)" in loud.err
    assert "CorruptDataError" in loud.err
    assert (
        loud.err.rstrip().splitlines()[-1].startswith("rocketstore: error: malformed offsetMsgId")
    )


def test_piped_output_has_no_progress_bar(store: Path, cli: Cli) -> None:
    for args in (("check",), ("dump",), ("printMsg", "-t", "Payments"), ("rebuild",)):
        run = cli("--store", store, *args)
        assert run.code == 0
        assert run.err == "", args


def _commands() -> list[click.Command]:
    return [c for name, c in sorted(root_group.all_commands().items()) if name != "demo"]


def test_mqadmin_spelling_of_decode_message_id(cli: Cli) -> None:
    ours = cli("--json", "decodeMessageId", "-i", "7F000001000000000000000000000005")
    theirs = cli("--json", "DecodeMessageId", "-i", "7F000001000000000000000000000005")
    assert theirs.code == 0 and theirs.json_lines()[0]["id"] == ours.json_lines()[0]["id"]


@pytest.mark.parametrize("command", _commands(), ids=lambda c: c.name)
def test_every_flag_is_documented_with_an_example(command: click.Command, cli: Cli) -> None:
    run = cli(str(command.name), "--help")
    assert run.code == 0
    assert "Example:" in run.out
    for param in command.params:
        if isinstance(param, click.Option) and param.name != "help":
            assert param.help and "Example:" in param.help, f"{command.name} {param.opts}"


def test_root_help_lists_every_command(cli: Cli) -> None:
    run = cli("--help")
    assert run.code == 0
    for name, command in root_group.all_commands().items():
        assert (f"  {name} " in run.out) is not command.hidden, name
    for section in ("Messages (mqadmin's names):", "Topics and queues:", "Store tools:"):
        assert section in run.out
    for param in root_group.params:
        if isinstance(param, click.Option):
            assert param.help and "Example:" in param.help


def test_installed_console_script(store: Path) -> None:
    script = shutil.which("rocketstore", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the rocketstore console script is not installed next to this python")
    done = subprocess.run(
        [script, "--store", str(store), "topicList"], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout) == (0, "OrderEvents\nPayments\n")


def test_demo_still_works(cli: Cli, tmp_path: Path) -> None:
    run = cli("--store", tmp_path / "demo", "demo", "-n", "300", "--batch", "16")
    assert run.code == 0, run.err
    assert run.out.startswith("wrote 300 messages")
    assert cli("--store", tmp_path / "demo", "check").code == 0


def test_demo_refuses_a_batch_size_below_one(cli: Cli, tmp_path: Path) -> None:
    run = cli("--store", tmp_path / "demo", "demo", "-n", "10", "--batch", "0")
    assert run.code == 2 and "--batch" in run.err and run.out == ""


def test_demo_stops_when_the_store_refuses_its_messages(cli: Cli, tmp_path: Path) -> None:
    # 200,000 bodies of ~30 bytes in one batch pass the 4 MiB max_message_size.
    run = cli("--store", tmp_path / "demo", "demo", "-n", "200000", "--batch", "200000")
    assert run.code == 1
    assert "refused the demo's messages: MESSAGE_ILLEGAL" in run.err
    assert not run.out.startswith("wrote")


def test_a_dledger_home_without_its_log_is_named(tmp_path: Path, cli: Cli) -> None:
    """A broker with enableDLegerCommitLog keeps its log in dledger-<id>/data: a
    dledger-<id>/ without it is said to be one, not just "no commitlog/" (a DLedger store
    is read: tests/cli/test_dledger.py)."""
    (tmp_path / "dledger-n0").mkdir()
    run = cli("--store", tmp_path, "topicStatus", "-t", "T")
    assert run.code == 1
    assert run.err == (
        f"rocketstore: error: {tmp_path} is not a store directory (no commitlog/; dledger-n0/ "
        "may be a DLedger CommitLog (enableDLegerCommitLog) without its data/ directory)\n"
    )
