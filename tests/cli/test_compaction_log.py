"""dumpCompactionLog: every record of a file in CommitLog record format, as mqadmin's
dumpCompactionLog prints them (MessageExt.toString(), bodies not read)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from tests.cli.cli_helpers import Run, uniq_of

Cli = Callable[..., Run]


def test_every_record_of_the_file_until_its_data_ends(
    store: Path, cli: Cli, tmp_path: Path
) -> None:
    log = tmp_path / "00000000000000000000"
    # A CommitLog file is in the same record format: its records, then an END_OF_FILE blank.
    shutil.copy(store / "commitlog" / "00000000000000000000", log)
    records = [
        o for o in cli("--store", store, "--json", "dump").json_lines() if o["offset"] < 65536
    ]
    run = cli("dumpCompactionLog", "-f", log)  # no --store needed
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert len(lines) == len(records)
    first = records[0]
    assert lines[0] == (
        # Decoded straight from the file, as mqadmin does: no broker name.
        f"MessageExt [brokerName=null, queueId=0, storeSize={first['size']}, "
        f"queueOffset=0, sysFlag=0, bornTimestamp={first['bornTimestamp']}, "
        f"bornHost=/{first['bornHost']}, storeTimestamp={first['storeTimestamp']}, "
        f"storeHost=/{first['storeHost']}, msgId={first['msgId']}, commitLogOffset=0, "
        f"bodyCRC={first['bodyCRC']}, reconsumeTimes=0, preparedTransactionOffset=0, "
        "toString()=Message{topic='Payments', flag=0, properties={KEYS=order-0 cust-0, "
        f"UNIQ_KEY={uniq_of(0)}, TAGS=created}}, body=null, transactionId='null'}}]"
    )
    as_json = cli("--json", "dumpCompactionLog", "-f", log).json_lines()
    assert [o["msgId"] for o in as_json] == [r["msgId"] for r in records]
    assert all(o["body"] is None for o in as_json)
    # Zeros where a record should be end the dump, as in mqadmin.
    cut = tmp_path / "cut"
    data = bytearray(log.read_bytes())
    second = records[1]["offset"]
    data[second:] = bytes(len(data) - second)
    cut.write_bytes(bytes(data))
    assert len(cli("dumpCompactionLog", "-f", cut).out.splitlines()) == 1


def test_a_missing_file_or_a_directory_is_refused(cli: Cli, tmp_path: Path) -> None:
    missing = cli("dumpCompactionLog", "-f", tmp_path / "nope")
    assert (missing.code, missing.err) == (
        1,
        f"rocketstore: error: file {tmp_path / 'nope'} not exist.\n",
    )
    directory = cli("dumpCompactionLog", "-f", tmp_path)
    assert directory.code == 1 and "is a directory." in directory.err
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert cli("dumpCompactionLog", "-f", empty).out == ""
