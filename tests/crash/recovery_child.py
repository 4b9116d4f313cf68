"""Opens and closes a store as a writer (run as ``python -m tests.crash.recovery_child``
from the project root, never collected by pytest).

The crash tests arm a crash point in its environment: the open's recovery re-dispatches
(queues or index were removed) and the process dies partway through.
"""

from __future__ import annotations

import sys

from rocketstore import MessageStore
from tests.crash.crash_writer import config


def main() -> None:
    root, flush_disk_type = sys.argv[1:3]
    with MessageStore.open(root, config(flush_disk_type).replace(cut_damaged_commitlog=False)):
        pass
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
