"""The optional C loops (:mod:`rocketstore.format._native`), or None.

Layer: format. The extension is built by ``pip install`` where a C compiler is present
and runs the common case of a few per-record loops (put encoding and append, the scan's
walk, decode and CRC check, dispatch facts, reads into MessageExt). The pure-Python code
beside each use defines the behaviour and runs whenever the extension is missing, or when
``ROCKETSTORE_PURE_PYTHON=1`` is set (CI runs the unit tests both ways).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

PURE_PYTHON_ENV = "ROCKETSTORE_PURE_PYTHON"


def _load() -> ModuleType | None:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None
    try:
        return importlib.import_module("rocketstore.format._native")
    except ImportError:  # not built (no compiler at install time): the Python paths run
        return None


native = _load()
if native is not None:
    # The put encoder writes these properties' text as it is, not their serialisation.
    from rocketstore.format.properties import VerbatimProperties

    native.set_verbatim_type(VerbatimProperties)
