"""Opens and closes a store as a writer (run as a script, never collected by pytest).

The crash tests arm a crash point in its environment: the open's recovery re-dispatches
(queues or index were removed) and the process dies partway through.
"""

from __future__ import annotations

import sys

from crash_writer import config

from rocketstore import MessageStore


def main() -> None:
    root, flush_disk_type = sys.argv[1:3]
    with MessageStore.open(root, config(flush_disk_type).replace(cut_damaged_commitlog=False)):
        pass
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
