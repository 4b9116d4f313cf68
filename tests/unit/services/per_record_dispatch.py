"""The reference for the bulk dispatcher: dispatch records one at a time, the way the store
did before dispatching went bulk (decode each record, its properties dict, ``queue.put`` and
``index.build_index`` per record). Tests compare the bulk path's files with these."""

from __future__ import annotations

from rocketstore import MessageStore
from rocketstore.format import properties as props
from rocketstore.format import record as rec
from rocketstore.format import sysflag
from rocketstore.format.javahash import tags_code
from rocketstore.index import DispatchedKeys
from rocketstore.paths import SCHEDULE_TOPIC


def _tags_code(store: MessageStore, view: rec.RecordView, properties: dict[str, str]) -> int:
    levels = store._delay_levels_ms
    if view.topic == SCHEDULE_TOPIC and props.DELAY in properties:
        try:
            level = min(int(properties[props.DELAY]), len(levels))
        except ValueError:
            level = 0
        if level > 0:
            return view.store_timestamp + levels[level - 1]
    return tags_code(properties.get(props.TAGS))


def dispatch_per_record(store: MessageStore, data: bytes, views: list[rec.RecordView]) -> None:
    """Queue units and index entries for ``views`` (records of ``data``), one by one."""
    for view in views:
        properties = rec.record_properties(data, view)
        if sysflag.gets_queue_entry(view.sys_flag):
            queue = store._queue(view.topic, view.queue_id, create=True)
            assert queue is not None
            queue.put(
                view.physical_offset,
                view.size,
                _tags_code(store, view, properties),
                view.queue_offset,
            )
        if store.config.message_index_enable:
            store.index.build_index(
                DispatchedKeys(
                    topic=view.topic,
                    commit_log_offset=view.physical_offset,
                    store_timestamp=view.store_timestamp,
                    sys_flag=view.sys_flag,
                    uniq_key=properties.get(props.UNIQ_KEY),
                    keys=properties.get(props.KEYS),
                )
            )


def commitlog_records(data: bytes) -> list[rec.RecordView]:
    """The records of one CommitLog file, up to its blank or the end of its data."""
    views = []
    position = 0
    while position + 8 <= len(data) and any(data[position : position + 8]):
        view = rec.read_record(data, position)
        if isinstance(view, rec.Blank):
            break
        views.append(view)
        position += view.size
    return views
