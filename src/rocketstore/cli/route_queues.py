"""The queues of a topic that mqadmin's printMsg and consumeMessage go through, in the
order they go through them.

Layer: cli. mqadmin asks the name server for the topic's route and makes a MessageQueue
for each read queue of each readable broker (MQClientInstance.topicRouteData2Topic
SubscribeInfo) in a ``HashSet``, then walks that set: the order is the set's, by
``MessageQueue.hashCode`` (which takes in the broker name), not by queue id. Offline the
route is the store's topic config, as its broker would register it.
"""

from __future__ import annotations

from rocketstore.broker.perm_name import PERM_READ
from rocketstore.broker.topic_config import TopicConfigManager
from rocketstore.cli.context import CliError, require_topic
from rocketstore.format.javahash import java_hash_set_order, message_queue_hash
from rocketstore.store import MessageStore


def subscribe_queue_ids(store: MessageStore, topic: str, broker_name: str) -> list[int]:
    """``fetchSubscribeMessageQueues(topic)`` offline: the read queues of the topic's
    config (``readQueueNums``; none when it is not readable), or, for a topic without
    one, the queues the store has; in the iteration order of mqadmin's HashSet."""
    config = TopicConfigManager(store.root).get(topic)
    if config is None:
        queue_ids = require_topic(store, topic)
    else:
        queue_ids = list(range(config.read_queue_nums)) if config.perm & PERM_READ else []
    if not queue_ids:
        # MQAdminImpl's words when the route gives no readable queue.
        raise CliError(f"Can not find Message Queue for this topic, {topic} Namesrv return empty")
    hashes = [message_queue_hash(topic, broker_name, queue_id) for queue_id in queue_ids]
    return [queue_ids[i] for i in java_hash_set_order(hashes)]
