"""A read-only opener in another process while a writer appends: it must only ever see
whole, dispatched messages (a consistent prefix), never a torn record."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from rocketstore import Message, MessageStore, StoreConfig

CONFIG: dict[str, Any] = dict(
    mapped_file_size_commit_log=64 * 1024,
    mapped_file_size_consume_queue=2000,
    max_hash_slot_num=64,
    max_index_num=256,
)

READER = textwrap.dedent(
    """
    import json, sys, time
    from rocketstore import MessageStore, GetStatus
    root = sys.argv[1]
    seen_max = 0
    checks = 0
    deadline = time.monotonic() + 20
    with MessageStore.open(root, read_only=True) as store:
        while time.monotonic() < deadline:
            top = store.max_offset("T", 0)
            assert top >= seen_max, (top, seen_max)
            seen_max = top
            offset = 0
            while offset < top:
                got = store.get_messages("r", "T", 0, offset, max_count=32)
                assert got.status is GetStatus.FOUND, got.status
                for m in got.messages:
                    n = int(m.properties["N"])
                    assert m.queue_offset == n, (m.queue_offset, n)
                    assert m.body == (b"%d:" % n) * (n % 50 + 1), n
                    checks += 1
                offset = got.next_begin_offset
            if top:
                hits = store.query_messages("T", "key-%d" % (top - 1))
                assert [int(h.properties["N"]) for h in hits] == [top - 1]
            if top >= 400:
                break
    print(json.dumps({"max": seen_max, "checks": checks}))
    """
)


def test_reader_in_other_process_sees_consistent_prefix(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    config = StoreConfig(**CONFIG)
    with MessageStore.open(root, config) as store:
        store.put(Message("T", b"0:", properties={"N": "0", "KEYS": "key-0"}))
        store.wait_dispatched()
        reader = subprocess.Popen(
            [sys.executable, "-c", READER, root], stdout=subprocess.PIPE, text=True
        )
        for n in range(1, 400):
            body = (b"%d:" % n) * (n % 50 + 1)
            result = store.put(Message("T", body, properties={"N": str(n), "KEYS": f"key-{n}"}))
            assert result.ok
        store.wait_dispatched()
        out, _ = reader.communicate(timeout=60)
    assert reader.returncode == 0
    report = json.loads(out)
    assert report["max"] == 400
    assert report["checks"] > 0
