"""The Prometheus endpoint in process: a broker over loopback with --metrics-listen on a free
port, the project's own remoting client sending and pulling, /metrics scraped over HTTP and
parsed with prometheus_client's parser (the real-client version is
tests/conformance/test_metrics_endpoint.py)."""

from __future__ import annotations

import json
import re
import socket
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rocketstore.broker.app import BackgroundServer, BrokerOptions
from rocketstore.broker.client import invoke_sync, request
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.paths import ABORT_FILE
from tests.unit.broker.broker_helpers import small_store


def scrape(address: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics by (name, sorted labels)."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    """The one sample of ``name`` whose labels include ``labels`` (0 when there is none)."""
    found = [
        v for (n, have), v in samples.items() if n == name and set(labels.items()) <= set(have)
    ]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else 0.0


def _send(broker: str, topic: str, body: bytes) -> None:
    ext = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1"}
    ext |= {"h": "0", "i": "", "j": "0", "k": "false"}
    answer = invoke_sync(broker, request(RequestCode.SEND_MESSAGE_V2, ext, body))
    assert answer.code == ResponseCode.SUCCESS, answer.remark


def _pull(broker: str, topic: str, queue_id: int, offset: int) -> int:
    ext = {"consumerGroup": "G", "topic": topic, "queueId": str(queue_id)}
    ext |= {"queueOffset": str(offset), "maxMsgNums": "32", "sysFlag": "4"}
    ext |= {"subscription": "*", "subVersion": "0", "suspendTimeoutMillis": "0"}
    answer = invoke_sync(broker, request(RequestCode.PULL_MESSAGE, ext))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return int(answer.ext_fields["nextBeginOffset"])


def _commit(broker: str, topic: str, queue_id: int, offset: int) -> None:
    ext = {"consumerGroup": "G", "topic": topic, "queueId": str(queue_id)}
    ext |= {"commitOffset": str(offset)}
    answer = invoke_sync(broker, request(RequestCode.UPDATE_CONSUMER_OFFSET, ext))
    assert answer.code == ResponseCode.SUCCESS


def test_metrics_move_with_sends_and_pulls(tmp_path: Path) -> None:
    options = BrokerOptions(
        str(tmp_path / "s"),
        listen="127.0.0.1:0",
        store_config=small_store(),
        metrics_listen="127.0.0.1:0",
    )
    with BackgroundServer(options) as server:
        metrics = server.broker.metrics
        assert metrics is not None
        base = {"cluster": "DefaultCluster", "node_id": "broker-a", "node_type": "broker"}
        before = scrape(metrics.address)
        assert value(before, "rocketmq_messages_in_total", topic="M") == 0
        assert value(before, "rocketmq_broker_permission", **base) == 6
        for i in range(5):
            _send(server.broker_address, "M", b"body-%d" % i)
        ctx = server.broker.ctx
        assert ctx is not None
        ctx.store.wait_dispatched()
        queues = [q for q in range(4) if ctx.store.max_offset("M", q) > 0]
        pulled = {q: _pull(server.broker_address, "M", q, 0) for q in queues}
        first = queues[0]
        _commit(server.broker_address, "M", first, 1)  # one consumed, the rest in flight
        after = scrape(metrics.address)
        stored = sum(
            m.size for q in queues for m in ctx.store.get_messages("G", "M", q, 0, 32).messages
        )
        labels = {**base, "topic": "M", "is_system": "false"}
        assert value(after, "rocketmq_messages_in_total", **labels) == 5
        assert value(after, "rocketmq_throughput_in_total", **labels) == stored
        out = {"topic": "M", "consumer_group": "G", "is_retry": "false"}
        assert value(after, "rocketmq_messages_out_total", **out) == 5
        assert value(after, "rocketmq_throughput_out_total", **out) == stored
        # Offsets exist for one queue only: the lag is that queue's.
        assert value(after, "rocketmq_consumer_lag_messages", **out) == pulled[first] - 1
        assert value(after, "rocketmq_consumer_inflight_messages", **out) == pulled[first] - 1
        assert value(after, "rocketmq_consumer_ready_messages", **out) == 0
        assert value(after, "rocketmq_message_size_count", **labels) == 5
        assert value(after, "rocketmq_message_size_sum", **labels) == stored
        assert value(after, "rocketmq_message_size_bucket", le="1024", **labels) == 5
        sends = {"request_code": "send_message_v2", "response_code": "success"}
        assert value(after, "rocketmq_rpc_latency_count", **sends) == 5
        assert value(after, "rocketmq_rpc_latency_bucket", le="+Inf", **sends) == 5
        assert value(after, "rocketmq_storage_dispatch_behind_bytes") == 0
        assert value(after, "rocketstore_commitlog_max_offset") == ctx.store.max_commit_log_offset()
        assert value(after, "rocketstore_recovery_seconds") > 0
        assert value(after, "rocketstore_writeable") == 1
        assert value(after, "process_resident_memory_bytes") > 0
        address = metrics.address
    with pytest.raises(OSError):  # stopped with the broker
        urllib.request.urlopen(f"http://{address}/metrics", timeout=2)


def test_a_taken_metrics_port_fails_the_start_before_the_store_opens(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        options = BrokerOptions(
            str(tmp_path / "s"),
            listen="127.0.0.1:0",
            store_config=small_store(),
            metrics_listen=f"127.0.0.1:{port}",
        )
        with pytest.raises(OSError, match="cannot listen on"):
            BackgroundServer(options).start()
    assert not (tmp_path / "s" / ABORT_FILE).exists()


def test_the_grafana_dashboard_asks_for_metrics_the_endpoint_has(tmp_path: Path) -> None:
    dashboard = Path(__file__).parents[3] / "docs" / "grafana" / "rocketstore.json"
    exprs = [
        target["expr"]
        for panel in json.loads(dashboard.read_text())["panels"]
        for target in panel["targets"]
    ]
    asked = {name for expr in exprs for name in re.findall(r"\b(rocket\w+)", expr)}
    options = BrokerOptions(
        str(tmp_path / "s"),
        listen="127.0.0.1:0",
        store_config=small_store(),
        metrics_listen="127.0.0.1:0",
    )
    with BackgroundServer(options) as server:
        assert server.broker.metrics is not None
        address = server.broker.metrics.address
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    declared = set(re.findall(r"^# TYPE (\w+) ", text, re.MULTILINE))
    served = declared | {f"{name}_total" for name in declared}
    served |= {f"{name}_{part}" for name in declared for part in ("bucket", "count", "sum")}
    assert asked and asked <= served, asked - served
