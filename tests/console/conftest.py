"""Fixtures for the console tests: the store (built once) and an offline console over it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketstore.console import ConsoleServer, OfflineSource
from tests.cli.cli_helpers import CONFIG
from tests.console.console_helpers import build_console_store


@pytest.fixture(scope="session")
def console_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, int]]:
    root = tmp_path_factory.mktemp("console") / "store"
    ends = build_console_store(root)
    return root, ends


@pytest.fixture(scope="session")
def console_url(console_store: tuple[Path, dict[int, int]]) -> Iterator[str]:
    """An offline console over the store, at http://127.0.0.1:PORT."""
    source = OfflineSource(str(console_store[0]), CONFIG)
    server = ConsoleServer(source, "127.0.0.1:0")
    server.start()
    try:
        yield f"http://{server.address}"
    finally:
        server.stop()
        source.close()
