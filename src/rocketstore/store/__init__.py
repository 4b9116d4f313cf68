"""The MessageStore facade and the modules it delegates to (``message_store`` wires them).

Layer: store, the top of the engine: only rebuild/check, cli, spark and broker sit above.
Upper layers use ``MessageStore``'s public methods, not its parts (tests/unit/store's
contract test keeps it so).
"""

from rocketstore.services.dispatcher import DispatchRun
from rocketstore.store.message_store import MessageStore
from rocketstore.store.queue_table import UndispatchedRecord
from rocketstore.store.replica import ReplicaWindow
from rocketstore.store.sinks import DispatchListener
from rocketstore.store.truncation import TruncateReport, TruncateStatus
from rocketstore.store.views import QueueView
from rocketstore.store.write_path import ReplicationGate

__all__ = [
    "DispatchListener",
    "DispatchRun",
    "MessageStore",
    "QueueView",
    "ReplicaWindow",
    "ReplicationGate",
    "TruncateReport",
    "TruncateStatus",
    "UndispatchedRecord",
]
