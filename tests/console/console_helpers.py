"""The store the console tests browse, and an HTTP client for its pages.

The store: tests/cli's (900 messages over Payments and OrderEvents, keys ``order-N
cust-M``, UNIQ_KEYs, JSON bodies; small files), plus two dead-lettered messages of the
group OrderProcessors and that group's committed offsets on OrderEvents: queue 0 at 10,
queue 1 at its end, queue 2 at 0, queue 3 never committed."""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from rocketstore import Message, MessageStore
from rocketstore.broker.consumer_offsets import ConsumerOffsets
from tests.cli.cli_helpers import BASE_MS, CONFIG, build_store

GROUP = "OrderProcessors"
DLQ = "%DLQ%" + GROUP
# queue id -> committed offset of GROUP on OrderEvents (None: never committed; "end":
# the queue's max offset)
COMMITTED: dict[int, int | str | None] = {0: 10, 1: "end", 2: 0, 3: None}


def build_console_store(root: Path) -> dict[int, int]:
    """Builds the store; returns OrderEvents' max offset per queue."""
    build_store(root)
    with MessageStore.open(root, CONFIG) as store:
        for i in range(2):
            result = store.put(
                Message(
                    DLQ,
                    f"dead letter {i}".encode(),
                    properties={"KEYS": f"dead-{i}", "RETRY_TOPIC": "OrderEvents"},
                ),
                store_timestamp=BASE_MS + 2_000_000 + i,
            )
            assert result.status.ok
        store.wait_dispatched()
        ends = {q: store.max_offset("OrderEvents", q) for q in range(4)}
    offsets = ConsumerOffsets(root)
    for queue_id, committed in COMMITTED.items():
        if committed is not None:
            offset = ends[queue_id] if committed == "end" else int(committed)
            offsets.commit(GROUP, "OrderEvents", queue_id, offset)
    assert offsets.persist(force=True)
    return ends


@dataclass
class Page:
    status: int
    text: str
    headers: dict[str, str]


def get(base: str, path: str, data: dict[str, str] | None = None, **params: object) -> Page:
    """GET ``path`` with ``params`` (POST ``data`` when given); no redirects followed."""
    url = base + path + ("?" + urlencode(params) if params else "")
    body = urlencode(data).encode() if data is not None else None

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, data=body, timeout=60) as answer:
            return Page(answer.status, answer.read().decode(), dict(answer.headers))
    except urllib.error.HTTPError as e:
        return Page(e.code, e.read().decode(), dict(e.headers))
