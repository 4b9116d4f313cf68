"""The checkpoint file has its blocks from the open on (issue #33, item 5): a flush on a
full disk rewrites blocks the file has, so it cannot fail and stop the store's writes."""

from __future__ import annotations

import os
from pathlib import Path

from rocketstore import MessageStore
from rocketstore.format.checkpoint import CHECKPOINT_FILE_SIZE, Checkpoint, encode_checkpoint
from rocketstore.recovery.checkpoint_file import CheckpointFile


def test_a_new_store_has_its_checkpoint_blocks_after_the_open(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path / "s"):
        st = os.stat(tmp_path / "s" / "checkpoint")
        assert st.st_size == CHECKPOINT_FILE_SIZE
        assert st.st_blocks * 512 >= CHECKPOINT_FILE_SIZE


def test_reserve_keeps_the_bytes_of_an_existing_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    image = encode_checkpoint(Checkpoint(1, 2, 3), with_5x_fields=False)
    path.write_bytes(image)
    checkpoint = CheckpointFile(str(path), writable=True)
    checkpoint.reserve()
    assert path.read_bytes() == image
    assert checkpoint.value == Checkpoint(1, 2, 3)


def test_a_read_only_checkpoint_is_never_made(tmp_path: Path) -> None:
    CheckpointFile(str(tmp_path / "checkpoint"), writable=False).reserve()
    assert not (tmp_path / "checkpoint").exists()
