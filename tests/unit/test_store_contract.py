"""The facade's contract with the layers above it (issue #34): broker, cli, spark, check and
rebuild use MessageStore's public methods, never the parts it wires or its private names.
The modules are kept out by import-linter (pyproject.toml); this test keeps out attribute
use, which import-linter cannot see."""

from __future__ import annotations

import ast
from pathlib import Path

import rocketstore

# The parts MessageStore wires that upper layers used to reach into.
PARTS = frozenset({"commitlog", "queues", "dispatcher", "flusher", "index", "reader"})
UPPER = ("broker", "cli", "spark", "check", "rebuild")


def _names_a_store(node: ast.expr) -> bool:
    """``store``, ``self.store``, ``ctx.store``, ``message_store`` and the like."""
    if isinstance(node, ast.Name):
        return "store" in node.id.lower()
    if isinstance(node, ast.Attribute):
        return "store" in node.attr.lower()
    return False


def _reaches_in(source: str) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or not _names_a_store(node.value):
            continue
        private = node.attr.startswith("_") and not node.attr.startswith("__")
        if node.attr in PARTS or private:
            found.append((node.lineno, f"{ast.unparse(node.value)}.{node.attr}"))
    return found


def test_upper_layers_use_only_the_facade() -> None:
    package = Path(rocketstore.__file__).parent
    roots = [package / name for name in UPPER] + [package.parent / "pyspark_rocketstore"]
    offences = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for line, text in _reaches_in(path.read_text()):
                offences.append(f"{path.relative_to(package.parent)}:{line}: {text}")
    assert offences == []


def test_the_check_sees_what_it_is_for() -> None:
    source = (
        "store.commitlog.read(0, 1)\n"
        "self.store.queues.get(key)\n"
        "ctx.store.dispatcher.handle\n"
        "store._check_open()\n"
        "store.read_commitlog(0, 1)\n"
        "route.queues()\n"
    )
    assert sorted(line for line, _ in _reaches_in(source)) == [1, 2, 3, 4]
