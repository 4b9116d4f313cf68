"""Fixtures for the CLI tests (helpers live in cli_helpers.py)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.cli_helpers import Run, build_store, run_cli, run_cli_process


@pytest.fixture(scope="session")
def template_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("template") / "store"
    build_store(root)
    return root


@pytest.fixture
def store(template_store: Path, tmp_path: Path) -> Path:
    """A fresh copy of the template store for one test (tests may damage it)."""
    root = tmp_path / "store"
    shutil.copytree(template_store, root)
    return root


@pytest.fixture
def cli(request: pytest.FixtureRequest) -> Callable[..., Run]:
    """The CLI run in this process; in a process of its own (the console script) for a test
    marked ``cli_subprocess``: what this process holds or has loaded must not be the
    command's (a writer lock, a Spark session, a module PYTHONPATH would hide)."""
    if request.node.get_closest_marker("cli_subprocess") is not None:
        return run_cli_process
    return run_cli
