"""Shared by every test package: tests/ on the import path for its helper modules
(dledger_helpers)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
