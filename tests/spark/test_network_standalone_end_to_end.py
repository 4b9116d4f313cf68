"""The network mode (option ``namesrv``, #35) on a Spark standalone cluster: a real master
and worker started here on loopback with pyspark's ``sbin/spark-daemon.sh`` (own log, pid
and work directories, free ports) and stopped at the end, a driver process whose
SparkSession names ``spark://``, and a rocketstore name server + two brokers. The driver
reads (batch, key lookup), writes and streams with a group, all through the name server:
no store path is given to Spark."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketstore.remoting.blocking import invoke_sync, request
from rocketstore.remoting.codes import RequestCode, ResponseCode
from tests.spark.network_helpers import (
    PER_QUEUE,
    QUEUES,
    TOPIC,
    Cluster,
    free_port,
    load,
    running_cluster,
)

# A JVM daemon starts in 5-15 s on a quiet machine; a loaded one (parallel suites, CI
# neighbours) once took over 60 s for the worker. Only a bound, not a measurement.
STANDALONE_START_S = 240

DRIVER = """
import json, sys
from pyspark.sql import SparkSession
from rocketstore.spark import register
master, namesrv, out = sys.argv[1], sys.argv[2], sys.argv[3]
spark = (SparkSession.builder.master(master).appName("network-standalone")
         .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.executor.memory", "512m")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
register(spark)
def read(**options):
    reader = spark.read.format("rocketstore").option("namesrv", namesrv)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()
result = {"app": spark.sparkContext.applicationId, "master": spark.sparkContext.master}
result["rows"] = sorted([r.broker, r.partition, r.offset, r.uniqKey]
                        for r in read(topics="Orders").collect())
result["keyed"] = sorted(r.key for r in read(topics="Orders", keys="broker-b-1-4").collect())
(spark.range(200, numPartitions=3)
     .selectExpr("concat('w-', id) AS key", "CAST(id AS STRING) AS value")
     .write.format("rocketstore").option("namesrv", namesrv).option("topic", "Written")
     .mode("append").save())
result["written"] = sorted(r.key for r in read(topics="Written").collect())
query = (spark.readStream.format("rocketstore")
         .option("namesrv", namesrv).option("topics", "Orders")
         .option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", "20").option("group", "standalone_job").load()
         .writeStream.format("parquet").option("path", out + "/parquet")
         .option("checkpointLocation", out + "/ckpt").trigger(availableNow=True).start())
query.awaitTermination()
result["streamed"] = sorted([r.broker, r.partition, r.offset]
                            for r in spark.read.parquet(out + "/parquet").collect())
print("RESULT " + json.dumps(result), flush=True)
spark.stop()
"""


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _daemon(env: dict[str, str], action: str, cls: str, *args: str) -> None:
    script = _spark_home() / "sbin" / "spark-daemon.sh"
    subprocess.run(
        ["bash", str(script), action, f"org.apache.spark.deploy.{cls}", "1", *args],
        env=env, check=True, capture_output=True, timeout=60,
    )  # fmt: skip


def _wait_for_log(log_dir: Path, pattern: str, what: str) -> None:
    deadline = time.monotonic() + STANDALONE_START_S
    while time.monotonic() < deadline:
        for log in log_dir.glob("*.out"):
            if pattern in log.read_text(errors="replace"):
                return
        time.sleep(0.2)
    logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in log_dir.glob("*.out"))
    raise AssertionError(f"the standalone {what} did not start:\n{logs}")


@pytest.fixture(scope="module")
def standalone(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, dict[str, str], Path]]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java for Spark")
    root = tmp_path_factory.mktemp("standalone")
    port = free_port()
    master = f"spark://127.0.0.1:{port}"
    env = {
        **os.environ,
        "SPARK_HOME": str(_spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(root / "logs"),
        "SPARK_PID_DIR": str(root / "pids"),
        "SPARK_WORKER_DIR": str(root / "work"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    started: list[str] = []
    try:
        _daemon(env, "start", "master.Master", "--host", "127.0.0.1", "--port", str(port),
                "--webui-port", str(free_port()))  # fmt: skip
        started.append("master.Master")
        _wait_for_log(root / "logs", "Starting Spark master", "master")
        _daemon(env, "start", "worker.Worker", "--host", "127.0.0.1", "--webui-port",
                str(free_port()), "--cores", "2", "--memory", "1g", master)  # fmt: skip
        started.append("worker.Worker")
        _wait_for_log(root / "logs", "Successfully registered with master", "worker")
        yield master, env, root
    finally:
        for cls in reversed(started):
            _daemon(env, "stop", cls)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("standalone-brokers")) as running:
        load(running)
        yield running


def test_read_write_and_stream_through_the_name_server_on_a_standalone_cluster(
    standalone: tuple[str, dict[str, str], Path], cluster: Cluster, tmp_path: Path
) -> None:
    master, env, root = standalone
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(DRIVER))
    done = subprocess.run(
        [sys.executable, str(script), master, cluster.namesrv, str(tmp_path / "out")],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(lines[0].removeprefix("RESULT "))
    assert result["master"] == master
    # The worker launched the application's executors (their work directory).
    assert (root / "work" / result["app"]).is_dir(), sorted((root / "work").iterdir())
    sent = sorted([m["broker"], m["partition"], m["offset"], m["uniqKey"]] for m in cluster.sent)
    assert result["rows"] == sent
    assert result["keyed"] == ["broker-b-1-4 shared"]
    assert result["written"] == sorted(f"w-{i}" for i in range(200))
    assert result["streamed"] == [row[:3] for row in sent]
    for broker, address in cluster.brokers.items():  # the stream's option group
        for qid in range(QUEUES):
            ext = {"consumerGroup": "standalone_job", "topic": TOPIC, "queueId": str(qid)}
            answer = invoke_sync(address, request(RequestCode.QUERY_CONSUMER_OFFSET, ext))
            assert answer.code == ResponseCode.SUCCESS, (broker, qid, answer.remark)
            assert int(answer.ext_fields["offset"]) == PER_QUEUE
