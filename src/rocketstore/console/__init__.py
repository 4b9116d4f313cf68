"""The web console (``rocketstore console``, ``serve --http-listen``): pages over a store
directory opened read-only, or over a running broker's state.

Layer: console, above broker and check (it reads through MessageStore's public methods,
the broker's config managers and ``check_store``); below cli, which starts it.
"""

from rocketstore.console.app import Console
from rocketstore.console.server import ConsoleServer, ConsoleService
from rocketstore.console.source import LiveSource, OfflineSource, Source

__all__ = ["Console", "ConsoleServer", "ConsoleService", "LiveSource", "OfflineSource", "Source"]
