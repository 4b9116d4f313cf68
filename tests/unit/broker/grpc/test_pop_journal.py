import json

import pytest

pytest.importorskip("grpc")

from rocketstore.broker.grpc.pop_journal import PopJournal


def test_lines_of_records_by_generation(tmp_path):
    journal = PopJournal(str(tmp_path))
    journal.start(3)
    journal.append([["n", "g", "t", 0, 0], ["h", "g", "t", 0, 0, 0, 1, 5, 10]])
    journal.append([])  # nothing to write: no line
    journal.start(4)
    journal.append([["a", "g", "t", 0, 0]])
    journal.close()
    assert journal.generations() == [3, 4]
    lines = (tmp_path / "grpcPopState.journal.3").read_bytes().splitlines()
    assert [json.loads(line) for line in lines] == [
        [["n", "g", "t", 0, 0], ["h", "g", "t", 0, 0, 0, 1, 5, 10]]
    ]
    assert journal.read(3) == [
        ["n", "g", "t", 0, 0],
        ["h", "g", "t", 0, 0, 0, 1, 5, 10],
        ["a", "g", "t", 0, 0],
    ]
    assert journal.read(4) == [["a", "g", "t", 0, 0]]
    journal.remove_before(4)
    assert journal.generations() == [4]


def test_a_torn_line_is_skipped(tmp_path, caplog):
    journal = PopJournal(str(tmp_path), sync=True)
    journal.start(1)
    journal.append([["a", "g", "t", 0, 1]])
    journal.close()
    with open(tmp_path / "grpcPopState.journal.1", "ab") as f:
        f.write(b'[["a","g","t",0')  # a power loss mid-line
    (tmp_path / "grpcPopState.journal.x").write_bytes(b"not ours")
    assert journal.read(0) == [["a", "g", "t", 0, 1]]
    assert "line 2 is not a journal line" in caplog.text
