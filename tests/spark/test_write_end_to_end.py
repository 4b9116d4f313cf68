"""Batch writes through the shared local SparkSession, read back field by field; an
aborted job appends nothing and leaves no staged files; the auto-registration shim."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest
from pyspark.sql import functions as sf

from rocketstore import Message, MessageStore
from rocketstore.spark.routing import hash_queue
from rocketstore.spark.staging import STAGING_DIR
from tests.spark.spark_helpers import store_rows


def test_batch_write_reads_back_field_by_field(spark, tmp_path):
    target = tmp_path / "store"
    df = spark.createDataFrame(
        [
            ("first", "Orders", "k-1", "TagA", {"color": "red"}, None),
            ("second", "Orders", None, None, {}, 3),
            ("third", "Audit", "k-3 k-4", "TagB", None, None),
        ],
        "value string, topic string, key string, tags string, "
        "properties map<string,string>, queueId int",
    )
    df.write.format("rocketstore").mode("append").save(str(target))
    rows = {
        r["value"]: r.asDict() for r in spark.read.format("rocketstore").load(str(target)).collect()
    }
    assert set(rows) == {b"first", b"second", b"third"}
    first, second, third = rows[b"first"], rows[b"second"], rows[b"third"]
    assert (first["topic"], first["key"], first["tags"]) == ("Orders", "k-1", "TagA")
    uniq = first["properties"].pop("UNIQ_KEY")  # the sink gives every message one
    assert first["properties"] == {"color": "red", "KEYS": "k-1", "TAGS": "TagA"}
    assert re.fullmatch("[0-9A-F]{32}", uniq) and uniq == first["uniqKey"]
    assert len({r["uniqKey"] for r in rows.values()}) == 3
    assert first["partition"] == hash_queue("k-1", 4)
    assert (second["partition"], second["key"], second["tags"]) == (3, None, None)
    assert third["keys"] == ["k-3", "k-4"] and third["partition"] == hash_queue("k-3 k-4", 4)
    assert not (target / STAGING_DIR).exists()
    # A second job appends after the first; `keys` and option topic work too.
    more = spark.createDataFrame([(b"\x00\x01", ["a", "b"])], "value binary, keys array<string>")
    more.write.format("rocketstore").option("topic", "Audit").mode("append").save(str(target))
    audit = [r for r in store_rows(target) if r["topic"] == "Audit"]
    assert sorted(r["value"] for r in audit) == [b"\x00\x01", b"third"]
    assert {r["key"] for r in audit} == {"a b", "k-3 k-4"}


def test_read_dataframe_writes_back_as_a_copy(spark, store_path, tmp_path):
    target = tmp_path / "copy"
    source = spark.read.format("rocketstore").option("topics", "Payments").load(str(store_path))
    source.write.format("rocketstore").mode("append").save(str(target))
    copied = store_rows(target)
    original = store_rows(store_path, [("Payments", 0), ("Payments", 1)])
    assert sorted((r["key"], r["tags"], r["uniqKey"], r["value"]) for r in copied) == sorted(
        (r["key"], r["tags"], r["uniqKey"], r["value"]) for r in original
    )


def test_aborted_job_appends_nothing_and_leaves_no_staging(spark, tmp_path):
    target = tmp_path / "store"
    with MessageStore.open(target) as store:
        assert store.put(Message(topic="T", body=b"before")).ok

    @sf.udf("string")
    def body(i):
        if i == 150:
            raise ValueError("a task fails half-way")
        return f"m{i}"

    df = spark.range(0, 200, numPartitions=2).select(body("id").alias("value"))
    with pytest.raises(Exception, match="a task fails half-way"):
        df.write.format("rocketstore").option("topic", "T").mode("append").save(str(target))
    assert [r["value"] for r in store_rows(target)] == [b"before"]
    assert not (target / STAGING_DIR).exists()


def test_write_errors_name_the_option_or_column(spark, tmp_path):
    df = spark.createDataFrame([("x", "T")], "value string, topic string")
    with pytest.raises(Exception, match=r"queueNums='many' must be an integer"):
        df.write.format("rocketstore").option("queueNums", "many").mode("append").save(
            str(tmp_path)
        )
    with pytest.raises(Exception, match=r"unknown column\(s\) \['body'\]"):
        df.withColumnRenamed("value", "body").write.format("rocketstore").mode("append").save(
            str(tmp_path)
        )
    with pytest.raises(Exception, match="only appends"):
        df.write.format("rocketstore").mode("overwrite").save(str(tmp_path))


def test_shim_is_what_spark_auto_registers():
    names = [m.name for m in pkgutil.iter_modules() if m.name.startswith("pyspark_")]
    assert "pyspark_rocketstore" in names
    shim = importlib.import_module("pyspark_rocketstore")
    from pyspark.sql.datasource import DataSource

    from rocketstore.spark.source import PushdownReader, RocketStoreReader

    assert issubclass(shim.DefaultSource, DataSource)
    assert shim.DefaultSource.name() == "rocketstore"
    plain = shim.DefaultSource({"path": "/s"}).reader(None)
    assert type(plain) is RocketStoreReader  # works while Spark's pushdown setting is off
    assert isinstance(shim.DefaultSource({"path": "/s", "pushdown": "true"}).reader(None),
                      PushdownReader)  # fmt: skip
