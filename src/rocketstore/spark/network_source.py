"""The batch reader of a read through name servers (option ``namesrv``): plans on the
driver (:mod:`.network_plan`), pulls on the executors (:mod:`.network_scan`).

Layer: spark (top). Filters are not pushed in this mode (the keys/uniqKeys options give
key lookups); every query of the DataFrame plans again against the live cluster.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from rocketstore.spark.network_cluster import Cluster
from rocketstore.spark.network_plan import plan_network_read
from rocketstore.spark.network_scan import read_network_partition
from rocketstore.spark.options import ReadOptions


class NetworkReader(DataSourceReader):
    """Picklable: holds only the parsed options."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        with Cluster(
            options.namesrv,
            credentials=options.credentials,
            broker_down_wait_ms=options.broker_down_wait_ms,
        ) as cluster:
            return plan_network_read(cluster, options)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_network_partition(partition, self.options)
