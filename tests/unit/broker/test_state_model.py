"""The topic table and the offset table against in-memory models: random changes,
persists and reloads (a reload sees exactly what was last persisted)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from rocketstore.broker.consumer_offsets import ConsumerOffsets
from rocketstore.broker.topic_config import TopicConfig, TopicConfigManager

TOPICS = st.sampled_from(["A", "B", "%RETRY%g1", "C_D"])
GROUPS = st.sampled_from(["g1", "g2", "g3"])


class OffsetsModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="offsets-model-"))
        self.offsets = ConsumerOffsets(self.root)
        self.live: dict[tuple[str, str], dict[int, int]] = {}
        self.persisted: dict[tuple[str, str], dict[int, int]] = {}

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(group=GROUPS, topic=TOPICS, queue_id=st.integers(0, 3), offset=st.integers(0, 10**12))
    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.offsets.commit(group, topic, queue_id, offset)
        self.live.setdefault((topic, group), {})[queue_id] = offset

    @rule(group=GROUPS, topic=TOPICS)
    def clean(self, group: str, topic: str) -> None:
        assert self.offsets.clean(group, topic) == ((topic, group) in self.live)
        self.live.pop((topic, group), None)

    @rule(group=GROUPS)
    def remove_group(self, group: str) -> None:
        self.offsets.remove_group(group)
        self.live = {k: v for k, v in self.live.items() if k[1] != group}

    @rule()
    def persist(self) -> None:
        self.offsets.persist()
        self.persisted = {k: dict(v) for k, v in self.live.items()}

    @rule()
    def crash_and_reload(self) -> None:
        self.offsets = ConsumerOffsets(self.root)
        self.live = {k: dict(v) for k, v in self.persisted.items()}

    @invariant()
    def same_table(self) -> None:
        assert self.offsets.table() == self.live


class TopicsModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="topics-model-"))
        self.manager = TopicConfigManager(self.root)
        self.model = {c.topic_name: c for c in self.manager.all()}

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(topic=TOPICS, queues=st.integers(0, 16), perm=st.sampled_from([2, 4, 6, 7]))
    def update(self, topic: str, queues: int, perm: int) -> None:
        config = TopicConfig(topic, queues, queues, perm)
        self.manager.update(config)
        self.model[topic] = config

    @rule(topic=TOPICS)
    def delete(self, topic: str) -> None:
        assert self.manager.delete(topic) == (topic in self.model)
        self.model.pop(topic, None)

    @rule(topic=TOPICS, queues=st.integers(1, 16))
    def create_on_send(self, topic: str, queues: int) -> None:
        created = self.manager.create_on_send(topic, "TBW102", queues)
        if topic in self.model:
            assert created == self.model[topic]
        else:
            nums = min(queues, self.model["TBW102"].write_queue_nums)
            expected = TopicConfig(topic, nums, nums, 6)  # TBW102's perm 7 minus inherit
            assert created == expected
            self.model[topic] = expected

    @rule()
    def reload(self) -> None:
        # Every change is persisted at once: a reload sees the same table.
        self.manager = TopicConfigManager(self.root)

    @invariant()
    def same_table(self) -> None:
        assert {c.topic_name: c for c in self.manager.all()} == self.model


TestOffsetsModel = OffsetsModel.TestCase
TestOffsetsModel.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
TestTopicsModel = TopicsModel.TestCase
TestTopicsModel.settings = settings(max_examples=30, stateful_step_count=25, deadline=None)
