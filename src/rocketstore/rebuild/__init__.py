"""The parallel rebuild plan: CommitLog ranges -> ConsumeQueues and IndexFiles.

Layer: above the store; ``spark`` runs the plan on Spark, ``cli`` on local processes.
Everything here writes the same bytes as the store's dispatcher (docs/spark.md,
"Rebuilding queues and index")::

    from rocketstore.rebuild import ProcessRunner, rebuild_store

    if __name__ == "__main__":  # worker processes re-import the main module
        with ProcessRunner() as runner:
            report = rebuild_store("/data/store", runner)
"""

from rocketstore.format.record_scan import CorruptRegion
from rocketstore.rebuild.driver import RebuildReport, rebuild_store
from rocketstore.rebuild.runners import ProcessRunner, RebuildFailedError, SerialRunner

__all__ = [
    "CorruptRegion",
    "ProcessRunner",
    "RebuildFailedError",
    "RebuildReport",
    "SerialRunner",
    "rebuild_store",
]
