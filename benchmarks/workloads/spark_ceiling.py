"""The ceiling of any Python data source on this Spark: a source with the ``rocketstore``
schema that yields already-decoded Arrow batches (taken from the store once per task,
then repeated), so it does no work per row. Its rate is what Spark's Python data source
path allows (Arrow from the Python worker to the JVM, rows out of the batches); the gap
between it and ``rocketstore`` is our decoding, the gap between it and Parquet is Spark's.

Layer: benchmark workload helper. Pickled by value to Spark's Python workers (they cannot
import the ``benchmarks`` package), so it imports nothing of ``benchmarks`` at module level.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

NAME = "rocketstore-ceiling"
SAMPLE_BATCHES = 4


class _Share(InputPartition):
    def __init__(self, rows: int) -> None:
        self.rows = rows


class _Reader(DataSourceReader):
    def __init__(self, store: str, rows: int, partitions: int, columns: str | None) -> None:
        self.store, self.rows, self.partitions_wanted = store, rows, partitions
        self.columns = columns

    def partitions(self) -> Sequence[InputPartition]:
        share = -(-self.rows // self.partitions_wanted)
        counts = [min(share, self.rows - i * share) for i in range(self.partitions_wanted)]
        return [_Share(c) for c in counts if c > 0]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from rocketstore.spark.options import parse_options
        from rocketstore.spark.source import RocketStoreReader

        options = {"path": self.store}
        if self.columns:
            options["columns"] = self.columns
        reader = RocketStoreReader(parse_options(options))
        sample = []
        for batch in reader.read(reader.partitions()[0]):
            sample.append(batch)
            if len(sample) == SAMPLE_BATCHES:
                break
        left = partition.rows
        while left > 0:
            for batch in sample:
                if left <= 0:
                    break
                piece = batch if batch.num_rows <= left else batch.slice(0, left)
                left -= piece.num_rows
                yield piece


class CeilingSource(DataSource):
    """``spark.read.format("rocketstore-ceiling").option("store", DIR)
    .option("rows", N).option("partitions", P).load()``; ``option("columns", "a,b")``
    yields only those columns, as ``rocketstore``'s option of that name does."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> Any:
        from rocketstore.spark import columns

        chosen = self.options.get("columns")
        if chosen:
            return columns.spark_schema(tuple(chosen.split(",")))
        return columns.spark_schema()

    def reader(self, schema: Any) -> DataSourceReader:
        return _Reader(
            self.options["store"],
            int(self.options["rows"]),
            int(self.options["partitions"]),
            self.options.get("columns"),
        )
