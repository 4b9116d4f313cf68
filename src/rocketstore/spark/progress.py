"""How far a ``rocketstore`` stream is behind the store, from Spark's progress reports
(pure Python: no pyspark, no store).

Layer: spark (top). Spark's Kafka source reports ``minOffsetsBehindLatest``,
``maxOffsetsBehindLatest`` and ``avgOffsetsBehindLatest`` in each progress's
``sources[i]["metrics"]`` through the JVM's ``ReportsSourceMetrics``; pyspark 4.3 gives a
Python source no such hook (its micro-batch stream implements admission control, the
latest offset and Trigger.AvailableNow, nothing else). What it does carry is the offset a
Python source reports as its latest (``reportLatestOffset``): every progress has the
source's ``endOffset`` (read up to) and ``latestOffset`` (the store's end when the batch
was planned), and :func:`offsets_behind_latest` computes Kafka's three numbers from them::

    from rocketstore.spark.progress import offsets_behind_latest
    offsets_behind_latest(query.lastProgress["sources"][0])
    # {'minOffsetsBehindLatest': '0', 'maxOffsetsBehindLatest': '1200',
    #  'avgOffsetsBehindLatest': '300.0'}

It works on the progress dicts a ``StreamingQueryListener`` receives too
(``event.progress.sources[i].endOffset`` / ``.latestOffset``, as JSON text).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rocketstore.errors import ConfigError
from rocketstore.spark import offsets as offs


def _offsets(value: Any, what: str) -> offs.Offsets:
    """A progress offset: a dict, or its JSON text (listener events carry text)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise ConfigError(f"the progress's {what} {value!r} is not JSON") from e
    return offs.from_json(value)


def offsets_behind_latest(source: Mapping[str, Any], by_topic: bool = False) -> dict[str, Any]:
    """Kafka's lag metrics for one source of a streaming progress (its ``endOffset`` and
    ``latestOffset``): per queue, the store's max offset minus the offset read up to; their
    min, max and mean, as text like Kafka's. With ``by_topic``, one such dict per topic.
    Empty when the progress has no latest offset yet (no batch planned)."""
    latest_raw = source.get("latestOffset")
    if latest_raw is None:
        return {}
    latest = _offsets(latest_raw, "latestOffset")
    end_raw = source.get("endOffset")
    consumed = {} if end_raw is None else _offsets(end_raw, "endOffset")
    if not by_topic:
        return offs.lag_metrics(consumed, latest)
    return {
        topic: offs.lag_metrics(consumed, {key: v for key, v in latest.items() if key[0] == topic})
        for topic in sorted({topic for topic, _qid in latest})
    }
