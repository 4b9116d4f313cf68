"""benchmarks.report's broker targets (issue #37): shown for the cases the Java broker
was measured in, a rate ratio and a CPU ratio each."""

from __future__ import annotations

from benchmarks.common import row
from benchmarks.report import BROKER_JAVA, broker_targets, targets

BATCH = "batch send 4 x 64, 100 B"
CONSUME = "push consume, 500k backlog, 100 B"
CPU = "broker CPU per message"


def test_broker_rows_appear_only_where_java_was_measured() -> None:
    ours = "rocketstore serve --brokers 2"
    rows = [
        row("broker", BATCH, BROKER_JAVA, "rate", "msg/s", [100.0]),
        row("broker", BATCH, ours, "rate", "msg/s", [60.0]),
        row("broker", BATCH, BROKER_JAVA, CPU, "us", [5.0], higher_is_better=False),
        row("broker", BATCH, ours, CPU, "us", [12.0], higher_is_better=False),
        row("broker", CONSUME, BROKER_JAVA, "rate", "msg/s", [100.0]),
        row("broker", CONSUME, ours, "rate", "msg/s", [90.0]),
        row("broker", "sync send, 1 producer, 100 B", ours, "rate", "msg/s", [90.0]),
    ]
    found = {(t.name, t.goal): (t.value, t.verdict) for t in broker_targets(rows)}
    assert found == {
        (f"broker, {BATCH}", ">= 0.5"): (0.6, "pass"),
        (f"broker CPU per message, {BATCH}", "<= 2"): (2.4, "miss"),
        (f"broker, {CONSUME}", ">= 1"): (0.9, "miss"),
        (f"broker CPU per message, {CONSUME}", "<= 2"): (None, "not measured"),
    }
    assert [t.name for t in targets(rows) if t.name.startswith("broker")] == [
        name for name, _ in found
    ]
    assert broker_targets(rows[-1:]) == []  # rocketstore alone: no verdicts
