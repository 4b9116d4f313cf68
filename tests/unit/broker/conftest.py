"""The broker tests import their shared helpers (broker_helpers.py) as a top-level module
from this directory."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
