"""Write the `basic` workload with rocketstore into a directory (used by build.sh).

build.sh then lists that store and RocketMQ's own `basic` through RocketMQ 4.9.8
(`GoldenHarness list`): the listings must be equal, i.e. RocketMQ opens a store rocketstore
wrote (its checkpoint, no abort file) and reads every message as in its own store.
Usage: python tests/golden/harness/rewrite_basic.py OUT_DIR
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def main(out_dir: str) -> None:
    # The rewrite lives with the tests (one copy of it); load that module by path.
    source = Path(__file__).resolve().parent.parent / "test_rocketmq_written.py"
    spec = importlib.util.spec_from_file_location("golden_tests", source)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {source}")
    golden = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(golden)
    golden.rewrite_with_rocketstore(golden.load_manifest("basic"), Path(out_dir))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: rewrite_basic.py OUT_DIR")
    main(sys.argv[1])
