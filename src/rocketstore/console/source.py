"""Where the console's pages read from: a store directory opened read-only (``rocketstore
console``), or a running broker's own state (``serve --http-listen``).

Layer: console. Both give the same things (the store, the consumer offsets, the topic and
group configs) through the store's and the broker managers' public methods; offline, the
config files are read again on each request, so a console beside a running broker shows
its latest commits.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocketstore.broker.consumer_offsets import ConsumerOffsets
from rocketstore.broker.subscription_groups import SubscriptionGroupManager
from rocketstore.broker.topic_config import TopicConfigManager
from rocketstore.config import StoreConfig
from rocketstore.store import MessageStore

if TYPE_CHECKING:
    from rocketstore.broker.acl import AclConfig
    from rocketstore.broker.context import BrokerContext
    from rocketstore.broker.stats import BrokerStats


@dataclass
class Snapshot:
    """What one request reads: the store and the broker's tables at that moment."""

    store: MessageStore
    offsets: ConsumerOffsets
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    stats: BrokerStats | None  # live only: the broker's put/get counters


class Source:
    """The console's view of a store. ``live``: a running broker's; otherwise a read-only
    opener of a directory. ``lock`` serialises the requests' reads (a console serves a
    person, not a load)."""

    live: bool = False

    def __init__(self, root: str, broker_name: str, cluster: str, address: str) -> None:
        self.root = root
        self.broker_name = broker_name
        self.cluster = cluster
        self.address = address
        self.lock = threading.Lock()

    @property
    def acl(self) -> AclConfig | None:
        """The ACL pages and actions follow (None: none)."""
        return None

    def snapshot(self) -> Snapshot:
        raise NotImplementedError

    def close(self) -> None:
        """Releases what the source opened (the offline store)."""


class OfflineSource(Source):
    """A store directory opened without the writer lock: it works beside a running writer
    or broker, and never changes a file."""

    def __init__(
        self,
        root: str,
        config: StoreConfig | None = None,
        *,
        broker_name: str = "localStore",
        cluster: str = "DefaultCluster",
    ) -> None:
        super().__init__(os.path.abspath(root), broker_name, cluster, "")
        self.store = MessageStore.open(root, config or StoreConfig(), read_only=True)

    def snapshot(self) -> Snapshot:
        return Snapshot(
            store=self.store,
            offsets=ConsumerOffsets(self.root),
            topics=TopicConfigManager(self.root, broker_name=self.broker_name),
            groups=SubscriptionGroupManager(self.root),
            stats=None,
        )

    def close(self) -> None:
        self.store.close()


class LiveSource(Source):
    """A running broker's context (``serve --http-listen``): its store, its tables as the
    broker holds them in memory, its counters and its ACL."""

    live = True

    def __init__(self, context: BrokerContext) -> None:
        config = context.config
        super().__init__(
            context.store.root, config.broker_name, config.broker_cluster_name, context.broker_addr
        )
        self.context = context

    @property
    def acl(self) -> AclConfig | None:
        return self.context.acl

    def snapshot(self) -> Snapshot:
        ctx = self.context
        return Snapshot(ctx.store, ctx.offsets, ctx.topics, ctx.groups, ctx.stats)
