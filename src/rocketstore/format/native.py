"""The optional C loops (:mod:`rocketstore.format._native`): one registry binding each C
entry point beside the pure-Python twin whose behaviour it must match.

Layer: format. The extension is built by ``pip install`` where a C compiler is present
and runs the common case of a few per-record loops (put encoding and append, the scan's
walk, decode and CRC check, dispatch facts, reads into MessageExt). The pure-Python code
named as each entry's twin defines the behaviour and runs whenever the extension is
missing, or when ``ROCKETSTORE_PURE_PYTHON=1`` is set (CI runs the unit tests both ways).

Callers import this module (``from rocketstore.format import native``) and call
``native.walk_starts(...)`` when it is not None: each name below is typed by the
``_native.pyi`` stub, and is None without the extension. The file I/O entry points
(pwrite, msync, madvise) are bound in :mod:`rocketstore.files.native_io`, through
:func:`bind` as well; this layer does no I/O. Tests switch every binding to its twin at
once with :func:`python_only`, and walk :data:`REGISTRY` (tests/unit/format/test_native.py).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

from rocketstore.format.properties import VerbatimProperties

PURE_PYTHON_ENV = "ROCKETSTORE_PURE_PYTHON"

_T = TypeVar("_T")


def _load() -> ModuleType | None:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None
    try:
        return importlib.import_module("rocketstore.format._native")
    except ImportError:  # not built (no compiler at install time): the Python paths run
        return None


# The extension module itself, or None (a public name: scripts/check.sh asks it which CRC
# runs). Code calls the typed bindings below, not this.
native = _load()


@dataclass(frozen=True)
class Entry:
    """One C entry point: where it is bound and the pure-Python code it must match."""

    name: str  # its name in the extension's method table
    module: str  # the module whose attribute ``name`` is the binding (None when unbuilt)
    twin: str  # "module:qualname" of the pure-Python twin, or why it has none


REGISTRY: dict[str, Entry] = {}


class _Unbuilt:
    """Stands for the extension when it is not loaded: each entry point is None."""

    def __getattr__(self, name: str) -> None:
        return None


def bind(entry: _T, name: str, twin: str, *, module: str = __name__) -> _T | None:
    """``entry`` (the extension's ``name``, or None when it is not loaded), registered with
    its ``twin``; bound to ``name`` in ``module`` by the caller's assignment."""
    if name in REGISTRY:
        raise ValueError(f"{name} is bound twice")
    REGISTRY[name] = Entry(name, module, twin)
    return entry


@contextlib.contextmanager
def python_only(*names: str) -> Iterator[None]:
    """The bindings ``names`` of :data:`REGISTRY` (all when none are named) None for the
    block, so their pure-Python twins run (for tests; not thread-safe). Import-time uses
    (the MessageExt descriptors) stay."""
    chosen = [REGISTRY[name] for name in names] if names else list(REGISTRY.values())
    saved = [getattr(sys.modules[e.module], e.name) for e in chosen]
    try:
        for e in chosen:
            setattr(sys.modules[e.module], e.name, None)
        yield
    finally:
        for e, value in zip(chosen, saved, strict=True):
            setattr(sys.modules[e.module], e.name, value)


if TYPE_CHECKING:
    from rocketstore.format import _native as _c
else:
    _c = native if native is not None else _Unbuilt()

# ---- CRC ---------------------------------------------------------------------------
masked_crc32 = bind(_c.masked_crc32, "masked_crc32", "rocketstore.format.crc:masked_crc32")
crc_backend = bind(_c.crc_backend, "crc_backend", "none: reports which CRC loop runs")

# ---- put ---------------------------------------------------------------------------
set_verbatim_type = bind(
    _c.set_verbatim_type, "set_verbatim_type", "none: tells the encoder VerbatimProperties"
)
encode_batch = bind(_c.encode_batch, "encode_batch", "rocketstore.put_path:MessagePreparer.prepare")
encode_columns = bind(_c.encode_columns, "encode_columns", "rocketstore.put_columns:_put_prepared")
append_encoded = bind(_c.append_encoded, "append_encoded", "rocketstore.commitlog:CommitLog.append")
put_results = bind(_c.put_results, "put_results", "rocketstore.commitlog:CommitLog.append")
put_one = bind(_c.put_one, "put_one", "rocketstore.commitlog:CommitLog.append")

# ---- scan, recovery, dispatch ------------------------------------------------------------
walk_starts = bind(
    _c.walk_starts, "walk_starts", "rocketstore.format.record_scan:_walk_starts_python"
)
decode_chunk = bind(_c.decode_chunk, "decode_chunk", "rocketstore.format.record_scan:_decode_chunk")
crc_mismatch = bind(
    _c.crc_mismatch, "crc_mismatch", "rocketstore.format.commitlog_walk:first_crc_mismatch"
)
queue_units = bind(_c.queue_units, "queue_units", "rocketstore.format.record_scan:queue_runs")
dispatch_facts = bind(
    _c.dispatch_facts, "dispatch_facts", "rocketstore.format.dispatch_facts:dispatch_facts"
)
java_hash = bind(_c.java_hash, "java_hash", "rocketstore.format.javahash:java_string_hash")

transfer_run = bind(_c.transfer_run, "transfer_run", "rocketstore.format.ha:transfer_run_python")

# ---- index -------------------------------------------------------------------------
index_put = bind(_c.index_put, "index_put", "rocketstore.index_file:IndexFile.put_keys_bulk")
index_chain = bind(_c.index_chain, "index_chain", "rocketstore.index_file:IndexFile.candidates")
chain_private = bind(_c.chain_private, "chain_private", "rocketstore.index_chain:chain_block")

# ---- reads -------------------------------------------------------------------------
decode_messages = bind(
    _c.decode_messages, "decode_messages", "rocketstore.format.record:to_message_ext"
)
select_units = bind(_c.select_units, "select_units", "rocketstore.read_path:MessageReader._select")
pull_messages = bind(
    _c.pull_messages, "pull_messages", "rocketstore.read_path:MessageReader._pull_all"
)
pull_records = bind(
    _c.pull_records, "pull_records", "rocketstore.read_path:MessageReader._records_python"
)
pull_tagged_records = bind(
    _c.pull_tagged_records,
    "pull_tagged_records",
    "rocketstore.read_path:MessageReader._records_python",
)
key_lookup = bind(_c.key_lookup, "key_lookup", "rocketstore.queries:KeyQuery._python_matches")
time_search = bind(
    _c.time_search, "time_search", "rocketstore.consume_queue:ConsumeQueue._first_past"
)
LazyProperties = bind(
    _c.LazyProperties, "LazyProperties", "rocketstore.format.properties:decode_properties"
)
LazyMsgId = bind(
    _c.LazyMsgId, "LazyMsgId", "rocketstore.format.message_id:offset_msg_id_from_bytes"
)

# ---- the broker's batch bodies ----------------------------------------------------------
batch_columns = bind(
    _c.batch_columns,
    "batch_columns",
    "rocketstore.broker.processors.message_batch:decode_batch_columns_python",
)
offset_msg_ids = bind(
    _c.offset_msg_ids, "offset_msg_ids", "rocketstore.format.message_id:joined_offset_msg_ids"
)

# ---- the broker's sends ------------------------------------------------------------------
send_frame = bind(
    _c.send_frame, "send_frame", "rocketstore.broker.processors.send_fast:send_frame_python"
)
send_answer = bind(
    _c.send_answer, "send_answer", "rocketstore.broker.processors.send_fast:send_answer_python"
)
batch_frame = bind(
    _c.batch_frame, "batch_frame", "rocketstore.broker.processors.send_fast:batch_frame_python"
)
batch_answer = bind(
    _c.batch_answer,
    "batch_answer",
    "rocketstore.broker.processors.send_fast:batch_answer_python",
)

# ---- the broker's pulls -------------------------------------------------------------------
pull_frame = bind(
    _c.pull_frame, "pull_frame", "rocketstore.broker.processors.pull_fast:pull_frame_python"
)
pull_answer = bind(
    _c.pull_answer, "pull_answer", "rocketstore.broker.processors.pull_fast:pull_answer_python"
)


if set_verbatim_type is not None:
    # The put encoder writes these properties' text as it is, not their serialisation.
    set_verbatim_type(VerbatimProperties)
