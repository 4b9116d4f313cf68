"""Topic administration of a running broker through its name server."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from rocketstore.broker.admin_client import (
    AdminError,
    delete_topic,
    master_addresses,
    topic_list,
    topic_route,
    update_topic,
)
from rocketstore.broker.app import BackgroundServer, BrokerOptions
from rocketstore.broker.topic_config import TopicConfig
from tests.unit.broker.broker_helpers import small_store

T = TypeVar("T")


def _eventually(probe: Callable[[], T | None], timeout_s: float = 5) -> T | None:
    deadline = time.monotonic() + timeout_s
    while (value := probe()) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return value


def test_update_list_route_and_delete(tmp_path: Path) -> None:
    with BackgroundServer(
        BrokerOptions(str(tmp_path / "s"), listen="127.0.0.1:0", store_config=small_store())
    ) as server:
        namesrv = server.namesrv_address
        assert master_addresses(namesrv) == {"broker-a": server.broker_address}
        assert master_addresses(namesrv, "DefaultCluster") == {"broker-a": server.broker_address}
        with pytest.raises(AdminError, match="no cluster 'Other'"):
            master_addresses(namesrv, "Other")
        assert update_topic(namesrv, TopicConfig("Admin", 2, 3)) == [server.broker_address]
        route = _eventually(lambda: topic_route(namesrv, "Admin"))  # the broker re-registers
        assert route is not None
        assert route["queueDatas"][0]["readQueueNums"] == 2
        assert route["queueDatas"][0]["writeQueueNums"] == 3
        assert "Admin" in topic_list(namesrv)
        assert delete_topic(namesrv, "Admin") == [server.broker_address]
        assert topic_route(namesrv, "Admin") is None
        assert server.broker.ctx is not None and server.broker.ctx.topics.get("Admin") is None
        with pytest.raises(AdminError, match="refused request 17"):
            update_topic(namesrv, TopicConfig("DefaultCluster", 1, 1))
