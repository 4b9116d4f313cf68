"""Fixtures for the Spark data source tests: one small store for the module set, and ONE
small local SparkSession shared by every end-to-end test (started only if one needs it)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from rocketstore.spark import scan
from tests.spark.spark_helpers import build_store


@pytest.fixture(scope="session")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The shared store (read-only for every test)."""
    root = tmp_path_factory.mktemp("spark") / "store"
    build_store(root)
    yield root
    scan.close_stores()


@pytest.fixture
def store_copy(store_path: Path, tmp_path: Path) -> Path:
    """A private copy a test may change (delete consumequeue/, add messages...)."""
    root = tmp_path / "store"
    shutil.copytree(store_path, root)
    return root


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java for Spark")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from rocketstore.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("rocketstore-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "512m")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    register(session)
    yield session
    session.stop()
