"""ConsumeQueueExtReader and odd files (issue #33 item 10): a FIFO put where an extension
file was listed is refused by its path at once, instead of blocking the read forever."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocketstore.consume_queue_ext import ConsumeQueueExtReader
from rocketstore.errors import CorruptDataError
from rocketstore.format.cq_ext import address_of
from rocketstore.paths import consume_queue_ext_dir


def test_a_fifo_in_place_of_a_listed_file_is_named(tmp_path: Path) -> None:
    directory = Path(consume_queue_ext_dir(str(tmp_path), "T", 0))
    directory.mkdir(parents=True)
    path = directory / "00000000000000000000"
    path.write_bytes(bytes(4096))
    reader = ConsumeQueueExtReader(str(tmp_path), "T", 0)
    assert reader.get(address_of(0)) is None  # listed; zeros are no unit
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(CorruptDataError, match="a FIFO, not a regular file") as raised:
        reader.get(address_of(0))
    assert raised.value.path == str(path)
